"""A stacked bar of the memory planner's breakdown against free VRAM, one row per device.

The planner call is pure and cheap, so the bar recomputes on a 100 ms debounce while the user moves
the context slider or flips cache types. When a GPU would go over (or inside the 1 GiB margin), the
bar turns red and says what to change, before a launch runs out of memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from PySide6.QtCore import QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from beedeck.core.models.planner import DeviceUse, GiB, MemoryPlan
from beedeck.ui.wrap_label import WrapLabel

log = logging.getLogger(__name__)

DEBOUNCE_MS = 100

# Planner item keys -> the five groups the bar shows (anything unknown counts as overhead).
GROUPS: dict[str, tuple[str, ...]] = {
    "weights": ("weights",),
    "KV cache": ("kv", "recurrent", "fa_scratch", "turbo_dequant"),
    "compute": ("compute",),
    "draft": ("draft_weights", "draft_compute", "draft_kv", "dflash_ring", "dflash_kv_proj", "dflash_tape",
              "dflash_capture", "dflash_cpu_ring"),
    "overhead": ("cuda_context",),
}
COLORS: dict[str, QColor] = {
    "weights": QColor("#4e79a7"),
    "KV cache": QColor("#59a14f"),
    "compute": QColor("#f28e2b"),
    "draft": QColor("#b07aa1"),
    "overhead": QColor("#9d9d9d"),
}
RED = QColor("#d62728")
AMBER = QColor("#c98a00")


def grouped(device: DeviceUse) -> dict[str, int]:
    """A device's items summed into the bar's groups, in display order."""
    out = {name: 0 for name in GROUPS}
    for key, nbytes in device.items.items():
        group = next((g for g, keys in GROUPS.items() if key in keys), "overhead")
        out[group] += nbytes
    return out


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def verdict(plan: MemoryPlan) -> tuple[str, str]:
    """("ok" | "tight" | "over", a sentence for people) for the whole plan."""
    worst = "ok"
    lines = []
    for d in plan.gpus:
        left = d.left or 0
        if left < 0:
            worst = "over"
            lines.append(f"{d.name} runs out of memory: the launch needs {_gib(d.total)} but only "
                         f"{_gib(d.free or 0)} is free ({_gib(-left)} short).")
        elif left < plan.margin:
            if worst == "ok":
                worst = "tight"
            lines.append(f"{d.name} is too tight: {_gib(left)} would be left and 1 GiB should stay free "
                         "for the driver and other apps.")
    if worst == "ok":
        if plan.gpus:
            text = "; ".join(f"{d.name}: {_gib(d.total)} of {_gib(d.free or 0)} free" for d in plan.gpus)
            return "ok", f"Fits. {text}."
        return "ok", f"CPU only: about {_gib(plan.host.total)} of system memory."
    remedy = ("Lower the context, pick a smaller KV cache type (q8_0, q4_0) or a smaller quant, or put "
              "fewer layers on the GPU.")
    return worst, " ".join(lines) + " " + remedy


class _Canvas(QWidget):
    ROW_H = 22
    GAP = 10
    LABEL_W = 64
    LEGEND_H = 20

    def __init__(self, owner: MemoryBar) -> None:
        super().__init__(owner)
        self._owner = owner
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def _rows(self) -> list[DeviceUse]:
        plan = self._owner.plan
        if plan is None:
            return []
        return plan.gpus or [plan.host]

    def sizeHint(self) -> QSize:
        n = max(1, len(self._rows()))
        return QSize(360, n * (self.ROW_H + self.GAP) + self.LEGEND_H)

    def minimumSizeHint(self) -> QSize:
        return QSize(200, self.sizeHint().height())

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text_color = pal.windowText().color()
        rows = self._rows()
        if not rows:
            p.setPen(pal.placeholderText().color())
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       self._owner.empty_text)
            p.end()
            return
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.9))
        plan = self._owner.plan
        assert plan is not None
        bar_x = self.LABEL_W
        bar_w = max(40, self.width() - bar_x - 2)
        for r, dev in enumerate(rows):
            y = float(r * (self.ROW_H + self.GAP))
            p.setPen(text_color)
            p.setFont(self.font())
            p.drawText(QRectF(0, y, self.LABEL_W - 6, self.ROW_H),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft, dev.name)
            scale_to = max(dev.total, dev.free or 0, 1)
            track = QRectF(bar_x, y, bar_w, self.ROW_H)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(pal.alternateBase())
            p.drawRoundedRect(track, 4, 4)
            x = float(bar_x)
            for group, nbytes in grouped(dev).items():
                if nbytes <= 0:
                    continue
                w = bar_w * nbytes / scale_to
                p.setBrush(COLORS[group])
                p.drawRect(QRectF(x, y + 1, w, self.ROW_H - 2))
                x += w
            over = dev.free is not None and (dev.left or 0) < plan.margin
            if dev.free is not None:
                # Where the free VRAM ends, and where the 1 GiB safety margin starts.
                fx = bar_x + bar_w * dev.free / scale_to
                mx = bar_x + bar_w * max(0, dev.free - plan.margin) / scale_to
                p.setPen(QPen(text_color, 2))
                p.drawLine(int(fx), int(y - 2), int(fx), int(y + self.ROW_H + 2))
                p.setPen(QPen(text_color, 1, Qt.PenStyle.DashLine))
                p.drawLine(int(mx), int(y), int(mx), int(y + self.ROW_H))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QPen(RED if (dev.left or 0) < 0 and dev.free is not None else
                          AMBER if over else pal.mid().color(), 2 if over else 1))
            p.drawRoundedRect(track, 4, 4)
            label = (f"{_gib(dev.total)} / {_gib(dev.free)} free" if dev.free is not None
                     else f"{_gib(dev.total)} system memory")
            p.setFont(small)
            p.setPen(QColor("white"))
            p.drawText(track.adjusted(6, 0, -6, 0), Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       label)
        # legend
        y = float(len(rows) * (self.ROW_H + self.GAP))
        x = float(bar_x)
        p.setFont(small)
        fm = p.fontMetrics()
        for group, color in COLORS.items():
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(color)
            p.drawRoundedRect(QRectF(x, y + 4, 10, 10), 2, 2)
            p.setPen(text_color)
            p.drawText(QRectF(x + 14, y, 200, 18), Qt.AlignmentFlag.AlignVCenter, group)
            x += 14 + fm.horizontalAdvance(group) + 14
        p.end()


class MemoryBar(QWidget):
    """Per-device stacked bar of a :class:`MemoryPlan` against free VRAM, with a verdict line.

    Signals: ``plan_changed(MemoryPlan)`` (the new plan, or None), ``fits_changed(bool)``.
    Feed it with :meth:`set_plan`, or with :meth:`schedule` (debounced recompute).
    """

    plan_changed = Signal(MemoryPlan)
    fits_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plan: MemoryPlan | None = None
        self.error = ""
        self.state = "empty"  # empty | ok | tight | over | error
        self.empty_text = "Pick a model to see its memory plan."
        self._pending: Callable[[], MemoryPlan | None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.flush)
        self.canvas = _Canvas(self)
        self.summary = WrapLabel()
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.canvas)
        layout.addWidget(self.summary)
        self._refresh()

    @property
    def fits(self) -> bool:
        return self.state in ("ok", "empty")

    def schedule(self, compute: Callable[[], MemoryPlan | None]) -> None:
        """Recompute with ``compute()`` after 100 ms of quiet; a newer call replaces an older one."""
        self._pending = compute
        self._timer.start()

    def flush(self) -> None:
        """Run a pending recompute now (the debounce timer calls this; tests may too)."""
        self._timer.stop()
        compute, self._pending = self._pending, None
        if compute is None:
            return
        try:
            self.set_plan(compute())
        except ValueError as exc:  # PlanError and friends: show, do not crash the form
            self.set_plan(None, error=str(exc))

    def set_plan(self, plan: MemoryPlan | None, error: str = "") -> None:
        was = self.fits
        self.plan, self.error = plan, error
        self._refresh()
        self.plan_changed.emit(plan)
        if was != self.fits:
            self.fits_changed.emit(self.fits)

    def _refresh(self) -> None:
        if self.error:
            self.state, text = "error", self.error
        elif self.plan is None:
            self.state, text = "empty", ""
        else:
            self.state, text = verdict(self.plan)
        color = {"over": RED, "tight": AMBER, "error": RED}.get(self.state)
        self.summary.setStyleSheet(f"color: {color.name()}; font-weight: 600;" if color else "")
        self.summary.setText(text)
        self.summary.setVisible(bool(text))
        if self.plan is not None:
            self.setToolTip("\n".join(self.plan.explain()))
        self.canvas.updateGeometry()
        self.canvas.update()
