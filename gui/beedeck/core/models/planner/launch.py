"""The memory plan of one launch, as every caller makes it: the launch preflight (which refuses what does not
fit), the launch form's memory bar and ``beedeck serve`` over RPC workers (which prints it) call this one
function, so they cannot disagree on which draft is planned, which engine family or which devices."""

from __future__ import annotations

from collections.abc import Sequence

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.rpc.probe import RpcDevice
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.planner.devices import plan_across
from beedeck.core.models.planner.memory import MemoryPlan, plan


def plan_launch(target: ModelInfo, draft: ModelInfo | None, settings: LaunchSettings, caps: EngineCaps | None,
                devices: Sequence[int] | None = None, rpc_devices: Sequence[RpcDevice] = ()) -> MemoryPlan:
    """The plan of launching ``settings`` on the engine ``caps`` (None or not recognised: mainline's rules).

    ``draft`` is the draft file's header: planned in every speculation mode but Baseline (the planner knows
    what each mode loads of it: a DFlash draft, an EAGLE-3 or an MTP head file); ``devices`` each local GPU's
    free bytes (none: CPU only); ``rpc_devices`` the engine's devices over the RPC workers and this machine
    (their probe, workers first): with workers set and probed, the layers go across them. Raises PlanError
    (a file the planner cannot read, a draft picked as the target)."""
    generation = caps.generation if caps is not None else Generation.MAINLINE
    if generation == Generation.UNKNOWN:
        generation = Generation.MAINLINE
    drafted = draft if settings.spec_mode != Mode.BASELINE else None
    if settings.rpc_workers and rpc_devices:
        return plan_across(target, drafted, settings, generation, rpc_devices)
    return plan(target, drafted, settings, generation, list(devices or []))
