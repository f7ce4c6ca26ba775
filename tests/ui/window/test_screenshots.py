"""The screenshot script's setup pictures (ui/window/screenshots.py): the wizard's three pages and Settings,
taken from the real window on this machine, each a picture of what the page shows."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.ui.window.screenshots import take_setup_screenshots
from tests.ui.window.test_main_window import make


@pytest.mark.engine
def test_the_setup_pictures_are_taken_from_the_real_pages(qtbot: QtBot, store: ChatStore, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:  # the Hub search answers offline, at once
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{sock.getsockname()[1]}")
    w = make(qtbot, store)
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    take_setup_screenshots(app, w, tmp_path)
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    gpu = "wizard-1-detected.png" in names
    assert names == sorted([f"wizard-1-{'detected' if gpu else 'no-gpu'}.png",
                            f"wizard-2-{'recommend' if gpu else 'starter'}.png", "wizard-3-run.png",
                            "settings-dialog.png", "settings-cannot-launch.png"])
    assert all(not QImage(str(tmp_path / n)).isNull() for n in names)
