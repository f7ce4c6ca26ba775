"""Server log: batched appends, line cap, search, memory-line jump and highlighting."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtGui import QTextCursor
from pytestqt.qtbot import QtBot

from beedeck.ui.engine.log_dock import LogView
from tests.conftest import FIXTURES

REAL_LOG = FIXTURES / "engines" / "beellama-0.1-cuda.gemma3-270m.server.log"


def test_lines_are_batched_and_capped(qtbot: QtBot) -> None:
    view = LogView(max_lines=100)
    qtbot.addWidget(view)
    for i in range(250):
        view.append_line(f"line {i}\n")
    assert view.line_count() <= 1  # nothing yet: appends happen on the timer
    qtbot.waitUntil(lambda: "line 249" in view.text.toPlainText(), timeout=2000)
    assert view.line_count() == 100
    assert "line 149" not in view.text.toPlainText()


def test_search_and_memory_lines_on_a_real_log(qtbot: QtBot) -> None:
    view = LogView()
    qtbot.addWidget(view)
    for line in Path(REAL_LOG).read_text().splitlines():
        view.append_line(line)
    view.flush()
    view.search.setText("load_model")
    assert view.find_next()
    assert "load_model" in view.text.textCursor().block().text()
    view.search.setText("no-such-text-anywhere")
    assert not view.find_next() and view.status.text() == "not found"
    cursor = view.text.textCursor()
    cursor.movePosition(QTextCursor.MoveOperation.Start)
    view.text.setTextCursor(cursor)
    assert view.find_memory()
    line = view.text.textCursor().block().text()
    assert "MiB" in line or "memory" in line.lower()
    # The highlighter coloured that line.
    fmt = view.text.textCursor().block().layout().formats()
    assert fmt and fmt[0].format.foreground().color().name() == "#2e8b57"
