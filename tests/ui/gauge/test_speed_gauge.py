"""Speed gauge and panel: stored values, scale, live rate, final figures, baseline marker, comparison."""

from __future__ import annotations

import time

from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

from beedeck.ui.gauge.sparkline import Sparkline
from beedeck.ui.gauge.speed_gauge import SpeedGauge, SpeedPanel, nice_scale


def test_nice_scale() -> None:
    assert nice_scale(0) == 10
    assert nice_scale(30) == 50
    assert nice_scale(90) == 200
    assert nice_scale(900) == 2000


def test_set_value_stores_and_grows_the_scale(qtbot: QtBot) -> None:
    g = SpeedGauge()
    qtbot.addWidget(g)
    g.set_value(120.0)
    assert g.value == 120.0 and g.scale == 200
    g.set_value(-3)
    assert g.value == 0.0


def test_paint_draws_the_arc_in_the_mode_colour(qtbot: QtBot) -> None:
    g = SpeedGauge()
    qtbot.addWidget(g)
    g.resize(240, 210)

    def amber_pixels() -> int:
        img: QImage = g.grab().toImage()
        n = 0
        for x in range(0, img.width(), 3):
            for y in range(0, img.height(), 3):
                c = img.pixelColor(x, y)
                n += c.red() > 200 and 140 < c.green() < 190 and c.blue() < 60
        return n

    g.set_mode("dflash")
    g.set_value(0.0)
    empty = amber_pixels()
    g.set_value(40.0)
    assert amber_pixels() > empty + 20


def test_panel_live_then_final(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_started("baseline")
    t0 = time.perf_counter()
    # Deltas at a known pace: 20 arrivals 10 ms apart (event-loop driven, no sleep).
    for _ in range(20):
        qtbot.wait(10)
        panel.delta_arrived("x")
    span = time.perf_counter() - t0
    rate = panel.live_rate()
    assert 0.5 * 19 / span < rate < 2.5 * 19 / span
    qtbot.waitUntil(lambda: panel.gauge.live and panel.gauge.value > 0, timeout=2000)
    panel.reply_finished({"mode": "baseline", "tps": 31.5, "tokens": 20, "ttft_s": 0.12, "prompt_tps": 800.0})
    assert panel.gauge.value == 31.5 and not panel.gauge.live
    assert panel.gauge.baseline == 31.5
    assert panel.ttft.text() == "0.12 s" and panel.prefill.text() == "800 tok/s"
    panel.reply_started("dflash")
    panel.reply_finished(
        {"mode": "dflash", "tps": 63.0, "tokens": 100, "draft_n": 80, "draft_accepted": 60, "ttft_s": 0.1}
    )
    assert "60/80 (75 %)" in panel.acceptance.text() and "60 % of output" in panel.acceptance.text()
    assert "speed-up ×2.00" in panel.compare.text()
    assert panel.sparkline.values() == [31.5, 63.0]


def test_cancelled_reply_does_not_enter_history(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_finished({"mode": "baseline", "tps": 10.0, "cancelled": True})
    assert panel.sparkline.values() == [] and panel.gauge.baseline is None


def test_gpu_line(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.set_gpu(None, None, None)
    assert panel.gpu.text() == "GPU: none detected"
    panel.set_gpu(6 * 2**30, 24 * 2**30, 87)
    assert panel.gpu.text() == "GPU memory 6.0 / 24.0 GiB · 87 % busy"


def test_sparkline_caps_its_history(qtbot: QtBot) -> None:
    s = Sparkline(capacity=5)
    qtbot.addWidget(s)
    for v in range(8):
        s.add_value(v)
    assert s.values() == [3, 4, 5, 6, 7]
    s.grab()  # paints without error
