"""The list of chats: switch, rename, delete, search, export to Markdown or JSON.

A right-click acts on the chat under the mouse and leaves the selection alone (as Finder and VS Code
do): the selected item stays the chat on screen, and the one the menu is for is tinted while it is
open.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPoint, Qt, Signal
from PySide6.QtGui import QBrush, QMouseEvent, QPalette
from PySide6.QtWidgets import (
    QFileDialog,
    QInputDialog,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from beedeck.core import paths
from beedeck.core.chat.store import ChatStore, ChatStoreError


class ConversationList(QWidget):
    """Signals: ``conversation_selected(int)``, ``new_requested()``, ``conversation_deleted(int)``."""

    conversation_selected = Signal(int)
    new_requested = Signal()
    conversation_deleted = Signal(int)

    def __init__(self, store: ChatStore, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.new_button = QPushButton("New chat")
        self.new_button.clicked.connect(self.new_requested)
        self.search = QLineEdit(placeholderText="Search chats")
        self.search.setClearButtonEnabled(True)
        self.search.textChanged.connect(lambda _t: self.refresh())
        self.list = QListWidget()
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.viewport().installEventFilter(self)  # a right-click must not select (see eventFilter)
        self.list.customContextMenuRequested.connect(self._on_list_menu)
        self.list.itemActivated.connect(self._on_item_activated)
        self.list.itemClicked.connect(self._on_item_activated)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.new_button)
        layout.addWidget(self.search)
        layout.addWidget(self.list, 1)
        self._current: int | None = None
        # Dialog hooks, replaceable in tests (no modal dialogs offscreen).
        self.ask_text = self._ask_text
        self.ask_confirm = self._ask_confirm
        self.ask_save_path = self._ask_save_path
        self.show_error = self._show_error
        # Who else (another BeeDeck window) has a chat open, or None: such a chat is not deleted here.
        self.held_elsewhere: Callable[[int], str | None] = lambda _conversation_id: None
        self.refresh()

    def refresh(self) -> None:
        try:
            conversations = self.store.list_conversations(self.search.text().strip())
        except ChatStoreError as exc:
            self.show_error(str(exc))
            return  # the list keeps what it showed
        self.list.blockSignals(True)
        self.list.clear()
        for conv in conversations:
            item = QListWidgetItem(conv.title)
            item.setData(Qt.ItemDataRole.UserRole, conv.id)
            item.setToolTip(conv.title)
            self.list.addItem(item)
            if conv.id == self._current:
                item.setSelected(True)
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)

    def set_current(self, conversation_id: int) -> None:
        self._current = conversation_id
        self.refresh()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        # The item view selects on any mouse button; the context menu comes from its own event.
        if (
            watched is self.list.viewport()
            and event.type() in (QEvent.Type.MouseButtonPress, QEvent.Type.MouseButtonRelease,
                                 QEvent.Type.MouseButtonDblClick)
            and isinstance(event, QMouseEvent)
            and event.button() == Qt.MouseButton.RightButton
        ):
            return True
        return super().eventFilter(watched, event)

    def _item(self, conversation_id: int) -> QListWidgetItem | None:
        for i in range(self.list.count()):
            item = self.list.item(i)
            if int(item.data(Qt.ItemDataRole.UserRole)) == conversation_id:
                return item
        return None

    def ids(self) -> list[int]:
        return [int(self.list.item(i).data(Qt.ItemDataRole.UserRole)) for i in range(self.list.count())]

    def _on_item_activated(self, item: QListWidgetItem) -> None:
        cid = int(item.data(Qt.ItemDataRole.UserRole))
        if cid != self._current:
            self._current = cid
            self.conversation_selected.emit(cid)

    # -- actions (a store error is shown, never raised into Qt's event loop) ------------------
    def rename(self, conversation_id: int) -> None:
        self._guard(self._rename, conversation_id)

    def delete(self, conversation_id: int) -> None:
        self._guard(self._delete, conversation_id)

    def export(self, conversation_id: int, fmt: str) -> Path | None:
        result: Path | None = self._guard(self._export, conversation_id, fmt)
        return result

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except ChatStoreError as exc:
            self.show_error(str(exc))
            return None

    def _rename(self, conversation_id: int) -> None:
        conv = self.store.conversation(conversation_id)
        if conv is None:
            return
        title = self.ask_text("Rename chat", "Title:", conv.title)
        if title:
            self.store.rename(conversation_id, title)
            self.refresh()

    def _delete(self, conversation_id: int) -> None:
        holder = self.held_elsewhere(conversation_id)
        if holder:  # deleting it there would fail that window's next message
            self.show_error(f"This chat is open in {holder}: close it there (or open another chat there) first.")
            return
        conv = self.store.conversation(conversation_id)
        if conv is None or not self.ask_confirm(f"Delete the chat “{conv.title}”? This cannot be undone."):
            return
        self.store.delete_conversation(conversation_id)
        if self._current == conversation_id:
            self._current = None
        self.refresh()
        self.conversation_deleted.emit(conversation_id)

    def _export(self, conversation_id: int, fmt: str) -> Path | None:
        conv = self.store.conversation(conversation_id)
        if conv is None:
            return None
        suffix = ".md" if fmt == "markdown" else ".json"
        safe = "".join(c if c.isalnum() or c in " -_" else "_" for c in conv.title).strip() or "chat"
        path = self.ask_save_path(f"{safe}{suffix}")
        if not path:
            return None
        text = self.store.export_markdown(conversation_id) if fmt == "markdown" else self.store.export_json(conversation_id)
        out = Path(path)
        try:
            paths.atomic_write_text(out, text)  # an existing file is replaced whole or not at all
        except OSError as exc:
            self.show_error(f"The chat could not be exported to {out}: {exc.strerror or exc}. "
                            "Pick a folder you can write to, or free some disk space.")
            return None
        return out

    def _on_list_menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        cid = int(item.data(Qt.ItemDataRole.UserRole))
        menu = QMenu(self)
        menu.addAction("Rename…", lambda: self.rename(cid))
        menu.addAction("Export as Markdown…", lambda: self.export(cid, "markdown"))
        menu.addAction("Export as JSON…", lambda: self.export(cid, "json"))
        menu.addSeparator()
        menu.addAction("Delete…", lambda: self.delete(cid))
        tint = self.palette().color(QPalette.ColorRole.Highlight)
        tint.setAlpha(70)
        item.setBackground(QBrush(tint))  # which chat the menu is for; the selection stays put
        menu.exec(self.list.viewport().mapToGlobal(pos))
        after = self._item(cid)  # an action may have rebuilt the list (rename) or emptied it (delete)
        if after is not None:
            after.setData(Qt.ItemDataRole.BackgroundRole, None)

    # -- default dialogs -------------------------------------------------------------------
    def _ask_text(self, title: str, label: str, value: str) -> str:
        text, ok = QInputDialog.getText(self, title, label, text=value)
        return text.strip() if ok else ""

    def _ask_confirm(self, question: str) -> bool:
        answer = QMessageBox.question(self, "BeeDeck", question)
        return answer == QMessageBox.StandardButton.Yes

    def _show_error(self, message: str) -> None:
        QMessageBox.warning(self, "BeeDeck", message)

    def _ask_save_path(self, suggested: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", str(Path.home() / suggested))
        return path
