"""How the Baseline | DFlash toggle switches on this engine: checked once per build, then remembered.

When a server started with its draft becomes ready and nothing is known of its build, two short
replies tell whether it honours a per-request "no drafts" (:func:`check_per_request`, off the GUI
thread); the toggle then uses the per-request path or keeps restarting. A baseline reply that comes
back drafted contradicts a remembered "yes": the build is marked as ignoring it and the toggle
restarts the server without the draft.
"""

from __future__ import annotations

from PySide6.QtCore import QObject

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.speculation.switching import (
    ChatClient,
    PerRequestMemory,
    PerRequestVerdict,
    check_per_request,
)
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.speculation.mode_toggle import ModeToggle


class SwitchChecker(QObject):
    """Feeds the toggle what this engine build does. ``runner`` runs the check (tests: inline)."""

    def __init__(self, toggle: ModeToggle, parent: QObject | None = None, *,
                 memory: PerRequestMemory | None = None, runner: Runner | None = None) -> None:
        super().__init__(parent)
        self.toggle = toggle
        self.memory = memory or PerRequestMemory()
        self.runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self.checked: set[str] = set()  # engines checked this session (an inconclusive check is not kept)

    def server_ready(self, caps: EngineCaps | None, client: ChatClient) -> None:
        """A server is ready: check it if it runs with its draft and its build is not known yet."""
        if caps is None or not self.toggle.server_has_draft() or caps.path in self.checked:
            return
        known = self.memory.get(caps)
        if known is not None:
            self.toggle.set_per_request(known, "checked earlier on this engine build: it " + (
                "honours a per-request 'no drafts'" if known else "ignores a per-request 'no drafts'"))
            return
        self.checked.add(caps.path)
        self.toggle.set_status("checking how this engine switches to Baseline…")

        def done(verdict: PerRequestVerdict) -> None:
            self.memory.remember(caps, verdict)
            self.toggle.set_per_request(verdict.honoured, verdict.describe())

        def failed(exc: BaseException) -> None:
            self.toggle.set_per_request(None, f"the check failed ({exc}), so Baseline restarts the server")

        self.runner(lambda: check_per_request(client), done, failed)

    def reply_finished(self, caps: EngineCaps | None, facts: ReplyFacts) -> None:
        """A reply ended: the switch decides (ModeSwitch.reply_finished) whether it contradicts the verdict;
        a contradiction is remembered for this engine build."""
        before = self.toggle.per_request()
        self.toggle.reply_finished(facts.mode, facts.draft_n)
        if before and self.toggle.per_request() is False and caps is not None:
            self.memory.contradicted(caps, facts.draft_n)
