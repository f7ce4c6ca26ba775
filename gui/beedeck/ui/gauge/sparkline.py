"""A tiny QPainter line chart of recent values (QtCharts would need the 160-438 MB Addons wheel)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget


class Sparkline(QWidget):
    """Recent values as a line; ``add_value`` / ``set_values`` store and repaint later."""

    def __init__(self, capacity: int = 30, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: deque[float] = deque(maxlen=capacity)
        self._colors: deque[QColor | None] = deque(maxlen=capacity)
        self.setMinimumHeight(36)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(160, 40)

    def values(self) -> list[float]:
        return list(self._values)

    def add_value(self, value: float, color: QColor | None = None) -> None:
        self._values.append(float(value))
        self._colors.append(color)
        self.update()

    def set_values(self, values: Iterable[float]) -> None:
        self._values.clear()
        self._colors.clear()
        for v in values:
            self._values.append(float(v))
            self._colors.append(None)
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
        for pt, color in zip(points, self._colors, strict=True):
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(color or pal.color(QPalette.ColorRole.Highlight))
            p.drawEllipse(pt, 2.2, 2.2)
        p.end()
