"""Lasting notices above the chat: what BeeDeck found about its own files (kept aside, written by a newer
BeeDeck, a change kept for this session only) and a port another program or BeeDeck process holds.

The status bar's messages are no place for them: a message there is drawn over the engine, model and VRAM
labels, cut to one line, and cleared by the next menu hover. Here each notice wraps, stays until its
Dismiss (or until what it says is over), and a server becoming ready does not hide it, as it hides the
failure panel.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


class NoticeBar(QFrame):
    """Notices by key, each a title, a wrapped text and a Dismiss button; hidden when it holds none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("notice-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#notice-bar { border: 1px solid #c89a2c; border-radius: 6px; "
                           "background: rgba(200,154,44,0.10); }")
        self._layout = QVBoxLayout(self)
        self._rows: dict[str, tuple[QWidget, QLabel]] = {}
        self.hide()

    def show_notice(self, key: str, title: str, text: str) -> None:
        """Show ``text`` under ``title``, in place of an earlier notice of the same ``key``."""
        if key in self._rows:
            self._rows[key][1].setText(_html(title, text))
        else:
            row = QWidget(self)
            label = QLabel(_html(title, text), row)
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)  # to copy a path
            dismiss = QPushButton("Dismiss", row)
            dismiss.clicked.connect(lambda: self.dismiss(key))
            line = QHBoxLayout(row)
            line.setContentsMargins(0, 0, 0, 0)
            line.addWidget(label, 1)
            line.addWidget(dismiss, 0, Qt.AlignmentFlag.AlignTop)
            self._layout.addWidget(row)
            self._rows[key] = (row, label)
        self.show()

    def dismiss(self, key: str) -> None:
        """Take the notice of ``key`` away (its Dismiss, or what it said is over)."""
        row = self._rows.pop(key, None)
        if row is not None:
            row[0].hide()
            row[0].deleteLater()
        self.setVisible(bool(self._rows))

    def notices(self) -> dict[str, str]:
        """The shown notices' plain texts, by key."""
        return {key: _plain(label.text()) for key, (_row, label) in self._rows.items()}

    def text(self) -> str:
        """Every shown notice's text (title and words), as the person at the window reads it."""
        return " ".join(_plain(label.text()) for _row, label in self._rows.values())


def _html(title: str, text: str) -> str:
    return f"<b>{html.escape(title)}</b><br>{html.escape(text)}"


def _plain(rich: str) -> str:
    return html.unescape(rich.replace("<b>", "").replace("</b>", "").replace("<br>", " "))
