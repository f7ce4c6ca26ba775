"""The memory plan of a launch spread over RPC workers and this machine's GPUs.

The devices come from the engine (``core/engine/rpc_probe.py``), in its order: the workers' devices
first (in ``--rpc`` order), then the local GPUs. Layers are cut in that order in proportion to the
free memory each reported (or to ``--tensor-split``), exactly as llama.cpp does; each layer's KV cache
goes with it; the output layer and its compute go to the last device; a draft stays on this machine.
:func:`compare` sets the plan beside the engine's own per-device buffer lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import MemoryReport
from beedeck.core.engine.rpc_probe import RpcDevice
from beedeck.core.models.gguf import ModelInfo
from beedeck.core.models.planner import DEFAULT_MARGIN, MemoryPlan, MiB, plan


def plan_across(target: ModelInfo, draft: ModelInfo | None, settings: LaunchSettings, generation: Generation,
                devices: Sequence[RpcDevice], split: Sequence[float] | None = None,
                margin: int = DEFAULT_MARGIN) -> MemoryPlan:
    """The per-device plan; ``devices`` as :func:`probe_workers` returned them (workers first)."""
    ordered = [d for d in devices if not d.local] + [d for d in devices if d.local]
    mem = plan(target, draft, settings, generation, [d.free_bytes for d in ordered], margin,
               names=[engine_name(d, ordered) for d in ordered], split=split, local=[d.local for d in ordered])
    if len(ordered) > 1:
        mem.notes.append("Weights and KV per device are exact; compute is an estimate here: with layers on several "
                         "devices each one reserves its own compute buffer (tens of MiB for a small model, measured "
                         "on two loopback workers), which this plan puts on the last device only.")
    return mem


def engine_name(device: RpcDevice, devices: Sequence[RpcDevice]) -> str:
    """The name the engine's buffer lines give a device: a worker's devices are numbered per worker,
    ``RPC0[127.0.0.1:50052]``, ``RPC0[127.0.0.1:50053]`` (``--list-devices`` numbers them globally)."""
    if device.worker is None:
        return device.name
    k = [d for d in devices if d.worker == device.worker].index(device)
    return f"RPC{k}[{device.worker}]"


def tensor_split(mem: MemoryPlan) -> list[float]:
    """The plan's weights per device as ``--tensor-split`` proportions (MiB, rounded)."""
    return [round(g.items.get("weights", 0) / MiB, 1) for g in mem.gpus]


@dataclass(frozen=True)
class DeviceCheck:
    """One device: the planner's weights and KV next to the engine's model and KV buffers (MiB)."""

    device: str
    planned_weights_mib: float
    engine_model_mib: float
    planned_kv_mib: float
    engine_kv_mib: float

    @property
    def error(self) -> float:
        """Relative error of weights + KV (0.0 = exact)."""
        planned = self.planned_weights_mib + self.planned_kv_mib
        engine = self.engine_model_mib + self.engine_kv_mib
        return abs(planned - engine) / engine if engine else (0.0 if not planned else 1.0)


def compare(mem: MemoryPlan, report: MemoryReport) -> list[DeviceCheck]:
    """The plan's GPU/worker devices against the engine's buffer lines of the same device."""
    out = []
    for g in mem.gpus:
        dev = report.devices.get(g.name)
        out.append(DeviceCheck(g.name, g.items.get("weights", 0) / MiB, dev.model_mib if dev else 0.0,
                               g.items.get("kv", 0) / MiB, dev.kv_mib if dev else 0.0))
    return out
