"""How Baseline switches on this engine: checked once per build, then remembered.

The switch decides when (:meth:`ModeSwitch.server_ready`: a server started with its DFlash draft whose
build is not known yet; :meth:`ModeSwitch.attach`: a server BeeDeck did not start that may switch per
request) and what a verdict changes. This runs the check itself, two short replies off the GUI thread
(:func:`check_per_request`), hands the verdict to the switch, and keeps it per engine build
(:class:`PerRequestMemory`), including a verdict a reply contradicts.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.speculation.mode_switch import Decision, ModeSwitch
from beedeck.core.engine.speculation.switching import (
    ChatClient,
    PerRequestMemory,
    PerRequestVerdict,
    check_per_request,
)
from beedeck.ui.background import Runner, run_in_background


class SwitchChecker(QObject):
    """Runs the switch's per-request checks. ``runner`` runs a check (tests: inline).

    Signals: ``verdict_known()`` once a check told the switch how this build switches;
    ``remote_checked(PerRequestVerdict)`` / ``remote_check_failed(str)`` when a check of a server BeeDeck
    did not start ended.
    """

    verdict_known = Signal()
    remote_checked = Signal(PerRequestVerdict)
    remote_check_failed = Signal(str)

    def __init__(self, switch: ModeSwitch, memory: PerRequestMemory, parent: QObject | None = None, *,
                 runner: Runner | None = None) -> None:
        super().__init__(parent)
        self.switch, self.memory = switch, memory
        self.runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))

    def server_ready(self, caps: EngineCaps | None, client: Callable[[], ChatClient]) -> None:
        """A server BeeDeck started is ready: checked here (with ``client()``) when the switch asks for it (a
        remembered verdict is applied by the switch at once)."""
        if caps is None or not self.switch.server_ready(caps, self.memory.get):
            return
        chat = client()

        def done(verdict: PerRequestVerdict) -> None:
            self.memory.remember(caps, verdict)
            self.switch.check_done(verdict)
            self.verdict_known.emit()

        def failed(exc: BaseException) -> None:
            self.switch.check_failed(str(exc))
            self.verdict_known.emit()

        self.runner(lambda: check_per_request(chat), done, failed)

    def attached(self, info: RemoteInfo, client: ChatClient) -> None:
        """A server BeeDeck did not start is attached: checked when the switch may switch it per request."""
        if not self.switch.attach(info):
            return

        def done(verdict: PerRequestVerdict) -> None:
            self.switch.remote_checked(info, verdict)
            self.remote_checked.emit(verdict)

        def failed(exc: BaseException) -> None:
            self.switch.remote_check_failed(info, str(exc))
            self.remote_check_failed.emit(str(exc))

        self.runner(lambda: check_per_request(client), done, failed)

    def reply_finished(self, caps: EngineCaps | None, facts: ReplyFacts) -> Decision | None:
        """A reply ended: a contradicted verdict is remembered for this build; returns what the switch decided
        (a restart into a true Baseline, or None)."""
        if caps is not None and self.switch.contradicts(facts.mode, facts.draft_n):
            self.memory.contradicted(caps, facts.draft_n)
        return self.switch.reply_finished(facts.mode, facts.draft_n)
