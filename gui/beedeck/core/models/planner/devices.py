"""The memory plan of a launch spread over RPC workers and this machine's GPUs.

The devices come from the engine (``core/engine/rpc/probe.py``), in its order: the workers' devices
first (in ``--rpc`` order), then the local GPUs. Layers are cut in that order in proportion to the
free memory each reported (or to ``--tensor-split``), exactly as llama.cpp does; each layer's KV cache
goes with it; the output layer and the logits go to the last device; every device that runs layers
reserves its own compute buffer (larger in a pipeline, see ``planner.split``); a draft stays on
this machine. :func:`compare` sets the plan beside the engine's own per-device buffer lines.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import MemoryReport
from beedeck.core.engine.rpc.probe import RpcDevice
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.planner.memory import DEFAULT_MARGIN, MemoryPlan, MiB, plan


def plan_across(target: ModelInfo, draft: ModelInfo | None, settings: LaunchSettings, generation: Generation,
                devices: Sequence[RpcDevice], split: Sequence[float] | None = None,
                margin: int = DEFAULT_MARGIN) -> MemoryPlan:
    """The per-device plan; ``devices`` as :func:`probe_workers` returned them (workers first)."""
    ordered = [d for d in devices if not d.local] + [d for d in devices if d.local]
    mem = plan(target, draft, settings, generation, [d.free_bytes for d in ordered], margin,
               names=[engine_name(d, ordered) for d in ordered], split=split, local=[d.local for d in ordered],
               rpc_async=generation == Generation.MAINLINE)
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
    """One device: the planner's weights, KV and compute next to the engine's buffers of it (MiB)."""

    device: str
    planned_weights_mib: float
    engine_model_mib: float
    planned_kv_mib: float
    engine_kv_mib: float
    planned_compute_mib: float = 0.0
    engine_compute_mib: float = 0.0

    @property
    def error(self) -> float:
        """Relative error of weights + KV (0.0 = exact)."""
        return _relative(self.planned_weights_mib + self.planned_kv_mib, self.engine_model_mib + self.engine_kv_mib)

    @property
    def compute_error(self) -> float:
        """Relative error of the compute buffer."""
        return _relative(self.planned_compute_mib, self.engine_compute_mib)


def _relative(planned: float, engine: float) -> float:
    return abs(planned - engine) / engine if engine else (0.0 if not planned else 1.0)


def compare(mem: MemoryPlan, report: MemoryReport) -> list[DeviceCheck]:
    """The plan's GPU/worker devices, then the host (``CPU``: compute only, its weights are mapped
    differently), against the engine's buffer lines of the same device."""
    out = []
    for g in mem.gpus:
        dev = report.devices.get(g.name)
        out.append(DeviceCheck(g.name, g.items.get("weights", 0) / MiB, dev.model_mib if dev else 0.0,
                               g.items.get("kv", 0) / MiB, dev.kv_mib if dev else 0.0,
                               g.items.get("compute", 0) / MiB, dev.compute_mib if dev else 0.0))
    cpu = report.devices.get("CPU") or report.devices.get("CUDA_Host")  # CUDA_Host: the host beside one GPU
    out.append(DeviceCheck("CPU", 0.0, 0.0, 0.0, 0.0, mem.host.items.get("compute", 0) / MiB,
                           cpu.compute_mib if cpu else 0.0))
    return out
