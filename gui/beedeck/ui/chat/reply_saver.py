"""Writes the streaming reply to the chat store; a write the store refuses is kept, not lost.

A full disk makes SQLite refuse the write: the reply stays on screen, the refused write is kept here
and offered again every :data:`RETRY_SAVE_MS` until it goes through.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from beedeck.core.chat.store import ChatStore, ChatStoreError

RETRY_SAVE_MS = 5000  # a reply the store refused (a full disk) is offered again this often


class ReplySaver(QObject):
    """Signals: ``failed(ChatStoreError)`` the store refused a write; ``saved_late()``
    the write it had refused is saved now."""

    failed = Signal(ChatStoreError)
    saved_late = Signal()

    def __init__(self, store: ChatStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self._unsaved: tuple[int, str, dict[str, Any] | None, bool | None, str] | None = None
        self._retry_timer = QTimer(self, interval=RETRY_SAVE_MS)
        self._retry_timer.timeout.connect(self._retry)

    def save(self, message_id: int, content: str, stats: dict[str, Any] | None = None,
             complete: bool | None = None, reasoning: str = "") -> None:
        """Write the reply; on failure keep it (the view shows it) and retry every few seconds."""
        try:
            self.store.update_message(message_id, content, stats, complete=complete, reasoning=reasoning)
        except ChatStoreError as exc:
            self._unsaved = (message_id, content, stats, complete, reasoning)
            self.failed.emit(exc)
            if not self._retry_timer.isActive():
                self._retry_timer.start()
            return
        if self._unsaved is not None and self._unsaved[0] == message_id and complete is not None:
            self._unsaved = None

    def has_unsaved(self) -> bool:
        return self._unsaved is not None

    def _retry(self) -> None:
        pending = self._unsaved
        if pending is None:
            self._retry_timer.stop()
            return
        try:
            self.store.update_message(pending[0], pending[1], pending[2], complete=pending[3], reasoning=pending[4])
        except ChatStoreError:
            return  # still failing: the notice already says why; try again later
        self._unsaved = None
        self._retry_timer.stop()
        self.saved_late.emit()
