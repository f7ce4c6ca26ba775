"""Spin and combo boxes that the mouse wheel changes only once they have focus.

A settings form is scrolled with the wheel; a plain QSpinBox under the pointer takes the wheel and
changes its value on the way (Top-p 0.95 became 0.45). These take focus by click or Tab only
(Qt.StrongFocus) and, without focus, leave the wheel event ignored, so Qt passes it on to the
scroll area, which scrolls.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QComboBox, QDoubleSpinBox, QSpinBox, QWidget


def wheel_allowed(widget: QWidget, event: QWheelEvent) -> bool:
    """Whether ``widget`` may act on the wheel: only with focus. Otherwise the event is ignored, so
    it goes on to the parent (the scroll area)."""
    if widget.hasFocus():
        return True
    event.ignore()
    return False


class SpinBox(QSpinBox):
    """A QSpinBox the wheel changes only when it has focus."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if wheel_allowed(self, event):
            super().wheelEvent(event)


class DoubleSpinBox(QDoubleSpinBox):
    """A QDoubleSpinBox the wheel changes only when it has focus; shows no trailing zeros (0.95, not 0.950)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if wheel_allowed(self, event):
            super().wheelEvent(event)

    def textFromValue(self, value: float) -> str:
        text = super().textFromValue(value)
        point = self.locale().decimalPoint()
        return text.rstrip("0").rstrip(point) if point in text else text


class ComboBox(QComboBox):
    """A QComboBox the wheel changes only when it has focus."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def wheelEvent(self, event: QWheelEvent) -> None:
        if wheel_allowed(self, event):
            super().wheelEvent(event)
