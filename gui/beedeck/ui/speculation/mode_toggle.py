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

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget

from beedeck.core.engine.speculation.mode_switch import ModeSwitch
from beedeck.core.engine.speculation.modes import (
    BASELINE,
    DFLASH,
    DSPARK,
    EAGLE3,
    LABELS,
    MODE_KEYS,
    MODEL_FREE,
    MTP,
    ModeOption,
)
from beedeck.ui.speculation.mode_popover import ModePopover, plain_html

WHAT: dict[str, str] = {BASELINE: "no speculation: the target decodes every token itself.",
        DFLASH: "a DFlash draft proposes a block of tokens that the target checks in one pass.",
        EAGLE3: "an EAGLE-3 draft proposes tokens from the target's hidden states.",
        DSPARK: "a DSpark draft (DFlash with a Markov head) proposes a block of tokens.",
        MTP: "the target's own MTP heads propose the next tokens: no draft file.",
        MODEL_FREE: "guesses tokens from text already in the context ({spec_type}); no extra model."}


class ModeToggle(QWidget):
    """A segmented switch (one button per offered mode) plus a status line, rendering a :class:`ModeSwitch`.

    Signal: ``mode_clicked(str)`` with the mode key of a clicked segment. Call :meth:`show_switch` whenever the
    switch changed. While a restart is under way the status counts the seconds (``clock``: the switch's
    clock) and a bar shows how far it is against what such a switch took here before.
    """

    mode_clicked = Signal(str)

    def __init__(self, switch: ModeSwitch, parent: QWidget | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.switch = switch
        self.clock = clock
        self.buttons: dict[str, QToolButton] = {}
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self._segments = QHBoxLayout()
        self._segments.setSpacing(0)
        self.status = QLabel()
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
        self.baseline_button = self._button(BASELINE)
        self.show_switch()

    @property
    def dflash_button(self) -> QToolButton:
        return self._button(DFLASH)

    def button(self, key: str) -> QToolButton | None:
        """The segment of mode ``key`` while it is shown, else None."""
        b = self.buttons.get(key)
        return b if b is not None and not b.isHidden() else None

    def _button(self, key: str) -> QToolButton:
        """The segment of mode ``key``, made on first use and placed in :data:`MODE_KEYS` order."""
        if key not in self.buttons:
            button = QToolButton()
            button.setCheckable(True)
            button.setText(LABELS[key])
            button.setObjectName(f"mode-{key}")
            button.clicked.connect(lambda _=False, key=key: self._on_clicked(key))
            self.group.addButton(button)
            rank = MODE_KEYS.index(key)
            self._segments.insertWidget(sum(MODE_KEYS.index(k) < rank for k in self.buttons), button)
            self.buttons[key] = button
        return self.buttons[key]

    def _on_clicked(self, key: str) -> None:
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
            what = WHAT[o.key].format(spec_type=o.spec_type or "n-gram")
            note = sw.notes.get(o.key, "")
            tip = f"{o.label}: " + (f"{what} {note}".rstrip() if o.available else f"not available. {o.reason}")
            cost = sw.cost_line(o.key) if o.available else ""  # before the click: a restart's seconds, the chat kept
            if cost:
                tip += f" {cost}"
            # A measured note makes it long: rich text, which Qt wraps (a plain tooltip is one line)
            button.setToolTip(f"<p>{html.escape(tip, quote=False)}</p>" if (note or cost) and o.available else tip)
        self.setEnabled(sw.enabled)
        self._button(sw.pending or sw.mode).setChecked(True)
        self.status.setText(sw.status)
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
        self.status.setText(self.switch.restart_status(now))
        permille = self.switch.progress(now)
        self.progress.setVisible(permille is not None)
        self.progress.setValue(permille or 0)

    def unavailable(self) -> list[ModeOption]:
        """The modes that cannot run with this engine and these files, each with its reason."""
        return self.switch.unavailable()

    def _show_why(self) -> None:
        self.popover.set_options(self.unavailable())
        self.popover.show_below(self.why_button)

    def offered(self) -> list[str]:
        """The modes shown, in order (an unavailable one shown is the profile's own)."""
        return [k for k in MODE_KEYS if k in self.buttons and not self.buttons[k].isHidden()]
