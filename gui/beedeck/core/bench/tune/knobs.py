"""What the auto-tuner may change, and what the memory planner lets it try.

:func:`knobs_for` is the one place that decides which knobs move speed on this engine and card; a new
speculation mode (MTP, EAGLE-3, DSpark) adds its knobs here. Every knob only changes
:class:`LaunchSettings` fields (or appends one engine flag the probe found), so each point still goes
through ``build_argv`` and the benchmark runner like any launch.

:func:`planner_fit` turns :func:`beedeck.core.models.planner.plan` into the tuner's "does this point
fit" check: GPU memory left per device on a GPU engine, the host's available RAM on a CPU-only one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect
from beedeck.core.models.planner import MiB, PlanError, plan

# (settings) -> None when the point fits, else the reason it does not.
FitFn = Callable[[LaunchSettings], str | None]
ApplyFn = Callable[[LaunchSettings, Any], LaunchSettings]

DEFAULT = "default"  # a knob value meaning "no flag: the engine's own default"
# KV pairs worth a point, most compact last; only those this engine accepts are tried.
_KV_PAIRS = (("f16", "f16"), ("q8_0", "q8_0"), ("q5_0", "q4_1"), ("q4_0", "q4_0"))
_UBATCH = (512, 256, 128, 64)
_CROSS_CTX = (1024, 512, 2048)
# A quant token in a GGUF file name: "-Q5_K_M", ".IQ4_XS", "-f16", "-BF16" (before .gguf or -00001-of-).
_QUANT_RE = re.compile(r"[-_.](i?q\d+(?:_[a-z0-9]+)*|bf16|f16|f32)(?=(?:-\d{5}-of-\d{5})?\.gguf$)", re.IGNORECASE)


@dataclass(frozen=True)
class Knob:
    """One setting the tuner searches: the values to try, in order, and how to apply one.

    ``current`` is the start's value; ``values`` never repeats it. ``memory`` says whether the value
    changes what the server allocates (the planner is asked only then).
    """

    name: str
    label: str
    current: Any
    values: tuple[Any, ...]
    apply: ApplyFn
    why: str = ""
    memory: bool = False

    def describe(self, value: Any) -> str:
        return f"{self.name}={_show(value)}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label, "current": _show(self.current),
                "values": [_show(v) for v in self.values], "why": self.why}


def _show(value: Any) -> Any:
    if isinstance(value, Path):
        return value.name
    if isinstance(value, tuple):
        return "/".join(str(v) for v in value)
    return value


def _ordered(values: Iterable[Any], current: Any) -> tuple[Any, ...]:
    return tuple(v for v in dict.fromkeys(values) if v != current)


# ----------------------------------------------------------------------------- appliers


def _set_field(name: str) -> ApplyFn:
    def apply(s: LaunchSettings, value: Any) -> LaunchSettings:
        return replace(s, **{name: value})
    return apply


def _set_kv(s: LaunchSettings, value: Any) -> LaunchSettings:
    k, v = value
    return replace(s, cache_type_k=k, cache_type_v=v)


def _set_draft(s: LaunchSettings, value: Any) -> LaunchSettings:
    return replace(s, draft=str(value))


def threads_in(s: LaunchSettings) -> int | None:
    """The thread count a launch uses: the field, else a ``--threads N`` / ``-t N`` in extra_args."""
    if s.threads is not None:
        return s.threads
    args = s.extra_args
    for i, arg in enumerate(args):
        if arg in ("-t", "--threads") and i + 1 < len(args) and args[i + 1].isdigit():
            return int(args[i + 1])
        if arg.startswith("--threads=") and arg.split("=", 1)[1].isdigit():
            return int(arg.split("=", 1)[1])
    return None


def _without_flag(args: Sequence[str], names: tuple[str, ...], takes_value: bool) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in names:
            skip = takes_value
            continue
        if any(arg.startswith(f"{n}=") for n in names):
            continue
        out.append(arg)
    return out


def _set_threads(s: LaunchSettings, value: Any) -> LaunchSettings:
    # The field wins only if extra_args no longer repeats the flag (extra args come last on the line).
    return replace(s, threads=int(value), extra_args=_without_flag(s.extra_args, ("-t", "--threads"), True))


def _adaptive_applier(off_flag: tuple[str, ...]) -> ApplyFn:
    names = ("--spec-dm-adaptive", "--no-spec-dm-adaptive", "--spec-dm-controller")

    def apply(s: LaunchSettings, value: Any) -> LaunchSettings:
        extra = [a for a in _without_flag(s.extra_args, ("--spec-dm-controller",), True) if a not in names]
        return replace(s, extra_args=extra + (list(off_flag) if value == "off" else []))
    return apply


def _adaptive_current(s: LaunchSettings) -> str:
    args = s.extra_args
    if "--no-spec-dm-adaptive" in args:
        return "off"
    if "--spec-dm-controller" in args:
        i = args.index("--spec-dm-controller")
        if i + 1 < len(args) and args[i + 1] == "off":
            return "off"
    return DEFAULT


# ----------------------------------------------------------------------------- draft files


def quant_of(path: str | Path) -> str | None:
    """The quant token of a GGUF file name ("Q5_K_M"), or None when the name carries none."""
    m = _QUANT_RE.search(Path(path).name)
    return m.group(1).upper() if m else None


def _family(path: Path) -> str | None:
    m = _QUANT_RE.search(path.name)
    return None if m is None else (path.name[:m.start()] + path.name[m.end():]).lower()


def draft_siblings(draft: str | Path, files: Iterable[str | Path] | None = None) -> list[Path]:
    """Other quants of the same draft among ``files`` (default: the GGUFs beside it), best quant first:
    the same file name apart from its quant token, and (where readable) the same architecture."""
    start = Path(draft)
    family = _family(start)
    if family is None:
        return []
    pool = [Path(f) for f in files] if files is not None else sorted(start.parent.glob("*.gguf"))
    out = [p for p in pool if p.resolve() != start.resolve() and p.is_file() and _family(p) == family]
    try:
        arch = inspect(start).architecture
        out = [p for p in out if _arch_or_none(p) == arch]
    except GGUFError:
        pass
    return sorted(out, key=lambda p: -(_quant_bits(quant_of(p) or "")))


def _arch_or_none(path: Path) -> str | None:
    try:
        return inspect(path).architecture
    except GGUFError:
        return None


def _quant_bits(quant: str) -> float:
    m = re.search(r"(\d+)", quant)
    return float(m.group(1)) if m else 0.0


# ----------------------------------------------------------------------------- the knob set


def is_cpu_engine(caps: EngineCaps) -> bool:
    """A build without a GPU backend (or one whose probe lists no device)."""
    return caps.gpu_backend == "cpu" or (not caps.gpu_backend and not caps.devices)


def _draft_max_values(current: int | None, block: int | None) -> tuple[int, ...]:
    cap = max(2, (block - 1) if block else 16)
    return _ordered([cap, cap // 2, max(2, cap // 4), (3 * cap) // 4, 2, 1], current)


# Measured at full size on an H200 (docs/gpu-runs/2026-12-02-h200-standby, Gemma 4 31B + DFlash): with every
# draft accepted, tokens/s rises with the draft max all the way (Gen B 94 -> 317 from 1 to 16, mainline
# 110 -> 386); with none accepted, every extra drafted token costs (Gen B 45.5 at 1, 28.8 at 8). So the start's
# own acceptance says which end to try first; in between, the order above (deep, half, quarter...) stands.
DEEP_FIRST, SHALLOW_FIRST = 0.5, 0.2


def order_draft_max(knob: Knob, acceptance: float | None) -> Knob:
    """The draft-max knob with its values in the order the start's measured ``acceptance`` favours."""
    if knob.name != "draft_n_max" or acceptance is None or SHALLOW_FIRST <= acceptance < DEEP_FIRST:
        return knob
    return replace(knob, values=tuple(sorted(knob.values, reverse=acceptance >= DEEP_FIRST)))


def _thread_values(current: int | None, cores: int) -> tuple[int, ...]:
    wanted = [cores, max(1, cores - 1), max(1, cores // 2), 2, 1]
    return _ordered([v for v in wanted if 1 <= v <= cores], current)


def knobs_for(caps: EngineCaps, settings: LaunchSettings, files: Iterable[str | Path] | None = None, *,
              cpu_cores: int | None = None, draft_block: int | None = None) -> list[Knob]:
    """The knobs worth searching for this engine, card and start, most effective first.

    Speculation knobs only when the start speculates with a draft; threads only on a CPU engine (the
    GPU does the work otherwise); ubatch and KV types only on a GPU (on a CPU they move prompt speed and
    memory, not generation); the cross-context only on BeeLlama <= 0.3, the only engine with it.
    ``files``: where to look for other quants of the draft (default: its folder).
    """
    out: list[Knob] = []
    dflash = settings.spec_mode == Mode.DFLASH and bool(settings.draft) and caps.dflash_spec_type is not None
    speculating = settings.spec_mode != Mode.BASELINE
    cpu = is_cpu_engine(caps)
    if speculating:
        values = _draft_max_values(settings.draft_n_max, draft_block)
        out.append(Knob("draft_n_max", "Draft max", settings.draft_n_max, values, _set_field("draft_n_max"),
                        "tokens drafted per step: more is faster while the target accepts them"))
        if caps.has("--spec-dm-controller") or caps.has("--no-spec-dm-adaptive"):
            # BeeLlama <= 0.3: --no-spec-dm-adaptive (its controller takes profit|fringe); >= 0.4: profit|off.
            off = ("--no-spec-dm-adaptive",) if caps.has("--no-spec-dm-adaptive") else ("--spec-dm-controller", "off")
            cur = _adaptive_current(settings)
            out.append(Knob("adaptive", "Adaptive draft max", cur, _ordered([DEFAULT, "off"], cur),
                            _adaptive_applier(off), "BeeLlama's controller that lowers the draft max on its own"))
    if settings.spec_mode.uses_draft_file and settings.draft:
        siblings = draft_siblings(settings.draft, files)
        if siblings:
            out.append(Knob("draft", "Draft quant", Path(settings.draft), tuple(siblings), _set_draft,
                            "the other quants of this draft that are on disk", memory=True))
        if dflash and caps.generation == Generation.BEE_A and caps.has("--spec-dflash-cross-ctx"):
            # Unset means the engine's default (512 on 0.1-0.3): never measure it twice under two names.
            cur_ctx = settings.dflash_cross_ctx or _engine_default(caps, "--spec-dflash-cross-ctx")
            out.append(Knob("dflash_cross_ctx", "DFlash cross context", settings.dflash_cross_ctx,
                            _ordered(_CROSS_CTX, cur_ctx), _set_field("dflash_cross_ctx"),
                            "target context the drafter sees (BeeLlama <= 0.3)", memory=True))
    if cpu:
        cores = cpu_cores or _physical_cores()
        cur_threads = threads_in(settings)
        values = _thread_values(cur_threads, cores)
        if values:
            out.append(Knob("threads", "Threads", cur_threads, values, _set_threads,
                            "CPU threads: more cores help until they wait on each other"))
        return out
    if caps.has("--ubatch-size") or caps.has("-ub"):
        out.append(Knob("ubatch_size", "Micro-batch", settings.ubatch_size, _ordered(_UBATCH, settings.ubatch_size),
                        _ubatch_apply, "the batch the verifier runs", memory=True))
    if caps.has("--cache-type-k") and caps.cache_types:
        cur_kv = (settings.cache_type_k, settings.cache_type_v)
        pairs = [p for p in _KV_PAIRS if p[0] in caps.cache_types + ("f16",) and p[1] in caps.cache_types + ("f16",)]
        if settings.flash_attn == "off":
            pairs = [p for p in pairs if p[1] in ("f16", "f32", "bf16")]
        values = _ordered(pairs, cur_kv)
        if values:
            out.append(Knob("kv", "KV cache types", cur_kv, values, _set_kv,
                            "smaller caches read faster and leave room, at some precision", memory=True))
    return out


def _engine_default(caps: EngineCaps, flag: str) -> int | None:
    """The integer default the engine's --help states for ``flag``, or None."""
    text = caps.defaults.get(flag, "").strip()
    return int(text) if text.isdigit() else None


def _ubatch_apply(s: LaunchSettings, value: Any) -> LaunchSettings:
    batch = s.batch_size if s.batch_size is None or s.batch_size >= value else value
    return replace(s, ubatch_size=int(value), batch_size=batch)


def _physical_cores() -> int:
    try:
        import psutil

        return int(psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except ImportError:
        return os.cpu_count() or 1


def draft_block_size(settings: LaunchSettings) -> int | None:
    """The DFlash draft's block size (its useful draft max is one less), None when unreadable."""
    if not settings.draft:
        return None
    try:
        info = inspect(settings.draft)
    except GGUFError:
        return None
    return info.dflash.block_size if info.dflash else None


# ----------------------------------------------------------------------------- memory fit


def planner_fit(caps: EngineCaps, free_vram: Sequence[int] | None, ram_available: int | None) -> FitFn:
    """A fit check from the memory planner: on a GPU engine every GPU keeps its margin, on a CPU-only
    engine the host plan stays under the available RAM (no VRAM limit there). A model the planner
    cannot read is not refused here: the server's own start then decides."""
    cache: dict[str, ModelInfo | None] = {}

    def model(path: str | None) -> ModelInfo | None:
        if not path:
            return None
        if path not in cache:
            try:
                cache[path] = inspect(path)
            except (GGUFError, OSError):  # unreadable or gone: the server's own start decides
                cache[path] = None
        return cache[path]

    cpu = is_cpu_engine(caps)
    devices = [] if cpu else list(free_vram or [])

    def fits(s: LaunchSettings) -> str | None:
        target = model(s.target)
        draft = model(s.draft) if s.spec_mode.uses_draft_file else None
        if target is None:
            return None
        try:
            p = plan(target, draft, s, caps.generation, devices)
        except PlanError as exc:
            return f"the planner cannot plan it ({exc})"
        if devices and not p.fits:
            worst = min(p.gpus, key=lambda d: d.left or 0)
            return f"{worst.name} would have {(worst.left or 0) / MiB:,.0f} MiB left (the planner keeps 1 GiB free)"
        if cpu and ram_available is not None and p.host.total > ram_available:
            return (f"it needs {p.host.total / MiB:,.0f} MiB of RAM, {ram_available / MiB:,.0f} MiB are available")
        return None

    return fits
