"""The "tool-safe" choice of Use with...: speculation off where the known-issue table says this engine's
speculation mode corrupts tool calls (rows whose check is ``tool_calls_under_spec``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.known_issues import KnownIssue, load_table
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.speculation.modes import LABELS, MODE_OF_SPEC

CHECK = "tool_calls_under_spec"


@dataclass(frozen=True)
class ToolSafe:
    """The settings to launch for an agent, and why they differ from the user's (``why`` empty: same)."""

    settings: LaunchSettings
    why: str = ""
    issue: str = ""


def tool_safe(settings: LaunchSettings, caps: EngineCaps, table: tuple[KnownIssue, ...] | None = None) -> ToolSafe:
    """``settings`` with speculation off where a matching row says tool calls break under it; else as is.
    A row whose version range cannot be checked (the engine's release is unknown) counts as matching."""
    mode = settings.spec_mode
    for row in table if table is not None else load_table():
        if row.check != CHECK or mode.value not in row.params.get("modes", ()):
            continue
        if row.applies_to(caps) is False:
            continue
        label = LABELS.get(MODE_OF_SPEC.get(mode, ""), mode.value)
        message, _remedy = row.render({"mode": label})
        why = f"Tool-safe: speculation turned off ({label} → Baseline). {message}"
        return ToolSafe(replace(settings, spec_mode=SpecMode.OFF), why, row.id)
    return ToolSafe(settings)
