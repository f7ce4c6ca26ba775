"""The server log: a capped, searchable view with memory lines highlighted.

Lines arrive one signal each from the server's reader thread; they are appended in batches on a
100 ms timer so a chatty load (hundreds of lines a second) never stalls the chat.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QRegularExpression, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument
from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

MAX_LINES = 5000
MEMORY_LINE = re.compile(
    r"memory breakdown|MiB|buffer size|KV buffer|compute buffer|model buffer|VRAM|projected to use", re.I
)
ERROR_LINE = re.compile(r"\berror\b|failed|GGML_ASSERT|out of memory|\bE ", re.I)


class _LogHighlighter(QSyntaxHighlighter):
    def __init__(self, document: QTextDocument) -> None:
        super().__init__(document)
        self.memory = QTextCharFormat()
        self.memory.setForeground(QColor("#2e8b57"))
        self.memory.setFontWeight(QFont.Weight.DemiBold)
        self.error = QTextCharFormat()
        self.error.setForeground(QColor("#d04040"))

    def highlightBlock(self, text: str) -> None:
        if ERROR_LINE.search(text):
            self.setFormat(0, len(text), self.error)
        elif MEMORY_LINE.search(text):
            self.setFormat(0, len(text), self.memory)


class LogView(QWidget):
    """Log text plus a search row."""

    def __init__(self, parent: QWidget | None = None, max_lines: int = MAX_LINES) -> None:
        super().__init__(parent)
        self.text = QPlainTextEdit(readOnly=True)
        self.text.setMaximumBlockCount(max_lines)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        mono = QFont("monospace")
        mono.setStyleHint(QFont.StyleHint.Monospace)
        self.text.setFont(mono)
        self._highlighter = _LogHighlighter(self.text.document())
        self.search = QLineEdit(placeholderText="Search the log")
        self.search.setClearButtonEnabled(True)
        self.search.returnPressed.connect(self.find_next)
        self.next_button = QPushButton("Next")
        self.next_button.clicked.connect(self.find_next)
        self.prev_button = QPushButton("Previous")
        self.prev_button.clicked.connect(self.find_previous)
        self.memory_button = QPushButton("Memory lines")
        self.memory_button.setToolTip("Jump to the next line about memory use")
        self.memory_button.clicked.connect(self.find_memory)
        self.clear_button = QPushButton("Clear")
        self.clear_button.clicked.connect(self.text.clear)
        self.status = QLabel()
        row = QHBoxLayout()
        row.addWidget(self.search, 1)
        for w in (self.prev_button, self.next_button, self.memory_button, self.clear_button, self.status):
            row.addWidget(w)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.text, 1)
        self._pending: list[str] = []
        self._timer = QTimer(self, singleShot=True, interval=100)
        self._timer.timeout.connect(self.flush)

    def append_line(self, line: str) -> None:
        self._pending.append(line.rstrip("\r\n"))
        if not self._timer.isActive():
            self._timer.start()

    def flush(self) -> None:
        if not self._pending:
            return
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        self.text.appendPlainText("\n".join(self._pending))
        self._pending.clear()
        if at_end:
            bar.setValue(bar.maximum())

    def line_count(self) -> int:
        return self.text.blockCount()

    def _find(self, backward: bool) -> bool:
        needle = self.search.text()
        if not needle:
            return False
        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        found = self.text.find(needle, flags)
        if not found:  # wrap around
            cursor = self.text.textCursor()
            cursor.movePosition(cursor.MoveOperation.End if backward else cursor.MoveOperation.Start)
            self.text.setTextCursor(cursor)
            found = self.text.find(needle, flags)
        self.status.setText("" if found else "not found")
        return found

    def find_next(self) -> bool:
        return self._find(False)

    def find_previous(self) -> bool:
        return self._find(True)

    def find_memory(self) -> bool:
        regex = QRegularExpression(MEMORY_LINE.pattern, QRegularExpression.PatternOption.CaseInsensitiveOption)
        found = self.text.find(regex)
        if not found:
            cursor = self.text.textCursor()
            cursor.movePosition(cursor.MoveOperation.Start)
            self.text.setTextCursor(cursor)
            found = self.text.find(regex)
        self.status.setText("" if found else "no memory lines yet")
        return found


class LogDock(QDockWidget):
    """Collapsible dock holding the server log."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Server log", parent)
        self.setObjectName("server-log-dock")
        self.view = LogView()
        self.setWidget(self.view)
        self.setAllowedAreas(Qt.DockWidgetArea.BottomDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)

    def append_line(self, line: str) -> None:
        self.view.append_line(line)
