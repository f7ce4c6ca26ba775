"""A tiny QPainter line chart of recent values (QtCharts would need the 160-438 MB Addons wheel)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget


class Sparkline(QWidget):
    """Recent values as a line; ``add_value`` / ``set_values`` store and repaint later.

    A value marked ``stopped`` (a reply the user stopped: a true rate, of part of a reply) is drawn
    as a ring instead of a dot.
    """

    def __init__(self, capacity: int = 30, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: deque[float] = deque(maxlen=capacity)
        self._colors: deque[QColor | None] = deque(maxlen=capacity)
        self._stopped: deque[bool] = deque(maxlen=capacity)
        self.setMinimumHeight(36)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(160, 40)

    def values(self) -> list[float]:
        return list(self._values)

    def stopped(self) -> list[bool]:
        """Which of :meth:`values` came from stopped replies."""
        return list(self._stopped)

    def add_value(self, value: float, color: QColor | None = None, stopped: bool = False) -> None:
        self._values.append(float(value))
        self._colors.append(color)
        self._stopped.append(stopped)
        self.update()

    def set_values(self, values: Iterable[float]) -> None:
        self._values.clear()
        self._colors.clear()
        self._stopped.clear()
        for v in values:
            self._values.append(float(v))
            self._colors.append(None)
            self._stopped.append(False)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        r = self.rect().adjusted(3, 3, -3, -3)
        pal = self.palette()
        p.setPen(Qt.PenStyle.NoPen)
        base = pal.color(QPalette.ColorRole.AlternateBase)
        p.setBrush(base)
        p.drawRoundedRect(self.rect(), 4, 4)
        values = list(self._values)
        if len(values) < 2:
            p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "recent replies")
            p.end()
            return
        top = max(values) or 1.0
        step = r.width() / (len(values) - 1)
        points = [QPointF(r.left() + i * step, r.bottom() - (v / top) * r.height()) for i, v in enumerate(values)]
        p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 1.6))
        p.drawPolyline(QPolygonF(points))
        for pt, color, stopped in zip(points, self._colors, self._stopped, strict=True):
            fill = color or pal.color(QPalette.ColorRole.Highlight)
            if stopped:
                p.setPen(QPen(fill, 1.4))
                p.setBrush(pal.color(QPalette.ColorRole.AlternateBase))
                p.drawEllipse(pt, 2.8, 2.8)
            else:
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(fill)
                p.drawEllipse(pt, 2.2, 2.2)
        p.end()
