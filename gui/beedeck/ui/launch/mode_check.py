"""What the launch form says about speculation: which modes this engine and these model files can run
(the line under "Speculation"), why the chosen mode cannot run with these files (a reason Launch
gives), and the draft's verdict for the chosen mode (the line under "Draft model").

Qt-free: the form passes the probed caps, its settings and the GGUF headers it has read (None while a
header is being read or could not be read), and shows the texts.
"""

from __future__ import annotations

from dataclasses import dataclass

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.paircheck import check_pair, mode_refusal, modes_for

RED, AMBER, GREEN, GREY = "#d62728", "#c98a00", "#2e7d32", "palette(placeholder-text)"


@dataclass(frozen=True)
class Verdict:
    """A line of the form: its colour and text ("" hides it), and the tooltip behind it."""

    color: str
    text: str
    tooltip: str = ""


def modes_line(caps: EngineCaps | None, s: LaunchSettings, target: ModelInfo | None,
               draft: ModelInfo | None) -> Verdict:
    """"Runs here: Baseline · MTP · N-gram": the toggle's names (one name per mode), with every other mode's
    reason in the tooltip, and the engine's n-gram type there too (the "N-gram type" field sets it)."""
    options = modes_for(caps, s, target, draft)
    can = [o for o in options if o.available]
    cannot = [o for o in options if not o.available]
    tip = "The toolbar toggle switches between the modes that run here." + "".join(
        f"\n{o.key.label} runs as --spec-type {o.spec_type} on this engine." for o in can
        if o.key == Mode.MODEL_FREE and o.spec_type)
    tip += ("\n\n" + "\n".join(f"• {o.key.label}: {o.reason}" for o in cannot) if cannot
            else "\n\nEvery speculation mode runs here.")
    return Verdict(GREY, "Runs here: " + " · ".join(o.key.label for o in can), tip)


def draft_verdict(caps: EngineCaps | None, s: LaunchSettings, target: ModelInfo | None, draft: ModelInfo | None,
                  error: str | None, reading: bool) -> Verdict:
    """The draft line for a draft-file mode: the file's kind for the mode, then (DFlash, DSpark: a
    DFlash-format file) the full pair check. Empty in the other modes or without a draft."""
    if not s.spec_mode.uses_draft_file or not s.draft:
        return Verdict(GREY, "")
    if error:
        return Verdict(RED, f"✗ {error}")
    if target is None or draft is None:
        return Verdict(GREY, "Reading the GGUF headers…" if reading else "")
    why = mode_refusal(caps, s, target, draft)
    if why:
        return Verdict(RED, f"✗ {why}")
    key = s.spec_mode
    if draft.dflash is None:  # EAGLE-3: the engine checks the rest when it loads the draft
        return Verdict(GREEN, f"✓ An {key.label} draft.")
    verdict = check_pair(target, draft, caps)
    if not verdict.ok:
        return Verdict(RED, "✗ " + " ".join(verdict.reasons))
    if verdict.warnings:
        return Verdict(AMBER, "⚠ Pair OK, but: " + " ".join(verdict.warnings))
    return Verdict(GREEN, f"✓ This {'DSpark ' if key == Mode.DSPARK else ''}draft matches the target.")


__all__ = ["Verdict", "draft_verdict", "mode_refusal", "modes_line"]
