"""The benchmark's bar chart, and the rule it shares with every view that draws a mode: one colour per mode
(issue 35 item 2: DFlash and Baseline were drawn in other colours on the gauge than in the benchmark chart,
and the gauge drew EAGLE-3, MTP and N-gram alike)."""

from __future__ import annotations

from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QImage, QPainter
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.ui.bench.bench_chart import Bar, paint_bars
from beedeck.ui.bench.tune_chart import paint_search
from beedeck.ui.gauge.speed_gauge import SpeedGauge, SpeedPanel

W, H = 400, 300


def _image(paint: object) -> QImage:
    img = QImage(W, H, QImage.Format.Format_ARGB32)
    img.fill(QColor("white"))
    painter = QPainter(img)
    try:
        paint(painter, QRectF(0, 0, W, H))  # type: ignore[operator]
    finally:
        painter.end()
    return img


def _colours(img: QImage, x0: int, x1: int, y0: int, y1: int) -> set[str]:
    return {img.pixelColor(x, y).name() for x in range(x0, x1) for y in range(y0, y1)}


def _blend_of(pixel: str, colour: str) -> bool:
    """``pixel`` is ``colour`` laid over white, at least half covering (an antialiased line's pixel): the same
    share of the colour in every channel."""
    p, c = QColor(pixel), QColor(colour)
    shares = [(255 - pv) / (255 - cv) for pv, cv in ((p.red(), c.red()), (p.green(), c.green()), (p.blue(), c.blue()))
              if cv < 235]
    return min(shares) >= 0.5 and max(shares) - min(shares) < 0.06


def _bar_colours(variant: Variant) -> set[str]:
    """The colours inside the one bar of a chart of ``variant`` (left of its whisker, below its top)."""
    img = _image(lambda p, r: paint_bars(p, r, [Bar("p", variant, 10.0, 10.0, 10.0)], "t", "tok/s"))
    # plot area (56, 30)-(388, 256); the bar starts 10 % into it and reaches y(10) = 256 - 226 * 10 / 11
    return _colours(img, 95, 130, 120, 240)


def _gauge_pixels(qtbot: QtBot, mode: Mode) -> int:
    g = SpeedGauge()
    qtbot.addWidget(g)
    g.resize(240, 210)
    g.set_mode(mode)
    g.set_value(g.scale)  # the whole arc
    img = g.grab().toImage()
    want = QColor(mode.color).name()
    return sum(img.pixelColor(x, y).name() == want for x in range(img.width()) for y in range(img.height()))


def test_every_view_draws_a_mode_in_its_one_colour(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    for mode in Mode:
        colour = QColor(mode.color).name()
        assert _bar_colours(Variant(mode)) == {colour}, mode  # the benchmark chart
        assert _gauge_pixels(qtbot, mode) > 100, mode  # the gauge's arc
        panel.reply_finished(ReplyFacts(mode=mode, tps=20.0, tokens=40))
        assert panel.sparkline._colors[-1].name() == colour, mode  # the sparkline's dot
        tune = _image(lambda p, r, m=mode: paint_search(p, r, [], {"start": (10.0, m)}, "t"))
        # the start's dashed line at y(10) = 256 - 226 * 10 / 11.5 (the tune chart's own headroom)
        assert any(_blend_of(c, colour) for c in _colours(tune, 60, 380, 58, 64)), mode  # the tune chart's line
    assert len({m.color for m in Mode}) == len(Mode)  # and no two modes share one


def test_the_in_server_baseline_is_baselines_colour_shaded_so_its_bar_stays_apart() -> None:
    base = QColor(Mode.BASELINE.color)
    inner = _bar_colours(IN_SERVER_BASELINE)
    assert inner <= {base.name(), base.lighter(135).name()} and len(inner) == 2  # hatched in Baseline's colour
    assert inner != _bar_colours(Variant(Mode.BASELINE))
