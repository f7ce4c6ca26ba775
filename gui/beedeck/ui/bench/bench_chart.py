"""Bar charts of a benchmark report, drawn with QPainter: the view's widgets and the PNG files the
CLI writes (on a QImage, offscreen; QtCharts is not installed, docs/reference/python-stack.md §8)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QGuiApplication, QImage, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QWidget

from beedeck.core.bench.report import Summary
from beedeck.core.bench.results import BenchReport
from beedeck.core.engine.mode import Variant


@dataclass(frozen=True)
class Bar:
    """One bar: a group (prompt), a mode (or the in-server baseline), a value and its whisker (min-max or a CI)."""

    group: str
    variant: Variant
    value: float
    low: float
    high: float


def speed_bars(report: BenchReport, summary: Summary) -> list[Bar]:
    """Median generation tok/s per prompt and mode, whiskers min-max."""
    out = []
    for p in report.suite.prompts:
        for mode in report.variants:
            m = summary.prompts.get(p.id, {}).get(mode)
            if m is not None and m.gen_tps is not None:
                out.append(Bar(p.id, mode, m.gen_tps.median, m.gen_tps.min, m.gen_tps.max))
    return out


def speedup_bars(report: BenchReport, summary: Summary) -> list[Bar]:
    """Speed-up over the baseline per prompt and overall, whiskers the 95 % bootstrap interval: only the
    speed-ups the rule shows (core/engine/speculation/comparison.py), none from a single run."""
    out = []
    groups = [(p.id, summary.prompts.get(p.id, {})) for p in report.suite.prompts] + [("overall", summary.overall)]
    for gid, modes in groups:
        for mode, m in modes.items():
            sp = m.speedup
            if sp is not None and sp.ratio is not None and sp.ci_low is not None and sp.ci_high is not None:
                out.append(Bar(gid, mode, sp.ratio, sp.ci_low, sp.ci_high))
    return out


def fill_variant(painter: QPainter, rect: QRectF, variant: Variant) -> None:
    """Fill ``rect`` in the variant's mode colour (the gauge's too); the in-server baseline, which shares
    Baseline's colour, lighter and hatched so the two bars stay apart."""
    color = QColor(variant.color)
    if not variant.draft_loaded:
        painter.fillRect(rect, color)
        return
    painter.fillRect(rect, color.lighter(135))
    painter.fillRect(rect, QBrush(color, Qt.BrushStyle.BDiagPattern))


def chart_frame(painter: QPainter, rect: QRectF, title: str) -> QRectF:
    """Begin a chart in ``rect``: save the painter (the caller restores it), a white ground, the
    title top left in 13 px; returns the plot area, with room for the axis labels and the legend."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.fillRect(rect, QColor("white"))
    font = QFont(painter.font())
    font.setPixelSize(13)
    painter.setFont(font)
    painter.setPen(QColor("#222"))
    painter.drawText(rect.adjusted(8, 4, -8, 0), int(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft), title)
    return rect.adjusted(56, 30, -12, -44)


def paint_bars(painter: QPainter, rect: QRectF, bars: list[Bar], title: str, unit: str,
               reference: float | None = None, empty: str = "no data yet") -> None:
    """Grouped vertical bars with whiskers; ``reference`` draws a dashed line (1.0 for speed-ups); ``empty``
    is what an empty chart says."""
    plot = chart_frame(painter, rect, title)
    if not bars or plot.width() < 20 or plot.height() < 20:
        painter.drawText(plot, int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap), empty)
        painter.restore()
        return
    top = max(max(b.high for b in bars), reference or 0.0) * 1.1 or 1.0

    def y(v: float) -> float:
        return plot.bottom() - plot.height() * max(v, 0.0) / top

    painter.setPen(QPen(QColor("#ccc"), 1))
    for i in range(5):
        v = top * i / 4
        painter.drawLine(int(plot.left()), int(y(v)), int(plot.right()), int(y(v)))
        painter.drawText(QRectF(rect.left(), y(v) - 8, 50, 16),
                         int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{v:.3g}")
    groups = list(dict.fromkeys(b.group for b in bars))
    modes = list(dict.fromkeys(b.variant for b in bars))
    gw = plot.width() / len(groups)
    bw = gw * 0.8 / len(modes)
    for gi, g in enumerate(groups):
        painter.setPen(QColor("#222"))
        painter.drawText(QRectF(plot.left() + gi * gw, plot.bottom() + 4, gw, 16),
                         int(Qt.AlignmentFlag.AlignHCenter), g[:18])
        for b in (b for b in bars if b.group == g):
            x = plot.left() + gi * gw + gw * 0.1 + modes.index(b.variant) * bw
            fill_variant(painter, QRectF(x, y(b.value), bw * 0.9, plot.bottom() - y(b.value)), b.variant)
            painter.setPen(QPen(QColor("#333"), 1.5))
            cx = x + bw * 0.45
            painter.drawLine(int(cx), int(y(b.low)), int(cx), int(y(b.high)))
            painter.drawLine(int(cx - 4), int(y(b.low)), int(cx + 4), int(y(b.low)))
            painter.drawLine(int(cx - 4), int(y(b.high)), int(cx + 4), int(y(b.high)))
    if reference is not None:
        pen = QPen(QColor("#c0392b"), 1.5, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.drawLine(int(plot.left()), int(y(reference)), int(plot.right()), int(y(reference)))
    lx = plot.left()
    for mode in modes:  # legend
        fill_variant(painter, QRectF(lx, rect.bottom() - 18, 12, 12), mode)
        painter.setPen(QColor("#222"))
        painter.drawText(QRectF(lx + 16, rect.bottom() - 20, 150, 16), int(Qt.AlignmentFlag.AlignLeft), mode.label)
        lx += 22 + painter.fontMetrics().horizontalAdvance(mode.label) + 14
    painter.setPen(QColor("#555"))
    painter.drawText(QRectF(rect.right() - 160, rect.bottom() - 20, 150, 16), int(Qt.AlignmentFlag.AlignRight), unit)
    painter.restore()


_app: QGuiApplication | None = None


def _ensure_gui_app() -> None:
    """QImage text drawing needs a QGuiApplication; the CLI has none, so make an offscreen one."""
    global _app
    if QGuiApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _app = QGuiApplication([])


def render_report_charts(report: BenchReport, summary: Summary, out_dir: Path) -> list[Path]:
    """Draw tokens_per_s.png and (with a baseline) speedup.png into ``out_dir``; returns their paths."""
    charts: list[tuple[str, list[Bar], str, str, float | None]] = [("tokens_per_s.png", speed_bars(report, summary), "Generation speed per prompt (median, min-max)",
               "tokens/s", None)]
    sp = speedup_bars(report, summary)
    if sp:
        charts.append(("speedup.png", sp, "Speed-up over the baseline (95 % bootstrap CI)", "x baseline", 1.0))
    return [write_png(Path(out_dir) / name, functools.partial(paint_bars, bars=bars, title=title, unit=unit,
                                                              reference=ref))
            for name, bars, title, unit, ref in charts]


def write_png(path: Path, paint: Callable[[QPainter, QRectF], None]) -> Path:
    """Draw ``paint(painter, rect)`` on a white 900x420 image and save it to ``path`` (offscreen
    where there is no display); OSError when the file cannot be written."""
    _ensure_gui_app()
    img = QImage(900, 420, QImage.Format.Format_ARGB32)
    img.fill(QColor("white"))
    painter = QPainter(img)
    try:
        paint(painter, QRectF(0, 0, 900, 420))
    finally:
        painter.end()
    if not img.save(str(path)):  # the format follows the .png suffix
        raise OSError(f"could not write {path}: check that the folder is writable")
    return path


class BarChart(QWidget):
    """Draws :func:`paint_bars` for the latest report; ``set_bars()`` stores and repaints."""

    def __init__(self, title: str, unit: str, reference: float | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title, self.unit, self.reference = title, unit, reference
        self.bars: list[Bar] = []
        self.empty = "no data yet"
        self.setMinimumHeight(220)

    def set_bars(self, bars: list[Bar], empty: str = "no data yet") -> None:
        """Show ``bars``; without any, the chart says ``empty`` (e.g. why there is no speed-up)."""
        self.bars, self.empty = bars, empty
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        try:
            paint_bars(painter, QRectF(self.rect()), self.bars, self.title, self.unit, self.reference, self.empty)
        finally:
            painter.end()


