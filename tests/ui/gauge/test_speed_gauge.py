"""Speed gauge and panel: stored values, scale, live rate, final figures, baseline marker, comparison."""

from __future__ import annotations

import time

from PySide6.QtGui import QColor, QImage
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.mode import Mode, Variant
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

    g.set_mode(Mode.DFLASH)
    g.set_value(0.0)
    empty = amber_pixels()
    g.set_value(40.0)
    assert amber_pixels() > empty + 20


def test_panel_live_then_final(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_started(Mode.BASELINE)
    t0 = time.perf_counter()
    # Deltas at a known pace: 40 arrivals 10 ms apart (event-loop driven, no sleep), longer than the
    # rate's shortest window (0.25 s).
    for _ in range(40):
        qtbot.wait(10)
        panel.delta_arrived("x")
    span = time.perf_counter() - t0
    rate = panel.live_rate()
    assert 0.5 * 39 / span < rate < 2.5 * 39 / span
    qtbot.waitUntil(lambda: panel.gauge.live and panel.gauge.value > 0, timeout=2000)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=31.5, tokens=20, ttft_s=0.12, prompt_tps=800.0))
    assert panel.gauge.value == 31.5 and not panel.gauge.live
    assert panel.gauge.baseline == 31.5
    assert panel.ttft.text() == "0.12 s" and panel.prefill.text() == "800 tok/s"
    panel.reply_started(Mode.DFLASH)
    panel.reply_finished(ReplyFacts(mode=Mode.DFLASH, tps=63.0, tokens=100, draft_n=80, draft_accepted=60, ttft_s=0.1))
    assert panel.acceptance.text() == "60/80 (75 %)" and panel.draft_share.text() == "60 %"
    assert "DFlash 63.0 tok/s (last reply)" in panel.compare.text().splitlines()
    assert "×" not in panel.compare.text()  # two replies are two prompts: no ratio (issue 37)
    assert panel.sparkline.values() == [31.5, 63.0]


def test_a_stopped_reply_reaches_the_sparkline_and_prefill_but_not_the_per_mode_figures(qtbot: QtBot) -> None:
    """A stopped reply's timings are true for what it generated (the issue: it must show), but a part of
    a reply is no figure for its mode: the comparison line and the baseline marker skip it."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=30.0, tokens=50, prompt_tps=900.0, ttft_s=0.2))
    panel.reply_started(Mode.BASELINE)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=10.0, tokens=12, prompt_tps=750.0, ttft_s=0.3,
                                    cancelled=True))
    assert panel.sparkline.values() == [30.0, 10.0] and panel.sparkline.stopped() == [False, True]
    assert panel.prefill.text() == "750 tok/s" and panel.ttft.text() == "0.30 s"
    assert panel.tokens.text() == "12 (stopped)" and panel.gauge.value == 10.0
    assert panel.gauge.baseline == 30.0 and panel.last_by_mode == {Variant(Mode.BASELINE): 30.0}
    assert panel.compare.text().startswith("Baseline 30.0")


def test_a_reply_stopped_before_its_first_token_adds_no_point(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_started(Mode.DFLASH)
    panel.reply_finished(ReplyFacts(mode=Mode.DFLASH, cancelled=True))
    assert panel.sparkline.values() == [] and panel.tokens.text() == "0 (stopped)" and panel.prefill.text() == "—"


def test_a_stopped_point_is_drawn_as_a_ring(qtbot: QtBot) -> None:
    s = Sparkline()
    qtbot.addWidget(s)
    s.resize(161, 41)
    red = QColor("#ff0000")

    def middle_point() -> tuple[QColor, int]:
        """The colour at the middle value's centre, and the red pixels around it."""
        img = s.grab().toImage()
        centre = s.points()[1]
        cx, cy = round(centre.x()), round(centre.y())
        around = sum(
            img.pixelColor(x, y).red() > 200 and img.pixelColor(x, y).green() < 80
            for x in range(cx - 4, cx + 5) for y in range(cy - 4, cy + 5)
        )
        return img.pixelColor(cx, cy), around

    s.add_value(10.0)
    s.add_value(5.0, red)
    s.add_value(10.0)
    centre, around = middle_point()
    assert centre.red() > 200 and centre.green() < 80 and around > 5  # a filled dot
    s.set_values([])
    s.add_value(10.0)
    s.add_value(5.0, red, stopped=True)
    s.add_value(10.0)
    centre, around = middle_point()
    assert s.stopped() == [False, True, False]
    assert not (centre.red() > 200 and centre.green() < 80) and around > 5  # a ring: red around, hollow


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


def test_every_mode_is_labelled_with_its_own_name(qtbot: QtBot) -> None:
    """The bug: an N-gram reply's gauge said "baseline" (anything but DFlash did). Each mode's own name,
    and its own figure in the comparison line (typed facts, as the chat pane sends them)."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=20.0, tokens=40))
    for mode, tps in ((Mode.MODEL_FREE, 50.0), (Mode.MTP, 30.0), (Mode.EAGLE3, 25.0), (Mode.DSPARK, 40.0)):
        panel.reply_started(mode)
        assert panel.gauge.mode == mode
        panel.reply_finished(ReplyFacts(mode=mode, tps=tps, tokens=100, draft_n=60, draft_accepted=42))
        assert panel.gauge.mode == mode and panel.gauge.mode.label == mode.label != "Baseline"
        assert f"{mode.label} {tps:.1f} tok/s (last reply)" in panel.compare.text().splitlines()
    assert "DFlash" not in panel.compare.text()  # no mode that never answered
    assert panel.gauge.baseline == 20.0  # no other mode moved the baseline marker
    assert len([c for c in panel.sparkline._colors if c is not None]) == 5  # one point per reply


def test_the_dial_paints_the_label_of_the_mode_it_shows(qtbot: QtBot) -> None:
    g = SpeedGauge()
    qtbot.addWidget(g)
    g.resize(220, 190)
    g.set_value(40.0)

    def image(mode: Mode | None) -> QImage:
        g.set_mode(mode)
        img = QImage(g.size(), QImage.Format.Format_ARGB32)
        img.fill(QColor("white"))
        g.render(img)
        return img

    assert image(Mode.MODEL_FREE) != image(Mode.BASELINE)  # another label and colour, not "baseline"
    assert image(Mode.MODEL_FREE) == image(Mode.MODEL_FREE)


def test_a_burst_of_deltas_never_leaves_the_scale_high_and_each_reply_starts_from_its_mode(qtbot: QtBot) -> None:
    """The issue: after one N-gram reply the scale jumped to 0-500,000 and stayed, remote server included.
    Pieces arriving microseconds apart are no rate; the scale restarts at every reply from its mode's last
    figure, and another server starts from nothing."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=30.0, tokens=50))
    panel.reply_started(Mode.MODEL_FREE)
    for _ in range(8):  # one network read of accepted drafts: eight pieces at once
        panel.delta_arrived("x")
    panel._on_live_tick()
    assert panel.gauge.value < 1000 and panel.gauge.scale <= 50
    panel.reply_finished(ReplyFacts(mode=Mode.MODEL_FREE, tps=420.0, tokens=300, draft_n=400, draft_accepted=280))
    assert panel.gauge.scale == 1000 and panel.gauge.value == 420.0
    panel.reply_started(Mode.BASELINE)
    assert panel.gauge.scale == 50  # the baseline reply's own scale, not the n-gram's
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=31.0, tokens=40))
    panel.clear_figures()  # connected to a remote server
    panel.reply_started(Mode.MODEL_FREE)
    assert panel.gauge.scale == 50 and panel.gauge.baseline is None


def test_ttft_shows_at_the_first_token_not_at_the_end(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=30.0, tokens=50, ttft_s=0.9))
    panel.reply_started(Mode.BASELINE)
    assert panel.ttft.text() != "0.90 s" and "waiting" in panel.ttft.text()  # never the last reply's
    qtbot.wait(30)
    panel.delta_arrived("x")
    first = panel.ttft.text()
    assert first.endswith(" s") and float(first.split()[0]) >= 0.02
    panel.delta_arrived("y")
    assert panel.ttft.text() == first  # set once, by the first token
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=30.0, tokens=2, ttft_s=0.031))
    assert panel.ttft.text() == "0.03 s"  # the server's own figure replaces the client's


def test_the_last_figure_of_every_mode_shows_benchmark_and_tune_results_included(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.record_figure(Mode.BASELINE, 30.0, "benchmark")
    panel.reply_started(Mode.MTP)
    panel.reply_finished(ReplyFacts(mode=Mode.MTP, tps=45.0, tokens=100, draft_n=90, draft_accepted=60))
    panel.record_figure(Mode.MODEL_FREE, 90.0, "tune")
    lines = panel.compare.text().splitlines()
    assert lines == ["Baseline 30.0 tok/s (benchmark)", "MTP 45.0 tok/s (last reply)", "N-gram 90.0 tok/s (tune)"]
    assert panel.gauge.baseline == 30.0 and panel.last_by_mode == {Variant(Mode.BASELINE): 30.0, Variant(Mode.MTP): 45.0, Variant(Mode.MODEL_FREE): 90.0}


def test_nothing_is_cut_off_in_the_narrowest_dock(qtbot: QtBot) -> None:
    """The issue: "Drafts accepted 846/1209 (70 %) · 54 %…" was cut off. At the dock's minimum width
    (170 px, MainWindow) every label shows its whole text: wrapped, or wide enough."""
    from PySide6.QtWidgets import QApplication, QLabel

    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.record_figure(Mode.BASELINE, 40.68, "benchmark")
    panel.record_figure(Mode.MODEL_FREE, 131.2, "tune")
    panel.reply_started(Mode.DFLASH)
    panel.reply_finished(ReplyFacts(mode=Mode.DFLASH, tps=137.4, tokens=1567, draft_n=1209, draft_accepted=846,
                                    ttft_s=0.21, prompt_tps=1234.0))
    panel.set_gpu(20 * 2**30, 24 * 2**30, 97)
    panel.resize(170, 900)
    panel.show()
    qtbot.waitExposed(panel)
    QApplication.processEvents()
    assert "846/1209 (70 %)" in panel.acceptance.text() and panel.draft_share.text() == "54 %"
    for label in panel.findChildren(QLabel):
        if not label.isVisible() or not label.text():
            continue
        if label.wordWrap():
            assert label.heightForWidth(label.width()) <= label.height(), label.text()
        else:
            assert label.sizeHint().width() <= label.width(), label.text()
        assert label.geometry().right() <= panel.contentsRect().right() + 1, label.text()


def test_the_sparkline_is_labelled(qtbot: QtBot) -> None:
    s = Sparkline()
    qtbot.addWidget(s)
    s.resize(200, 52)
    assert s.labels() == ("", "", "")
    s.add_value(31.5)
    s.add_value(63.04)
    s.add_value(40.0)
    assert s.labels() == ("63.0 tok/s", "0", "40.0")
    img = s.grab().toImage()
    bg = img.pixelColor(img.width() // 2, 1)
    plot = s.plot_rect()

    def inked(x0: int, x1: int, y0: int, y1: int) -> int:
        return sum(img.pixelColor(x, y) != bg for x in range(x0, x1) for y in range(y0, y1))

    assert inked(2, 40, 0, int(plot.top()) - 1) > 5  # the top value, above the line
    assert inked(int(plot.right()) + 3, img.width() - 1, 0, img.height()) > 5  # the newest value, right of it
    assert all(plot.left() <= p.x() <= plot.right() and plot.top() <= p.y() <= plot.bottom() for p in s.points())


def test_figures_start_over_for_another_server_and_stay_for_the_same(qtbot: QtBot) -> None:
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.server_ready("local model: a.gguf")
    panel.record_figure(Mode.BASELINE, 30.0)
    panel.server_ready("local model: a.gguf")  # restarted in another mode: the same server
    assert panel.last_by_mode == {Variant(Mode.BASELINE): 30.0} and panel.gauge.baseline == 30.0
    panel.server_ready("http://10.0.0.5:8080 remote")  # connected elsewhere
    assert panel.last_by_mode == {} and panel.gauge.baseline is None and panel.compare.text() == "Baseline —"


def test_an_n_gram_reply_that_drafted_nothing_says_so_and_no_reply_becomes_a_ratio(qtbot: QtBot) -> None:
    """Issue 37: after an N-gram reply with "Drafts accepted: 0 drafted" the dock showed "N-gram 45.6 tok/s ·
    ×1.30", then ×1.33, ×0.93, ×0.87 as unrelated replies of other lengths arrived."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=35.1, tokens=120))
    panel.reply_started(Mode.MODEL_FREE)
    panel.reply_finished(ReplyFacts(mode=Mode.MODEL_FREE, tps=45.6, tokens=160, draft_n=0))
    assert panel.acceptance.text() == "0 drafted"
    assert panel.compare.text().splitlines() == ["Baseline 35.1 tok/s (last reply)",
                                                 "N-gram 45.6 tok/s (last reply) · drafted nothing"]
    for tps, tokens, drafted in ((46.7, 300, 0), (32.6, 80, 12), (30.5, 512, 40), (26.0, 700, 3)):
        panel.reply_started(Mode.MODEL_FREE)
        panel.reply_finished(ReplyFacts(mode=Mode.MODEL_FREE, tps=tps, tokens=tokens, draft_n=drafted))
        assert "×" not in panel.compare.text()  # a reply's own figure is never a ratio against another reply
    assert panel.compare.text().splitlines()[-1] == "N-gram 26.0 tok/s (last reply)"


def test_speed_ups_come_only_from_a_benchmark_or_tune_with_their_interval_and_runs(qtbot: QtBot) -> None:
    from beedeck.core.engine.speculation.comparison import Evidence, compare

    panel = SpeedPanel()
    qtbot.addWidget(panel)
    base = Evidence({"a": [40.0, 41.0, 39.0], "b": [30.0, 31.0, 29.0]})
    three = compare(base, Evidence({"a": [80.0, 82.0, 78.0], "b": [60.0, 62.0, 58.0]}, drafted=300))
    panel.record_figure(Mode.BASELINE, 35.5, "benchmark")
    panel.record_figure(Mode.DFLASH, 71.0, "benchmark", comparison=three)
    lines = panel.compare.text().splitlines()
    assert lines[:2] == ["Baseline 35.5 tok/s (benchmark)", "DFlash 71.0 tok/s (benchmark)"]
    assert lines[2] == f"  vs Baseline: ×2.00 ({three.interval_text()}, 3 runs of 2 prompts); benchmark"
    # one repetition: the benchmark's figure, and why there is no ratio
    one = compare(Evidence({"a": [40.0]}), Evidence({"a": [39.6]}, drafted=5))
    panel.record_figure(Mode.MODEL_FREE, 39.6, "benchmark", comparison=one)
    assert "  vs Baseline: one run: no interval; benchmark" in panel.compare.text().splitlines()
    # a chat reply afterwards replaces the figure; the benchmark's comparison stays, named as the benchmark's
    panel.reply_started(Mode.DFLASH)
    panel.reply_finished(ReplyFacts(mode=Mode.DFLASH, tps=65.0, tokens=200, draft_n=150, draft_accepted=120))
    lines = panel.compare.text().splitlines()
    assert "DFlash 65.0 tok/s (last reply)" in lines and lines[lines.index("DFlash 65.0 tok/s (last reply)") + 1] \
        .endswith("3 runs of 2 prompts); benchmark")
    panel.server_ready("a")
    panel.server_ready("another server")
    assert panel.compare.text() == "Baseline —"  # another server: its figures and comparisons start over


def test_the_dial_follows_the_server_in_use(qtbot: QtBot) -> None:
    """Issue 37: after "Use the local server" the dial showed the remote server's 54.9 on the local one's
    0-50 scale. The dial and the last reply's rows belong to the server they came from."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.server_ready("http://10.0.0.5:8080 remote")
    panel.reply_started(Mode.BASELINE)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=54.9, tokens=80, prompt_tps=300.0, ttft_s=0.2))
    assert panel.gauge.value == 54.9 and panel.gauge.scale == 100
    panel.server_ready("local model: SmolLM2-135M-Instruct.Q4_1.gguf")
    assert panel.gauge.value <= panel.gauge.scale
    assert panel.gauge.value == 0 and panel.gauge.mode is None and panel.gauge.scale == 50
    assert [lab.text() for lab in (panel.ttft, panel.prefill, panel.tokens, panel.acceptance)] == ["—"] * 4


def test_a_new_reply_shows_none_of_the_last_ones_figures_while_it_streams(qtbot: QtBot) -> None:
    """Issue 37: Prefill showed the previous reply's figure while a new one streamed (and the drafts rows
    theirs)."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    panel.reply_started(Mode.MODEL_FREE)
    panel.reply_finished(ReplyFacts(mode=Mode.MODEL_FREE, tps=40.0, tokens=80, prompt_tps=151.0, ttft_s=0.3,
                                    draft_n=20, draft_accepted=10))
    assert panel.prefill.text() == "151 tok/s" and panel.acceptance.text() == "10/20 (50 %)"
    panel.reply_started(Mode.MODEL_FREE)
    assert "151" not in panel.prefill.text() and panel.prefill.text() == "—"
    assert panel.acceptance.text() == "—" and panel.draft_share.text() == "—"
    panel.reply_finished(ReplyFacts(mode=Mode.MODEL_FREE, tps=41.0, tokens=60, prompt_tps=163.0, ttft_s=0.2))
    assert panel.prefill.text() == "163 tok/s" and panel.acceptance.text() == "0 drafted"


def test_the_recent_replies_line_is_said_in_words(qtbot: QtBot) -> None:
    """Issue 37: "Recent replies (tok/s; ring: stopped)" was cryptic."""
    panel = SpeedPanel()
    qtbot.addWidget(panel)
    title = panel.sparkline_title.text()
    assert title == "Recent replies, tokens per second"
    panel.reply_started(Mode.BASELINE)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=30.0, tokens=50))
    assert panel.sparkline_title.text() == title  # nothing to explain yet
    panel.reply_started(Mode.BASELINE)
    panel.reply_finished(ReplyFacts(mode=Mode.BASELINE, tps=10.0, tokens=12, cancelled=True))
    assert panel.sparkline_title.text() == f"{title} (an open circle: a reply you stopped)"
