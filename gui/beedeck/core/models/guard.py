"""The pre-launch guard: refuse, before anything starts, a launch that would fail or crash later.

It reads the model files' GGUF headers and compares them with what the probed engine can run:
missing or non-GGUF files, a draft in the wrong DFlash format, DFlash on a target architecture the
engine's graph cannot feed.
"""

from __future__ import annotations

from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server import ServerFailed
from beedeck.core.models.gguf import GGUFError, read_header
from beedeck.core.models.paircheck import MAINLINE_DFLASH_TARGETS


def _refuse(code: str, message: str, remedy: str) -> ServerFailed:
    return ServerFailed(ServerFailure(code, message, remedy))


def _check_gguf(path: str, role: str) -> str:
    """The GGUF architecture of ``path``; raises ServerFailed (model_missing / not_gguf) otherwise."""
    p = Path(path)
    if not p.exists():
        raise _refuse("model_missing", f"The {role} model {p} does not exist.", "Check the path, or download it again.")
    try:
        return read_header(p).architecture
    except GGUFError as exc:
        raise _refuse("not_gguf", f"The {role} model cannot be used: {exc}", "Pick a valid .gguf file.") from None


def check_launch(caps: EngineCaps, settings: LaunchSettings) -> None:
    """Refuse, before anything starts, launches that would fail or crash later. Raises ServerFailed."""
    target_arch = _check_gguf(settings.target, "target")
    if settings.spec_mode != SpecMode.DFLASH:
        return
    if not settings.draft:
        raise _refuse("wrong_draft_format", "DFlash needs a draft model.", "Pick the DFlash draft GGUF made for this target.")
    draft_arch = _check_gguf(settings.draft, "draft")
    want = caps.dflash_draft_arch
    if want is not None and draft_arch != want:
        if draft_arch in ("dflash", "dflash-draft"):
            message = (f"The draft is in the '{draft_arch}' format, but this engine wants '{want}' drafts "
                       "(BeeLlama <= 0.3 reads 'dflash-draft'; mainline llama.cpp and BeeLlama >= 0.4 read 'dflash').")
            remedy = f"Download the draft in the '{want}' format, or use an engine that reads '{draft_arch}'."
        else:
            message = (f"The draft model's architecture is '{draft_arch}', not a DFlash draft ('{want}' on this engine).")
            remedy = "Pick the DFlash draft GGUF made for this target."
        raise _refuse("wrong_draft_format", message, remedy)
    upstream_dflash = caps.dflash_spec_type == "draft-dflash" or caps.generation in (Generation.MAINLINE, Generation.BEE_B)
    if upstream_dflash and target_arch not in MAINLINE_DFLASH_TARGETS:
        raise _refuse(
            "dflash_target_unsupported",
            f"This engine's DFlash cannot run a '{target_arch}' target: its graph does not expose the layer inputs "
            "DFlash reads, so the server would abort on the first request.",
            "Use a supported target (Llama, Qwen3, Qwen3.5/3.6, Gemma 4, ...), BeeLlama <= 0.3, or turn DFlash off.",
        )
