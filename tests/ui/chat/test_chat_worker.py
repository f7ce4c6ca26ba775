"""ChatRun/ChatWorker against the fake llama-server speaking the real SSE protocol."""

from __future__ import annotations

import time

from pytestqt.qtbot import QtBot

from beedeck.core.engine.client import LlamaClient
from beedeck.ui.chat.chat_worker import ChatRun
from tests.fakes.sse_server import FakeLlamaServer

MSG = [{"role": "user", "content": "hi"}]


def test_streams_deltas_then_result(qtbot: QtBot, fake_server: FakeLlamaServer, client: LlamaClient) -> None:
    run = ChatRun(client.stream_chat(MSG))
    got: list[str] = []
    run.delta_received.connect(got.append)
    with qtbot.waitSignal(run.finished, timeout=10_000) as blocker:
        run.start()
    result = blocker.args[0]
    assert got == ["Hello", ",", " world", "!"]
    assert result.text == "Hello, world!" and not result.cancelled
    assert result.timings.predicted_n == 4
    qtbot.waitUntil(lambda: not run.is_running(), timeout=5000)


def test_cancel_from_gui_thread_is_immediate_during_a_stall(
    qtbot: QtBot, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script.stall_after = 2
    run = ChatRun(client.stream_chat(MSG))
    got: list[str] = []
    run.delta_received.connect(got.append)
    run.start()
    qtbot.waitUntil(lambda: fake_server.stalled.is_set() and len(got) == 2, timeout=10_000)
    t0 = time.perf_counter()
    with qtbot.waitSignal(run.finished, timeout=5000) as blocker:
        run.cancel()
    assert time.perf_counter() - t0 < 1.0
    assert blocker.args[0].cancelled
    assert blocker.args[0].text == "Hello,"
    fake_server.release_stall()  # the fake notices the hang-up on its next write
    assert fake_server.disconnected.wait(5)


def test_failure_is_reported_as_text(qtbot: QtBot, fake_server: FakeLlamaServer, client: LlamaClient) -> None:
    fake_server.script.status = 500
    fake_server.script.error_message = "model exploded"
    run = ChatRun(client.stream_chat(MSG))
    with qtbot.waitSignal(run.failed, timeout=10_000) as blocker:
        run.start()
    assert "model exploded" in blocker.args[0]
    qtbot.waitUntil(lambda: not run.is_running(), timeout=5000)


def test_server_gone(qtbot: QtBot) -> None:
    run = ChatRun(LlamaClient("http://127.0.0.1:9").stream_chat(MSG))
    with qtbot.waitSignal(run.failed, timeout=10_000) as blocker:
        run.start()
    assert "not running" in blocker.args[0]
    qtbot.waitUntil(lambda: not run.is_running(), timeout=5000)
