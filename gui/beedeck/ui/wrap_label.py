"""A word-wrapped label that reserves the lines its text needs, and tooltips that wrap (used across the ui
wings)."""

from __future__ import annotations

import html

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QLabel, QWidget


class WrapLabel(QLabel):
    """A word-wrapped label that reserves exactly the lines its text needs at its current width.

    WORKAROUND: a word-wrapped QLabel in nested layouts gets squeezed below its text and overlaps
    its neighbours (https://doc.qt.io/qt-6/layout.html#layout-issues), so this label turns off
    height-for-width and sets its own minimum height instead.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        self.setWordWrap(True)

    def hasHeightForWidth(self) -> bool:
        return False

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.minimumHeight())

    def setText(self, text: str) -> None:
        super().setText(text)
        self._fit()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit()  # laid out while hidden, it measured at its parent's width: measure at its own now

    def _fit(self) -> None:
        width = max(200, self.width() if self.isVisible() else (self.parentWidget() or self).width()) - 4
        text = self.text()
        rect = self.fontMetrics().boundingRect(0, 0, width, 100_000, Qt.TextFlag.TextWordWrap, text)
        height = rect.height() + 4 if text else 0
        if height != self.minimumHeight():
            self.setMinimumHeight(height)
            self.updateGeometry()


def wrapped_tip(text: str) -> str:
    """``text`` as a tooltip Qt wraps, its line breaks kept: rich text. Qt shows a plain-text tooltip on one
    line however long it is (it wraps one only when it is wider than the screen): the starter banner's was
    about 1,500 px wide on a 1600-px screen."""
    return "<p>" + html.escape(text, quote=False).replace("\n", "<br>") + "</p>"
