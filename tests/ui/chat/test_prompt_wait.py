"""The wait for a reply's first token is said while it lasts (issue 37: 13 s after a long reply with no hint that
the conversation was being read again): how far the server has read it, under the transcript and in the speed
dock, gone at the first token; from a server that says nothing of it, the conversation's size."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.ui.gauge.speed_gauge import SpeedPanel
from tests.fakes.sse_server import FakeLlamaServer, SSEScript
from tests.ui.chat.test_chat_pane import make_pane

READS = [(3076, 0, 0, 0.0), (3076, 0, 1024, 6939.0), (3076, 0, 2048, 15521.0), (3076, 0, 3076, 26064.0)]


def test_the_server_reading_a_long_conversation_is_said_until_the_first_token(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient) -> None:
    fake_server.script = SSEScript(tokens=["Sure", "."], first_token_delay=2.4, prompt_reads=READS)
    pane = make_pane(qtbot, store, client)
    panel = SpeedPanel()  # the dock, wired as the window wires it
    qtbot.addWidget(panel)
    pane.reply_started.connect(panel.reply_started)
    pane.pieces_arrived.connect(panel.pieces_arrived)
    pane.prompt_reading.connect(panel.prompt_reading)
    pane.reply_finished.connect(panel.reply_finished)
    said: list[str] = []
    pane.input.setPlainText("Now add interest.")
    pane.send_button.click()
    qtbot.waitUntil(lambda: "1,024 of 3,076" in pane.notice.text(), timeout=5000)
    said.append(pane.notice.text())
    assert pane.notice.isVisibleTo(pane)
    assert panel.ttft.text() == "reading the prompt: 1,024 of 3,076 tokens…"
    with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
        pass
    assert said == ["Reading the whole conversation before the reply: 1,024 of 3,076 tokens, about 14 s left."]
    assert pane.notice.text() == "" and not pane.notice.isVisibleTo(pane)  # gone with the first token
    assert panel.ttft.text().endswith(" s")  # the time to the first token, as measured
    assert fake_server.requests[-1].body["return_progress"] is True


def test_a_server_that_says_nothing_gets_the_conversations_size_and_a_quick_reply_no_words(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient) -> None:
    pane = make_pane(qtbot, store, client)
    seen: list[str] = []

    def record(text: str) -> None:
        seen.append(text)
        QLabel.setText(pane.notice, text)

    pane.notice.setText = record  # type: ignore[method-assign]
    fake_server.script = SSEScript(tokens=["Hi", "."], prompt_reads=[(40, 20, 20, 0.0), (40, 20, 40, 3.0)])
    pane.input.setPlainText("hello")
    with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
        pane.send_button.click()
    assert seen and not any(seen)  # a first token within a second: nothing said
    fake_server.script = SSEScript(tokens=["Sure", "."], first_token_delay=1.8)  # no progress, asked or not
    pane.new_conversation()
    pane.system_prompt.setText("Be brief.")
    pane.input.setPlainText("x" * 5000)
    pane.send_button.click()
    qtbot.waitUntil(lambda: bool(pane.notice.text()), timeout=5000)
    assert pane.notice.text() == ("Waiting for the first token: the server reads the whole conversation first "
                                  "(5,009 characters), and a long one takes a while.")
    with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
        pass
    assert pane.notice.text() == ""

