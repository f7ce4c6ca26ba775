"""Start a llama-server from launch settings: one :func:`preflight`, then the engine.

The one way the app, the CLI and the benchmark start a server, so none of them can skip the checks. The
launch form runs the same :func:`preflight` on every edit (with the headers it has read), so Launch is
greyed for exactly what a launch would refuse, with the same words.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from beedeck.core.engine.argv import ArgNote, LaunchPlan, LaunchRefused, build_argv
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings, SpecMode
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server import ServerFailed, ServerProcess, ServerState, start_server
from beedeck.core.engine.speculation.standby import with_margin
from beedeck.core.models.gguf import GGUFError, ModelInfo, inspect
from beedeck.core.models.guard import GuardWarning, check_launch
from beedeck.core.models.paircheck import mode_refusal
from beedeck.core.models.planner import GiB, MemoryPlan, PlanError, plan

__all__ = ["Preflight", "Refusal", "host_ram", "launch", "preflight", "standby_refusal"]

Refusal = ServerFailure  # the one refusal type: a code, a message, a remedy, and the setting it is about


@dataclass
class Preflight:
    """What :func:`preflight` found: ``refusals`` (empty: the launch may start), the guard's warnings, the
    argument list and the memory plan where they could be made."""

    refusals: list[Refusal] = field(default_factory=list)
    warnings: list[GuardWarning] = field(default_factory=list)
    argv: LaunchPlan | None = None
    memory: MemoryPlan | None = None

    @property
    def ok(self) -> bool:
        return not self.refusals

    def failure(self) -> ServerFailure:
        """All refusals as one failure (the first one's code), for a failure panel or a CLI message."""
        first = self.refusals[0]
        if len(self.refusals) == 1:
            return first
        return ServerFailure(first.code, " ".join(r.message for r in self.refusals),
                             " ".join(dict.fromkeys(r.remedy for r in self.refusals if r.remedy)), setting=first.setting)


def _missing(path: str, role: str, setting: str) -> Refusal:
    return Refusal("model_missing", f"The {role} model {Path(path)} does not exist.",
                   "Check the path, or download it again.", setting=setting)


def _unreadable(path: str, role: str, setting: str, why: object) -> Refusal:
    return Refusal("not_gguf", f"The {role} model {Path(path).name} is not a GGUF model BeeDeck can read ({why}).",
                   "Pick a valid .gguf file (a download that finished, not a renamed file).", setting=setting)


def _read(path: str, role: str, setting: str, read: bool, errors: dict[str, str]
          ) -> tuple[ModelInfo | None, Refusal | None]:
    """The header of ``path`` (``read``: from disk), or why not: missing, or a read that failed (``errors``: the
    form's own reads that failed). Without ``read`` a file not read yet is no refusal: it is judged when read."""
    if not path or not Path(path).exists():
        return None, _missing(path, role, setting)
    if path in errors:
        return None, _unreadable(path, role, setting, errors[path])
    if not read:
        return None, None
    try:
        return inspect(path), None
    except (GGUFError, OSError, ValueError) as exc:
        return None, _unreadable(path, role, setting, exc)


def _memory(target: ModelInfo, draft: ModelInfo | None, settings: LaunchSettings, caps: EngineCaps,
            devices: list[int] | None, host_ram: int | None, out: Preflight) -> None:
    gen = caps.generation if caps.generation != Generation.UNKNOWN else Generation.MAINLINE
    try:
        memory = out.memory = plan(target, draft if settings.spec_mode != SpecMode.OFF else None, settings, gen,
                                   devices or [])
    except PlanError:
        return  # the plan's own error is the memory bar's to show; the engine will judge
    except Exception:  # an estimate: a model the planner cannot read must not block a launch the engine may run
        return
    host = memory.host.total
    if host_ram is not None and host > host_ram:
        out.refusals.append(Refusal(
            "out_of_memory", f"This launch needs about {host / GiB:.1f} GiB of host memory (RAM), and this machine "
            f"has {host_ram / GiB:.1f} GiB.", "Lower the context size (or quantize the KV cache), or offload more "
            "layers to a GPU.", setting="ctx_size"))
    if devices and settings.n_gpu_layers != "auto":  # "auto": llama.cpp's --fit moves layers itself
        for gpu in memory.gpus:
            if (gpu.left or 0) < 0:
                out.refusals.append(Refusal(
                    "out_of_memory", f"This launch needs about {gpu.total / GiB:.1f} GiB on {gpu.name}, which has "
                    f"{(gpu.free or 0) / GiB:.1f} GiB free.", "Lower the context size, quantize the KV cache, or "
                    "put fewer layers on the GPU (GPU layers).", setting="n_gpu_layers"))


def preflight(caps: EngineCaps | None, settings: LaunchSettings, *, target: ModelInfo | None = None,
              draft: ModelInfo | None = None, read: bool = True, errors: dict[str, str] | None = None,
              devices: list[int] | None = None, host_ram: int | None = None) -> Preflight:
    """Every reason a launch would be refused, before anything stops or starts: the engine's argument list
    (build_argv's refusals), the model files (missing, not GGUF), the chosen mode against these files, the
    known-issue table (the guard), and memory: host RAM (``host_ram`` bytes) and each GPU (``devices``, free
    bytes). ``target``/``draft``: headers already read; ``read=False`` reads nothing (the launch form: its
    headers come off the GUI thread, ``errors`` its reads that failed, and a file not read yet is judged when
    it is)."""
    out = Preflight()
    if caps is None:
        out.refusals.append(Refusal("no_engine", "No engine is picked.", "Choose llama-server under Settings → Engine.",
                                    setting="engine"))
        return out
    out_of_range = settings.check()
    if out_of_range:  # a number outside its range: said as such, not as what it would cost (a 1e11 context's RAM)
        out.refusals += [Refusal("engine_refused", reason, "", setting="engine") for reason in out_of_range]
        return out
    try:
        out.argv = build_argv(settings, caps)
    except LaunchRefused as exc:
        out.refusals += [Refusal("engine_refused", reason, "", setting="engine") for reason in exc.reasons]
    wants_draft = settings.spec_mode.uses_draft_file or (settings.spec_mode == SpecMode.MTP and bool(settings.draft))
    errors = errors or {}
    if target is None:
        target, why = _read(settings.target, "target", "target", read, errors)
        out.refusals += [why] if why else []
    if draft is None and wants_draft and settings.draft:
        draft, why = _read(settings.draft, "draft", "draft", read, errors)
        out.refusals += [why] if why else []
    why_mode = mode_refusal(caps, settings, target, draft)
    if why_mode is not None:  # the files' own verdict, said once (the table's row on it would repeat it)
        out.refusals.append(Refusal("wrong_draft_format", why_mode, "Pick the draft file made for this target and "
                                    "mode, or choose another speculation mode (Baseline needs none).",
                                    setting="spec_mode"))
    files_ok = target is not None and (draft is not None or not (wants_draft and settings.draft))
    if files_ok and why_mode is None:
        try:
            out.warnings = check_launch(caps, settings, target=target, draft=draft)
        except ServerFailed as exc:
            setting = "spec_model_free_type" if settings.spec_mode == SpecMode.MODEL_FREE else ""
            out.refusals.append(replace(exc.failure, setting=exc.failure.setting or setting))
    if read:
        why_kernels = _kernel_refusal(caps, settings)
        out.refusals += [why_kernels] if why_kernels else []
    if target is not None:
        _memory(target, draft, settings, caps, devices, host_ram, out)
    return out


def _kernel_refusal(caps: EngineCaps, settings: LaunchSettings) -> Refusal | None:
    """A CUDA build BeeDeck made without the FlashAttention kernels of these K/V types (its recorded
    options: core/engine/build/choice.py) is refused before it starts, with the rebuild that adds them."""
    from beedeck.core.engine.build import build_lacks_pair
    from beedeck.core.engine.registry import EngineRegistry

    try:
        record = EngineRegistry().find_by_binary(caps.path)
    except (OSError, ValueError):
        return None
    why = build_lacks_pair(record.build_options, (settings.cache_type_k, settings.cache_type_v)) if record else None
    return Refusal("unsupported_cache_type", f"The K/V cache {settings.cache_type_k}/{settings.cache_type_v} cannot run: "
                   f"{why}.", "Pick a K/V cache type this build has (f16 or q8_0), or rebuild the engine as said.",
                   setting="cache_type_k") if why else None


def standby_refusal(caps: EngineCaps, settings: LaunchSettings, *, gpu_free: list[int] | None,
                    ram_available: int | None) -> str | None:
    """Why ``settings``' server cannot be loaded beside the running one (None: it fits, keep both): the
    preflight's memory check against what is free now, less a margin (core/engine/speculation/standby.py).

    ``gpu_free``: each GPU's free bytes now (None: no GPU is used); ``ram_available``: the host's available
    bytes now (None: unknown, which refuses: a guess must not swap the machine)."""
    if ram_available is None:
        return "the host's free memory is unknown"
    if settings.rpc_workers:
        return "the model is split over RPC workers"
    if gpu_free and settings.n_gpu_layers == "auto":
        return "its GPU layers are 'auto' (the engine fits them itself), so what it would take is not known"
    checked = preflight(caps, replace(settings, port=settings.port or DEFAULT_PORT),  # the port is judged apart
                        devices=[with_margin(f) for f in gpu_free] if gpu_free else None,
                        host_ram=with_margin(ram_available))
    if checked.memory is None:
        return "its memory could not be planned"
    memory = [r for r in checked.refusals if r.code == "out_of_memory"]
    if memory:
        return "it needs more memory than is free beside the running server: " + memory[0].message
    if not checked.ok:
        return checked.refusals[0].message
    return None


def host_ram() -> int | None:
    """This machine's RAM in bytes (None when it cannot be read)."""
    from beedeck.core.machine.system import system_info

    return system_info().ram_total


def launch(
    engine: str | Path,
    caps: EngineCaps,
    settings: LaunchSettings,
    *,
    on_line: Callable[[str], None] | None = None,
    on_state: Callable[[ServerState, ServerFailure | None], None] | None = None,
    pid_file: Path | None = None,
    env: dict[str, str] | None = None,
    stop_leftover: bool = True,
) -> ServerProcess:
    """Run :func:`preflight` (files, mode, guard, host RAM), then start; returns the running wrapper, whose
    ``notes`` carry build_argv's notes and the guard's warnings.

    Raises ServerFailed (with a code) or LaunchRefused (the engine's argument list) before starting anything.
    """
    checked = preflight(caps, settings, host_ram=host_ram())
    others = [r for r in checked.refusals if r.code != "engine_refused"]
    if others:  # the files and the guard first (as ServerFailed), then the engine's argument list
        raise ServerFailed(Preflight(others).failure())
    if not checked.ok:
        raise LaunchRefused([r.message for r in checked.refusals])
    proc = start_server(engine, caps, settings, on_line=on_line, on_state=on_state, pid_file=pid_file, env=env,
                        stop_leftover=stop_leftover)
    proc.notes = (*proc.notes, *(ArgNote("known_issue", "warning", str(w)) for w in checked.warnings))
    return proc
