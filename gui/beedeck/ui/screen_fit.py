"""Dialogs sized for the screen they open on (used across the ui wings): the preferred size, capped so
the whole window, title bar and buttons included, fits the screen's free area (a 1366x768 laptop with a
40-px panel leaves 728 px)."""

from __future__ import annotations

from PySide6.QtCore import QRect
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QWidget

# Room the window manager adds around the client area (title bar, borders): resize() sets the client size.
FRAME_W, FRAME_H = 16, 48


def available_area(widget: QWidget, parent: QWidget | None = None) -> QRect:
    """The free area (without panels and taskbars) of the screen ``widget`` will open on."""
    screen = (parent.screen() if parent is not None else None) or widget.screen() or QGuiApplication.primaryScreen()
    return screen.availableGeometry()


def fit_to(widget: QWidget, preferred: tuple[int, int], available: QRect) -> None:
    """Resize ``widget`` to ``preferred`` (client size), capped to ``available`` less the window frame."""
    widget.resize(min(preferred[0], available.width() - FRAME_W), min(preferred[1], available.height() - FRAME_H))
