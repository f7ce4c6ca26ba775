"""A reply the user stops keeps the server's figures for what it generated: the chat asks for timings on
every chunk (``timings_per_token``), so the gauge's sparkline and prefill figure get them."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.ui.gauge.speed_gauge import SpeedPanel
from tests.fakes.sse_server import FakeLlamaServer, SSEScript
from tests.ui.chat.test_chat_pane import make_pane


class PerTokenTimingsServer(FakeLlamaServer):
    """The fake, plus llama-server's ``timings_per_token``: every content chunk then carries the
    timings so far (docs/reference/engine-facts.md §3.7)."""

    def stream_bytes(self, script: SSEScript) -> Iterator[bytes | None]:
        body = self.requests[-1].body if self.requests else {}
        per_token = isinstance(body, dict) and body.get("timings_per_token") is True
        n = 0
        for piece in super().stream_bytes(script):
            if per_token and piece is not None and b'"delta":{"content"' in piece:
                n += 1
                obj = json.loads(piece[len(b"data: "):])
                obj["timings"] = {"cache_n": 0, "prompt_n": 42, "prompt_ms": 60.0, "prompt_per_second": 700.0,
                                  "predicted_n": n, "predicted_ms": 40.0 * n, "predicted_per_second": 25.0}
                piece = b"data: " + json.dumps(obj).encode() + b"\n\n"
            yield piece


def test_a_stopped_reply_keeps_its_timings_and_reaches_the_gauge(qtbot: QtBot, store: ChatStore) -> None:
    with PerTokenTimingsServer(SSEScript(tokens=["Hello", ",", " world", "!"], stall_after=3)) as server:
        pane = make_pane(qtbot, store, LlamaClient(server.base_url))
        panel = SpeedPanel()
        qtbot.addWidget(panel)
        pane.reply_started.connect(panel.reply_started)
        pane.pieces_arrived.connect(panel.pieces_arrived)
        pane.reply_finished.connect(panel.reply_finished)
        pane.input.setPlainText("go")
        pane.send_button.click()
        qtbot.waitUntil(lambda: "Hello, world" in pane.view.toPlainText(), timeout=10_000)
        qtbot.waitUntil(server.stalled.is_set, timeout=10_000)
        with qtbot.waitSignal(pane.reply_finished, timeout=5000) as blocker:
            pane.stop_button.click()
        assert server.requests[-1].body["timings_per_token"] is True
    stats = blocker.args[0]
    assert stats.cancelled is True
    assert (stats.prompt_tps, stats.prompt_n, stats.tokens, stats.tps) == (700.0, 42, 3, 25.0)
    assert panel.prefill.text() == "700 tok/s" and panel.tokens.text() == "3 (stopped)"
    assert panel.sparkline.values() == [25.0] and panel.sparkline.stopped() == [True]
    assert panel.last_by_mode == {}  # not a whole reply: no per-mode figure
    reply = store.messages(pane.conversation_id)[-1]  # type: ignore[arg-type]
    assert reply.stats["prompt_tps"] == 700.0 and "stopped" in pane.view.toPlainText()


def test_the_gauge_counts_every_piece_and_the_text_signals_carry_every_character(
        qtbot: QtBot, store: ChatStore) -> None:
    """Per batch, one ``pieces_arrived`` with its count and one text signal per run of text (not one emit per
    piece: at 10,000 tokens/s those cost the GUI thread a second a reply, benchmarks/ui_stream.py)."""
    tokens = [f"w{i} " for i in range(200)]
    with FakeLlamaServer(SSEScript(tokens=tokens)) as server:
        pane = make_pane(qtbot, store, LlamaClient(server.base_url))
        panel = SpeedPanel()
        qtbot.addWidget(panel)
        counts: list[int] = []
        texts: list[str] = []
        pane.reply_started.connect(panel.reply_started)
        pane.pieces_arrived.connect(panel.pieces_arrived)
        pane.pieces_arrived.connect(counts.append)
        pane.delta_received.connect(texts.append)
        pane.input.setPlainText("go")
        with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
            pane.send_button.click()
    assert sum(counts) == len(tokens) == panel.rate.count
    assert "".join(texts) == "".join(tokens) and len(texts) == len(counts)  # one run of answer text per batch
