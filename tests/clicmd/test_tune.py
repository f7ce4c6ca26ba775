"""`beedeck tune`'s arguments without an engine: the budget, the prompt sources (a suite, or only with
--from-chat the last prompts of a conversation) and the messages that name the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.cli import build_parser, main
from beedeck.clicmd.tune import _suite, parse_duration
from beedeck.core.bench.suites import BenchError
from beedeck.core.chat.store import ChatStore


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600.0), ("90s", 90.0), ("1h30m", 5400.0), ("45", 45.0),
                                               ("2 min", 120.0)])
def test_budget_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_budget_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BenchError, match="use e.g. 10m, 90s or 1h"):
        parse_duration("10 parsecs")
    assert main(["tune", "--budget", "soon"]) == 2
    assert "--budget 'soon' is not a duration: use e.g. 10m" in capsys.readouterr().err


def test_a_suite_is_the_default_source_at_temperature_zero_with_short_replies() -> None:
    suite = _suite(build_parser().parse_args(["tune"]))
    assert suite.name == "seed" and suite.temperature == 0.0 and suite.max_tokens == 128
    synth = _suite(build_parser().parse_args(["tune", "--synthetic", "--suite", "prose"]))
    assert synth.name == "prose" and synth.max_tokens == 128


def test_chat_prompts_only_with_the_flag_and_the_last_n(beedeck_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = ChatStore()
    try:
        conv = store.create_conversation("Deck work")
        for text in ("Write a Python deck shuffler.", "Now add type hints.", "And tests."):
            store.add_message(conv.id, "user", text)
            store.add_message(conv.id, "assistant", "ok")
    finally:
        store.close()
    suite = _suite(build_parser().parse_args(["tune", "--from-chat", str(conv.id), "--last", "2"]))
    assert [p.text for p in suite.prompts] == ["Now add type hints.", "And tests."]
    assert suite.source == f"chat:{conv.id}" and suite.temperature == 0.0
    assert "sent only to the local server BeeDeck starts" in capsys.readouterr().out
    with pytest.raises(BenchError, match="There is no conversation 999 in the chat history"):
        _suite(build_parser().parse_args(["tune", "--from-chat", "999"]))
    with pytest.raises(SystemExit):  # a suite and a conversation at once: argparse refuses
        build_parser().parse_args(["tune", "--from-chat", "1", "--suite", "prose"])


def test_a_saved_remote_profile_is_refused_with_what_to_give(beedeck_home: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.core.profile import remote_profile, save_profile

    save_profile(remote_profile("http://127.0.0.1:9"))
    assert main(["tune", "--budget", "1m"]) == 2
    err = capsys.readouterr().err
    assert "server BeeDeck did not start" in err and "--engine BIN --target MODEL.gguf" in err
