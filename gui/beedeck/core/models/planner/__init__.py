"""The memory planner: what a llama-server launch will allocate, per device, before launching it.

``memory`` is the plan itself (:func:`plan`, :class:`MemoryPlan`; formulas in
docs/reference/memory-model.md); ``split`` the compute buffers of a launch whose layers run on several
devices (pipeline or not); ``devices`` the plan across RPC workers and local GPUs (``plan_across``,
``--tensor-split``). Outside code imports the plan from this package; the modules inside import each
other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.models.planner.memory import (
    CACHE_TYPES,
    CUDA_CONTEXT,
    DEFAULT_MARGIN,
    DeviceUse,
    GiB,
    MemoryPlan,
    MiB,
    PlanError,
    bits_per_value,
    pad,
    plan,
    row_bytes,
)

__all__ = [
    "CACHE_TYPES",
    "CUDA_CONTEXT",
    "DEFAULT_MARGIN",
    "DeviceUse",
    "GiB",
    "MemoryPlan",
    "MiB",
    "PlanError",
    "bits_per_value",
    "pad",
    "plan",
    "row_bytes",
]
