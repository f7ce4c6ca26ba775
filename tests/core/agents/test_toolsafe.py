"""The tool-safe choice: speculation off exactly where the known-issue table says tool calls break, said in the
terminal too; and what each engine does with a forced tool call."""

from __future__ import annotations

from beedeck.core.agents.toolsafe import CHOICE_CHECK, spec_lines, tool_choice_lines, tool_safe
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.known_issues import load_table
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.guard import CHECKS
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout


def _caps(which: str) -> EngineCaps:
    return caps_from_texts(which, "", help_stdout(MAINLINE if which == "ml" else BEE_B))


def test_mtp_on_mainline_is_turned_off_and_says_why() -> None:
    s = LaunchSettings(target="/m/q.gguf", spec_mode=Mode.MTP)
    safe = tool_safe(s, _caps("ml"))
    assert safe.settings.spec_mode == Mode.BASELINE and s.spec_mode == Mode.MTP
    assert safe.issue == "mtp-tool-call-args" and "#27296" in safe.why and "MTP" in safe.why


def test_other_modes_and_engines_are_left_as_they_are() -> None:
    for mode in (Mode.BASELINE, Mode.DFLASH, Mode.MODEL_FREE):
        s = LaunchSettings(target="/m/q.gguf", draft="/m/d.gguf", spec_mode=mode)
        assert tool_safe(s, _caps("ml")).settings is s
    s = LaunchSettings(target="/m/q.gguf", spec_mode=Mode.MTP)
    assert tool_safe(s, _caps("bee-b")).why == ""  # the row names mainline only


def test_the_row_is_in_the_table_and_a_chat_launch_is_not_warned() -> None:
    rows = {r.id: r for r in load_table()}
    row = rows["mtp-tool-call-args"]
    assert row.severity == "warn" and row.engines == ("mainline",) and "27296" in row.source
    assert row.check not in CHECKS  # the launch guard skips it: only an agent's tool calls are at stake


def test_the_terminal_names_the_mode_that_breaks_tool_calls_and_the_safe_one() -> None:
    (running_mtp,) = spec_lines(Mode.MTP, _caps("ml"))
    assert running_mtp.startswith("tool-safe: this server runs MTP, which is known to break tool calls here.")
    assert "#27296" in running_mtp and "`beedeck serve --spec off`" in running_mtp
    (safe,) = spec_lines(Mode.DFLASH, _caps("ml"))
    assert "MTP speculation is known to break tool calls on this engine (mtp-tool-call-args)" in safe
    assert "this server runs DFlash, which is safe" in safe
    assert spec_lines(Mode.MTP, _caps("bee-b")) == [] and spec_lines(Mode.MTP, None) == []


def test_what_each_engine_does_with_a_forced_tool_call() -> None:
    (ml,) = tool_choice_lines(_caps("ml"), tools=True)
    assert "does not enforce a forced tool call" in ml and "Wrong type supplied" in ml
    (bee_a,) = tool_choice_lines(caps_from_texts("bee-a", "", help_stdout(BEE_A)), tools=True)
    assert "enforces tool_choice \"required\"" in bee_a and "ignores a named OpenAI function" in bee_a
    (no_tools,) = tool_choice_lines(_caps("bee-b"), tools=False)
    assert "no tool syntax in the template, nothing forces a tool call" in no_tools
    rows = {r.id: r for r in load_table() if r.check == CHOICE_CHECK}
    assert {r: tuple(rows[r].params["enforced"]) for r in rows} == {
        "tool-choice-not-enforced": (), "tool-choice-named-bee-a": ("required", "any", "tool")}
