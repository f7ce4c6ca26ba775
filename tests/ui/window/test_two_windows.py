"""Two windows on one chat history: each has its own chat, and a turn is saved to the chat it was typed in,
after what that window shows (the fault suite runs the same with two real BeeDeck processes)."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from beedeck.core.chat.leases import ChatLeases
from beedeck.core.chat.store import ChatStore
from beedeck.ui.window.main_window import MainWindow
from tests.fakes.sse_server import FakeLlamaServer


def _window(qtbot: QtBot, store: ChatStore) -> MainWindow:
    w = MainWindow(store)
    qtbot.addWidget(w)
    w.open_latest_chat()
    return w


def _ask(qtbot: QtBot, w: MainWindow, text: str) -> None:
    w.chat.input.setPlainText(text)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=10_000):
        w.chat.send()


def test_a_second_window_opens_its_own_chat_and_never_one_the_first_has_open(qtbot: QtBot, store: ChatStore) -> None:
    first = _window(qtbot, store)
    second = _window(qtbot, ChatStore(store.path))  # another window (its own connection, as another process)
    assert first.chat.conversation_id is not None and second.chat.conversation_id is not None
    assert first.chat.conversation_id != second.chat.conversation_id  # before: both took the latest chat
    mine = second.chat.conversation_id
    assert not second.chat.load_conversation(first.chat.conversation_id)  # a click on the first's chat
    assert second.chat.conversation_id == mine and "That chat is open in" in second.chat.notice.text()
    errors: list[str] = []
    second.conversations.show_error = errors.append
    second.conversations.delete(first.chat.conversation_id)
    assert errors and "open in" in errors[0] and store.conversation(first.chat.conversation_id) is not None
    first.close()  # its chat is free now
    assert second.chat.load_conversation(first.chat.conversation_id)
    second.close()
    second.store.close()


def test_each_window_saves_its_turns_after_what_it_shows(qtbot: QtBot, store: ChatStore,
                                                        fake_server: FakeLlamaServer) -> None:
    """Even on one chat (a history where no lease can be taken), a follow-up in one window is never saved as
    the reply to the other's answer, and the chat read back is one window's path, not both interleaved."""
    a = _window(qtbot, store)
    b = _window(qtbot, ChatStore(store.path))
    b.chat.leases = ChatLeases(Path(":memory:"))  # no leases: both windows on one chat
    assert b.chat.load_conversation(a.chat.conversation_id)  # (a.chat's own lease does not stop b now)
    conv = a.chat.conversation_id
    assert conv is not None
    for w in (a, b):
        w.session.controller.ready.emit(fake_server.base_url)
        qtbot.waitUntil(lambda w=w: w.chat.send_button.isEnabled(), timeout=5000)
    _ask(qtbot, a, "A first")
    _ask(qtbot, b, "B first")
    _ask(qtbot, a, "A follow-up")
    first, answer, follow_up, _ = store.messages(conv)  # A's path whole: B's turn is another version of turn 1
    assert (first.content, follow_up.content) == ("A first", "A follow-up")
    assert follow_up.parent_id == answer.id and answer.parent_id == first.id  # not the reply to B's answer
    other = [i for i in store.versions(first.id) if i != first.id]
    assert [store.connection.execute("SELECT content FROM messages WHERE id=?", (i,)).fetchone()[0]
            for i in other] == ["B first"]
    for w in (a, b):
        w.close()
    b.store.close()
