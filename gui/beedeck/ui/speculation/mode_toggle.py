"""Baseline | <each speculation mode this setup can run>: the view of the Qt-free
:class:`~beedeck.core.engine.speculation.mode_switch.ModeSwitch`, which holds the switching state and decides
what a click does (per request or by restart, see its module; the session carries it out:
:class:`~beedeck.ui.speculation.switch_runner.SwitchRunner`). This widget renders the switch's segments,
status, tooltips and a restart's progress, and emits the clicks.

A mode that cannot run is left out, except the profile's own mode, which stays visible but disabled with
the reason as its tooltip (the user chose it, so they need to know why it cannot run). Every other mode's
reason is behind the ? button at the end (its tooltip, and a click shows it too) and in the toggle's own
tooltip.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QSizePolicy,
    QToolButton,
    QWidget,
)

from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.mode_switch import ModeSwitch
from beedeck.core.engine.speculation.modes import ModeOption
from beedeck.ui.speculation.mode_popover import ModePopover, plain_html
from beedeck.ui.wrap_label import wrapped_tip

STATUS_MAX_W = 520  # px of the toolbar the status line asks for at most (its whole text is its tooltip)
CHECKED_SHEET = ("QToolButton:checked { background: palette(highlight); color: palette(highlighted-text); "
                 "border: 1px solid palette(highlight); border-radius: 3px; }")
STATUS_MIN_W = 60  # px it keeps when the toolbar is short of room (then it shows "…" and the tooltip)


class StatusLine(QLabel):
    """The switch's one-line status, cut ("…") to the width it gets, its whole text as its tooltip when cut.

    A long line ("… both stay loaded, so switching back loads nothing") made the toggle wider than the room
    in the toolbar, which then put the server's address and Copy into its overflow menu: this line asks for
    at most :data:`STATUS_MAX_W` and gives way down to :data:`STATUS_MIN_W` before anything else does."""

    def __init__(self) -> None:
        super().__init__()
        self._line = ""
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)

    def set_line(self, text: str) -> None:
        if text != self._line:
            self._line = text
            self.updateGeometry()
        self._fit()

    def line(self) -> str:
        """The whole line, however much of it is shown."""
        return self._line

    def sizeHint(self) -> QSize:
        # a few px beyond the advance: elidedText measures a little wider than horizontalAdvance
        return QSize(min(self.fontMetrics().horizontalAdvance(self._line) + 8, STATUS_MAX_W) if self._line else 0,
                     super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(self.sizeHint().width(), STATUS_MIN_W), super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        room = self.contentsRect().width() if self.isVisible() else STATUS_MAX_W  # laid out once shown
        shown = self.fontMetrics().elidedText(self._line, Qt.TextElideMode.ElideRight, room)
        self.setText(shown)
        self.setToolTip(wrapped_tip(self._line) if shown != self._line else "")


class ModeToggle(QWidget):
    """A segmented switch (one button per offered mode) plus a status line, rendering a :class:`ModeSwitch`.

    Signal: ``mode_clicked(Mode)`` with the mode of a clicked segment. Call :meth:`show_switch` whenever the
    switch changed. While a restart is under way the status counts the seconds (``clock``: the switch's
    clock) and a bar shows how far it is against what such a switch took here before.
    """

    mode_clicked = Signal(Mode)

    def __init__(self, switch: ModeSwitch, parent: QWidget | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.switch = switch
        self.clock = clock
        self.buttons: dict[Mode, QToolButton] = {}
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        # The checked segment in the highlight colour: Fusion only darkens a checked button's background, which
        # in the dark palette is dark already (it looked unchecked). palette(): the theme switch re-polishes it.
        self.setStyleSheet(CHECKED_SHEET)
        self._segments = QHBoxLayout()
        self._segments.setSpacing(0)
        self.status = StatusLine()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addLayout(self._segments)
        self.why_button = QToolButton()  # the modes that cannot run here, and why
        self.why_button.setText("?")  # plain ASCII: a symbol glyph is missing from minimal font sets
        self.why_button.setObjectName("mode-why")
        self.why_button.setAutoRaise(True)
        self.why_button.clicked.connect(self._show_why)
        # The modes that cannot run, in plain words, with their actions; a window of its own (no parent):
        # as a child it would be disabled with the toggle.
        self.popover = ModePopover()
        layout.addWidget(self.why_button)
        layout.addSpacing(8)
        layout.addWidget(self.status)
        # A switch by restart: how far along it is against what such a switch took here before.
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setFixedWidth(80)
        self.progress.hide()
        layout.addWidget(self.progress)
        self._tick = QTimer(self, interval=200)
        self._tick.timeout.connect(self._on_tick)
        self.baseline_button = self._button(Mode.BASELINE)
        self.show_switch()

    @property
    def dflash_button(self) -> QToolButton:
        return self._button(Mode.DFLASH)

    def button(self, key: Mode) -> QToolButton | None:
        """The segment of mode ``key`` while it is shown, else None."""
        b = self.buttons.get(key)
        return b if b is not None and not b.isHidden() else None

    def _button(self, key: Mode) -> QToolButton:
        """The segment of mode ``key``, made on first use and placed in :class:`Mode`'s order."""
        if key not in self.buttons:
            button = QToolButton()
            button.setCheckable(True)
            button.setText(key.label)
            button.setObjectName(f"mode-{key}")
            button.clicked.connect(lambda _=False, key=key: self._on_clicked(key))
            self.group.addButton(button)
            rank = list(Mode).index(key)
            self._segments.insertWidget(sum(list(Mode).index(k) < rank for k in self.buttons), button)
            self.buttons[key] = button
        return self.buttons[key]

    def _on_clicked(self, key: Mode) -> None:
        self.mode_clicked.emit(key)
        self.show_switch()  # a refused click leaves the segment that was checked

    # -- rendering ---------------------------------------------------------------------------
    def show_switch(self) -> None:
        """Show the switch: its segments, which is checked, its status, its tooltips and a restart's bar."""
        sw = self.switch
        shown = {o.key for o in sw.shown()}
        for o in sw.options:
            if o.key not in shown:
                if o.key in self.buttons:
                    self.buttons[o.key].setHidden(True)
                continue
            button = self._button(o.key)
            button.setHidden(False)
            button.setText(o.label)
            button.setEnabled(o.available and sw.pending is None)
            what = o.key.info.what.format(spec_type=o.spec_type or "n-gram")
            note = sw.notes.get(o.key, "")
            tip = f"{o.label}: " + (f"{what} {note}".rstrip() if o.available else f"not available. {o.reason}")
            cost = sw.cost_line(o.key) if o.available else ""  # before the click: a restart's seconds, the chat kept
            if cost:
                tip += f" {cost}"
            # A measured note makes it long: rich text, which Qt wraps (a plain tooltip is one line)
            button.setToolTip(f"<p>{html.escape(tip, quote=False)}</p>" if (note or cost) and o.available else tip)
        self.setEnabled(sw.enabled)
        self._button(sw.pending or sw.mode).setChecked(True)
        self.status.set_line(sw.status)
        self.setToolTip(sw.tooltip())
        self.why_button.setVisible(bool(sw.unavailable()) and sw.profile is not None)
        self.why_button.setToolTip(plain_html(sw.unavailable()))
        self._show_progress()

    def _show_progress(self) -> None:
        if self.switch.pending is None:
            self._tick.stop()
            self.progress.hide()
            return
        if not self._tick.isActive():
            self._tick.start()
        self._on_tick()

    def _on_tick(self) -> None:
        if self.switch.pending is None:
            return
        now = self.clock()
        self.status.set_line(self.switch.restart_status(now))
        permille = self.switch.progress(now)
        self.progress.setVisible(permille is not None)
        self.progress.setValue(permille or 0)

    def unavailable(self) -> list[ModeOption]:
        """The modes that cannot run with this engine and these files, each with its reason."""
        return self.switch.unavailable()

    def _show_why(self) -> None:
        self.popover.set_options(self.unavailable())
        self.popover.show_below(self.why_button)

    def offered(self) -> list[Mode]:
        """The modes shown, in order (an unavailable one shown is the profile's own)."""
        return [k for k in tuple(Mode) if k in self.buttons and not self.buttons[k].isHidden()]
