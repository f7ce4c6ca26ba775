"""Start a llama-server from launch settings: one :func:`preflight`, then :func:`start` runs what it planned.

The one way the app, the CLI and the benchmark start a server, so none of them can skip the checks. The
preflight decides everything a launch needs (the port, by its rule: :class:`PortRule`; the argument list,
built once; the memory plan; the notes) and hands it on as the launch plan (:class:`Preflight`) that
:func:`start` runs as it is. The launch form runs the same :func:`preflight` on every edit, with what it
gathered off the GUI thread (the headers, the engine's build options, the RPC workers' check, the memory
free), so Launch is greyed for exactly what a launch would refuse, with the same words: one refusal type
(:data:`Refusal`, a code, a message, a remedy and the setting it is about), raised as :class:`LaunchRefused`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from beedeck.core.engine.argv import ArgNote, LaunchPlan, LaunchRefused, Refusal, build_argv, merged
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.ports import ANY_FREE, SHOWN, HostError, PortChoice, PortRule, release_port
from beedeck.core.engine.rpc import RpcDevice, RpcError, parse_workers
from beedeck.core.engine.server import ServerFailed, ServerProcess, ServerState, key_refusal, start_server
from beedeck.core.engine.speculation.standby import with_margin
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect
from beedeck.core.models.guard import GuardWarning, check_launch
from beedeck.core.models.paircheck import mode_refusal
from beedeck.core.models.planner import GiB, MemoryPlan
from beedeck.core.models.planner.launch import plan_launch

__all__ = ["UNSET", "Held", "LaunchRefused", "PortRule", "Preflight", "Refusal", "Room", "args_refusal",
           "build_options_of", "given_back", "launch", "preflight", "room_now", "standby_preflight", "start"]


class _Unset(Enum):
    UNSET = "unset"


UNSET = _Unset.UNSET  # a fact not gathered: preflight gathers it itself when it may read (``read=True``)
Unset = _Unset


@dataclass
class Preflight:
    """What :func:`preflight` found and decided, the launch plan :func:`start` runs: ``refusals`` (empty: the
    launch may start), the guard's warnings, the engine, the settings on the port chosen (``port``: which, and
    why when it is not the one asked), the argument list with build_argv's notes (built once: the start runs it
    as it is), the memory plan (``unplanned``: why there is none) and the RPC workers' devices, each where it
    could be made."""

    refusals: list[Refusal] = field(default_factory=list)
    warnings: list[GuardWarning] = field(default_factory=list)
    argv: LaunchPlan | None = None
    memory: MemoryPlan | None = None
    rpc_devices: list[RpcDevice] = field(default_factory=list)
    caps: EngineCaps | None = None
    settings: LaunchSettings | None = None
    port: PortChoice | None = None
    unplanned: str = ""

    @property
    def ok(self) -> bool:
        return not self.refusals

    def failure(self) -> ServerFailure:
        """All refusals as one failure (the first one's code), for a failure panel or a CLI message."""
        return merged(self.refusals)


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


def args_refusal(text: str) -> Refusal | None:
    """Why an extra-arguments line (as typed in the form) cannot be read as a command line, or None."""
    try:
        shlex.split(text)
    except ValueError as exc:
        return Refusal("bad_value", f"Extra arguments cannot be read ({exc}).", "Close the quote, or remove it.",
                       setting="extra_args")
    return None


def _memory(target: ModelInfo, draft: ModelInfo | None, settings: LaunchSettings, caps: EngineCaps,
            devices: list[int] | None, host_ram: int | None, out: Preflight) -> None:
    devices = None if settings.rpc_workers else devices  # over RPC: no local GPU check (the workers' plan)
    try:
        memory = out.memory = plan_launch(target, draft, settings, caps, devices, out.rpc_devices)
    except Exception as exc:  # an estimate (PlanError included: the bar shows it): a model the planner cannot read
        out.unplanned = str(exc)
        return  # must not block a launch the engine may run
    host = memory.host.total
    if host_ram is not None and host > host_ram:
        out.refusals.append(Refusal(
            "out_of_memory", f"This launch needs about {host / GiB:.1f} GiB of host memory (RAM), and this machine "
            f"has {host_ram / GiB:.1f} GiB.", "Lower the context size (or quantize the KV cache), or offload more "
            "layers to a GPU.", setting="ctx_size"))
    workers = {f"[{d.worker}]": str(d.worker) for d in out.rpc_devices if d.worker is not None}
    if (devices or workers) and settings.n_gpu_layers != "auto":  # "auto": llama.cpp's --fit moves layers itself
        for gpu in memory.gpus:
            if (gpu.left or 0) < 0:
                worker = next((w for tag, w in workers.items() if gpu.name.endswith(tag)), None)
                where = f"{gpu.name} (the RPC worker at {worker})" if worker else gpu.name
                out.refusals.append(Refusal(
                    "out_of_memory", f"This launch needs about {gpu.total / GiB:.1f} GiB on {where}, which has "
                    f"{(gpu.free or 0) / GiB:.1f} GiB free.", "Lower the context size, quantize the KV cache, or "
                    + ("put fewer layers on the workers (GPU layers), or add a worker." if worker else
                       "put fewer layers on the GPU (GPU layers)."), setting="n_gpu_layers"))


def _files(caps: EngineCaps, settings: LaunchSettings, target: ModelInfo | None, draft: ModelInfo | None,
           read: bool, errors: dict[str, str], out: Preflight) -> tuple[ModelInfo | None, ModelInfo | None]:
    """The model files, the chosen mode against them, and the known-issue table (the guard)."""
    wants_draft = settings.spec_mode.uses_draft_file or (settings.spec_mode == Mode.MTP and bool(settings.draft))
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
            setting = "spec_model_free_type" if settings.spec_mode == Mode.MODEL_FREE else ""
            out.refusals.append(replace(exc.failure, setting=exc.failure.setting or setting))
    return target, draft


def preflight(caps: EngineCaps | None, settings: LaunchSettings, *, target: ModelInfo | None = None,
              draft: ModelInfo | None = None, read: bool = True, errors: dict[str, str] | None = None,
              devices: list[int] | None = None, host_ram: int | None = None,
              build_options: Sequence[str] | None | Unset = UNSET,
              rpc: Sequence[RpcDevice] | RpcError | Unset = UNSET, args_text: str | None = None,
              port: PortRule = SHOWN) -> Preflight:
    """Every reason a launch would be refused, before anything stops or starts, in this order: the extra
    arguments as typed (``args_text``), the ranges, the port (by the rule ``port``: what 0 means, and whether it
    is claimed now: :class:`PortRule`), the engine's argument list (build_argv's refusals, the API key's file),
    the model files (missing, not GGUF), the chosen mode against these files, the known-issue table (the guard),
    the FlashAttention kernels this build has (``build_options``, its registry record), the RPC workers
    (``rpc``: their probe's devices, or why it failed), and memory: host RAM (``host_ram`` bytes) and each GPU
    (``devices``, free bytes; no GPU check with RPC workers or GPU layers "auto"). What passed is the launch
    plan: :func:`start` runs it.

    ``target``/``draft``: headers already read. ``read=True`` gathers what is not given (headers, the build
    options, the workers' probe: blocking I/O); ``read=False`` reads nothing (the launch form: what it gathered
    comes off the GUI thread, ``errors`` its header reads that failed, and a fact not gathered yet is judged when
    it is, except the RPC workers, which Launch waits for)."""
    out = Preflight(caps=caps, settings=settings)
    if caps is None:
        out.refusals.append(Refusal("no_engine", "No engine is picked.", "Choose llama-server under Settings → Engine.",
                                    setting="engine"))
        return out
    why_args = args_refusal(args_text) if args_text is not None else None
    out.refusals += [why_args] if why_args else []
    problems = settings.problems()
    if problems:  # a number outside its range: said as such, not as what it would cost (a 1e11 context's RAM)
        out.refusals += [Refusal("bad_value", f"{p[0].upper()}{p[1:]}.", "", setting=name) for name, p in problems]
        return out
    settings, why_host = _on_port(settings, port, out)
    try:
        out.argv = build_argv(settings, caps)
    except LaunchRefused as exc:
        out.refusals += exc.refusals
    out.refusals += [why_host] if why_host else []  # after build_argv's: a LAN bind without a key is said first
    why_key = key_refusal(settings, caps)
    out.refusals += [why_key] if why_key else []
    target, draft = _files(caps, settings, target, draft, read, errors or {}, out)
    if build_options is UNSET:
        build_options = build_options_of(caps.path) if read else None
    why_kernels = _kernel_refusal(build_options, settings)
    out.refusals += [why_kernels] if why_kernels else []
    _rpc(caps, settings, rpc, read, out)
    if target is not None:
        _memory(target, draft, settings, caps, devices, host_ram, out)
    said: dict[str, Refusal] = {}  # one fact said once, where first found (build_argv and the guard both know
    for r in out.refusals:  # a draft-less DFlash)
        said.setdefault(r.message, r)
    out.refusals = list(said.values())
    if out.refusals and port.claim and out.port is not None:
        release_port(out.port.used)  # claimed for a launch that will not start (a claim a server holds stays)
    return out


def _on_port(settings: LaunchSettings, rule: PortRule, out: Preflight) -> tuple[LaunchSettings, Refusal | None]:
    """``settings`` on the port ``rule`` chooses (``out.settings``; ``out.port`` says which and why), or as they
    are with the refusal of a host that cannot be listened on (a name that does not resolve, an address of
    another machine)."""
    try:
        out.port = rule.choose(settings.host, settings.port)
    except HostError as exc:
        return settings, Refusal("bad_value", str(exc), "", setting="host")
    out.settings = replace(settings, port=out.port.used)
    return out.settings, None


def _rpc(caps: EngineCaps, settings: LaunchSettings, rpc: Sequence[RpcDevice] | RpcError | Unset, read: bool,
         out: Preflight) -> None:
    """The RPC workers: probed through the engine (``read``), or the form's probe (``rpc``)."""
    if isinstance(rpc, RpcError):  # the form's list that does not parse, or its check that failed
        out.refusals.append(Refusal(rpc.code, rpc.message, rpc.remedy, setting="rpc_workers"))
        return
    if not settings.rpc_workers or any(r.setting == "rpc_workers" for r in out.refusals):
        return  # none, or an engine without --rpc (build_argv said so)
    if not isinstance(rpc, Unset):
        out.rpc_devices = list(rpc)
        return
    if not read:
        out.refusals.append(Refusal("rpc_unchecked", "The RPC workers are being checked (their devices, memory and "
                                    "build)…", "Wait for the check, or clear the worker list.", setting="rpc_workers"))
        return
    from beedeck.core.engine.rpc.probe import probe_workers

    try:
        out.rpc_devices = probe_workers(caps.path, parse_workers(settings.rpc_workers))
    except RpcError as exc:
        out.refusals.append(Refusal(exc.code, exc.message, exc.remedy, setting="rpc_workers"))


def _kernel_refusal(build_options: Sequence[str] | None, settings: LaunchSettings) -> Refusal | None:
    """A CUDA build BeeDeck made without the FlashAttention kernels of these K/V types (its recorded
    options: core/engine/building/choice.py) is refused before it starts, with the rebuild that adds them."""
    from beedeck.core.engine.building import build_lacks_pair

    why = build_lacks_pair(build_options, (settings.cache_type_k, settings.cache_type_v)) if build_options else None
    return Refusal("unsupported_cache_type", f"The K/V cache {settings.cache_type_k}/{settings.cache_type_v} cannot run: "
                   f"{why}.", "Pick a K/V cache type this build has (f16 or q8_0), or rebuild the engine as said.",
                   setting="cache_type_k") if why else None


_OPTIONS_CACHE: dict[tuple[str, tuple[tuple[str, int], ...]], tuple[str, ...] | None] = {}


def build_options_of(binary: str) -> tuple[str, ...] | None:
    """The build options BeeDeck recorded for the engine at ``binary`` (None: not a build it made, or none
    recorded). Cached per state of the engine manifests (a few stat calls), so a launch or the form's
    check after the first costs no manifest read; still file I/O: the form calls it off the GUI thread."""
    from beedeck.core import paths
    from beedeck.core.engine.registry import MANIFEST, EngineRegistry

    root = paths.engines_dir()
    try:
        stamp: tuple[tuple[str, int], ...] | None = tuple(sorted(
            (e.name, os.stat(os.path.join(e.path, MANIFEST)).st_mtime_ns) for e in os.scandir(root)
            if e.is_dir() and os.path.isfile(os.path.join(e.path, MANIFEST))))
    except OSError:
        stamp = None  # not cached: looked up
    key = (str(Path(binary).resolve()), stamp or ())
    if stamp is None or key not in _OPTIONS_CACHE:
        try:
            record = EngineRegistry().find_by_binary(binary)
        except (OSError, ValueError):
            record = None
        _OPTIONS_CACHE.clear()  # one state of the manifests at a time
        _OPTIONS_CACHE[key] = tuple(record.build_options) if record and record.build_options else None
    return _OPTIONS_CACHE[key]


# -- memory free for a launch --------------------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """A running server a launch stops first: its process, and what it was started with (its plan says what
    it holds where the driver does not)."""

    pid: int
    caps: EngineCaps
    settings: LaunchSettings


@dataclass(frozen=True)
class Room:
    """The memory a launch may use: each GPU's free bytes (None: no NVIDIA GPU found, no GPU check), what of it
    the servers stopped first give back (included in ``gpus``), and this machine's RAM."""

    gpus: list[int] | None
    host_ram: int | None
    given_back: list[int] = field(default_factory=list)


def given_back(stopping: Sequence[Held], gpus_free: Sequence[int], *, nvml_module: Any = None) -> list[int]:
    """What the servers ``stopping`` hold on each GPU, which a launch that stops them first gets back: the
    driver's per-process figure (NVML), or where it does not say (a process it does not show, a usage it
    hides), each server's memory plan against ``gpus_free``."""
    if not stopping or not gpus_free:
        return [0] * len(gpus_free)
    from beedeck.core.machine.nvml import held_by

    measured = held_by({h.pid for h in stopping}, nvml_module)
    if measured is not None and len(measured) == len(gpus_free) and None not in measured and any(measured):
        return [int(m or 0) for m in measured]
    planned = [0] * len(gpus_free)
    for h in stopping:  # none seen by the driver (a pid namespace, WDDM) or none at all: the plans
        memory = preflight(h.caps, h.settings, devices=list(gpus_free), build_options=None, rpc=[]).memory
        for i, gpu in enumerate(memory.gpus if memory else []):
            if i < len(planned):
                planned[i] += gpu.total
    return planned


def room_now(stopping: Sequence[Held] = (), *, nvml_module: Any = None) -> Room:
    """The memory free for a launch now (blocking: one hardware detection, and NVML's process lists when
    ``stopping`` names servers this launch stops first: what they hold counts as free)."""
    from beedeck.core.machine import hardware

    report = hardware.detect(nvml_module=nvml_module)
    free = [g.memory_free for g in report.gpus]
    back = given_back(stopping, free, nvml_module=nvml_module)
    return Room([f + b for f, b in zip(free, back, strict=True)] or None, report.system.ram_total, back)


def standby_preflight(caps: EngineCaps, settings: LaunchSettings, *, gpu_free: list[int] | None,
                      ram_available: int | None, port: PortRule = SHOWN) -> Preflight:
    """The launch plan of ``settings``' server beside the running one, or why it cannot be loaded there (one
    refusal, code ``standby``, whose message says why): the preflight's memory check against what is free now,
    less a margin (core/engine/speculation/standby.py), its port by the rule ``port``.

    ``gpu_free``: each GPU's free bytes now (None: no GPU is used); ``ram_available``: the host's available
    bytes now (None: unknown, which refuses: a guess must not swap the machine)."""
    def refused(why: str) -> Preflight:
        return Preflight([Refusal("standby", why, "")], caps=caps, settings=settings)

    if ram_available is None:
        return refused("the host's free memory is unknown")
    if settings.rpc_workers:
        return refused("the model is split over RPC workers")
    if gpu_free and settings.n_gpu_layers == "auto":
        return refused("its GPU layers are 'auto' (the engine fits them itself), so what it would take is not known")
    checked = preflight(caps, settings, devices=[with_margin(f) for f in gpu_free] if gpu_free else None,
                        host_ram=with_margin(ram_available), port=port)
    if checked.memory is None:
        return refused("its memory could not be planned")
    memory = [r for r in checked.refusals if r.code == "out_of_memory"]
    if memory:
        return refused("it needs more memory than is free beside the running server: " + memory[0].message)
    if not checked.ok:
        return refused(checked.refusals[0].message)
    return checked


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
    room: Room | None = None,
    on_checked: Callable[[Preflight], None] | None = None,
    port: PortRule = ANY_FREE,
) -> ServerProcess:
    """Run :func:`preflight` (reading what it needs; memory: ``room``, else :func:`room_now`; the port by the
    rule ``port``: by default port 0 is any free one), then :func:`start` what it planned; returns the running
    wrapper, whose ``notes`` carry build_argv's notes and the guard's warnings. ``on_checked`` sees the passed
    preflight before the start (the CLI prints the RPC workers' devices and their memory plan).

    Raises :class:`LaunchRefused` (a ServerFailed: ``failure.code``) before starting anything, or ServerFailed.
    """
    room = room if room is not None else room_now()
    checked = preflight(caps, settings, devices=room.gpus, host_ram=room.host_ram, port=port)
    if not checked.ok:
        raise LaunchRefused(checked.refusals)
    if on_checked is not None:
        on_checked(checked)
    return start(engine, checked, on_line=on_line, on_state=on_state, pid_file=pid_file, env=env,
                 stop_leftover=stop_leftover)


def start(
    engine: str | Path,
    plan: Preflight,
    *,
    on_line: Callable[[str], None] | None = None,
    on_state: Callable[[ServerState, ServerFailure | None], None] | None = None,
    pid_file: Path | None = None,
    env: dict[str, str] | None = None,
    stop_leftover: bool = True,
) -> ServerProcess:
    """Start the launch ``plan`` a :func:`preflight` passed, as it was decided: its argument list as built (on
    its port), its notes and the guard's warnings on the wrapper (``notes``). Raises ServerFailed, or
    LaunchRefused for a plan that did not pass."""
    if not plan.ok or plan.argv is None or plan.caps is None:
        raise LaunchRefused(plan.refusals or [Refusal("bad_value", "The launch was not planned.", "")])
    try:
        proc = start_server(engine, plan.caps, plan.argv, on_line=on_line, on_state=on_state, pid_file=pid_file,
                            env=env, stop_leftover=stop_leftover,
                            any_port=plan.port is not None and plan.port.wanted == 0)
    except BaseException:
        if plan.settings is not None:  # the port claimed for this launch (ports.PortRule), no server took it over
            release_port(plan.settings.port)
        raise
    proc.notes = (*proc.notes, *(ArgNote("known_issue", "warning", str(w)) for w in plan.warnings))
    return proc
