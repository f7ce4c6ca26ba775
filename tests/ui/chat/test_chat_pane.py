"""The chat pane end to end over the fake server: streaming, persistence while streaming, stop,
regenerate, edit-and-resend, system prompt, statistics line, highlighted code with copy links."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QUrl
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.ui.chat.chat_pane import ChatPane
from tests.fakes.sse_server import FakeLlamaServer, SSEScript


def make_pane(qtbot: QtBot, store: ChatStore, client: LlamaClient | None) -> ChatPane:
    pane = ChatPane(store)
    qtbot.addWidget(pane)
    pane.resize(700, 500)
    pane.show()
    pane.set_client(client)
    pane.new_conversation()
    return pane


def send(qtbot: QtBot, pane: ChatPane, text: str) -> ReplyFacts:
    pane.input.setPlainText(text)
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000) as blocker:
        pane.send_button.click()
    return blocker.args[0]


def test_send_is_disabled_without_a_server(qtbot: QtBot, store: ChatStore) -> None:
    pane = make_pane(qtbot, store, None)
    assert not pane.send_button.isEnabled()
    assert "Start the server" in pane.send_button.toolTip()


def test_reply_streams_persists_and_shows_stats(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script.draft_n, fake_server.script.draft_n_accepted = 8, 6
    pane = make_pane(qtbot, store, client)
    pane.mode_provider = lambda: ("dflash", {})
    pane.system_prompt.setText("Be brief.")
    stats = send(qtbot, pane, "Say hello")
    assert stats.mode == "dflash" and stats.tokens == 4 and stats.draft_n == 8
    msgs = store.messages(pane.conversation_id)  # type: ignore[arg-type]
    assert [(m.role, m.content, m.complete) for m in msgs] == [
        ("user", "Say hello", True),
        ("assistant", "Hello, world!", True),
    ]
    assert msgs[1].stats["draft_accepted"] == 6 and msgs[1].facts == stats
    text = pane.view.toPlainText()
    assert "Hello, world!" in text and "4 tokens" in text and "drafts 6/8 accepted" in text and "DFlash" in text
    assert "Say hello\n" in text and "Say helloAssistant" not in text  # each message is its own block
    body = fake_server.requests[-1].body
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][-1] == {"role": "user", "content": "Say hello"}
    conv = store.conversation(pane.conversation_id)  # type: ignore[arg-type]
    assert conv is not None and conv.title == "Say hello"


def test_partial_reply_is_in_the_database_while_streaming_and_stop_keeps_it(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script.stall_after = 3
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("go")
    pane.send_button.click()
    cid = pane.conversation_id
    assert cid is not None

    def partial_saved() -> bool:
        msgs = store.messages(cid)
        return len(msgs) == 2 and msgs[1].content == "Hello, world" and not msgs[1].complete

    qtbot.waitUntil(partial_saved, timeout=10_000)  # written by the throttle, before the reply ended
    assert pane.stop_button.isEnabled() and not pane.send_button.isEnabled()
    with qtbot.waitSignal(pane.reply_finished, timeout=5000) as blocker:
        pane.stop_button.click()
    assert blocker.args[0].cancelled is True
    reply = store.messages(cid)[1]
    assert reply.content == "Hello, world" and reply.stats["cancelled"] is True
    assert "stopped" in pane.view.toPlainText()
    assert pane.send_button.isEnabled()


def test_regenerate_replaces_the_last_reply(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "first")
    fake_server.script = SSEScript(tokens=["Another", " answer"])
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.regen_button.click()
    msgs = store.messages(pane.conversation_id)  # type: ignore[arg-type]
    assert [m.content for m in msgs] == ["first", "Another answer"]
    assert "Hello, world!" not in pane.view.toPlainText()
    assert [m["content"] for m in fake_server.requests[-1].body["messages"]] == ["first"]


def test_edit_and_resend_replaces_the_later_messages_on_screen(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "one")
    send(qtbot, pane, "two")
    first_user = store.messages(pane.conversation_id)[0]  # type: ignore[arg-type]
    pane.view.anchorClicked.emit(QUrl(f"edit:{first_user.id}"))
    assert pane.input.toPlainText() == "one"
    pane.input.setPlainText("one, edited")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.send_button.click()
    msgs = store.messages(pane.conversation_id)  # type: ignore[arg-type]
    assert [m.content for m in msgs] == ["one, edited", "Hello, world!"]
    assert "two" not in pane.view.toPlainText()  # the earlier version is kept: test_edit_and_versions.py


def test_code_blocks_are_highlighted_and_copyable(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    code = "def add(a, b):\n    return a + b\n"
    fake_server.script = SSEScript(tokens=["Here:\n\n", "```python\n", *code.splitlines(keepends=True), "```\n", "Done."])
    pane = make_pane(qtbot, store, client)
    copied: list[str] = []
    pane.view.copy_text = copied.append
    send(qtbot, pane, "code please")
    html = pane.view.toHtml()
    assert "Copy code" in html
    assert html.count("color:#") > 3  # Pygments inline colours survived into the document
    reply = store.messages(pane.conversation_id)[-1]  # type: ignore[arg-type]
    pane.view.anchorClicked.emit(QUrl(f"copy:{reply.id}:0"))
    assert copied == [code]


def test_conversation_reload_shows_history(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "remember me")
    cid = pane.conversation_id
    assert cid is not None
    pane.new_conversation()
    assert "remember me" not in pane.view.toPlainText()
    pane.load_conversation(cid)
    assert "remember me" in pane.view.toPlainText() and "Hello, world!" in pane.view.toPlainText()


def test_failure_is_shown_and_partial_kept(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script.cut_after = 2
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("x")
    with qtbot.waitSignal(pane.reply_failed, timeout=15_000):
        pane.send_button.click()
    assert "The reply failed" in pane.notice.text()
    reply = store.messages(pane.conversation_id)[-1]  # type: ignore[arg-type]
    assert reply.content == "Hello," and not reply.complete


def test_a_closed_code_block_is_highlighted_while_the_reply_still_streams(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(
        tokens=["Intro\n\n", "```python\n", "x = 1\n", "```\n\n", "More", " text"], stall_after=5
    )
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("go")
    pane.send_button.click()
    qtbot.waitUntil(lambda: fake_server.stalled.is_set(), timeout=10_000)
    qtbot.waitUntil(lambda: "Copy code" in pane.view.toHtml(), timeout=5000)  # frozen + coloured block
    assert pane.is_generating()
    assert "More" in pane.view.toPlainText()
    with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
        fake_server.release_stall()
    text = pane.view.toPlainText()
    assert text.count("x = 1") == 1 and "More text" in text and text.count("Copy code") == 1


def test_closing_mid_reply_saves_everything_streamed_so_far(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app closes (wait_idle) while a reply streams and before the GUI thread has handled the
    latest pieces: the stored reply must hold all of them, not only the last throttled write."""
    import threading
    import time

    from PySide6.QtCore import Qt

    from beedeck.ui.chat import chat_pane as chat_pane_mod

    got_three = threading.Event()

    class CountingRun(chat_pane_mod.ChatRun):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            seen: list[str] = []

            def on_delta(text: str) -> None:  # runs on the worker thread
                seen.append(text)
                if len(seen) == 3:
                    got_three.set()

            self.worker.delta_received.connect(on_delta, Qt.ConnectionType.DirectConnection)

    monkeypatch.setattr(chat_pane_mod, "ChatRun", CountingRun)
    fake_server.script.stall_after = 3
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("go")
    pane.send_button.click()
    cid = pane.conversation_id
    assert cid is not None
    assert got_three.wait(10)  # the GUI thread handles no event until wait_idle, like a close would
    t0 = time.monotonic()
    pane.wait_idle()
    assert time.monotonic() - t0 < 2.5  # the worker thread ended; before the fix this hit the 5 s timeout
    reply = store.messages(cid)[1]
    assert reply.content == "Hello, world" and reply.stats.get("cancelled") is True
    assert not pane.is_generating()
