"""The tool-safe choice: speculation off exactly where the known-issue table says tool calls break."""

from __future__ import annotations

from beedeck.core.agents.toolsafe import tool_safe
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.known_issues import load_table
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.models.guard import CHECKS
from tests.fixtures.engines import BEE_B, MAINLINE, help_stdout


def _caps(which: str) -> EngineCaps:
    return caps_from_texts(which, "", help_stdout(MAINLINE if which == "ml" else BEE_B))


def test_mtp_on_mainline_is_turned_off_and_says_why() -> None:
    s = LaunchSettings(target="/m/q.gguf", spec_mode=SpecMode.MTP)
    safe = tool_safe(s, _caps("ml"))
    assert safe.settings.spec_mode == SpecMode.OFF and s.spec_mode == SpecMode.MTP
    assert safe.issue == "mtp-tool-call-args" and "#27296" in safe.why and "MTP" in safe.why


def test_other_modes_and_engines_are_left_as_they_are() -> None:
    for mode in (SpecMode.OFF, SpecMode.DFLASH, SpecMode.MODEL_FREE):
        s = LaunchSettings(target="/m/q.gguf", draft="/m/d.gguf", spec_mode=mode)
        assert tool_safe(s, _caps("ml")).settings is s
    s = LaunchSettings(target="/m/q.gguf", spec_mode=SpecMode.MTP)
    assert tool_safe(s, _caps("bee-b")).why == ""  # the row names mainline only


def test_the_row_is_in_the_table_and_a_chat_launch_is_not_warned() -> None:
    rows = {r.id: r for r in load_table()}
    row = rows["mtp-tool-call-args"]
    assert row.severity == "warn" and row.engines == ("mainline",) and "27296" in row.source
    assert row.check not in CHECKS  # the launch guard skips it: only an agent's tool calls are at stake
