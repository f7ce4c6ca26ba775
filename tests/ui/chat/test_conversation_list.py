"""Conversation list: switch, search, rename, delete, export."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtWidgets import QApplication, QMenu
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.ui.chat.conversation_list import ConversationList


def make(qtbot: QtBot, store: ChatStore) -> ConversationList:
    w = ConversationList(store)
    qtbot.addWidget(w)
    return w


def test_lists_searches_and_selects(qtbot: QtBot, store: ChatStore) -> None:
    a = store.create_conversation("Python sorting")
    b = store.create_conversation("Trip plans")
    store.add_message(b.id, "user", "what to pack for rain")
    w = make(qtbot, store)
    assert w.ids() == [b.id, a.id]
    w.search.setText("rain")
    assert w.ids() == [b.id]
    w.search.setText("")
    item = w.list.item(1)
    with qtbot.waitSignal(w.conversation_selected) as blocker:
        w.list.itemClicked.emit(item)
    assert blocker.args == [a.id]


def test_rename_delete_and_export(qtbot: QtBot, store: ChatStore, tmp_path: Path) -> None:
    c = store.create_conversation("Old")
    store.add_message(c.id, "user", "hi")
    w = make(qtbot, store)
    w.ask_text = lambda *a: "New title"
    w.rename(c.id)
    assert w.list.item(0).text() == "New title"
    w.ask_save_path = lambda suggested: str(tmp_path / suggested)
    md = w.export(c.id, "markdown")
    assert md is not None and md.name == "New title.md" and md.read_text().startswith("# New title")
    js = w.export(c.id, "json")
    assert js is not None and json.loads(js.read_text())["messages"][0]["content"] == "hi"
    errors: list[str] = []
    w.show_error = errors.append
    w.ask_save_path = lambda suggested: str(tmp_path / "no-such-folder" / "x" / suggested)
    (tmp_path / "no-such-folder").write_text("a file where a folder should be")
    assert w.export(c.id, "json") is None  # reported, not raised out of the menu action
    assert len(errors) == 1 and "could not be exported" in errors[0] and "Pick a folder" in errors[0]
    w.ask_confirm = lambda q: False
    w.delete(c.id)
    assert store.conversation(c.id) is not None
    w.ask_confirm = lambda q: True
    with qtbot.waitSignal(w.conversation_deleted):
        w.delete(c.id)
    assert store.conversation(c.id) is None and w.ids() == []


def test_current_is_selected(qtbot: QtBot, store: ChatStore) -> None:
    a = store.create_conversation("A")
    store.create_conversation("B")
    w = make(qtbot, store)
    w.set_current(a.id)
    assert w.list.currentItem().data(Qt.ItemDataRole.UserRole) == a.id


def test_right_click_acts_on_the_chat_under_the_mouse_and_keeps_the_shown_one_selected(
    qtbot: QtBot, store: ChatStore
) -> None:
    """The menu is for the chat under the mouse (tinted while it is open); the selection, which is
    the chat on screen, does not move to it, and no chat is switched to."""
    older = store.create_conversation("Older chat")
    shown = store.create_conversation("Shown chat")
    w = make(qtbot, store)
    w.resize(300, 300)
    w.show()
    qtbot.waitExposed(w)
    w.set_current(shown.id)
    target = w.list.item(1)
    assert target.data(Qt.ItemDataRole.UserRole) == older.id
    asked: list[str] = []
    w.ask_text = lambda title, label, value: asked.append(value) or ""
    seen: list[tuple[list[int], bool]] = []

    def answer_menu() -> None:  # the menu runs its own event loop: act on it from a timer
        menu = QApplication.activePopupWidget()
        if not isinstance(menu, QMenu):
            return
        poll.stop()
        selected = [int(i.data(Qt.ItemDataRole.UserRole)) for i in w.list.selectedItems()]
        seen.append((selected, w.list.item(1).background().style() != Qt.BrushStyle.NoBrush))
        rename = next(a for a in menu.actions() if a.text().startswith("Rename"))
        menu.close()
        rename.trigger()

    poll = QTimer(interval=10)
    poll.timeout.connect(answer_menu)
    poll.start()
    pos = w.list.visualItemRect(target).center()
    viewport = w.list.viewport()
    with qtbot.assertNotEmitted(w.conversation_selected):
        # What the platform delivers for a right-click: the button, then the context-menu event.
        qtbot.mousePress(viewport, Qt.MouseButton.RightButton, pos=pos)
        QApplication.sendEvent(
            viewport, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos, viewport.mapToGlobal(pos))
        )
        qtbot.mouseRelease(viewport, Qt.MouseButton.RightButton, pos=pos)
    poll.stop()
    assert asked == ["Older chat"]  # the menu acted on the chat under the mouse
    assert seen == [([shown.id], True)]  # while open: the shown chat still selected, the target tinted
    assert w.list.currentItem().data(Qt.ItemDataRole.UserRole) == shown.id
    assert [int(i.data(Qt.ItemDataRole.UserRole)) for i in w.list.selectedItems()] == [shown.id]
    assert w.list.item(1).background().style() == Qt.BrushStyle.NoBrush  # the tint goes with the menu
