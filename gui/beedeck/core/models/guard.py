"""The pre-launch guard: refuse, before anything starts, a launch that would fail or crash later.

It reads the model files' GGUF headers and runs the checks of the known-issue table
(``resources/known-issues.json``, :mod:`beedeck.core.engine.known_issues`) that apply to the probed
engine: cache types the model's head size cannot take, a draft in the wrong DFlash format or of the wrong
kind for the mode (a DFlash file run as EAGLE-3), MTP on a target without MTP heads, DFlash on a target
architecture the engine's graph cannot feed, speculation modes that crash on this build. A row
that applies refuses the launch (``ServerFailed`` with the row's code); a row that only may
apply (its version range, an engine of unknown release) or whose severity is "warn" becomes a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.known_issues import KnownIssue, load_table
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed
from beedeck.core.engine.speculation.modes import keeps_mtp_head
from beedeck.core.models.draft_kinds import draft_kind, is_dflash2, mtp_layers
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect, read_header
from beedeck.core.printable import printable

FULL_PRECISION = frozenset({"f32", "f16", "bf16"})
TURBO_BLOCK = 128  # BeeLlama 0.1-0.3 TurboQuant: 128-value blocks (ggml-common.h QK_TURBO*)
QUANT_BLOCK = 32  # every other quantized KV type (q8_0 ... q2_1): QK*_0 = 32


def cache_block(cache_type: str) -> int | None:
    """Values per block of a KV cache type; None for unquantized types and KVarN (not a ggml type)."""
    t = cache_type.lower()
    if t in FULL_PRECISION or t.startswith("kvarn"):
        return None
    return TURBO_BLOCK if t.startswith("turbo") else QUANT_BLOCK


@dataclass
class LaunchContext:
    """What the checks look at; model headers are read once, and only when a check needs them."""

    caps: EngineCaps
    settings: LaunchSettings
    target_arch: str
    draft_arch: str | None
    _target_info: ModelInfo | None = None
    _draft_info: ModelInfo | None = None

    @property
    def target(self) -> ModelInfo:
        if self._target_info is None:
            self._target_info = inspect(self.settings.target)
        return self._target_info

    @property
    def draft(self) -> ModelInfo:
        """The draft's header and tensor table (only read in a draft-file mode, where the draft exists)."""
        if self._draft_info is None:
            self._draft_info = inspect(str(self.settings.draft))
        return self._draft_info

    @property
    def dflash(self) -> bool:
        return self.settings.spec_mode == Mode.DFLASH and self.draft_arch is not None


Fields = dict[str, Any]
Check = Callable[[LaunchContext, KnownIssue], Iterator[Fields]]


def _kv_head_sizes(info: ModelInfo) -> list[tuple[str, int]]:
    layers = info.kv_layers() or list(range(info.n_layer))
    return [(side, dims[i]) for side, dims in (("K", info.head_dim_k), ("V", info.head_dim_v))
            for i in layers if i < len(dims)]


def _check_cache_block(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    s = ctx.settings
    types = {"K": s.cache_type_k, "V": s.cache_type_v}
    quantized_v = cache_block(s.cache_type_v) is not None
    turbo = any(t.startswith("turbo") for t in types.values())
    if s.flash_attn == "off" and not quantized_v and not turbo:
        return  # the engines only test the block size when flash attention is on (turbo/quantized V force it)
    for side, head in _kv_head_sizes(ctx.target):
        block = cache_block(types[side])
        if block is not None and head % block:
            yield {"side": side, "type": types[side], "block": block, "head": head}
            return


def _check_kvarn(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    allowed = set(row.params.get("head_dims", (128, 256, 512)))
    s = ctx.settings
    kvarn = next((t for t in (s.cache_type_k, s.cache_type_v) if t.startswith("kvarn")), None)
    if kvarn is None:
        return
    bad = sorted({head for _side, head in _kv_head_sizes(ctx.target) if head not in allowed})
    if bad:
        yield {"type": kvarn, "head": ", ".join(map(str, bad))}


def _check_spec_type(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    s = ctx.settings
    if s.spec_mode == Mode.MODEL_FREE and s.spec_model_free_type in row.params.get("types", ()):
        yield {"spec_type": s.spec_model_free_type}


def _check_draft_arch_is(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    if ctx.dflash and ctx.draft_arch == row.params.get("arch"):
        yield {"draft_arch": ctx.draft_arch}


def _check_draft_not_dflash(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    if ctx.dflash and ctx.draft_arch not in ("dflash", "dflash-draft"):
        yield {"draft_arch": ctx.draft_arch}


def _check_dflash_target(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    archs = row.params.get("archs", {}).get(ctx.caps.generation.value)
    if ctx.dflash and archs is not None and ctx.target_arch not in archs:
        yield {"target_arch": ctx.target_arch}


def _check_mtp_heads(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    # An mtp- head file as the draft brings the heads (mainline: --spec-draft-model with draft-mtp); the mode
    # check (core.engine.speculation.modes) says whether this engine loads one.
    if ctx.settings.spec_mode == Mode.MTP and mtp_layers(ctx.target) < 1 and not keeps_mtp_head(ctx.settings):
        yield {"target": Path(ctx.settings.target).name}


def _check_draft_kind(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    """An EAGLE-3 or DSpark mode whose draft is another kind (a DFlash file, an ordinary model)."""
    mode = ctx.settings.spec_mode
    if mode not in (Mode.EAGLE3, Mode.DSPARK) or ctx.draft_arch is None:
        return
    runs_as = Mode.of_draft_kind(draft_kind(ctx.draft))
    if runs_as == mode:
        return
    label = mode.label
    yield {"draft": Path(str(ctx.settings.draft)).name, "mode": label,
           "kind": f"{runs_as.a_label} draft" if runs_as else f"an ordinary '{ctx.draft_arch}' model",
           "fix": f"use the {runs_as.label} mode for it" if runs_as else f"pick the {label} draft made for this target"}


def _p_min(args: list[str]) -> float | None:
    """The last --spec-draft-p-min the extra arguments pass (as the engine reads them), or None."""
    value = None
    for i, arg in enumerate(args):
        flag, eq, text = arg.partition("=")
        if flag in ("--spec-draft-p-min", "--draft-p-min"):
            text = text if eq else (args[i + 1] if i + 1 < len(args) else "")
            try:
                value = float(text)
            except ValueError:
                continue
    return value


def _check_dspark_p_min(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    # common/speculative.cpp: a DSpark draft whose dflash.has_confidence_head is not true refuses p_min > 0.
    p_min = _p_min(ctx.settings.extra_args)
    if ctx.settings.spec_mode != Mode.DSPARK or ctx.draft_arch is None or not p_min or p_min <= 0:
        return
    has_head = ctx.draft.metadata.get("dflash.has_confidence_head")
    if has_head is not None and str(has_head).lower() != "true":
        yield {"draft": Path(str(ctx.settings.draft)).name, "p_min": f"{p_min:g}"}


def _check_dflash2(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    if not (ctx.dflash and ctx.draft_arch == "dflash"):
        return
    # The selector key is in the metadata; only without it is the tensor table read (for selector_* names). A
    # header already read (a Hub file sized by range requests, the launch form's) is used as it is.
    meta = ctx._draft_info.metadata if ctx._draft_info is not None else read_header(str(ctx.settings.draft)).metadata
    if "dflash.selector_rank" not in meta:
        try:
            if not is_dflash2(ctx.draft):
                return
        except GGUFError:
            return  # a table the planner cannot size is not this row's business
    yield {"draft": Path(str(ctx.settings.draft)).name}


def _check_kvarn_mtp(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    s = ctx.settings
    kvarn = next((t for t in (s.cache_type_k, s.cache_type_v) if t.startswith("kvarn")), None)
    if kvarn and s.spec_mode == Mode.MTP and ctx.target_arch in row.params.get("archs", ()):
        yield {"type": kvarn}


def _check_cache_type(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    hit = next((t for t in (ctx.settings.cache_type_k, ctx.settings.cache_type_v) if t in row.params.get("types", ())),
               None)
    if hit:
        yield {"type": hit}


def _check_cuda_low_bit(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    # The CUDA version is in the release asset's name ("...-cuda-13.2-x64"), which the engine's folder,
    # the release sidecar or the build line keep.
    where = " ".join((ctx.caps.path, ctx.caps.release, ctx.caps.built_with)).lower()
    cuda = next((v for v in row.params.get("cuda", ()) if f"cuda-{v}" in where or f"cuda {v}" in where), None)
    quant = ctx.target.file_type.upper()
    if cuda and any(quant.startswith(q) for q in row.params.get("quants", ())):
        yield {"cuda": cuda, "target": Path(ctx.settings.target).name, "quant": quant}


def _check_no_cors(ctx: LaunchContext, row: KnownIssue) -> Iterator[Fields]:
    # Probed, never by engine name: an engine without the option cannot be limited to its own origin
    # (argv/build.py _cors). A key shuts a page out (a browser cannot send one without a preflight the engine
    # cannot pass on), and --cors-origins among the extra arguments is the user's own choice.
    s = ctx.settings
    if ctx.caps.has("--cors-origins") or s.api_key or any(a.split("=", 1)[0] == "--cors-origins" for a in s.extra_args):
        return
    yield {}


CHECKS: dict[str, Check] = {
    "cache_block_vs_head_dim": _check_cache_block,
    "kvarn_head_dim": _check_kvarn,
    "spec_type_in": _check_spec_type,
    "draft_arch_is": _check_draft_arch_is,
    "draft_not_dflash": _check_draft_not_dflash,
    "dflash_target_arch": _check_dflash_target,
    "mtp_without_heads": _check_mtp_heads,
    "draft_kind_mismatch": _check_draft_kind,
    "dspark_p_min": _check_dspark_p_min,
    "draft_is_dflash2": _check_dflash2,
    "kvarn_with_mtp_on": _check_kvarn_mtp,
    "cache_type_in": _check_cache_type,
    "cuda_build_low_bit": _check_cuda_low_bit,
    "no_cors_restriction": _check_no_cors,
}


@dataclass(frozen=True)
class GuardWarning:
    """A known issue that may bite (or is only a warning): shown, not refused."""

    issue: str
    message: str
    remedy: str

    def __str__(self) -> str:
        return f"{self.message} {self.remedy}"


def _refuse(code: str, message: str, remedy: str, issue: str = "") -> ServerFailed:
    return ServerFailed(ServerFailure(code, message, remedy, issue=issue))


def _check_gguf(path: str, role: str) -> str:
    """The GGUF architecture of ``path``; raises ServerFailed (model_missing / not_gguf) otherwise."""
    p = Path(path)
    if not p.exists():
        raise _refuse("model_missing", f"The {role} model {p} does not exist.", "Check the path, or download it again.")
    try:
        return read_header(p).architecture
    except GGUFError as exc:
        raise _refuse("not_gguf", f"The {role} model cannot be used: {printable(exc, 1000)}",
                      "Pick a valid .gguf file.") from None


def check_launch(caps: EngineCaps, settings: LaunchSettings, table: tuple[KnownIssue, ...] | None = None, *,
                 target: ModelInfo | None = None, draft: ModelInfo | None = None) -> list[GuardWarning]:
    """Refuse a launch that would fail or crash (raises ServerFailed); return the warnings to show.
    ``target`` / ``draft``: headers already read (the launch form's), else they are read here."""
    target_arch = target.architecture if target is not None else _check_gguf(settings.target, "target")
    draft_arch = None
    if settings.spec_mode.uses_draft_file:
        label = settings.spec_mode.label
        if not settings.draft:
            raise _refuse("wrong_draft_format", f"{label} needs a draft model.",
                          f"Pick the {label} draft GGUF made for this target.")
        draft_arch = draft.architecture if draft is not None else _check_gguf(settings.draft, "draft")
    ctx = LaunchContext(caps, settings, target_arch, draft_arch, target, draft)
    warnings: list[GuardWarning] = []
    for row in table if table is not None else load_table():
        applies = row.applies_to(caps)
        check = CHECKS.get(row.check)
        if applies is False or check is None:
            continue
        try:
            hit = next(check(ctx, row), None)
        except (GGUFError, OSError) as exc:
            raise _refuse("not_gguf", f"A model file cannot be read: {printable(exc, 1000)}",
                          "Pick a valid .gguf file.") from None
        if hit is None:
            continue
        message, remedy = row.render(hit)
        if row.severity == "refuse" and applies:
            raise _refuse(row.code, message, remedy, issue=row.id)
        if applies is None:
            message = f"This engine's release is unknown, so this may apply ({row.versions}): {message}"
        warnings.append(GuardWarning(row.id, message, remedy))
    return warnings
