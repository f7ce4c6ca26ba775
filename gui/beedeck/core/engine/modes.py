"""Speculation modes of a launch profile: whether it has a draft, the settings for each mode, and
how a server switches between them.
"""

from __future__ import annotations

from dataclasses import replace

from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode

PER_REQUEST = "per-request"
RESTART = "restart"


def has_draft(settings: LaunchSettings | None) -> bool:
    return bool(settings and settings.draft and settings.spec_mode == SpecMode.DFLASH)


def switch_path(per_request_honoured: bool | None) -> str:
    """per-request only where this engine build was measured to honour it
    (:mod:`beedeck.core.engine.switching`), otherwise restart without the draft."""
    return PER_REQUEST if per_request_honoured else RESTART


def settings_for_mode(profile: LaunchSettings, mode: str) -> LaunchSettings:
    """The profile's settings with the draft (dflash) or without it (baseline); nothing else changes."""
    if mode == "dflash":
        return replace(profile)
    return replace(profile, draft=None, spec_mode=SpecMode.OFF)
