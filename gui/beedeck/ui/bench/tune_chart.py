"""The chart of an auto-tune search, drawn with QPainter: generation speed per point in the order
tried (median, min-max whisker), the baseline and the start as dashed reference lines (each in its mode's
colour, as the gauge and the benchmark chart draw it), the best point highlighted; rejected points are
marked where they were tried, a point the cancel cut short as cancelled (what it measured before the cancel,
or a hollow mark). The same painter draws the view's
widget and the PNG the CLI writes (on a QImage, offscreen)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from beedeck.core.bench.tune import BASELINE_ROLE, CONFIRM_ROLE, MEASURED, START_ROLE, TunePoint, TuneResult
from beedeck.core.bench.tune.points import CANCELLED
from beedeck.core.engine.mode import Mode
from beedeck.ui.bench.bench_chart import chart_frame, write_png

COLORS = {"candidate": QColor("#3d8bd9"), "kept": QColor("#f2a900"), "best": QColor("#2e9e4f"),
          "rejected": QColor("#c0392b"), "cancelled": QColor("#17becf"), "skipped": QColor("#9aa5b1"),
          "again": QColor("#8e44ad")}


@dataclass(frozen=True)
class Dot:
    """One point of the search as drawn: its number, label, speed (None: not measured) and kind."""

    number: int
    label: str
    value: float | None
    low: float
    high: float
    kind: str  # candidate | kept | best | rejected | cancelled | skipped | again (the confirmation after the search)


def search_dots(points: list[TunePoint], best: TunePoint | None = None) -> list[Dot]:
    """The start, the candidates and the confirmation in the order measured (the baseline is a reference line)."""
    out = []
    for p in points:
        if p.role == BASELINE_ROLE:
            continue
        g = p.gen_tps
        if p is best:
            kind = "best"
        elif p.status == CANCELLED:  # cut short by the user: not judged, so not rejected
            kind = "cancelled"
        elif p.role == CONFIRM_ROLE and g is not None:
            kind = "again"
        elif p.status != MEASURED:
            kind = "rejected" if g is not None else "skipped"
        else:
            kind = "kept" if p.accepted else "candidate"
        out.append(Dot(p.index + 1, "start" if p.role == START_ROLE else p.label, None if g is None else g.median,
                       g.min if g else 0.0, g.max if g else 0.0, kind))
    return out


def references(points: list[TunePoint]) -> dict[str, tuple[float, Mode]]:
    """The baseline's and the start's median speed and mode, for the dashed lines."""
    out = {}
    for p in points:
        if p.role in (BASELINE_ROLE, START_ROLE) and p.gen_tps is not None:
            out[p.role] = (p.gen_tps.median, p.settings.spec_mode)
    return out


def paint_search(painter: QPainter, rect: QRectF, dots: list[Dot], refs: dict[str, tuple[float, Mode]],
                 title: str) -> None:
    plot = chart_frame(painter, rect, title)
    if not dots and not refs or plot.width() < 20 or plot.height() < 20:
        painter.drawText(plot, int(Qt.AlignmentFlag.AlignCenter), "no points yet")
        painter.restore()
        return
    top = max([d.high for d in dots if d.value is not None] + [v for v, _m in refs.values()] + [1.0]) * 1.15

    def y(v: float) -> float:
        return plot.bottom() - plot.height() * max(v, 0.0) / top

    for i in range(5):
        v = top * i / 4
        painter.setPen(QPen(QColor("#ccc"), 1))
        painter.drawLine(int(plot.left()), int(y(v)), int(plot.right()), int(y(v)))
        painter.setPen(QColor("#555"))
        painter.drawText(QRectF(rect.left(), y(v) - 8, 50, 16),
                         int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{v:.3g}")
    for role, (value, mode) in refs.items():  # the baseline labelled on the left, the start on the right
        painter.setPen(QPen(QColor(mode.color), 1.5, Qt.PenStyle.DashLine))
        painter.drawLine(int(plot.left()), int(y(value)), int(plot.right()), int(y(value)))
        align = Qt.AlignmentFlag.AlignLeft if role == BASELINE_ROLE else Qt.AlignmentFlag.AlignRight
        x = plot.left() + 4 if role == BASELINE_ROLE else plot.right() - 150
        painter.drawText(QRectF(x, y(value) - 16, 146, 14), int(align), f"{role} {value:.1f}")
    step = plot.width() / max(len(dots), 1)
    for i, d in enumerate(dots):
        cx = plot.left() + step * (i + 0.5)
        color = COLORS[d.kind]
        painter.setPen(QColor("#222"))
        painter.drawText(QRectF(cx - step / 2, plot.bottom() + 4, step, 16), int(Qt.AlignmentFlag.AlignHCenter),
                         str(d.number))
        if d.value is None:  # not measured: a hollow mark on the axis where it was tried
            painter.setPen(QPen(color, 1.5))
            painter.drawEllipse(QPointF(cx, plot.bottom() - 5), 4, 4)
            continue
        painter.setPen(QPen(QColor("#333"), 1.2))
        painter.drawLine(int(cx), int(y(d.low)), int(cx), int(y(d.high)))
        painter.setPen(QPen(color.darker(130), 1))
        painter.setBrush(color)
        r = 6 if d.kind == "best" else 4.5
        painter.drawEllipse(QPointF(cx, y(d.value)), r, r)
        painter.setBrush(Qt.BrushStyle.NoBrush)
    lx = plot.left()
    for kind in LEGEND:
        width = painter.fontMetrics().horizontalAdvance(kind) + 4
        painter.fillRect(QRectF(lx, rect.bottom() - 18, 12, 12), COLORS[kind])
        painter.setPen(QColor("#222"))
        painter.drawText(QRectF(lx + 16, rect.bottom() - 20, width, 16), int(Qt.AlignmentFlag.AlignLeft), kind)
        lx += 16 + width + 10
    painter.setPen(QColor("#555"))
    painter.drawText(QRectF(max(lx, rect.right() - 270), rect.bottom() - 20, min(260, rect.right() - lx - 10), 16),
                     int(Qt.AlignmentFlag.AlignRight), "tok/s; point numbers as in the table")
    painter.restore()


LEGEND = ("candidate", "kept", "best", "rejected", "cancelled", "skipped", "again")
TITLE = "Auto-tune search: generation speed per point (median, min-max)"


def render_tune_chart(result: TuneResult, out_dir: Path) -> list[Path]:
    """Draw tune.png into ``out_dir``; returns its path."""
    dots, refs = search_dots(result.points, result.best), references(result.points)
    return [write_png(Path(out_dir) / "tune.png", lambda painter, rect: paint_search(painter, rect, dots, refs, TITLE))]


class SearchChart(QWidget):
    """Draws :func:`paint_search`; ``set_points()`` stores and repaints (live during a search)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dots: list[Dot] = []
        self.refs: dict[str, tuple[float, Mode]] = {}
        self.setMinimumHeight(240)

    def set_points(self, points: list[TunePoint], best: TunePoint | None = None) -> None:
        self.dots, self.refs = search_dots(points, best), references(points)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        try:
            paint_search(painter, QRectF(self.rect()), self.dots, self.refs, TITLE)
        finally:
            painter.end()
