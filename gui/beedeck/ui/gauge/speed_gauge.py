"""The speed gauge: a QPainter dial of generation tok/s plus the numbers around it.

Live during a reply (a sliding window over the arrival times of its tokens, read on a 100 ms GUI
timer: :class:`beedeck.core.chat.speed.LiveRate`), then replaced by the server's own
``timings.predicted_per_second``. The dial's scale starts each reply from the last figure of its mode
on this server (:class:`beedeck.core.chat.speed.ModeFigures`, fed by chat replies, benchmarks and
tune runs), grows only within the reply and settles on the reply's own figure. ``set_*`` methods store
and call ``update()``; painting happens only in ``paintEvent`` (napari's status-checker pattern).

A reply the user stopped still has true figures for what it generated (the chat asks the server for
timings on every chunk): its speed shows on the dial and, as a ring, on the sparkline, and its
prefill and time to first token show too. It stays out of the per-mode figures (the comparison line
and the baseline marker), which stand for whole replies.
"""

from __future__ import annotations

import math
import time

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.speed import DEFAULT_SCALE, LiveRate, ModeFigures, nice_scale
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.speculation.comparison import Comparison
from beedeck.ui.gauge.sparkline import Sparkline

__all__ = ["SpeedGauge", "SpeedPanel", "mode_color", "nice_scale"]

NO_MODE_COLOR = QColor("#4f9a6a")  # a reply sent without a mode (no toggle)
SPARKLINE_TITLE = "Recent replies, tokens per second"
START_DEG, SPAN_DEG = 225.0, 270.0  # dial from bottom-left, clockwise to bottom-right


def mode_color(mode: Mode | Variant | None) -> QColor:
    """The colour a mode's figures are drawn in (the dial's arc, the sparkline's dots): the mode's own
    (:attr:`Mode.color`, the benchmark and tune charts' too)."""
    return QColor(mode.color) if mode is not None else QColor(NO_MODE_COLOR)


class SpeedGauge(QWidget):
    """The dial alone: value, mode colour and a baseline marker."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value = 0.0
        self.scale = DEFAULT_SCALE
        self.baseline: float | None = None
        self.mode: Mode | None = None
        self.live = False
        self.caption = "tok/s"
        self.setMinimumSize(180, 160)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def sizeHint(self) -> QSize:
        return QSize(220, 190)

    def set_value(self, value: float, live: bool = False) -> None:
        self.value = max(0.0, float(value))
        self.live = live
        if self.value > self.scale or (self.baseline or 0) > self.scale:
            self.scale = nice_scale(max(self.value, self.baseline or 0))
        self.update()

    def reset_scale(self, scale: float) -> None:
        """A new full scale (a new reply, or its final figure): it may shrink, unlike :meth:`set_value`'s."""
        self.scale = max(float(scale), nice_scale(self.baseline or 0.0)) if self.baseline else float(scale)
        self.update()

    def set_baseline(self, value: float | None) -> None:
        self.baseline = value
        if value and value > self.scale:
            self.scale = nice_scale(value)
        self.update()

    def set_mode(self, mode: Mode | None) -> None:
        """The mode whose colour and name the dial shows (None for none)."""
        self.mode = mode
        self.update()

    def _angle(self, value: float) -> float:
        frac = min(max(value / self.scale, 0.0), 1.0)
        return math.radians(START_DEG - frac * SPAN_DEG)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        side = min(self.width(), self.height() * 1.15) - 16
        rect = QRectF((self.width() - side) / 2, 8, side, side)
        center = rect.center()
        radius = side / 2
        thick = max(8.0, side * 0.07)
        arc_rect = rect.adjusted(thick / 2, thick / 2, -thick / 2, -thick / 2)
        track = pal.color(QPalette.ColorRole.Mid)
        track.setAlpha(90)
        p.setPen(QPen(track, thick, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
        p.drawArc(arc_rect, int(START_DEG * 16), int(-SPAN_DEG * 16))
        color = mode_color(self.mode)
        frac = min(self.value / self.scale, 1.0)
        if frac > 0:
            p.setPen(QPen(color, thick, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
            p.drawArc(arc_rect, int(START_DEG * 16), int(-SPAN_DEG * frac * 16))
        # Scale labels at 0, half and full.
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, self.font().pointSizeF() * 0.8))
        p.setFont(small)
        for v in (0.0, self.scale / 2, self.scale):
            a = self._angle(v)
            pt = QPointF(center.x() + math.cos(a) * (radius - thick * 2.4), center.y() - math.sin(a) * (radius - thick * 2.4))
            p.drawText(QRectF(pt.x() - 24, pt.y() - 8, 48, 16), Qt.AlignmentFlag.AlignCenter, f"{v:g}")
        # Baseline marker: a tick across the track where the last baseline reply landed.
        if self.baseline:
            a = self._angle(self.baseline)
            outer = radius + 2
            inner = radius - thick - 4
            p.setPen(QPen(mode_color(Mode.BASELINE).darker(130), 3))
            p.drawLine(
                QPointF(center.x() + math.cos(a) * inner, center.y() - math.sin(a) * inner),
                QPointF(center.x() + math.cos(a) * outer, center.y() - math.sin(a) * outer),
            )
        # The number.
        big = QFont(self.font())
        big.setPointSizeF(self.font().pointSizeF() * 2.4)
        big.setBold(True)
        p.setFont(big)
        p.setPen(pal.color(QPalette.ColorRole.WindowText))
        text = f"{self.value:.0f}" if self.value >= 100 else f"{self.value:.1f}"
        p.drawText(QRectF(rect.left(), center.y() - side * 0.18, side, side * 0.25), Qt.AlignmentFlag.AlignCenter, text)
        p.setFont(small)
        p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
        caption = self.caption + (" · live" if self.live else "")
        p.drawText(QRectF(rect.left(), center.y() + side * 0.07, side, side * 0.12), Qt.AlignmentFlag.AlignCenter, caption)
        if self.mode is not None:
            p.setPen(color)
            p.drawText(
                QRectF(rect.left(), center.y() + side * 0.2, side, side * 0.12),
                Qt.AlignmentFlag.AlignCenter,
                self.mode.label,
            )
        p.end()




class SpeedPanel(QFrame):
    """Gauge + drafts, TTFT, prefill, tokens, a labelled sparkline of recent replies, the last figure
    per mode and the GPU line.

    Inputs (the window connects the chat's signals): :meth:`reply_started` (mode), :meth:`pieces_arrived`
    (a batch's piece count; :meth:`delta_arrived` one piece),
    :meth:`reply_finished` (the reply's stats dict), :meth:`record_figure` (a reply's figure for its mode),
    :meth:`show_figures` (``figures`` changed elsewhere: a benchmark's or a tune's figure), :meth:`server_ready`
    (figures start over for another server), :meth:`set_gpu`. ``figures``: the session's, shared.
    """

    def __init__(self, parent: QWidget | None = None, *, figures: ModeFigures | None = None) -> None:
        super().__init__(parent)
        self.gauge = SpeedGauge()
        self.sparkline = Sparkline()
        self.acceptance = QLabel("—")
        self.draft_share = QLabel("—")
        self.ttft = QLabel("—")
        self.prefill = QLabel("—")
        self.tokens = QLabel("—")
        self.compare = QLabel("Baseline —")
        self.gpu = QLabel("GPU: none detected")
        for lab in (self.acceptance, self.draft_share, self.ttft, self.prefill, self.tokens, self.compare, self.gpu):
            lab.setWordWrap(True)  # a narrow dock wraps a figure, never cuts it off
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
        form.addRow("Drafts accepted", self.acceptance)
        form.addRow("Output from drafts", self.draft_share)
        form.addRow("Time to first token", self.ttft)
        form.addRow("Prefill", self.prefill)
        form.addRow("Tokens", self.tokens)
        title = QLabel("<b>Generation speed</b>")
        self.sparkline_title = QLabel(SPARKLINE_TITLE)
        self.sparkline_title.setWordWrap(True)
        self.compare_title = QLabel("Last figure per mode")
        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(self.gauge, 1)
        layout.addLayout(form)
        layout.addWidget(self.sparkline_title)
        layout.addWidget(self.sparkline)
        layout.addWidget(self.compare_title)
        layout.addWidget(self.compare)
        layout.addWidget(self.gpu)
        self.figures = figures if figures is not None else ModeFigures()
        self.rate = LiveRate()
        self._mode: Mode | None = None
        self._server: str | None = None
        self._live_timer = QTimer(self, interval=100)
        self._live_timer.timeout.connect(self._on_live_tick)

    @property
    def last_by_mode(self) -> dict[Variant, float]:
        """The last figure per mode (tokens/s), whatever measured it."""
        return self.figures.as_dict()

    # -- reply lifecycle -------------------------------------------------------------------
    def reply_started(self, mode: Mode | None) -> None:
        """A reply began in ``mode`` (None: sent without a toggle)."""
        self._mode = mode
        self.rate.start(time.perf_counter())
        self.gauge.set_mode(mode)
        self.gauge.reset_scale(self.figures.scale_for(mode))  # per reply: an old spike never stays
        self.gauge.set_value(0.0, live=True)
        self.ttft.setText("waiting for the first token…")
        self.tokens.setText("0")
        for row in (self.prefill, self.acceptance, self.draft_share):
            row.setText("—")  # this reply's come at its end: the last one's are not this one's
        self._live_timer.start()

    def delta_arrived(self, _text: str = "") -> None:
        """One streamed piece arrived (llama-server sends about one token per piece)."""
        self.pieces_arrived(1)

    def pieces_arrived(self, count: int) -> None:
        """``count`` streamed pieces arrived together (one batch from the chat's worker)."""
        first = self.rate.first_token_at is None
        self.rate.add(time.perf_counter(), count)
        if first and (ttft := self.rate.ttft()) is not None:
            self.ttft.setText(f"{ttft:.2f} s")

    def prompt_reading(self, text: str) -> None:
        """How far the server has read the prompt (the chat's ``prompt_reading``), until the first token."""
        if self.rate.first_token_at is None and self._live_timer.isActive():
            self.ttft.setText(text)

    def live_rate(self) -> float:
        """The live tokens/s (0 until the window is long enough to be a rate)."""
        return self.rate.rate(time.perf_counter()) or 0.0

    def _on_live_tick(self) -> None:
        self.gauge.set_value(self.live_rate(), live=True)
        self.tokens.setText(str(self.rate.count))

    def reply_finished(self, facts: ReplyFacts) -> None:
        """Replace the live estimate with the server's own figures for the reply."""
        self._live_timer.stop()
        mode = facts.mode or self._mode  # a reply sent without a mode is labelled with the one it started in
        tps = facts.tps or 0.0
        self.gauge.reset_scale(nice_scale(tps) if tps > 0 else self.figures.scale_for(mode))
        self.gauge.set_value(tps, live=False)
        count = facts.tokens if facts.tokens is not None else self.rate.count
        self.tokens.setText(f"{count} (stopped)" if facts.cancelled else str(count))
        ttft = facts.ttft_s if facts.ttft_s is not None else self.rate.ttft()
        self.ttft.setText(f"{ttft:.2f} s" if ttft is not None else "—")
        self.prefill.setText(f"{facts.prompt_tps:.0f} tok/s" if facts.prompt_tps else "—")
        if facts.draft_n:
            acc, draft_n = facts.draft_accepted, facts.draft_n
            self.acceptance.setText(f"{acc}/{draft_n} ({100 * acc / draft_n:.0f} %)")
            self.draft_share.setText(f"{100 * acc / facts.tokens:.0f} %" if facts.tokens else "—")
        else:
            self.acceptance.setText("— (no drafts)" if mode in (Mode.BASELINE, None) else "0 drafted")
            self.draft_share.setText("—")
        if tps > 0:
            self.sparkline.add_value(tps, mode_color(mode), stopped=facts.cancelled)
            stopped = any(self.sparkline.stopped())
            self.sparkline_title.setText(SPARKLINE_TITLE + (" (an open circle: a reply you stopped)" if stopped else ""))
        if tps > 0 and not facts.cancelled and mode is not None:
            self.record_figure(mode, tps, drafted=facts.draft_n)

    def record_figure(self, mode: Mode | Variant, tps: float, source: str = "chat", *, drafted: int | None = None,
                      comparison: Comparison | None = None) -> None:
        """A mode's latest speed (a whole reply with its ``drafted`` tokens, a benchmark's median, a tune's
        best point); ``comparison``: its speed-up over the baseline by the rule (a benchmark's, a tune's)."""
        self.figures.record(mode, tps, source, drafted=drafted, comparison=comparison)
        self.show_figures()

    def show_figures(self) -> None:
        """Show :attr:`figures` as they are now: the baseline's marker on the dial, the comparison lines."""
        baseline = self.figures.get(Mode.BASELINE)
        if baseline is not None:
            self.gauge.set_baseline(baseline.tps)
        self._update_compare()

    def server_ready(self, identity: str) -> None:
        """A server became ready; ``identity`` names it (address and model). Another one than before (a
        remote server, another model or card) starts from no figures; the same one keeps them."""
        if self._server is not None and identity != self._server:
            self.clear_figures()
        self._server = identity

    def clear_figures(self) -> None:
        """Another server (model, card): its speeds start from nothing, the dial and the last reply's rows too
        (they were the other server's: its 54.9 stood on this one's 0-50 scale)."""
        self.figures.clear()
        self.gauge.set_baseline(None)
        self.gauge.set_mode(None)
        self.gauge.reset_scale(DEFAULT_SCALE)
        self.gauge.set_value(0.0)
        for row in (self.ttft, self.prefill, self.tokens, self.acceptance, self.draft_share):
            row.setText("—")
        self._update_compare()

    def _update_compare(self) -> None:
        self.compare.setText("\n".join(self.figures.lines()))

    # -- GPU -------------------------------------------------------------------------------
    def set_gpu(self, used_bytes: int | None, total_bytes: int | None, util_percent: int | None) -> None:
        if not total_bytes:
            self.gpu.setText("GPU: none detected")
            return
        text = f"GPU memory {used_bytes / 2**30:.1f} / {total_bytes / 2**30:.1f} GiB" if used_bytes is not None else ""
        if util_percent is not None:
            text += f" · {util_percent} % busy"
        self.gpu.setText(text)
