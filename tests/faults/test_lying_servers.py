"""Faults, round three: a server that lies with numbers (docs/reliability.md, "Servers that lie with numbers").

The lying server is the protocol-level fake llama-server (tests/fakes/sse_server.py) with its timings,
its ``/props`` or its length replaced: NaN, -1e9, 1e308, more drafts accepted than drafted, a context of
-5 tokens, -1 slots, a reply that ignores ``max_tokens``. Driven through the real ``beedeck`` CLI as a
child process and the real window offscreen; every figure the user is shown must be one that can be true.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.profile import remote_profile, save_profile
from beedeck.ui.window import app as app_mod
from tests.fakes.sse_server import FakeLlamaServer, SSEScript

from .conftest import Beedeck

TOKENS = ["Bees ", "make ", "honey. "]
LIES: dict[str, dict[str, Any]] = {
    "nan": {"predicted_per_second": math.nan, "predicted_n": math.nan},
    "negative": {"predicted_per_second": -1e9, "draft_n": -1_000_000_000, "draft_n_accepted": -1_000_000_000},
    "huge": {"predicted_n": 1e308, "predicted_per_second": 1e308},
    "accepted-over-drafted": {"draft_n": 3, "draft_n_accepted": 7},
}
IMPOSSIBLE_TEXT = ("nan", "inf", "-1000000000", "1e+308", "7/3", "233", "Traceback")


def _no_constants(name: str) -> Any:
    raise AssertionError(f"--json printed {name}, which is not JSON")


@pytest.fixture
def liar() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(SSEScript(tokens=TOKENS, rate=40)) as srv:
        yield srv


@pytest.mark.parametrize("lie", list(LIES), ids=list(LIES))
def test_chat_against_impossible_timings_prints_only_figures_that_can_be_true(
        beedeck: Beedeck, liar: FakeLlamaServer, lie: str) -> None:
    liar.script.timings = LIES[lie]
    text = beedeck.run("chat", "hi", "--url", liar.base_url, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "Bees make honey." in text.stdout
    figures, notes = [], []
    for line in text.stdout.splitlines():
        (notes if line.startswith("note: ") else figures).append(line)
    for bad in IMPOSSIBLE_TEXT:  # the note quotes what the server said; no figure shows it
        assert bad.lower() not in "\n".join(figures).lower() and bad not in text.stderr, (bad, text.stdout)
    assert len(notes) == 1 and notes[0].startswith("note: the server's timings cannot be true (")
    assert "tok/s seen by the client" in text.stdout  # BeeDeck's own clock still measures the reply
    done = beedeck.run("chat", "hi", "--url", liar.base_url, "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout, parse_constant=_no_constants)  # strict JSON: no NaN, no Infinity
    assert out["text"] == "".join(TOKENS) and out["timings"] is None
    assert "cannot be true" in out["timings_rejected"]
    assert out["client_tokens_per_s"] is None or 0 < out["client_tokens_per_s"] < 1e7


@pytest.mark.parametrize("lie", ["negative", "huge", "accepted-over-drafted"])
def test_the_window_shows_only_figures_that_can_be_true_from_a_lying_server(
        qtbot: QtBot, liar: FakeLlamaServer, lie: str) -> None:
    liar.script.timings = LIES[lie]
    save_profile(remote_profile(liar.base_url, None, "liar"))
    window = app_mod.build_window(no_autostart=False)
    qtbot.addWidget(window)
    # the chat has its client (the ready signal reached the window; the core's state is set before it is sent)
    qtbot.waitUntil(lambda: window.chat.client is not None, timeout=10_000)
    window.chat.input.setPlainText("hi")
    with qtbot.waitSignal(window.chat.reply_finished, timeout=20_000) as blocker:
        window.chat.send_button.click()
    facts = blocker.args[0]
    assert facts.draft_n == 0 and facts.tokens is None  # the server's figures were refused, not shown
    assert facts.tps is None or 0 < facts.tps < 1e7  # the client's own clock
    panel = window.speed
    assert math.isfinite(panel.gauge.value) and math.isfinite(panel.gauge.scale)
    shown = " ".join(label.text() for label in (panel.acceptance, panel.draft_share, panel.tokens, panel.prefill))
    shown += " " + window.chat.view.toPlainText()
    for bad in IMPOSSIBLE_TEXT:
        assert bad not in shown, (bad, shown)
    assert "Bees make honey." in window.chat.view.toPlainText()
    window.close()


def test_impossible_figures_stored_by_an_earlier_beedeck_are_not_shown(qtbot: QtBot) -> None:
    store = ChatStore()
    conv = store.create_conversation("kept from before")
    store.add_message(conv.id, "user", "hi")
    store.add_message(conv.id, "assistant", "Bees make honey.",
                      {"mode": "baseline", "tokens": -5, "tps": math.nan, "ttft_s": -1.0, "prompt_tps": 1e308,
                       "prompt_n": 2.5, "draft_n": 3, "draft_accepted": 7, "reasoning_s": math.inf})
    store.close()
    window = app_mod.build_window(no_autostart=True)
    qtbot.addWidget(window)
    text = window.chat.view.toPlainText()
    assert "Bees make honey." in text  # the message is kept whole; only its impossible figures go
    for bad in ("-5 tokens", "nan", "TTFT -1", "prefill 1", "7/3", "233", "inf"):
        assert bad not in text, (bad, text)
    window.close()


def test_chat_against_a_server_that_ignores_max_tokens_ends_with_a_message(
        beedeck: Beedeck, liar: FakeLlamaServer) -> None:
    liar.script = SSEScript(tokens=["bee "], repeat=True, rate=400)
    t0 = time.monotonic()
    done = beedeck.run("chat", "hi", "--url", liar.base_url, "--max-tokens", "50", timeout=60)
    took = time.monotonic() - t0
    assert done.returncode == 1 and took < 30, (took, done.stderr)
    assert "Traceback" not in done.stderr
    assert "went on past the reply's cap of 50 tokens" in done.stderr and "ignores max_tokens" in done.stderr
    assert "what arrived is kept" in done.stderr
    assert done.stdout.count("bee") >= 50  # every token that arrived was printed
    assert "the connection broke" not in done.stderr  # BeeDeck ended it, nothing broke
    assert liar.disconnected.wait(10)  # and hung up, so a real server would stop generating


def test_a_reply_that_goes_on_past_its_deadline_is_ended_with_a_message(
        beedeck: Beedeck, liar: FakeLlamaServer) -> None:
    liar.script = SSEScript(tokens=["bee "], repeat=True, rate=5)  # slow, under any token cap, never ending
    t0 = time.monotonic()
    done = beedeck.run("chat", "hi", "--url", liar.base_url, "--max-tokens", "100000", "--deadline", "3",
                       timeout=60)
    took = time.monotonic() - t0
    assert done.returncode == 1 and 3 <= took < 30, (took, done.stderr)
    assert "went on for more than 3 s" in done.stderr and "what arrived is kept" in done.stderr
    assert "--deadline" in done.stderr and "Traceback" not in done.stderr
    assert "bee" in done.stdout


IMPOSSIBLE_FACTS: dict[str, tuple[dict[str, Any], Any, str]] = {
    "context-negative": ({"default_generation_settings": {"n_ctx": -5}}, None, "context -5 tokens per slot"),
    "slots-negative": ({"total_slots": -1}, None, "slots -1"),
    "slots-zero": ({"total_slots": 0}, None, "slots 0"),
    "context-huge": ({"default_generation_settings": {"n_ctx": 1 << 40}}, None, "context 1,099,511,627,776"),
}


@pytest.mark.parametrize("case", list(IMPOSSIBLE_FACTS), ids=list(IMPOSSIBLE_FACTS))
def test_connect_refuses_to_save_a_server_whose_facts_cannot_be_true(
        beedeck: Beedeck, liar: FakeLlamaServer, case: str) -> None:
    props, slots, said = IMPOSSIBLE_FACTS[case]
    liar.props, liar.slots = props, slots
    done = beedeck.run("connect", liar.base_url, "--save", timeout=60)
    assert done.returncode == 1, done.stdout
    assert "reports what cannot be true" in done.stderr and said in done.stderr, done.stderr
    assert "BeeDeck neither uses nor saves it" in done.stderr and "Traceback" not in done.stderr
    assert "context:" not in done.stdout and "saved as the app's profile" not in done.stdout
    assert not list(beedeck.home.rglob("profile.json"))
    js = beedeck.run("connect", liar.base_url, "--json", timeout=60)
    assert js.returncode == 1 and json.loads(js.stdout)["kind"] == "impossible"
