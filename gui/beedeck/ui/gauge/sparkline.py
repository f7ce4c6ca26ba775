"""A tiny QPainter line chart of recent values (QtCharts would need the 160-438 MB Addons wheel)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget


class Sparkline(QWidget):
    """Recent values as a line; ``add_value`` / ``set_values`` store and repaint later.

    A value marked ``stopped`` (a reply the user stopped: a true rate, of part of a reply) is drawn
    as a ring instead of a dot. The chart is labelled (:meth:`labels`): its top value at the top left,
    0 at the bottom left, the newest value at the right.
    """

    def __init__(self, capacity: int = 30, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: deque[float] = deque(maxlen=capacity)
        self._colors: deque[QColor | None] = deque(maxlen=capacity)
        self._stopped: deque[bool] = deque(maxlen=capacity)
        self.setMinimumHeight(44)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(160, 52)

    def labels(self) -> tuple[str, str, str]:
        """The axis labels as drawn: (top, bottom, newest); empty strings before two values."""
        if len(self._values) < 2:
            return "", "", ""
        return f"{_num(max(self._values))} tok/s", "0", _num(self._values[-1])

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

    def _small_font(self) -> QFont:
        small = QFont(self.font())
        small.setPointSizeF(max(6.5, self.font().pointSizeF() * 0.75))
        return small

    def plot_rect(self) -> QRectF:
        """Where the line is drawn: clear of the labels (top label above, the newest value right)."""
        metrics = QFontMetricsF(self._small_font())
        _top, bottom_text, last_text = self.labels()
        left = metrics.horizontalAdvance(bottom_text) + 6
        right = metrics.horizontalAdvance(last_text) + 8
        return QRectF(self.rect()).adjusted(left, metrics.height() + 2, -right, -4)

    def points(self) -> list[QPointF]:
        """The values' centres as drawn."""
        values = list(self._values)
        if len(values) < 2:
            return []
        r = self.plot_rect()
        top = max(values) or 1.0
        step = r.width() / (len(values) - 1)
        return [QPointF(r.left() + i * step, r.bottom() - (v / top) * r.height()) for i, v in enumerate(values)]

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        small = self._small_font()
        metrics = QFontMetricsF(small)
        top_text, bottom_text, last_text = self.labels()
        r = self.plot_rect()
        p.setPen(Qt.PenStyle.NoPen)
        base = pal.color(QPalette.ColorRole.AlternateBase)
        p.setBrush(base)
        p.drawRoundedRect(self.rect(), 4, 4)
        values = list(self._values)
        if len(values) < 2:
            p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no replies yet")
            p.end()
            return
        p.setFont(small)
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        p.drawText(QPointF(4, metrics.ascent() + 1), top_text)
        p.drawText(QPointF(3, r.bottom()), bottom_text)
        points = self.points()
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
        p.setPen(pal.color(QPalette.ColorRole.WindowText))
        p.drawText(QPointF(r.right() + 5, points[-1].y() + metrics.ascent() / 2 - 1), last_text)
        p.end()


def _num(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"
