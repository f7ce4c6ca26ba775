"""A theme switch applies to every widget at once (issue 22): the starter banner, the message box and
the open transcript's code colours, and the whole window with them, look, right after View → Theme, exactly as in a window that was
started in that theme. Proved by screenshots (offscreen grabs) compared pixel by pixel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtGui import QImage, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.ui.window.main_window import MainWindow
from beedeck.ui.window.theme import apply_theme
from tests.ui.window.test_first_hour import NO_GPU, starter_profile
from tests.ui.window.test_integration import RecordingController

REPLY = "Reverse it with a slice:\n\n```python\ndef reverse(s: str) -> str:\n    return s[::-1]\n```\n\nDone."
PARTS = ("starter_banner", "composer", "transcript", "window")


@pytest.fixture
def restore_theme(qapp: QApplication) -> Iterator[None]:
    palette, style = QPalette(qapp.palette()), qapp.style().name()
    yield
    qapp.setStyle(style)
    qapp.setPalette(palette)


def open_window(qtbot: QtBot, store: ChatStore, conversation: int) -> MainWindow:
    window = MainWindow(store, RecordingController())
    qtbot.addWidget(window)
    window.resize(1100, 700)
    window.show()
    qtbot.waitExposed(window)
    window.session.set_profile(starter_profile())
    window.session.set_hardware(NO_GPU)
    window.chat.load_conversation(conversation)
    window.chat.input.setPlainText("Thanks")
    return window


def shots(window: MainWindow) -> dict[str, QImage]:
    QApplication.processEvents()
    widgets = {"starter_banner": window.starter_banner, "composer": window.chat.input, "transcript": window.chat.view,
               "window": window}  # the whole window: toolbar, toggle, gauge, sidebar, status bar too
    return {name: w.grab().toImage().convertToFormat(QImage.Format.Format_RGB32) for name, w in widgets.items()}


def differing(a: QImage, b: QImage) -> float:
    """The fraction of pixels that differ (1.0 for different sizes)."""
    if a.size() != b.size():
        return 1.0
    pa, pb = bytes(a.constBits()), bytes(b.constBits())  # type: ignore[call-overload]
    n = a.width() * a.height()
    diff = sum(pa[i : i + 4] != pb[i : i + 4] for i in range(0, 4 * n, 4))
    return diff / n


def test_switching_the_theme_repaints_every_widget_like_a_fresh_window(
    qtbot: QtBot, beedeck_home: Path, qapp: QApplication, restore_theme: None
) -> None:
    store = ChatStore()
    conversation = store.create_conversation("Reverse").id
    store.add_message(conversation, "user", "How do I reverse a string?")
    store.add_message(conversation, "assistant", REPLY, {"mode": "baseline", "tokens": 30, "tps": 12.0})
    apply_theme(qapp, "light")
    switched = open_window(qtbot, store, conversation)
    light = shots(switched)
    switched.set_theme("dark")
    after_switch = shots(switched)
    switched.chat.leases.release()  # the same chat in a second window, for the comparison (the app opens another)
    fresh_dark = open_window(qtbot, store, conversation)
    dark = shots(fresh_dark)
    for part in PARTS:
        assert differing(light[part], dark[part]) > 0.3, part  # the themes do look different
        assert differing(after_switch[part], dark[part]) == 0.0, part  # ...and the switch got all of it
    switched.set_theme("light")
    back = shots(switched)
    for part in PARTS:
        assert differing(back[part], light[part]) == 0.0, part
    for w in (switched, fresh_dark):
        w.close()
