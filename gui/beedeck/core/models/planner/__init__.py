"""The memory planner: what a llama-server launch will allocate, per device, before launching it.

``memory`` is the plan itself (:func:`plan`, :class:`MemoryPlan`; formulas in
docs/reference/memory-model.md); ``units`` its byte sizes, cache types and per-device bills; ``drafts`` the
drafter's part and an engine's drafter defaults (:func:`draft_defaults`); ``split`` the compute buffers of a launch whose layers run on several
devices (pipeline or not); ``devices`` the plan across RPC workers and local GPUs (``plan_across``,
``--tensor-split``). Outside code imports the plan from this package; the modules inside import each
other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.models.planner.drafts import DraftDefaults, draft_defaults
from beedeck.core.models.planner.memory import CUDA_CONTEXT, DEFAULT_MARGIN, MemoryPlan, plan
from beedeck.core.models.planner.units import (
    CACHE_TYPES,
    DeviceUse,
    GiB,
    MiB,
    PlanError,
    bits_per_value,
    pad,
    row_bytes,
)

__all__ = [
    "CACHE_TYPES",
    "CUDA_CONTEXT",
    "DEFAULT_MARGIN",
    "DeviceUse",
    "DraftDefaults",
    "GiB",
    "MemoryPlan",
    "MiB",
    "PlanError",
    "bits_per_value",
    "draft_defaults",
    "pad",
    "plan",
    "row_bytes",
]
