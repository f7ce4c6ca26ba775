"""Baseline | DFlash: which mode the next reply uses. The conversation is kept either way.

Two paths, chosen by what this engine build was measured to do (:mod:`beedeck.core.engine.switching`),
never by its generation's name:

1. **per-request**: the server keeps its draft and a baseline reply asks for no drafts
   (``"speculative.n_max": 0``). Instant. Only where a check showed the server honours it (BeeLlama
   0.1-0.3 does; 0.4 and mainline ignore the field). The draft stays loaded, which on a GPU makes
   this baseline slower than a server without the draft: the benchmark measures that one.
2. **restart**: the server is restarted with or without the draft, same command line otherwise.
   Shows progress and how long it took. The default until a check says otherwise, and where a reply
   contradicts the check (a "baseline" reply that drafted).

Disabled, with a tooltip saying why, when no draft is configured.
"""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QToolButton, QWidget

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.modes import PER_REQUEST, RESTART, has_draft, settings_for_mode, switch_path
from beedeck.core.engine.switching import NO_DRAFTS


class ModeToggle(QWidget):
    """A two-segment switch plus a status line.

    Signals: ``mode_changed(str)`` once the new mode is in effect ("baseline"/"dflash");
    ``restart_requested(object)`` with the LaunchSettings to restart the server with (path 2).
    Call :meth:`restart_finished` / :meth:`restart_failed` when that restart ends, and
    :meth:`set_per_request` when the engine's per-request behaviour is known.
    ``last_switch_s``: seconds the last finished restart-path switch took (the status shows it rounded).
    """

    mode_changed = Signal(str)
    restart_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.baseline_button = QToolButton()
        self.dflash_button = QToolButton()
        for button, text in ((self.baseline_button, "Baseline"), (self.dflash_button, "DFlash")):
            button.setText(text)
            button.setCheckable(True)
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.group.addButton(self.baseline_button)
        self.group.addButton(self.dflash_button)
        self.baseline_button.setChecked(True)
        self.baseline_button.clicked.connect(lambda: self.request_mode("baseline"))
        self.dflash_button.clicked.connect(lambda: self.request_mode("dflash"))
        self.status = QLabel()
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.baseline_button)
        layout.addWidget(self.dflash_button)
        layout.addSpacing(8)
        layout.addWidget(self.status)
        self._mode = "baseline"
        self._profile: LaunchSettings | None = None
        self._caps: EngineCaps | None = None
        self._per_request: bool | None = None  # measured: does this build honour "no drafts" per request?
        self._path_note = "Baseline restarts the server without the draft until BeeDeck has checked this engine."
        self._pending: str | None = None
        self._t0 = 0.0
        self.last_switch_s: float | None = None
        self._tick = QTimer(self, interval=200)
        self._tick.timeout.connect(self._on_tick)
        self.configure(None, None)

    # -- configuration ---------------------------------------------------------------------
    def configure(self, profile: LaunchSettings | None, caps: EngineCaps | None,
                  per_request: bool | None = None) -> None:
        """Set the launch profile (with its draft, if any), the engine's capabilities and what is known
        of its per-request switching (None: not checked yet, so restart).

        Re-configuring with the same profile (new caps after a restart) keeps the chosen mode.
        """
        same_profile = profile is not None and profile is self._profile
        if caps is None or self._caps is None or caps.path != self._caps.path:
            self._per_request = per_request
        elif per_request is not None:
            self._per_request = per_request
        self._profile, self._caps = profile, caps
        enabled = has_draft(profile)
        self.setEnabled(enabled)
        if not enabled:
            self._set_checked("baseline")
            self._mode = "baseline"
        else:
            if not same_profile:
                self._mode = "dflash"
            self._set_checked(self._pending or self._mode)
        self._update_tooltip()
        if not same_profile:
            self.status.setText("" if enabled else "no draft configured")

    def set_per_request(self, honoured: bool | None, why: str = "") -> None:
        """What a check (or a contradicting reply) showed; the status says which path is used now."""
        self._per_request = honoured
        if why:
            self._path_note = why[0].upper() + why[1:] + "."
        self._update_tooltip()
        if has_draft(self._profile) and self._pending is None:
            how = ("per request: the draft stays loaded, no restart" if self.path() == PER_REQUEST
                   else "by restarting the server without the draft")
            self.status.setText(f"Baseline switches {how}")

    def contradicted(self, drafted: int) -> None:
        """A reply sent as baseline per request came back with ``drafted`` draft tokens: this engine
        ignores the field after all. Switch to the restart path, and restart now if in baseline."""
        self.set_per_request(False, f"this engine drafted {drafted} tokens in a reply that asked for none, so "
                                    "Baseline restarts the server without the draft")
        if self._mode == "baseline" and self._profile is not None and self._pending is None:
            self._mode = "dflash"  # what the server really runs; the restart below makes it baseline
            self.request_mode("baseline")

    def _update_tooltip(self) -> None:
        if not has_draft(self._profile):
            tip = "No DFlash draft model is configured for this profile: choose one in Settings to compare."
        else:
            tip = "Baseline vs DFlash for the next reply. " + self._path_note
        for w in (self, self.baseline_button, self.dflash_button):
            w.setToolTip(tip)

    def path(self) -> str:
        return switch_path(self._per_request)

    def per_request(self) -> bool | None:
        return self._per_request

    def mode(self) -> str:
        return self._mode

    def request_extra(self) -> dict[str, Any]:
        """Fields to add to the next chat request."""
        if self._mode == "baseline" and has_draft(self._profile) and self.path() == PER_REQUEST:
            return dict(NO_DRAFTS)
        return {}

    def provider(self) -> tuple[str, dict[str, Any]]:
        """For ChatPane.mode_provider: (mode, extra request fields)."""
        return self._mode, self.request_extra()

    # -- switching -------------------------------------------------------------------------
    def request_mode(self, mode: str) -> None:
        if mode == self._mode or self._pending is not None:
            self._set_checked(self._pending or self._mode)
            return
        if self.path() == PER_REQUEST or self._profile is None:
            self._mode = mode
            self.status.setText(
                f"{self._label(mode)}: next reply "
                + ("asks for no drafts (per request; the draft stays loaded)" if mode == "baseline"
                   else "uses the draft")
            )
            self.mode_changed.emit(mode)
            return
        self._pending = mode
        self._t0 = time.monotonic()
        self.baseline_button.setEnabled(False)
        self.dflash_button.setEnabled(False)
        self._on_tick()
        self._tick.start()
        self.restart_requested.emit(settings_for_mode(self._profile, mode))

    def restart_finished(self) -> None:
        if self._pending is None:
            return
        mode, self._pending = self._pending, None
        self._tick.stop()
        took = self.last_switch_s = time.monotonic() - self._t0
        self._mode = mode
        self._set_checked(mode)
        self._enable_buttons()
        without = "without" if mode == "baseline" else "with"
        self.status.setText(f"{self._label(mode)}: restarted the server {without} the draft in {took:.1f} s")
        self.mode_changed.emit(mode)

    def restart_failed(self) -> None:
        if self._pending is None:
            return
        self._pending = None
        self._tick.stop()
        self._enable_buttons()
        self._set_checked(self._mode)
        self.status.setText("switch failed: see the server log")

    def is_switching(self) -> bool:
        return self._pending is not None

    def server_has_draft(self) -> bool:
        """Whether the running server was started with the draft (it always is on the per-request path)."""
        return has_draft(self._profile) and (self._mode == "dflash" or self.path() == PER_REQUEST)

    def _on_tick(self) -> None:
        if self._pending is not None:
            without = "without" if self._pending == "baseline" else "with"
            self.status.setText(f"restarting {without} the draft… {time.monotonic() - self._t0:.1f} s")

    def _enable_buttons(self) -> None:
        self.baseline_button.setEnabled(True)
        self.dflash_button.setEnabled(True)

    def _set_checked(self, mode: str) -> None:
        (self.dflash_button if mode == "dflash" else self.baseline_button).setChecked(True)

    @staticmethod
    def _label(mode: str) -> str:
        return "DFlash" if mode == "dflash" else "Baseline"


__all__ = ["PER_REQUEST", "RESTART", "ModeToggle"]
