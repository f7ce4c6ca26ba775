"""The mouse wheel over the Settings form scrolls it and never edits a field it passes over (issue:
Top-p 0.95 became 0.45 while scrolling). A field takes the wheel only once it has focus."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QComboBox, QDoubleSpinBox, QSpinBox, QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.ui.launch.launch_form import LaunchForm
from tests.fakes.inline_runner import run_inline as sync
from tests.ui.launch.test_launch_form import ml_caps


def wheel(widget: QWidget, notches: int) -> QWheelEvent:
    """Send one wheel turn of ``notches`` (negative: towards the user) over ``widget``'s centre."""
    pos = QPointF(widget.rect().center())
    event = QWheelEvent(pos, QPointF(widget.mapToGlobal(pos.toPoint())), QPoint(), QPoint(0, 120 * notches),
                        Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)
    return event


def shown_form(qtbot: QtBot) -> LaunchForm:
    form = LaunchForm(runner=sync)
    qtbot.addWidget(form)
    form.set_engine(ml_caps(), "/opt/ml/llama-server")
    form.set_settings(LaunchSettings(target="/m/t.gguf", top_p=0.95, ctx_size=8192, cache_type_k="q8_0"))
    form.resize(900, 400)
    form.show()
    qtbot.waitExposed(form)
    form.activateWindow()
    qtbot.waitUntil(form.isActiveWindow, timeout=2000)
    form.widgets["target"].setFocus()
    qtbot.waitUntil(form.widgets["target"].hasFocus, timeout=2000)
    return form


def test_wheel_over_unfocused_fields_changes_nothing_and_passes_on(qtbot: QtBot) -> None:
    form = shown_form(qtbot)
    top_p, ctx, cache = form.widgets["top_p"], form.widgets["ctx_size"], form.widgets["cache_type_k"]
    assert isinstance(top_p, QDoubleSpinBox) and isinstance(ctx, QSpinBox) and isinstance(cache, QComboBox)
    before = form.settings()
    events = {w.objectName(): [wheel(w, notches) for notches in (-2, -1)] for w in (top_p, ctx, cache)}
    assert (top_p.value(), ctx.value(), cache.currentText()) == (0.95, 8192, "q8_0")
    assert form.settings() == before
    for name, sent in events.items():
        # Ignored, so Qt hands a real wheel on to the parents: the scroll area scrolls.
        assert not any(e.isAccepted() for e in sent), f"{name} kept the wheel: the scroll area would not scroll"
    for w in (top_p, ctx, cache):
        assert w.focusPolicy() == Qt.FocusPolicy.StrongFocus, w.objectName()  # a wheel never gives focus


def test_a_focused_field_still_takes_the_wheel(qtbot: QtBot) -> None:
    """The same events do change a field the user clicked into (the guard is about focus, nothing else)."""
    form = shown_form(qtbot)
    top_p = form.widgets["top_p"]
    assert isinstance(top_p, QDoubleSpinBox)
    qtbot.mouseClick(top_p.lineEdit(), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(top_p.hasFocus, timeout=2000)
    event = wheel(top_p, -1)
    assert event.isAccepted() and form.settings().top_p == 0.9
