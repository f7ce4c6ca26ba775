"""Baseline | <each speculation mode this setup can run>: which mode the next reply uses. The
conversation is kept either way.

The segments come from :func:`beedeck.core.engine.modes.available_modes`: the probed engine's spec
types and the model files' GGUF headers (read off the GUI thread) decide which of DFlash, EAGLE-3,
DSpark, MTP and model-free speculation are offered. A mode that cannot run is left out, except the
profile's own mode, which stays visible but disabled with the reason as its tooltip (the user chose
it, so they need to know why it cannot run). Every other mode's reason is behind the ? button at the
end (its tooltip, and a click shows it too) and in the toggle's own tooltip.

Two ways to switch, chosen by what this engine build was measured to do
(:mod:`beedeck.core.engine.switching`), never by its generation's name:

1. **per-request**, only between Baseline and DFlash on a server started with its DFlash draft: a
   baseline reply asks for no drafts (``"speculative.n_max": 0``). Instant. Only where a check showed
   the server honours it (BeeLlama 0.1-0.3 does; 0.4 and mainline ignore the field). The draft stays
   loaded, which on a GPU makes this baseline slower than a server without it: the benchmark
   measures that one.
2. **restart**, for every other switch: the server restarts with
   :func:`beedeck.core.engine.modes.settings_for_mode`, the same command line apart from speculation.
   Shows progress and how long it took.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QToolButton, QWidget

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.modes import (
    BASELINE,
    DFLASH,
    DRAFT_MODES,
    DSPARK,
    EAGLE3,
    LABELS,
    MODE_KEYS,
    MODEL_FREE,
    MTP,
    PER_REQUEST,
    RESTART,
    ModeOption,
    available_modes,
    mode_of,
    option,
    settings_for_mode,
    switch_path,
)
from beedeck.core.engine.switching import NO_DRAFTS
from beedeck.core.models import gguf
from beedeck.core.models.gguf import ModelInfo
from beedeck.core.models.paircheck import model_facts
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.engine.mode_popover import ModePopover, plain_html

NO_SPECULATION = "no speculation here"
WHAT = {BASELINE: "no speculation: the target decodes every token itself.",
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
    """A segmented switch (one button per offered mode) plus a status line.

    Signals: ``mode_changed(str)`` once the new mode is in effect (a mode key: "baseline", "dflash",
    "mtp", ...); ``restart_requested(object)`` with the LaunchSettings to restart the server with.
    Call :meth:`restart_finished` / :meth:`restart_failed` when that restart ends, and
    :meth:`set_per_request` when the engine's per-request behaviour is known.
    ``last_switch_s``: seconds the last finished restart-path switch took (the status shows it rounded).
    ``runner`` reads the GGUF headers (tests: inline), ``inspect_fn`` is the header reader.
    """

    mode_changed = Signal(str)
    restart_requested = Signal(object)

    def __init__(self, parent: QWidget | None = None, *, runner: Runner | None = None,
                 inspect_fn: Callable[[str], ModelInfo] = gguf.inspect) -> None:
        super().__init__(parent)
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
        self._runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self._inspect = inspect_fn
        # path -> (the version read, its header or None when unreadable); kept up to date off the GUI
        # thread: even a stat can hang on a network mount.
        self._known: dict[str, tuple[FileKey | None, ModelInfo | None]] = {}
        self._reading: set[str] = set()
        self._local_files = True  # the profile's files are on this machine
        self._mode = BASELINE  # what the next reply uses
        self._served = BASELINE  # what the server was (or is being) started with
        self._options: list[ModeOption] = [ModeOption(BASELINE, LABELS[BASELINE], True)]
        self._profile: LaunchSettings | None = None
        self._caps: EngineCaps | None = None
        self._per_request: bool | None = None  # measured: does this build honour "no drafts" per request?
        self._path_note = "Baseline restarts the server without the draft until BeeDeck has checked this engine."
        self._pending: str | None = None
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
        switching (None: not checked yet, so restart). A new profile starts in its own mode.

        Re-configuring with the same profile (new caps after a restart) keeps the chosen mode.
        ``local_files=False``: the profile's paths are on another machine (a server BeeDeck did not
        start), so no header is read here, even where a file of that name exists on this one.
        """
        self._local_files = local_files
        same_profile = profile is not None and profile is self._profile
        if caps is None or self._caps is None or caps.path != self._caps.path:
            self._per_request = per_request
        elif per_request is not None:
            self._per_request = per_request
        self._profile, self._caps = profile, caps
        if not same_profile:
            self._mode = self._served = mode_of(profile) if profile is not None else BASELINE
        self._read_headers()
        self._refresh()
        if not same_profile or self.status.text() == NO_SPECULATION:  # the probe may have brought modes
            self.status.setText("" if self.isEnabled() else NO_SPECULATION)

    def _info(self, path: str | None) -> ModelInfo | None:
        return self._known.get(path, (None, None))[1] if path and self._local_files else None

    def _read_headers(self) -> None:
        """Check the target's and the draft's files off the GUI thread, and read a header again only when
        its file changed (a re-download)."""
        if self._profile is None or not self._local_files:
            return
        for path in (self._profile.target, self._profile.draft):
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
                    self._refresh()

            def failed(exc: BaseException, path: str = path) -> None:
                self._reading.discard(path)

            self._runner(read, done, failed)

    def _refresh(self) -> None:
        """Recompute the offered modes and show them."""
        profile = self._profile
        if profile is None:
            self._options = [ModeOption(BASELINE, LABELS[BASELINE], True)]
        else:
            facts = model_facts(self._info(profile.target), self._info(profile.draft))
            self._options = available_modes(self._caps, profile, facts)
        own = mode_of(profile) if profile is not None else BASELINE
        for o in self._options:
            if not (o.available or o.key in (own, self._mode, self._pending)):
                if o.key in self.buttons:
                    self.buttons[o.key].setHidden(True)
                continue
            button = self._button(o.key)
            button.setHidden(False)
            button.setText(o.label)
            button.setEnabled(o.available and self._pending is None)
            what = WHAT[o.key].format(spec_type=o.spec_type or "n-gram")
            button.setToolTip(f"{o.label}: " + (what if o.available else f"not available. {o.reason}"))
        self.setEnabled(sum(o.available for o in self._options) > 1)
        self._set_checked(self._pending or self._mode)
        self._update_tooltip()

    def unavailable(self) -> list[ModeOption]:
        """The modes that cannot run with this engine and these files, each with its reason."""
        return [o for o in self._options if not o.available]

    def _show_why(self) -> None:
        self.popover.set_options(self.unavailable())
        self.popover.show_below(self.why_button)

    def offered(self) -> list[str]:
        """The modes shown, in order (an unavailable one shown is the profile's own)."""
        return [k for k in MODE_KEYS if k in self.buttons and not self.buttons[k].isHidden()]

    def options(self) -> list[ModeOption]:
        return list(self._options)

    def set_per_request(self, honoured: bool | None, why: str = "") -> None:
        """What a check (or a contradicting reply) showed; the status says which path is used now."""
        self._per_request = honoured
        if why:
            self._path_note = why[0].upper() + why[1:] + "."
        self._update_tooltip()
        if self._dflash_profile() and self._pending is None:
            how = ("per request: the draft stays loaded, no restart" if self.path() == PER_REQUEST
                   else "by restarting the server without the draft")
            self.status.setText(f"Baseline switches {how}")

    def contradicted(self, drafted: int) -> None:
        """A reply sent as baseline per request came back with ``drafted`` draft tokens: this engine
        ignores the field after all. Switch to the restart path, and restart now if in baseline."""
        self.set_per_request(False, f"this engine drafted {drafted} tokens in a reply that asked for none, so "
                                    "Baseline restarts the server without the draft")
        if self._mode == BASELINE and self._served != BASELINE and self._profile is not None \
                and self._pending is None:
            self._restart(BASELINE)

    def _dflash_profile(self) -> bool:
        """A DFlash profile on an engine that runs it: the only case with a per-request path."""
        dflash = option(self._options, DFLASH)
        return self._profile is not None and mode_of(self._profile) == DFLASH and bool(dflash and dflash.available)

    def _update_tooltip(self) -> None:
        usable = [o for o in self._options if o.available]
        if len(usable) > 1:
            lines = [" | ".join(o.label for o in usable) + ": the mode of the next reply."]
            if self._dflash_profile():
                lines.append(self._path_note)
        else:
            lines = ["No speculation mode can run with this setup, so replies use Baseline."]
        others = self.unavailable()
        if others:
            lines += ["", "Not available here:", *(f"• {o.label}: {o.reason}" for o in others)]
        self.setToolTip("\n".join(lines))
        self.why_button.setVisible(bool(others) and self._profile is not None)
        self.why_button.setToolTip(plain_html(others))

    def path(self) -> str:
        return switch_path(self._per_request)

    def per_request(self) -> bool | None:
        return self._per_request

    def mode(self) -> str:
        return self._mode

    def request_extra(self) -> dict[str, Any]:
        """Fields to add to the next chat request."""
        if self._mode == BASELINE and self._served == DFLASH and self.path() == PER_REQUEST:
            return dict(NO_DRAFTS)
        return {}

    def provider(self) -> tuple[str, dict[str, Any]]:
        """For ChatPane.mode_provider: (mode, extra request fields)."""
        return self._mode, self.request_extra()

    def launch_settings(self, profile: LaunchSettings) -> LaunchSettings:
        """The settings to start ``profile``'s server with in the toggle's mode, remembered as what the
        server runs. A per-request Baseline keeps the DFlash server (its replies ask for no drafts)."""
        if profile is not self._profile:
            return profile  # not the profile the toggle shows: start it as saved
        keep_draft = self._mode == BASELINE and self.path() == PER_REQUEST and self._dflash_profile()
        self._served = DFLASH if keep_draft else self._mode
        if self._served == mode_of(profile):
            return profile  # its own mode: exactly as saved
        return settings_for_mode(profile, self._served, self._caps)

    # -- switching -------------------------------------------------------------------------
    def request_mode(self, key: str) -> bool:
        """Switch to mode ``key`` as a click on its segment would (per request or by restart).

        True when the switch is done or under way (or ``key`` is the mode already); False when the
        mode cannot run here (see :meth:`unavailable`), is unknown, or another switch is under way.
        """
        chosen = option(self._options, key)
        if key == self._mode and self._pending is None:
            self._set_checked(key)
            return True
        if self._pending is not None or chosen is None or not chosen.available:
            self._set_checked(self._pending or self._mode)
            return False
        per_request = (self.path() == PER_REQUEST and self._served == DFLASH and key in (BASELINE, DFLASH))
        if per_request or self._profile is None:
            self._mode = key
            self._set_checked(key)
            self.status.setText(
                f"{LABELS[key]}: next reply "
                + ("asks for no drafts (per request; the draft stays loaded)" if key == BASELINE
                   else "uses the draft")
            )
            self.mode_changed.emit(key)
            return True
        self._restart(key)
        return True

    def _restart(self, mode: str) -> None:
        assert self._profile is not None
        self._pending = mode
        self._t0 = time.monotonic()
        for button in self.buttons.values():
            button.setEnabled(False)
        self._on_tick()
        self._tick.start()
        self.restart_requested.emit(settings_for_mode(self._profile, mode, self._caps))

    def _how(self, mode: str, before: str) -> str:
        if mode == BASELINE:
            return "without the draft" if before in DRAFT_MODES else "without speculation"
        if mode in DRAFT_MODES:
            return "with the draft"
        if mode == MTP:
            return "with the target's MTP heads"
        chosen = option(self._options, mode)
        return f"with {chosen.spec_type if chosen and chosen.spec_type else 'n-gram'} speculation"

    def restart_finished(self) -> None:
        if self._pending is None:
            return
        mode, self._pending = self._pending, None
        before, self._served = self._served, mode
        self._tick.stop()
        took = self.last_switch_s = time.monotonic() - self._t0
        self._mode = mode
        self._refresh()
        label = next((o.label for o in self._options if o.key == mode), LABELS[mode])
        self.status.setText(f"{label}: restarted the server {self._how(mode, before)} in {took:.1f} s")
        self.mode_changed.emit(mode)

    def restart_failed(self) -> None:
        if self._pending is None:
            return
        self._pending = None
        self._tick.stop()
        self._refresh()
        self.status.setText("switch failed: see the server log")

    def is_switching(self) -> bool:
        return self._pending is not None

    def server_has_draft(self) -> bool:
        """Whether the running server was started with the DFlash draft (the per-request path's case)."""
        return self._served == DFLASH

    def _on_tick(self) -> None:
        if self._pending is not None:
            how = self._how(self._pending, self._served)
            self.status.setText(f"restarting {how}… {time.monotonic() - self._t0:.1f} s")

    def _set_checked(self, mode: str) -> None:
        self._button(mode).setChecked(True)


__all__ = ["PER_REQUEST", "RESTART", "ModeToggle"]
