"""A server BeeDeck did not start, as the mode switch sees it: what it serves (as launch settings the
switch understands) and whether Baseline can be switched on it at all.

BeeDeck cannot restart such a server with or without a draft, so the only switch it can offer is per
request, between Baseline and DFlash, and only where a check
(:func:`~beedeck.core.engine.speculation.switching.check_per_request`) proves a "no drafts" request
honoured. Anywhere else the switch is held on what the server runs, so every reply is labelled with what
really produced it, and the reason is the toggle's tooltip.
"""

from __future__ import annotations

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.speculation.switching import PerRequestVerdict

NOT_OURS = "BeeDeck did not start this server, so it cannot restart it with or without a draft"
HELD_STATUS = "the server's own speculation; no switching here"
OFF_STATUS = "no switching on this server"
CHECKING_STATUS = "checking…"
CHECKING_REASON = f"{NOT_OURS}: checking whether it honours a per-request 'no drafts'…"
NO_RESTART_REASON = (f"{NOT_OURS}, and a reply that asked for no drafts still drafted: this server ignores a "
                     "per-request 'no drafts'.")
# Speculation types whose drafts a per-request "no drafts" could switch off (a DFlash draft; a
# BeeLlama 0.1-0.3 server reports no type and treats any draft as DFlash).
_DFLASH_LIKE = ("", "on", "dflash", "draft-dflash")


def served_settings(info: RemoteInfo) -> LaunchSettings:
    """What the attached server runs, as launch settings the switch understands (its mode only)."""
    first = info.spec_types.split(",")[0].strip()
    mode = Mode.of_spec_type(first)
    if mode is None and first.startswith("ngram"):
        return LaunchSettings(target=info.model, spec_mode=Mode.MODEL_FREE, spec_model_free_type=first)
    mode = mode or Mode.DFLASH
    return LaunchSettings(target=info.model, draft=None if mode == Mode.MTP else "(loaded on the server)",
                          spec_mode=mode)


def toggle_reason(info: RemoteInfo) -> str | None:
    """Why the switch cannot be offered on this server before any check (None: check per request)."""
    if info.speculative is None:
        return f"{NOT_OURS}, and it does not tell whether it speculates (its /slots endpoint is off)."
    if not info.speculative:
        return f"This server runs without speculation, and {NOT_OURS}: replies use Baseline."
    if info.spec_types not in _DFLASH_LIKE and "dflash" not in info.spec_types:
        return (f"This server speculates with {info.spec_types}; BeeDeck switches a running server only between "
                f"Baseline and DFlash, per request, and {NOT_OURS}.")
    return None


def verdict_reason(verdict: PerRequestVerdict) -> str:
    """Why the switch is held after a check that did not prove "no drafts" honoured."""
    what = verdict.describe().split(", so ")[0]
    return f"{NOT_OURS}, and {what}: Baseline cannot be honest here."


def check_failed_reason(why: str) -> str:
    return f"{NOT_OURS}, and the per-request check failed ({why})."
