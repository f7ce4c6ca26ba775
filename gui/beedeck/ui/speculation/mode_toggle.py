"""Baseline | <each speculation mode this setup can run>: the view of the Qt-free
:class:`~beedeck.core.engine.speculation.mode_switch.ModeSwitch`, which holds the switching state and decides what a
click does (per request or by restart, see its module). This widget renders the switch's segments, status
and tooltips, reads the model files' GGUF headers off the GUI thread for it, and emits what it decides.

A mode that cannot run is left out, except the profile's own mode, which stays visible but disabled with
the reason as its tooltip (the user chose it, so they need to know why it cannot run). Every other mode's
reason is behind the ? button at the end (its tooltip, and a click shows it too) and in the toggle's own
tooltip.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.mode_switch import Decision, ModeSwitch, Outcome
from beedeck.core.engine.speculation.modes import (
    BASELINE,
    DFLASH,
    DSPARK,
    EAGLE3,
    LABELS,
    MODE_KEYS,
    MODEL_FREE,
    MTP,
    PER_REQUEST,
    RESTART,
    Mode,
    ModelFacts,
    ModeOption,
    uses_draft,
)
from beedeck.core.engine.speculation.standby import RESTARTED
from beedeck.core.models import gguf
from beedeck.core.models.gguf import ModelInfo
from beedeck.core.models.paircheck import model_facts
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.speculation.mode_popover import ModePopover, plain_html

WHAT: dict[str, str] = {BASELINE: "no speculation: the target decodes every token itself.",
        DFLASH: "a DFlash draft proposes a block of tokens that the target checks in one pass.",
        EAGLE3: "an EAGLE-3 draft proposes tokens from the target's hidden states.",
        DSPARK: "a DSpark draft (DFlash with a Markov head) proposes a block of tokens.",
        MTP: "the target's own MTP heads propose the next tokens: no draft file.",
        MODEL_FREE: "guesses tokens from text already in the context ({spec_type}); no extra model."}
FileKey = tuple[str, int, int]  # path, size, mtime: a re-downloaded file is read again


def _file_key(path: str) -> FileKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return path, st.st_size, st.st_mtime_ns


class ModeToggle(QWidget):
    """A segmented switch (one button per offered mode) plus a status line, over a :class:`ModeSwitch`.

    Signals: ``mode_changed(str)`` once the new mode is in effect (a :class:`Mode` value);
    ``restart_requested(LaunchSettings)`` to restart the server with.
    Call :meth:`restart_finished` / :meth:`restart_failed` when that restart ends, and
    :meth:`set_per_request` when the engine's per-request behaviour is known.
    ``last_switch_s``: seconds the last finished restart-path switch took (the status shows it rounded).
    ``runner`` reads the GGUF headers (tests: inline), ``inspect_fn`` is the header reader; ``switch``
    is the session's switch (a new one by default).
    """

    mode_changed = Signal(str)
    restart_requested = Signal(LaunchSettings)
    per_request_known = Signal()  # a check's verdict is in: the other mode may be loaded beside now

    def __init__(self, parent: QWidget | None = None, *, runner: Runner | None = None,
                 inspect_fn: Callable[[str], ModelInfo] = gguf.inspect, switch: ModeSwitch | None = None) -> None:
        super().__init__(parent)
        self.switch = switch or ModeSwitch()
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
        self.expected_s: Callable[[bool], float | None] | None = None  # (loads a draft) -> seconds, or None
        self._expected: float | None = None
        self._runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self._inspect = inspect_fn
        # path -> (the version read, its header or None when unreadable); kept up to date off the GUI
        # thread: even a stat can hang on a network mount.
        self._known: dict[str, tuple[FileKey | None, ModelInfo | None]] = {}
        self._reading: set[str] = set()
        self._local_files = True  # the profile's files are on this machine
        self._t0 = 0.0
        self.last_switch_s: float | None = None
        self._tick = QTimer(self, interval=200)
        self._tick.timeout.connect(self._on_tick)
        self.baseline_button = self._button(BASELINE)
        self.configure(None, None)

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
            button.clicked.connect(lambda _=False, key=key: self.request_mode(key))
            self.group.addButton(button)
            rank = MODE_KEYS.index(key)
            self._segments.insertWidget(sum(MODE_KEYS.index(k) < rank for k in self.buttons), button)
            self.buttons[key] = button
        return self.buttons[key]

    # -- configuration ---------------------------------------------------------------------
    def configure(self, profile: LaunchSettings | None, caps: EngineCaps | None,
                  per_request: bool | None = None, local_files: bool = True) -> None:
        """Set the launch profile, the engine's capabilities and what is known of its per-request
        switching (:meth:`ModeSwitch.configure`). ``local_files=False``: the profile's paths are on another
        machine (a server BeeDeck did not start), so no header is read here, even where a file of that
        name exists on this one.
        """
        self._local_files = local_files
        self.switch.configure(profile, caps, per_request, self._facts(profile))
        self._read_headers()
        self._render()

    def _info(self, path: str | None) -> ModelInfo | None:
        return self._known.get(path, (None, None))[1] if path and self._local_files else None

    def _facts(self, profile: LaunchSettings | None) -> ModelFacts:
        if profile is None:
            return ModelFacts()
        return model_facts(self._info(profile.target), self._info(profile.draft))

    def _read_headers(self) -> None:
        """Check the target's and the draft's files off the GUI thread, and read a header again only when
        its file changed (a re-download)."""
        profile = self.switch.profile
        if profile is None or not self._local_files:
            return
        for path in (profile.target, profile.draft):
            if not path or path in self._reading:
                continue
            self._reading.add(path)
            known = self._known.get(path, (None, None))

            def read(path: str = path, known: tuple[FileKey | None, ModelInfo | None] = known
                     ) -> tuple[FileKey | None, ModelInfo | None]:
                key = _file_key(path)
                if key is None or key == known[0]:
                    return key, known[1] if key else None
                try:
                    return key, self._inspect(path)
                except (OSError, ValueError):
                    return key, None  # unreadable: the modes are judged from the profile, the launch names it

            def done(result: tuple[FileKey | None, ModelInfo | None], path: str = path) -> None:
                self._reading.discard(path)
                if self._known.get(path) != result:
                    self._known[path] = result
                    self.switch.set_facts(self._facts(self.switch.profile))
                    self._render()

            def failed(exc: BaseException, path: str = path) -> None:
                self._reading.discard(path)

            self._runner(read, done, failed)

    def _render(self) -> None:
        """Show the switch: its segments, which is checked, its status and its tooltips."""
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
            button.setToolTip(f"{o.label}: " + (what if o.available else f"not available. {o.reason}"))
        self.setEnabled(sw.enabled)
        self._set_checked(sw.pending or sw.mode)
        self.status.setText(sw.status)
        self.setToolTip(sw.tooltip())
        self.why_button.setVisible(bool(sw.unavailable()) and sw.profile is not None)
        self.why_button.setToolTip(plain_html(sw.unavailable()))

    def unavailable(self) -> list[ModeOption]:
        """The modes that cannot run with this engine and these files, each with its reason."""
        return self.switch.unavailable()

    def _show_why(self) -> None:
        self.popover.set_options(self.unavailable())
        self.popover.show_below(self.why_button)

    def offered(self) -> list[str]:
        """The modes shown, in order (an unavailable one shown is the profile's own)."""
        return [k for k in MODE_KEYS if k in self.buttons and not self.buttons[k].isHidden()]

    def options(self) -> list[ModeOption]:
        return list(self.switch.options)

    def set_status(self, text: str) -> None:
        """A line for the status label from outside the switch (a check under way, a remote server)."""
        self.switch.status = text
        self.status.setText(text)

    def set_per_request(self, honoured: bool | None, why: str = "") -> None:
        """What a check (or a contradicting reply) showed; the status says which path is used now."""
        self.switch.set_per_request(honoured, why)
        self._render()
        self.per_request_known.emit()

    def contradicted(self, drafted: int) -> None:
        """A reply sent as baseline per request came back drafted: see :meth:`ModeSwitch.contradicted`."""
        self._carry_out(self.switch.contradicted(drafted))

    def reply_finished(self, mode: Mode | None, drafted: int) -> None:
        """A reply ended: the switch may learn the engine ignores per-request "no drafts" and restart."""
        self._carry_out(self.switch.reply_finished(mode, drafted))

    def path(self) -> str:
        return self.switch.path()

    def per_request(self) -> bool | None:
        return self.switch.per_request

    def mode(self) -> str:
        return self.switch.mode

    def request_extra(self) -> dict[str, Any]:
        """Fields to add to the next chat request."""
        return self.switch.request_extra()

    def provider(self) -> tuple[Mode | None, dict[str, Any]]:
        """For ChatPane.mode_provider: (mode, extra request fields)."""
        return self.switch.mode, self.switch.request_extra()

    def launch_settings(self, profile: LaunchSettings) -> LaunchSettings:
        """:meth:`ModeSwitch.launch_settings`: the settings to start ``profile``'s server with."""
        return self.switch.launch_settings(profile)

    # -- switching -------------------------------------------------------------------------
    def request_mode(self, key: str) -> bool:
        """Switch to mode ``key`` as a click on its segment would (per request or by restart).

        True when the switch is done or under way (or ``key`` is the mode already); False when the
        mode cannot run here (see :meth:`unavailable`), is unknown, or another switch is under way.
        """
        before = self.switch.mode
        decision = self.switch.request(key)
        self._carry_out(decision)
        if decision.outcome == Outcome.SWITCHED and decision.mode != before:
            self.mode_changed.emit(decision.mode.value)
        return decision.accepted

    def _carry_out(self, decision: Decision | None) -> None:
        if decision is not None and decision.outcome == Outcome.RESTART:
            assert decision.settings is not None
            self._t0 = time.monotonic()
            self._expected = self.expected_s(uses_draft(decision.settings)) if self.expected_s else None
            self.progress.setVisible(self._expected is not None)
            self.progress.setValue(0)
            self._tick.start()
            self._render()
            self.restart_requested.emit(decision.settings)
        else:
            self._render()

    def restart_finished(self, went: str = RESTARTED) -> None:
        """The switch's server is ready; ``went``: how the switch went (core/engine/speculation/standby.py)."""
        if self.switch.pending is None:
            return
        self._tick.stop()
        self.progress.hide()
        took = self.last_switch_s = time.monotonic() - self._t0
        mode = self.switch.restart_done(took, went)
        self._render()
        if mode is not None:
            self.mode_changed.emit(mode.value)

    def restart_failed(self) -> None:
        if self.switch.pending is None:
            return
        self._tick.stop()
        self.progress.hide()
        self.switch.restart_failed()
        self._render()

    def is_switching(self) -> bool:
        return self.switch.pending is not None

    def server_has_draft(self) -> bool:
        """Whether the running server was started with the DFlash draft (the per-request path's case)."""
        return self.switch.server_has_draft()

    def _on_tick(self) -> None:
        if self.switch.pending is not None:
            elapsed = time.monotonic() - self._t0
            self.status.setText(self.switch.restarting(elapsed, self._expected))
            if self._expected:  # never full before the server is: 95 % at the expected time, then slower
                self.progress.setValue(min(990, round(950 * elapsed / self._expected)))

    def _set_checked(self, mode: str) -> None:
        self._button(mode).setChecked(True)


__all__ = ["PER_REQUEST", "RESTART", "ModeToggle"]
