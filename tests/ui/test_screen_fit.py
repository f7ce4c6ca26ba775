"""Dialogs sized for the screen: on a 1366x768 laptop with a 40-px panel (728 px free) the Settings,
Benchmark and Tune dialogs open whole, buttons included (issue 22: the Benchmark and Tune dialogs asked
for 720 and 760 px of client area plus their title bar)."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.profile import Profile
from beedeck.ui.bench.bench_dialog import BenchDialog
from beedeck.ui.bench.tune_dialog import TuneDialog
from beedeck.ui.screen_fit import FRAME_H, FRAME_W, available_area, fit_to
from tests.core.bench.tune.test_search import START
from tests.ui.bench.hosts import ENGINE, make_host

LAPTOP = QRect(0, 0, 1366, 728)


def test_fit_to_caps_the_preferred_size_to_the_free_area(qtbot: QtBot) -> None:
    w = QWidget()
    qtbot.addWidget(w)
    fit_to(w, (1040, 760), LAPTOP)
    assert (w.width(), w.height()) == (1040, 728 - FRAME_H)
    fit_to(w, (600, 400), LAPTOP)
    assert (w.width(), w.height()) == (600, 400)  # a screen with room: the preferred size
    fit_to(w, (1040, 760), QRect(0, 0, 800, 600))
    assert (w.width(), w.height()) == (800 - FRAME_W, 600 - FRAME_H)


def test_the_benchmark_and_tune_dialogs_open_whole_on_a_768_px_screen(qtbot: QtBot) -> None:
    host = make_host(qtbot, Profile(ENGINE, START, "mine"))
    for dialog in (BenchDialog(host, host.widget), TuneDialog(host, host.widget)):
        qtbot.addWidget(dialog)
        own = available_area(dialog, host.widget)  # as built: sized for the screen it opens on
        assert dialog.height() + FRAME_H <= own.height() and dialog.width() + FRAME_W <= own.width(), own
        fit_to(dialog, (1040, 760), LAPTOP)
        dialog.show()
        # the content can shrink that far (its minimum), and the window, frame included, is on screen
        assert dialog.minimumSizeHint().height() + FRAME_H <= LAPTOP.height(), type(dialog).__name__
        assert dialog.height() + FRAME_H <= LAPTOP.height() and dialog.width() + FRAME_W <= LAPTOP.width()
        dialog.close()
