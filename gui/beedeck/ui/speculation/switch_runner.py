"""The session's half of the mode switch: the Qt-free
:class:`~beedeck.core.engine.speculation.mode_switch.ModeSwitch` decides, this carries it out.

A click (or the advice's pick, or the guard banner's) goes through :meth:`SwitchRunner.request`: a switch
per request is in effect for the next reply (:meth:`provider` gives the chat its mode and request fields);
a restart goes to the serving (``core/serving``), timed against what such a switch took here before, and the
other mode's server is offered to the serving to load beside the running one as soon as the restart path is
known (the serving decides whether it may: core/engine/speculation/standby.py). The model files' GGUF headers
are read off the GUI thread (:class:`~beedeck.core.models.header_cache.HeaderCache`), and the per-request
checks run in a :class:`SwitchChecker`. The session feeds it the server's events in order; views render
:attr:`switch` on ``changed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.remote import NO_RESTART, RemoteInfo
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.mode_switch import Decision, ModeSwitch, Outcome
from beedeck.core.engine.speculation.modes import settings_for_mode, uses_draft
from beedeck.core.engine.speculation.standby import RESTARTED
from beedeck.core.engine.speculation.switch_cost import SwitchForecast
from beedeck.core.engine.speculation.switching import PerRequestMemory
from beedeck.core.models.header_cache import HeaderCache, Read
from beedeck.core.serving import Serving
from beedeck.core.starter import mode_notes
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.speculation.switch_checker import SwitchChecker

NEWS_MS = 20_000  # how long the toolbar reports what a switch did ("restarted … in 2.1 s"), then its line goes


class SwitchRunner(QObject):
    """Carries out :attr:`switch`'s decisions with the app's server (``serving``).

    Signals: ``changed()`` whenever the switch's state changed (views render it again); ``mode_changed(Mode)``
    once a new mode is in effect; ``restarting(LaunchSettings)`` just before a switch restarts the server with
    these settings (a reply in flight stops). A report of what a switch did (the switch's news) goes after
    :attr:`news_ms`, or when the server stops.
    ``client_factory(url, api_key)`` makes the checks' clients; ``runner`` runs the header reads and checks
    (tests: inline); ``clock`` times a restart.
    """

    changed = Signal()
    mode_changed = Signal(Mode)
    restarting = Signal(LaunchSettings)

    def __init__(self, switch: ModeSwitch, serving: Serving, memory: PerRequestMemory,
                 client_factory: Callable[[str, str | None], Any], parent: QObject | None = None, *,
                 runner: Runner | None = None, headers: HeaderCache | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self.switch, self.serving, self.memory = switch, serving, memory
        self._client = client_factory
        self._runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self.headers = headers or HeaderCache()
        self.clock = clock
        self.checker = SwitchChecker(switch, memory, self, runner=self._runner)
        self.checker.verdict_known.connect(self._on_verdict_known)
        self.checker.remote_checked.connect(self.changed)
        self.checker.remote_check_failed.connect(self.changed)
        self.news_ms = NEWS_MS
        self._news = ""  # the report the news timer runs for
        self._news_timer = QTimer(self, singleShot=True)
        self._news_timer.timeout.connect(self._on_news_old)
        self.changed.connect(self._on_changed)
        self._tokens = 0  # the conversation on the server after the last reply
        self._prefill: tuple[int, float] | None = None  # this target's longest prefill seen: (tokens, tokens/s)

    # -- configuration ---------------------------------------------------------------------
    def configure(self, settings: LaunchSettings | None, caps: EngineCaps | None, per_request: bool | None = None,
                  local_files: bool = True) -> None:
        """The shown profile's settings, its engine's capabilities and what is remembered of the build's
        per-request switching (:meth:`ModeSwitch.configure`). ``local_files=False``: a server BeeDeck did not
        start, whose paths are not read here. No file is touched on this thread: the headers are read by the
        runner."""
        if settings is not self.switch.profile:
            self._tokens, self._prefill = 0, None
        self.switch.configure(settings, caps, per_request, self.headers.facts(settings), local_files)
        self.switch.notes = mode_notes(settings) if settings is not None else {}
        self._update_forecast()
        self._read_headers()
        self.changed.emit()

    def _read_headers(self) -> None:
        """Check the target's and the draft's files off the GUI thread; a header is read again only when its
        file changed (a re-download)."""
        if not self.switch.local_files:
            return
        for path in self.headers.to_read(self.switch.profile):
            def done(result: Read, path: str = path) -> None:
                if self.headers.store(path, result) and self.switch.local_files:
                    self.switch.set_facts(self.headers.facts(self.switch.profile))
                    self.changed.emit()

            def failed(_exc: BaseException, path: str = path) -> None:
                self.headers.forget(path)

            self._runner(self.headers.reader(path), done, failed)

    # -- the chat ----------------------------------------------------------------------------
    def provider(self) -> tuple[Mode | None, dict[str, Any]]:
        """For ChatPane.mode_provider: the next reply's mode and its extra request fields."""
        return self.switch.mode, self.switch.request_extra()

    def launch_settings(self, settings: LaunchSettings) -> LaunchSettings:
        """:meth:`ModeSwitch.launch_settings`: what to start ``settings``' server with (in the mode shown)."""
        return self.switch.launch_settings(settings)

    def reply_finished(self, facts: ReplyFacts) -> None:
        """A reply ended: a "baseline" reply that drafted may send the switch to restarts; the conversation's
        length and the prefill rate feed the switch's forecast."""
        self._tokens = facts.context_tokens or self._tokens
        if facts.prompt_n and facts.prompt_tps and (self._prefill is None or facts.prompt_n > self._prefill[0]):
            self._prefill = (facts.prompt_n, facts.prompt_tps)
        if said := self.serving.reply_read(facts.prompt_n, facts.cache_n):  # the cache kept at a switch, unused
            self.switch.tell(said)
        self._update_forecast()
        self._carry_out(self.checker.reply_finished(self.serving.caps, facts))

    def _update_forecast(self) -> None:
        """What a switch by restart costs here, said before the click (:class:`SwitchForecast`): the starts this
        machine measured, whether the conversation's cache comes along, and what re-reading it would cost."""
        serving, profile = self.serving, self.switch.profile
        if profile is None or not serving.is_running() or serving.is_remote():
            self.switch.forecast = None
            return
        keeps: dict[Mode, str] = {}
        carry_s = 0.0
        for o in self.switch.options:
            if o.available and o.key != self.switch.mode:
                keeps[o.key], took = serving.keeps_conversation(settings_for_mode(profile, o.key, serving.caps))
                carry_s = max(carry_s, took)
        kept = serving.kept
        self.switch.forecast = SwitchForecast(
            {True: serving.times.expected(True), False: serving.times.expected(False)},
            uses_draft(kept.asked) if kept is not None else None, keeps, carry_s, self._tokens,
            self._prefill[1] if self._prefill else None)

    # -- switching -------------------------------------------------------------------------
    def request(self, key: Mode) -> bool:
        """Switch to mode ``key`` as a click on its segment would (per request or by restart).

        True when the switch is done or under way (or ``key`` is the mode already); False when the mode
        cannot run here or another switch is under way."""
        before = self.switch.mode
        decision = self.switch.request(key)
        self._carry_out(decision)
        if decision.outcome == Outcome.SWITCHED and decision.mode != before:
            self.mode_changed.emit(decision.mode)
        return decision.accepted

    def _carry_out(self, decision: Decision | None) -> None:
        if decision is None or decision.outcome != Outcome.RESTART:
            self.changed.emit()
            return
        assert decision.settings is not None
        self.switch.timed(self.clock(), self.serving.expected_switch_s(uses_draft(decision.settings)))
        self.changed.emit()
        self.restarting.emit(decision.settings)
        self.serving.restart(decision.settings)

    def offers(self, mode: Mode) -> bool:
        """Whether the guard's banner may suggest ``mode`` now: the switch is on, elsewhere, and it runs here."""
        chosen = next((o for o in self.switch.options if o.key == mode), None)
        return self.switch.enabled and self.switch.mode != mode and chosen is not None and chosen.available

    # -- the server's events, fed in order by the session ------------------------------------
    def server_ready(self, base_url: str, api_key: str | None) -> None:
        """The app's server is ready: a restart under way is done, its build may need a check, and the
        other mode may be loaded beside it now."""
        if self.switch.pending is not None:
            mode = self.switch.restart_done(self.switch.elapsed(self.clock()), self.serving.last_switch or RESTARTED,
                                            self.serving.restart_note)
            if mode is not None:
                self.mode_changed.emit(mode)
        if not self.serving.is_remote():
            self.checker.server_ready(self.serving.caps, lambda: self._client(base_url, api_key))
        self._update_forecast()
        self.changed.emit()
        self._keep_other_mode_loaded()

    def server_failed(self, failure: ServerFailure) -> None:
        """A start or a restart failed (or a restart was refused: a server BeeDeck did not start)."""
        self.switch.restart_failed()
        if failure.code == f"remote:{NO_RESTART}":  # RemoteError's code (as_failure keeps it)
            self.switch.restart_refused()
        self.changed.emit()

    def attached(self, info: RemoteInfo, api_key: str | None) -> None:
        self.checker.attached(info, self._client(info.url, api_key))
        self.changed.emit()

    def state_changed(self, state: ServerState) -> None:
        if not state.running and self.switch.attached is not None:
            self.switch.detach()  # disconnected, or it stopped answering
        if state == ServerState.STOPPED and self.switch.news:
            self.switch.server_stopped()  # "both stay loaded" is not true of a stopped server
            self.changed.emit()

    def _on_changed(self) -> None:
        """A report of what a switch did goes after :attr:`news_ms` (a new report starts the time again; other
        changes leave it be)."""
        if not self.switch.news:
            self._news_timer.stop()
        elif self.switch.status != self._news or not self._news_timer.isActive():
            self._news_timer.start(self.news_ms)
        self._news = self.switch.status if self.switch.news else ""

    def _on_news_old(self) -> None:
        if self.switch.news:
            self.switch.clear_news()
            self.changed.emit()

    def _on_verdict_known(self) -> None:
        self.changed.emit()
        self._keep_other_mode_loaded()

    def _keep_other_mode_loaded(self) -> None:
        """Offer the other mode's settings (the switch's, once the restart path is known) to be loaded beside the
        running server (:meth:`Serving.preload` decides: standby on, memory free): the first switch then loads
        nothing either."""
        other = self.switch.standby_settings()
        if other is not None:
            self.serving.preload(other)
