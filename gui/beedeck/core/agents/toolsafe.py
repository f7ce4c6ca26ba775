"""The "tool-safe" choice of Use with...: speculation off where the known-issue table says this engine's
speculation mode corrupts tool calls (rows whose check is ``tool_calls_under_spec``), and what the engine
does with a forced ``tool_choice`` (rows whose check is ``tool_choice_ignored``). The window, ``beedeck agent``
and ``beedeck serve`` all say it from here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.known_issues import KnownIssue, load_table
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode

CHECK = "tool_calls_under_spec"
CHOICE_CHECK = "tool_choice_ignored"
TOOL_CHECKS = (CHECK, CHOICE_CHECK)  # rows for agents' tool calls: the launch guard does not run them


@dataclass(frozen=True)
class ToolSafe:
    """The settings to launch for an agent, and why they differ from the user's (``why`` empty: same)."""

    settings: LaunchSettings
    why: str = ""
    issue: str = ""


def _rows(caps: EngineCaps, check: str, table: tuple[KnownIssue, ...] | None) -> list[KnownIssue]:
    """The rows of ``check`` that may apply to this engine (an unknown release counts as matching)."""
    return [r for r in (table if table is not None else load_table()) if r.check == check and r.applies_to(caps)
            is not False]


def tool_safe(settings: LaunchSettings, caps: EngineCaps, table: tuple[KnownIssue, ...] | None = None) -> ToolSafe:
    """``settings`` with speculation off where a matching row says tool calls break under it; else as is.
    A row whose version range cannot be checked (the engine's release is unknown) counts as matching."""
    mode = settings.spec_mode
    for row in _rows(caps, CHECK, table):
        if mode.setting not in row.params.get("modes", ()):  # known-issues.json names a mode by its setting
            continue
        label = mode.label
        message, _remedy = row.render({"mode": label})
        why = f"Tool-safe: speculation turned off ({label} → Baseline). {message}"
        return ToolSafe(replace(settings, spec_mode=Mode.BASELINE), why, row.id)
    return ToolSafe(settings)


def spec_lines(mode: Mode, caps: EngineCaps | None, table: tuple[KnownIssue, ...] | None = None) -> list[str]:
    """What a terminal user is told: the speculation mode known to break tool calls on this engine, whether this
    server runs it, and the safe choice (``beedeck agent show/write``, ``beedeck serve``)."""
    if caps is None:
        return []
    out = []
    for row in _rows(caps, CHECK, table):
        modes = [m for m in map(Mode.from_setting, row.params.get("modes", ())) if m is not None]
        names = " and ".join(m.label for m in modes)
        message, _remedy = row.render({"mode": names})
        if mode in modes:
            out.append(f"tool-safe: this server runs {mode.label}, which is known to break tool calls here. {message} "
                       "The safe choice is speculation off: `beedeck serve --spec off` (in the window: Server → Use "
                       "with… → Tool-safe).")
        else:
            off = "no speculation" if mode == Mode.BASELINE else mode.label
            out.append(f"tool-safe: {names} speculation is known to break tool calls on this engine ({row.id}); "
                       f"this server runs {off}, which is safe for an agent.")
    return out


def tool_choice_lines(caps: EngineCaps | None, tools: bool | None,
                      table: tuple[KnownIssue, ...] | None = None) -> list[str]:
    """What the engine does with a forced tool call (``tool_choice`` "required"/named, Anthropic "any"/"tool")."""
    if tools is False:
        return ["tool_choice: with no tool syntax in the template, nothing forces a tool call: \"required\" or a named "
                "function (OpenAI) and \"any\" or \"tool\" (Anthropic) come back as plain text."]
    if caps is None:
        return []
    return [f"tool_choice: {row.render({})[0]}" for row in _rows(caps, CHOICE_CHECK, table)]
