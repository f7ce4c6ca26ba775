"""The learnt speed advice in the window (core/engine/speculation/advice.py): the speculation guard consults it for the
running setup, tune and benchmark results teach it, and, when the user opts in (Server → Follow the
fastest mode per prompt kind), the toggle follows it before each message: a code prompt may go out in
DFlash and a prose one in MTP or Baseline, whichever this setup measured fastest for that kind.

A switch that needs a restart holds the message (it stays in the input box) until the server is ready
again, then sends it; a failed restart sends nothing and leaves the text where it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QStatusBar

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.speculation.advice import WorkloadAdvice, load_advice, setup_key
from beedeck.core.engine.speculation.modes import LABELS
from beedeck.core.engine.speculation.spec_guard import classify_prompt
from beedeck.ui.background import run_in_background
from beedeck.ui.chat.chat_pane import ChatPane
from beedeck.ui.session import Session
from beedeck.ui.speculation.mode_toggle import ModeToggle


class AdviceHost(Protocol):
    chat: ChatPane
    mode: ModeToggle

    @property
    def session(self) -> Session: ...

    def statusBar(self) -> QStatusBar: ...


class AdviceGlue(QObject):
    def __init__(self, host: AdviceHost, parent: QObject | None = None,
                 loader: Callable[[], WorkloadAdvice] | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self._load = loader or load_advice
        self.advice: WorkloadAdvice | None = None
        self._held: str | None = None  # a message waiting for a restart into the advised mode
        self._caps: EngineCaps | None = None
        self.follow_action = QAction("Follow the fastest mode per prompt kind", self, checkable=True)
        self.follow_action.setToolTip("Before each message, switch to the speculation mode this setup measured "
                                      "fastest for that kind of prompt (code, prose, structured). Learnt from "
                                      "Tune and Benchmark runs; until then nothing changes.")
        self.session = host.session
        self.follow_action.setChecked(self.session.app_settings.follow_advice)
        self.follow_action.toggled.connect(self._on_follow_toggled)
        host.chat.before_send = self.before_send
        self.session.controller.caps_known.connect(
            lambda caps: self.refresh(caps if isinstance(caps, EngineCaps) else None))
        self.session.controller.ready.connect(self._on_ready)
        self.session.controller.failed.connect(self._on_failed)
        # Read off the GUI thread (a file, perhaps set aside when damaged); tune and benchmark runs then
        # teach this same object, so it is never read again.
        run_in_background(self._load, self._loaded, self._load_failed,
                          owner=host if isinstance(host, QObject) else self)

    @classmethod
    def for_host(cls, host: AdviceHost) -> AdviceGlue:
        return cls(host, host if isinstance(host, QObject) else None)

    def _loaded(self, advice: WorkloadAdvice) -> None:
        self.advice = self.session.advice = advice
        if advice.problem:
            self.host.statusBar().showMessage(advice.problem, 20000)
        self.refresh()

    def _load_failed(self, exc: BaseException) -> None:
        self.host.statusBar().showMessage(f"BeeDeck's learnt speed advice could not be read ({exc}): the toggle "
                                          "stays where you put it.", 20000)

    def refresh(self, caps: EngineCaps | None = None) -> None:
        """The guard consults the advice for the running setup (engine build, target, draft)."""
        profile = self.session.profile
        if caps is not None:
            self._caps = caps  # the controller's latest probe: the advice may finish loading after it
        if caps is None and profile is not None:
            caps = self.session.known_caps.get(profile.engine)
            if caps is None and self._caps is not None and self._caps.path == profile.engine:
                caps = self._caps
        setup = setup_key(caps, profile.settings) if profile is not None and caps is not None else None
        self.session.guard.use_advice(self.advice, setup)

    def _on_follow_toggled(self, on: bool) -> None:
        self.session.app_settings.follow_advice = on
        problem = self.session.save_settings()
        if problem:
            self.host.statusBar().showMessage(f"The choice could not be saved ({problem}); it applies to this session.")

    def before_send(self, text: str) -> bool:
        """ChatPane's hook: True sends now; False holds the message for a restart into the advised mode."""
        if not self.follow_action.isChecked() or not self.host.mode.isEnabled():
            return True
        runnable = [o.key for o in self.host.mode.options() if o.available]
        wanted = self.session.guard.mode_for_prompt(text, runnable)
        if wanted is None or wanted == self.host.mode.mode():
            return True
        kind = classify_prompt(text)
        if not self.host.mode.request_mode(wanted):
            return True
        note = f"{LABELS.get(wanted, wanted)} for this {kind} prompt: it was the fastest here for {kind}."
        if not self.host.mode.is_switching():  # switched per request: nothing to wait for
            self.host.statusBar().showMessage(note, 8000)
            return True
        self._held = text
        self.host.chat.set_notice(f"Switching to {note} The message goes out when the server is ready.")
        return False

    def _on_ready(self, _base_url: str) -> None:
        if self._held is not None:
            QTimer.singleShot(0, self._send_held)  # after the window has given the chat its new client

    def _send_held(self) -> None:
        held, self._held = self._held, None
        if held is not None and self.host.chat.input.toPlainText().strip() == held:
            self.host.chat.send()

    def _on_failed(self, _failure: object) -> None:
        self._held = None  # the text stays in the input box; the failure panel says why
