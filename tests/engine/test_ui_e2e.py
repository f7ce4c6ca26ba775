"""The desktop app driving the REAL starter engine (mainline llama-server on CPU + SmolLM2-135M):
start from the toolbar, chat, see a non-zero speed on the gauge, stop a reply, close the window and
find no server left running."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.server_state import ServerState
from beedeck.core.profile import Profile
from beedeck.core.starter import StarterProfile
from beedeck.ui.window.main_window import MainWindow


@pytest.mark.engine
def test_window_chats_with_the_real_starter_engine(
    qtbot: QtBot, starter_engine_path: Path, starter_model_path: Path
) -> None:
    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    settings = StarterProfile(starter_engine_path, starter_model_path).settings()
    window.session.set_profile(Profile(str(starter_engine_path), settings, "starter (CPU)"))
    window.chat.max_tokens = 24  # keep the CPU run short
    states: list[ServerState] = []
    window.session.controller.state_changed.connect(states.append)

    with qtbot.waitSignal(window.session.controller.ready, timeout=240_000):
        window.start_action.trigger()
    assert ServerState.LOADING in states or ServerState.STARTING in states
    assert window.state_label.text() == "server: ready"
    assert window.endpoint.endpoint().startswith("http://127.0.0.1:")
    pid = window.session.server.proc.pid
    assert psutil.pid_exists(pid)
    qtbot.waitUntil(lambda: window.log.view.line_count() > 5, timeout=5000)  # the real log reached the dock

    window.chat.input.setPlainText("Write one sentence about bees.")
    with qtbot.waitSignal(window.chat.reply_finished, timeout=240_000) as blocker:
        window.chat.send_button.click()
    stats = blocker.args[0].to_json()  # the ReplyFacts as stored
    assert stats["tokens"] > 0 and stats["tps"] > 0 and stats["ttft_s"] > 0
    assert window.speed.gauge.value == pytest.approx(stats["tps"])
    reply = store.messages(window.chat.conversation_id)[-1]  # type: ignore[arg-type]
    assert reply.role == "assistant" and reply.complete and reply.content.strip()
    assert reply.content.strip()[:20] in window.chat.view.toPlainText()

    # Stop a longer reply as soon as text flows: the partial reply is kept, marked stopped.
    window.chat.max_tokens = 400
    window.chat.input.setPlainText("Tell me a long story about a bee.")
    window.chat.send_button.click()
    qtbot.waitUntil(lambda: len((window.chat.view.current_reply() or reply).content) > 10, timeout=240_000)
    with qtbot.waitSignal(window.chat.reply_finished, timeout=30_000) as blocker:
        window.chat.stop_button.click()
    assert blocker.args[0].cancelled is True
    # The server is still healthy after the cancel: another reply works.
    window.chat.max_tokens = 8
    window.chat.input.setPlainText("Hi")
    with qtbot.waitSignal(window.chat.reply_finished, timeout=240_000) as blocker:
        window.chat.send_button.click()
    assert (blocker.args[0].tokens or 0) > 0

    window.close()  # must stop the server
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert window.session.server.state == ServerState.STOPPED
    QApplication.processEvents()
    store.close()
