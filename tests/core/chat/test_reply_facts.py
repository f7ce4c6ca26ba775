"""A reply's facts: typed from the client's result, stored and read back, and labelled with its own mode."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client.answers import ChatResult, Timings
from beedeck.core.engine.mode import Mode


def result(draft_n: int = 1209, accepted: int = 846, cancelled: bool = False) -> ChatResult:
    timings = Timings(cache_n=0, prompt_n=31, prompt_ms=40.0, prompt_per_second=775.04, predicted_n=1500,
                      predicted_ms=30000.0, predicted_per_second=50.004, draft_n=draft_n,
                      draft_n_accepted=accepted)
    return ChatResult(text="x", reasoning="", finish_reason="stop", timings=timings, usage=None, ttft_s=0.12345,
                      client_tokens_per_s=48.0, n_chunks=1500, wall_s=30.2, cancelled=cancelled, model="m")


def test_an_n_gram_reply_says_n_gram_not_baseline() -> None:
    """The bug the issue found: "drafts 846/1209 accepted (70 %) · baseline" on an N-gram reply."""
    facts = ReplyFacts.from_result(result(), Mode.MODEL_FREE)
    assert facts.summary() == ("1500 tokens · 50.0 tok/s · TTFT 0.12 s · prefill 775 tok/s · "
                               "drafts 846/1209 accepted (70 %) · N-gram")
    assert "baseline" not in facts.summary().lower()


@pytest.mark.parametrize("mode", list(Mode))
def test_every_mode_has_one_name_everywhere(mode: Mode) -> None:
    facts = ReplyFacts(mode=mode, tokens=3)
    assert facts.summary().endswith(" · " + mode.label) and facts.mode_label == mode.label == mode.label


def test_the_one_names() -> None:
    assert [m.label for m in Mode] == ["Baseline", "DFlash", "EAGLE-3", "DSpark", "MTP", "N-gram"]


def test_stored_and_read_back_through_the_chat_store(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    conv = store.create_conversation("t")
    facts = ReplyFacts.from_result(result(cancelled=True), Mode.EAGLE3).with_reasoning(1.234)
    msg = store.add_message(conv.id, "assistant", "hi", facts.to_json())
    reopened = ChatStore(tmp_path / "c.sqlite3")
    (back,) = reopened.messages(conv.id)
    assert back.facts == facts == msg.facts
    assert back.facts.mode is Mode.EAGLE3 and back.facts.reasoning_s == 1.23 and back.facts.cancelled
    assert back.facts.acceptance == pytest.approx(846 / 1209)
    md = reopened.export_markdown(conv.id)
    assert "drafts 846/1209 accepted (70 %) · EAGLE-3 · stopped" in md
    store.close()
    reopened.close()


def test_rows_written_by_earlier_releases_are_read() -> None:
    old = {"mode": "dflash", "cancelled": False, "ttft_s": 0.2, "tokens": 12, "tps": 30.5, "prompt_tps": 800.0,
           "prompt_n": 9, "draft_n": 10, "draft_accepted": 7}
    facts = ReplyFacts.from_json(old)
    assert facts.to_json() == old and facts.mode is Mode.DFLASH
    assert ReplyFacts.from_json({"mode": "", "error": "boom"}) == ReplyFacts(error="boom")
    # Damaged or foreign values become unknowns, never an exception.
    odd = ReplyFacts.from_json({"mode": "warp", "tokens": "12", "tps": True, "cancelled": "yes"})
    assert odd == ReplyFacts()
    assert ReplyFacts.from_json(None) == ReplyFacts() and ReplyFacts().summary() == ""


def test_a_reply_without_server_timings_keeps_the_clients_rate() -> None:
    r = result()
    r.timings = None
    facts = ReplyFacts.from_result(r, None)
    assert facts.tps == 48.0 and facts.tokens is None and facts.mode is None and facts.full_speed
    assert facts.summary() == "48.0 tok/s · TTFT 0.12 s"


def test_stored_figures_that_cannot_be_true_are_left_out() -> None:
    """A row an earlier BeeDeck stored from a lying server: its impossible figures are not shown or learnt from."""
    facts = ReplyFacts.from_json({"mode": "mtp", "tokens": -5, "tps": math.nan, "ttft_s": -1.0, "prompt_tps": 1e308,
                                  "prompt_n": 2.5, "draft_n": 3, "draft_accepted": 7, "reasoning_s": math.inf})
    assert facts == ReplyFacts(mode=Mode.MTP)
    assert facts.summary() == "MTP" and not facts.full_speed
    kept = ReplyFacts.from_json({"tokens": 120.0, "tps": 41.25, "draft_n": 120, "draft_accepted": 84})
    assert (kept.tokens, kept.tps, kept.acceptance) == (120, 41.25, 0.7)


def test_the_conversation_a_reply_leaves_on_the_server_counts_the_cached_prompt_too() -> None:
    """What a restart would make the next reply read again (issue 36): the prompt read, the prompt cached and
    the reply, stored and read back."""
    t = Timings(cache_n=16_000, prompt_n=31, prompt_ms=40.0, prompt_per_second=775.0, predicted_n=100,
                predicted_ms=2000.0, predicted_per_second=50.0)
    facts = ReplyFacts.from_result(ChatResult("x", "", "stop", t, None, 0.1, 50.0, 100, 2.1, False, "m"), Mode.DFLASH)
    assert facts.cache_n == 16_000 and facts.context_tokens == 16_131
    assert ReplyFacts.from_json(facts.to_json()) == facts
    assert ReplyFacts(prompt_n=31).context_tokens is None  # no reply length: not known
