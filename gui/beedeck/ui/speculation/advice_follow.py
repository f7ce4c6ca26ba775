"""The learnt speed advice in the session (core/engine/speculation/advice.py): the speculation guard consults
it for the running setup, tune and benchmark results teach it, and, when the user opts in (Server → Follow
the fastest mode per prompt kind), the switch follows it before each message: a code prompt may go out in
DFlash and a prose one in MTP or Baseline, whichever this setup measured fastest for that kind.

A switch that needs a restart holds the message (it stays in the input box) until the server is ready
again, then releases it to be sent; a failed restart releases nothing and leaves the text where it was.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.advice import WorkloadAdvice, load_advice, setup_key
from beedeck.core.engine.speculation.spec_guard import SpecGuard, classify_prompt
from beedeck.ui.background import run_in_background
from beedeck.ui.speculation.switch_runner import SwitchRunner

Setup = Callable[[], tuple[EngineCaps | None, LaunchSettings | None]]  # the shown profile's engine caps and settings


class AdviceFollower(QObject):
    """Loads the advice (off the GUI thread), keeps the guard on the running setup's, and follows it when
    :attr:`follow` is on. ``setup()`` says what runs; ``loader`` reads the advice (tests: a slow one).

    Signals: ``said(str, int)`` a status-bar line and how long it stays (ms); ``notice_changed(str)`` the
    chat's notice while a message waits; ``held_released(str)`` the held message, to be sent now that the
    server is ready (sent only if it is still what the input box holds).
    """

    said = Signal(str, int)
    notice_changed = Signal(str)
    held_released = Signal(str)

    def __init__(self, guard: SpecGuard, switching: SwitchRunner, setup: Setup, parent: QObject | None = None, *,
                 follow: bool = False, loader: Callable[[], WorkloadAdvice] | None = None) -> None:
        super().__init__(parent)
        self.guard, self.switching, self._setup = guard, switching, setup
        self.follow = follow
        self.advice: WorkloadAdvice | None = None
        self.held: str | None = None  # a message waiting for a restart into the advised mode
        # Read off the GUI thread (a file, perhaps set aside when damaged); tune and benchmark runs then
        # teach this same object, so it is never read again.
        run_in_background(loader or load_advice, self._loaded, self._load_failed, owner=self)

    def _loaded(self, advice: WorkloadAdvice) -> None:
        self.advice = advice
        if advice.problem:
            self.said.emit(advice.problem, 20000)
        self.refresh()

    def _load_failed(self, exc: BaseException) -> None:
        self.said.emit(f"BeeDeck's learnt speed advice could not be read ({exc}): the toggle stays where you put it.",
                       20000)

    def refresh(self) -> None:
        """The guard consults the advice for the running setup (engine build, target, draft)."""
        caps, settings = self._setup()
        self.guard.use_advice(self.advice, setup_key(caps, settings) if caps is not None and settings is not None
                              else None)

    def before_send(self, text: str) -> bool:
        """ChatPane's hook: True sends now; False holds the message for a restart into the advised mode."""
        switch = self.switching.switch
        if not self.follow or not switch.enabled:
            return True
        wanted = self.guard.mode_for_prompt(text, [o.key for o in switch.options if o.available])
        if wanted is None or wanted == switch.mode:
            return True
        kind = classify_prompt(text)
        if not self.switching.request(wanted):
            return True
        note = f"{wanted.label} for this {kind} prompt: it was the fastest here for {kind}."
        if switch.pending is None:  # switched per request: nothing to wait for
            self.said.emit(note, 8000)
            return True
        self.held = text
        self.notice_changed.emit(f"Switching to {note} The message goes out when the server is ready.")
        return False

    def server_ready(self) -> None:
        if self.held is not None:
            QTimer.singleShot(0, self._release)  # after the window has given the chat its new client

    def _release(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            self.held_released.emit(held)

    def server_failed(self) -> None:
        self.held = None  # the text stays in the input box; the failure panel says why
