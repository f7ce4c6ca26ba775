"""Edit mode can be left (Cancel, Esc, another chat) and gives the draft back; regenerate and
edit-and-resend keep the replaced messages as an earlier version that "◀ 1/2 ▶" brings back."""

from __future__ import annotations

from PySide6.QtCore import Qt, QUrl
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.ui.chat.chat_pane import ChatPane
from tests.fakes.sse_server import FakeLlamaServer, SSEScript
from tests.ui.chat.test_chat_pane import make_pane, send


def shown(store: ChatStore, pane: ChatPane) -> list[str]:
    assert pane.conversation_id is not None
    return [m.content for m in store.messages(pane.conversation_id)]


def click(pane: ChatPane, href: str) -> None:
    assert f'href="{href}"' in pane.view.toHtml(), f"no link {href} on screen"
    pane.view.anchorClicked.emit(QUrl(href))


def test_cancel_leaves_edit_mode_and_gives_the_draft_back(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "one")
    first = store.messages(pane.conversation_id)[0]  # type: ignore[arg-type]
    pane.input.setPlainText("a half-typed thought")
    click(pane, f"edit:{first.id}")
    assert pane.is_editing() and pane.input.toPlainText() == "one"
    assert pane.edit_bar.isVisible() and "Send replaces it" in pane.edit_bar.label.text()
    qtbot.mouseClick(pane.edit_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert not pane.is_editing() and not pane.edit_bar.isVisible()
    assert pane.input.toPlainText() == "a half-typed thought"
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.send_button.click()  # a plain send again: appended, nothing replaced
    assert shown(store, pane) == ["one", "Hello, world!", "a half-typed thought", "Hello, world!"]


def test_esc_in_the_message_box_leaves_edit_mode(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "one")
    first = store.messages(pane.conversation_id)[0]  # type: ignore[arg-type]
    pane.input.setPlainText("draft")
    click(pane, f"edit:{first.id}")
    pane.input.setPlainText("one, half edited")
    qtbot.keyClick(pane.input, Qt.Key.Key_Escape)
    assert not pane.is_editing() and not pane.edit_bar.isVisible() and pane.input.toPlainText() == "draft"
    click(pane, f"edit:{first.id}")
    pane.escape()  # the window's Esc, with the focus elsewhere
    assert not pane.is_editing() and pane.input.toPlainText() == "draft"


def test_switching_conversation_leaves_edit_mode(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "in chat A")
    chat_a = pane.conversation_id
    assert chat_a is not None
    click(pane, f"edit:{store.messages(chat_a)[0].id}")
    assert pane.is_editing()
    pane.new_conversation()
    assert not pane.is_editing() and not pane.edit_bar.isVisible() and pane.input.toPlainText() == ""
    send(qtbot, pane, "in chat B")
    assert shown(store, pane) == ["in chat B", "Hello, world!"]
    assert [m.content for m in store.messages(chat_a)] == ["in chat A", "Hello, world!"]  # untouched


def test_edit_and_resend_keeps_the_earlier_version_and_the_arrows_bring_it_back(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "one")
    send(qtbot, pane, "two")
    first = store.messages(pane.conversation_id)[0]  # type: ignore[arg-type]
    pane.input.setPlainText("typed before the edit")
    click(pane, f"edit:{first.id}")
    pane.input.setPlainText("one, edited")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.send_button.click()
    assert not pane.is_editing() and not pane.edit_bar.isVisible()
    assert pane.input.toPlainText() == "typed before the edit"  # the draft comes back after the edit
    assert shown(store, pane) == ["one, edited", "Hello, world!"]
    assert "earlier version is kept" in pane.notice.text()
    edited = store.messages(pane.conversation_id)[0]  # type: ignore[arg-type]
    text = pane.view.toPlainText()
    assert "2/2" in text and "one, edited" in text and "two" not in text
    click(pane, f"version:{edited.id}:-1")
    assert shown(store, pane) == ["one", "Hello, world!", "two", "Hello, world!"]
    text = pane.view.toPlainText()
    assert "1/2" in text and "two" in text and "one, edited" not in text
    click(pane, f"version:{first.id}:1")
    assert shown(store, pane) == ["one, edited", "Hello, world!"]
    # The request after the edit held only the edited branch.
    assert [m["content"] for m in fake_server.requests[-1].body["messages"]] == ["one, edited"]


def test_regenerate_keeps_the_earlier_reply(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "first")
    old_reply = store.messages(pane.conversation_id)[1]  # type: ignore[arg-type]
    fake_server.script = SSEScript(tokens=["Another", " answer"])
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.regen_button.click()
    assert shown(store, pane) == ["first", "Another answer"]
    new_reply = store.messages(pane.conversation_id)[1]  # type: ignore[arg-type]
    assert "2/2" in pane.view.toPlainText() and "earlier reply is kept" in pane.notice.text()
    click(pane, f"version:{new_reply.id}:-1")
    assert shown(store, pane) == ["first", "Hello, world!"]
    assert "Another answer" not in pane.view.toPlainText() and "1/2" in pane.view.toPlainText()
    assert f'href="version:{old_reply.id}:-1"' not in pane.view.toHtml()  # no older one than the first
    send(qtbot, pane, "and then")  # a new turn continues from the version on screen
    assert [m["content"] for m in fake_server.requests[-1].body["messages"]] == [
        "first", "Hello, world!", "and then"]


def test_regenerating_an_earlier_reply_keeps_the_turns_after_it_as_the_earlier_version(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "one")
    send(qtbot, pane, "two")
    first_reply = store.messages(pane.conversation_id)[1]  # type: ignore[arg-type]
    fake_server.script = SSEScript(tokens=["Redo"])
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        click(pane, f"regenerate:{first_reply.id}")
    assert shown(store, pane) == ["one", "Redo"]
    assert [m["content"] for m in fake_server.requests[-1].body["messages"]] == ["one"]
    redo = store.messages(pane.conversation_id)[1]  # type: ignore[arg-type]
    click(pane, f"version:{redo.id}:-1")
    assert shown(store, pane) == ["one", "Hello, world!", "two", "Hello, world!"]


def test_versions_survive_a_reload(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "q")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.regen_button.click()
    cid = pane.conversation_id
    assert cid is not None
    pane.new_conversation()
    pane.load_conversation(cid)
    assert "2/2" in pane.view.toPlainText()


def test_editing_the_first_message_retitles_a_chat_titled_after_it(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    """The issue: editing the first message kept the old title. A title the user typed stays."""
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "Sort a list in Python")
    cid = pane.conversation_id
    assert cid is not None and store.conversation(cid).title == "Sort a list in Python"  # type: ignore[union-attr]
    send(qtbot, pane, "now in Rust")
    second = store.messages(cid)[2]
    click(pane, f"edit:{second.id}")  # not the first message: the title stays
    pane.input.setPlainText("now in Go")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.send_button.click()
    assert store.conversation(cid).title == "Sort a list in Python"  # type: ignore[union-attr]
    first = store.messages(cid)[0]
    click(pane, f"edit:{first.id}")
    pane.input.setPlainText("Reverse a string in Python")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.send_button.click()
    assert store.conversation(cid).title == "Reverse a string in Python"  # type: ignore[union-attr]
    store.rename(cid, "My own title")
    first = store.messages(cid)[0]
    click(pane, f"edit:{first.id}")
    pane.input.setPlainText("Something else")
    with qtbot.waitSignal(pane.reply_finished, timeout=15_000):
        pane.send_button.click()
    assert store.conversation(cid).title == "My own title"  # type: ignore[union-attr]
