"""The speed gauge: a QPainter dial of generation tok/s plus the numbers around it.

Live during a reply (from delta arrival times, on a 100 ms GUI timer), then replaced by the server's
own ``timings.predicted_per_second``. ``set_*`` methods store and call ``update()``; painting happens
only in ``paintEvent`` (napari's status-checker pattern).

A reply the user stopped still has true figures for what it generated (the chat asks the server for
timings on every chunk): its speed shows on the dial and, as a ring, on the sparkline, and its
prefill and time to first token show too. It stays out of the per-mode figures (the comparison line
and the baseline marker), which stand for whole replies.
"""

from __future__ import annotations

import math
import time
from collections import deque

from PySide6.QtCore import QPointF, QRectF, QSize, Qt, QTimer
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QFormLayout, QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.modes import Mode
from beedeck.ui.gauge.sparkline import Sparkline

DFLASH_COLOR = QColor("#e0a100")  # bee amber
BASELINE_COLOR = QColor("#6c8ebf")
# One colour per mode (the benchmark chart's hues): the dial, its label and the sparkline agree.
MODE_COLORS = {Mode.BASELINE: BASELINE_COLOR, Mode.DFLASH: DFLASH_COLOR, Mode.EAGLE3: QColor("#d9534f"),
               Mode.DSPARK: QColor("#e07b00"), Mode.MTP: QColor("#2e9e5b"), Mode.MODEL_FREE: QColor("#3d8bd9")}


def mode_color(mode: Mode | None) -> QColor:
    return MODE_COLORS.get(mode, BASELINE_COLOR) if mode else BASELINE_COLOR
START_DEG, SPAN_DEG = 225.0, 270.0  # dial from bottom-left, clockwise to bottom-right


def nice_scale(value: float) -> float:
    """The dial's full scale: the first of 1-2-5 x 10^n above value with 20 % headroom."""
    target = max(value * 1.2, 10.0)
    exp = 10 ** math.floor(math.log10(target))
    for m in (1, 2, 5, 10):
        if m * exp >= target:
            return float(m * exp)
    return float(10 * exp)


class SpeedGauge(QWidget):
    """The dial alone: value, mode colour and a baseline marker."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.value = 0.0
        self.scale = 50.0
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

    def set_baseline(self, value: float | None) -> None:
        self.baseline = value
        if value and value > self.scale:
            self.scale = nice_scale(value)
        self.update()

    def set_mode(self, mode: Mode | None) -> None:
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
            p.setPen(QPen(BASELINE_COLOR.darker(130), 3))
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
        if self.mode:
            p.setPen(color)
            p.drawText(
                QRectF(rect.left(), center.y() + side * 0.2, side, side * 0.12),
                Qt.AlignmentFlag.AlignCenter,
                self.mode.label,
            )
        p.end()


class SpeedPanel(QFrame):
    """Gauge + acceptance, TTFT, prefill, sparkline of recent replies, baseline-vs-DFlash and GPU line."""

    LIVE_WINDOW_S = 1.5

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.gauge = SpeedGauge()
        self.sparkline = Sparkline()
        self.acceptance = QLabel("—")
        self.ttft = QLabel("—")
        self.prefill = QLabel("—")
        self.tokens = QLabel("—")
        self.compare = QLabel("Baseline — · DFlash —")
        self.compare.setWordWrap(True)
        self.gpu = QLabel("GPU: none detected")
        self.gpu.setWordWrap(True)
        for lab in (self.acceptance, self.ttft, self.prefill, self.tokens):
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft)
        form.addRow("Drafts accepted", self.acceptance)
        form.addRow("Time to first token", self.ttft)
        form.addRow("Prefill", self.prefill)
        form.addRow("Tokens", self.tokens)
        title = QLabel("<b>Generation speed</b>")
        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(self.gauge, 1)
        layout.addLayout(form)
        layout.addWidget(QLabel("Recent replies"))
        layout.addWidget(self.sparkline)
        layout.addWidget(self.compare)
        layout.addWidget(self.gpu)
        self.last_by_mode: dict[Mode, float] = {}
        self._arrivals: deque[float] = deque()
        self._count = 0
        self._live_timer = QTimer(self, interval=100)
        self._live_timer.timeout.connect(self._on_live_tick)

    # -- reply lifecycle -------------------------------------------------------------------
    def reply_started(self, mode: str) -> None:
        """``mode``: a :class:`Mode` value ("" without a toggle), as ChatPane.reply_started sends it."""
        self._arrivals.clear()
        self._count = 0
        self.gauge.set_mode(Mode.parse(mode))
        self.gauge.set_value(0.0, live=True)
        self._live_timer.start()

    def delta_arrived(self, _text: str = "") -> None:
        """One streamed piece arrived (llama-server sends about one token per piece)."""
        self._arrivals.append(time.perf_counter())
        self._count += 1

    def live_rate(self) -> float:
        now = time.perf_counter()
        while self._arrivals and now - self._arrivals[0] > self.LIVE_WINDOW_S:
            self._arrivals.popleft()
        if len(self._arrivals) < 2:
            return 0.0
        span = self._arrivals[-1] - self._arrivals[0]
        return (len(self._arrivals) - 1) / span if span > 0 else 0.0

    def _on_live_tick(self) -> None:
        self.gauge.set_value(self.live_rate(), live=True)
        self.tokens.setText(str(self._count))

    def reply_finished(self, facts: ReplyFacts) -> None:
        """Replace the live estimate with the server's own figures for the reply."""
        self._live_timer.stop()
        mode = facts.mode
        self.gauge.set_mode(mode)
        tps = facts.tps or 0.0
        self.gauge.set_value(tps, live=False)
        stopped = facts.cancelled
        if facts.tokens is not None:
            self.tokens.setText(f"{facts.tokens} (stopped)" if stopped else str(facts.tokens))
        elif stopped:
            self.tokens.setText(f"{self._count} (stopped)")
        self.ttft.setText(f"{facts.ttft_s:.2f} s" if facts.ttft_s is not None else "—")
        self.prefill.setText(f"{facts.prompt_tps:.0f} tok/s" if facts.prompt_tps else "—")
        if facts.draft_n:
            acc, draft_n = facts.draft_accepted, facts.draft_n
            share = acc / facts.tokens if facts.tokens else 0.0
            self.acceptance.setText(f"{acc}/{draft_n} ({100 * acc / draft_n:.0f} %) · {100 * share:.0f} % of output")
        else:
            self.acceptance.setText("— (no drafts)" if mode in (Mode.BASELINE, None) else "0 drafted")
        if tps > 0:
            self.sparkline.add_value(tps, mode_color(mode), stopped=stopped)
        if tps > 0 and not stopped:
            if mode:
                self.last_by_mode.pop(mode, None)  # re-inserted: the dict's order is the order last seen
                self.last_by_mode[mode] = tps
            if mode == Mode.BASELINE:
                self.gauge.set_baseline(tps)
        self._update_compare()

    def _update_compare(self) -> None:
        """"Baseline 30.1 · N-gram 52.3 tok/s · speed-up ×1.74": the last whole reply of each mode seen."""
        base = self.last_by_mode.get(Mode.BASELINE)
        others = [(m, v) for m, v in self.last_by_mode.items() if m != Mode.BASELINE]
        text = f"Baseline {base:.1f}" if base else "Baseline —"
        if not others:
            text += " · DFlash —"
        for m, v in others:
            text += f" · {m.label} {v:.1f}"
        text += " tok/s" if self.last_by_mode else ""
        latest = others[-1] if others else None
        if base and latest:
            text += f" · {latest[0].label} speed-up ×{latest[1] / base:.2f}"
        self.compare.setText(text)

    # -- GPU -------------------------------------------------------------------------------
    def set_gpu(self, used_bytes: int | None, total_bytes: int | None, util_percent: int | None) -> None:
        if not total_bytes:
            self.gpu.setText("GPU: none detected")
            return
        text = f"GPU memory {used_bytes / 2**30:.1f} / {total_bytes / 2**30:.1f} GiB" if used_bytes is not None else ""
        if util_percent is not None:
            text += f" · {util_percent} % busy"
        self.gpu.setText(text)
