"""The Baseline | <modes> switch as rules, without Qt: which mode the next reply uses, what the server runs,
and what a click does. The toolbar's toggle (``ui/speculation/mode_toggle.py``) renders it and forwards clicks.

Inputs: :meth:`ModeSwitch.configure` (profile, engine caps, what is known of per-request switching, what
the GGUF headers say), :meth:`ModeSwitch.request` (a click), :meth:`ModeSwitch.restart_done` /
:meth:`ModeSwitch.restart_failed`, :meth:`ModeSwitch.set_per_request` (a check's verdict) and
:meth:`ModeSwitch.reply_finished` (a reply's facts). Outputs: a :class:`Decision` (switched with these
request extras, restart with these settings, or refused with a reason) and :attr:`ModeSwitch.status`.

Two ways to switch, chosen by what this engine build was measured to do
(:mod:`beedeck.core.engine.speculation.switching`), never by its generation's name:

1. **per request**, only between Baseline and DFlash on a server started with its DFlash draft: a
   baseline reply asks for no drafts (:data:`~beedeck.core.engine.speculation.switching.NO_DRAFTS`). Instant. Only
   where a check showed the server honours it (BeeLlama 0.1-0.3 does; 0.4 and mainline ignore the field).
2. **restart**, for every other switch: :func:`~beedeck.core.engine.speculation.modes.settings_for_mode`, the same
   command line apart from speculation.

An engine that ignores the per-request field (a check said so, or a "baseline" reply came back drafted:
:meth:`ModeSwitch.reply_finished`) gets the restart path; a baseline reply drafting on a server with the
draft restarts it without the draft at once. When to check an engine build is the switch's rule too
(:meth:`ModeSwitch.server_ready`); the session runs the check off the GUI thread and reports its verdict.

A server BeeDeck did not start (:meth:`ModeSwitch.attach`) is switched per request only where a check
proves it honours "no drafts"; otherwise the switch is *held* on what the server runs, with the reason
(:mod:`beedeck.core.engine.speculation.remote_switch`). Only the switch writes its status line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.speculation.modes import (
    PER_REQUEST,
    ModelFacts,
    ModeOption,
    available_modes,
    option,
    settings_for_mode,
    switch_path,
    uses_draft,
)
from beedeck.core.engine.speculation.remote_switch import (
    CHECKING_REASON,
    CHECKING_STATUS,
    HELD_STATUS,
    NO_RESTART_REASON,
    OFF_STATUS,
    check_failed_reason,
    served_settings,
    toggle_reason,
    verdict_reason,
)
from beedeck.core.engine.speculation.standby import LOADED_BESIDE, RESTARTED, SWAPPED
from beedeck.core.engine.speculation.switch_cost import SwitchForecast
from beedeck.core.engine.speculation.switching import NO_DRAFTS, PerRequestVerdict

NO_SPECULATION = "no speculation here"
FIRST_NOTE = "Baseline restarts the server without the draft until BeeDeck has checked this engine."
CHECKING = "checking how this engine switches to Baseline…"


class Outcome(StrEnum):
    SWITCHED = "switched"  # in effect for the next reply (per request, or nothing was running)
    RESTART = "restart"  # restart the server with Decision.settings; restart_done / restart_failed follow
    REFUSED = "refused"  # nothing changes: Decision.reason says why


@dataclass(frozen=True)
class Decision:
    """What a click (or a contradicting reply) asks of the window."""

    outcome: Outcome
    mode: Mode
    settings: LaunchSettings | None = None  # with RESTART
    extra: dict[str, Any] = field(default_factory=dict)  # with SWITCHED: the next request's extra fields
    reason: str = ""  # with REFUSED

    @property
    def accepted(self) -> bool:
        return self.outcome != Outcome.REFUSED


class ModeSwitch:
    """The switching state: the mode of the next reply, what the server was started with, a restart under
    way (and when it began), what this engine build does with a per-request "no drafts", and, on a server
    BeeDeck did not start, why the switch is held (:attr:`held`)."""

    def __init__(self) -> None:
        self.profile: LaunchSettings | None = None
        self.caps: EngineCaps | None = None
        self.facts = ModelFacts()
        self.mode: Mode = Mode.BASELINE  # what the next reply uses
        self.served: Mode = Mode.BASELINE  # what the server was (or is being) started with
        self.pending: Mode | None = None  # a restart under way into this mode
        self.per_request: bool | None = None  # measured: does this build honour "no drafts" per request?
        self.path_note = FIRST_NOTE
        self.options: list[ModeOption] = [ModeOption(Mode.BASELINE, True)]
        self.status = ""
        self.news = False  # the status reports what a switch did (it goes: clear_news), not what lasts
        self.local_files = True  # the profile's files are on this machine (their headers may be read here)
        self.held = ""  # why the switch is held on a server BeeDeck did not start ("" when it is not)
        # A mode that runs here but was measured not to help with these files (the starter's N-gram): the
        # measured reason, shown where the mode is offered. The caller sets it with the profile.
        self.notes: dict[Mode, str] = {}
        self.attached: RemoteInfo | None = None  # that server, while attached
        self.checked: set[str] = set()  # engines checked this session (an inconclusive check is not kept)
        self.began: float | None = None  # when the restart under way began (the caller's clock)
        self.expected_s: float | None = None  # what such a restart took here before, if measured
        self.last_switch_s: float | None = None  # what the last finished restart-path switch took
        self.forecast: SwitchForecast | None = None  # what a restart costs here, before the click (the session's)

    # -- configuration ---------------------------------------------------------------------
    def configure(self, profile: LaunchSettings | None, caps: EngineCaps | None, per_request: bool | None = None,
                  facts: ModelFacts | None = None, local_files: bool = True) -> None:
        """A profile, the engine's capabilities and what is known of its per-request switching (None: not
        checked yet, so restart). A new profile starts in its own mode; the same profile (new caps after a
        restart) keeps the chosen mode. ``local_files=False``: the profile's paths are on another machine (a
        server BeeDeck did not start), so no header is read for them here. Releases a hold."""
        same_profile = profile is not None and profile is self.profile
        self.local_files, self.held = local_files, ""
        if not local_files:
            facts = ModelFacts()
        if caps is None or self.caps is None or caps.path != self.caps.path:
            self.per_request = per_request
        elif per_request is not None:
            self.per_request = per_request
        self.profile, self.caps = profile, caps
        if facts is not None:
            self.facts = facts
        if not same_profile:
            self.mode = self.served = profile.spec_mode if profile is not None else Mode.BASELINE
        self._refresh()
        if not same_profile or self.status == NO_SPECULATION:  # the probe may have brought modes
            self._say("" if self.enabled else NO_SPECULATION)

    def set_facts(self, facts: ModelFacts) -> None:
        """What the GGUF headers say now (read off the GUI thread by the view)."""
        self.facts = facts
        self._refresh()

    def _refresh(self) -> None:
        if self.profile is None:
            self.options = [ModeOption(Mode.BASELINE, True)]
        else:
            self.options = available_modes(self.caps, self.profile, self.facts)

    # -- what the view shows ---------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """More than one mode can run and the switch is not held: worth showing as enabled."""
        return not self.held and sum(o.available for o in self.options) > 1

    def shown(self) -> list[ModeOption]:
        """The segments to show: every mode that runs, and the profile's own, the current and the pending
        one even when they do not (the user chose them, so they need to see why)."""
        own = self.profile.spec_mode if self.profile is not None else Mode.BASELINE
        return [o for o in self.options if o.available or o.key in (own, self.mode, self.pending)]

    def unavailable(self) -> list[ModeOption]:
        return [o for o in self.options if not o.available]

    def path(self) -> str:
        return switch_path(self.per_request)

    def dflash_profile(self) -> bool:
        """A DFlash profile on an engine that runs it: the only case with a per-request path."""
        dflash = option(self.options, Mode.DFLASH)
        return self.profile is not None and self.profile.spec_mode == Mode.DFLASH and bool(dflash and dflash.available)

    def tooltip(self) -> str:
        if self.held:
            return self.held
        usable = [o for o in self.options if o.available]
        if len(usable) > 1:
            lines = [" | ".join(o.label for o in usable) + ": the mode of the next reply."]
            if self.dflash_profile():
                lines.append(self.path_note)
        else:
            lines = ["No speculation mode can run with this setup, so replies use Baseline."]
        others = self.unavailable()
        if others:
            lines += ["", *self.why_lines()]
        return "\n".join(lines)

    def cost_line(self, mode: Mode) -> str:
        """Before the click: what a switch to ``mode`` costs here (:class:`SwitchForecast`: the restart's
        seconds as measured, whether the conversation comes along); "" for the mode in effect, a switch per
        request (instant) or while nothing is known."""
        if mode == self.mode or self.pending is not None or self.profile is None or self.forecast is None:
            return ""
        if self.path() == PER_REQUEST and self.served == Mode.DFLASH and mode in (Mode.BASELINE, Mode.DFLASH):
            return ""
        return self.forecast.line(mode, uses_draft(settings_for_mode(self.profile, mode, self.caps)))

    def why_lines(self) -> list[str]:
        return ["Not available here:", *(f"• {o.label}: {o.reason}" for o in self.unavailable())]

    # -- the next request and the next start -------------------------------------------------
    def request_extra(self) -> dict[str, Any]:
        """Fields to add to the next chat request."""
        if self.mode == Mode.BASELINE and self.served == Mode.DFLASH and self.path() == PER_REQUEST:
            return dict(NO_DRAFTS)
        return {}

    def launch_settings(self, profile: LaunchSettings) -> LaunchSettings:
        """The settings to start ``profile``'s server with in the switch's mode, remembered as what the
        server runs. A per-request Baseline keeps the DFlash server (its replies ask for no drafts)."""
        if profile is not self.profile:
            return profile  # not the profile the switch shows: start it as saved
        keep_draft = self.mode == Mode.BASELINE and self.path() == PER_REQUEST and self.dflash_profile()
        self.served = Mode.DFLASH if keep_draft else self.mode
        if self.served == profile.spec_mode:
            return profile  # its own mode: exactly as saved
        return settings_for_mode(profile, self.served, self.caps)

    # -- switching -------------------------------------------------------------------------
    def request(self, wanted: Mode) -> Decision:
        """A click on mode ``wanted``'s segment (or the advice's pick)."""
        if wanted == self.mode and self.pending is None:
            return Decision(Outcome.SWITCHED, wanted, extra=self.request_extra())
        if self.pending is not None:
            return Decision(Outcome.REFUSED, wanted, reason=f"A switch to {self.pending.label} is under way.")
        chosen = option(self.options, wanted)
        if chosen is None or not chosen.available:
            why = chosen.reason if chosen is not None else f"{wanted.label} is not offered here."
            return Decision(Outcome.REFUSED, wanted, reason=why)
        per_request = self.path() == PER_REQUEST and self.served == Mode.DFLASH and wanted in (Mode.BASELINE, Mode.DFLASH)
        if per_request or self.profile is None:
            self.mode = wanted
            self._say(f"{wanted.label}: next reply " + (
                "asks for no drafts (per request; the draft stays loaded)" if wanted == Mode.BASELINE else "uses the draft"),
                news=True)
            return Decision(Outcome.SWITCHED, wanted, extra=self.request_extra())
        return self._restart(wanted)

    def _restart(self, mode: Mode) -> Decision:
        assert self.profile is not None
        self.pending = mode
        self._say(self.restarting(0.0))
        return Decision(Outcome.RESTART, mode, settings=settings_for_mode(self.profile, mode, self.caps))

    def how(self, mode: Mode, before: Mode) -> str:
        if mode == Mode.BASELINE:
            return "without the draft" if before.uses_draft_file else "without speculation"
        if mode.uses_draft_file:
            return "with the draft"
        if mode == Mode.MTP:
            return "with the target's MTP heads"
        return f"with {mode.label} speculation"  # the toggle's name, not the engine's type (ngram-mod)

    def timed(self, began: float, expected_s: float | None) -> None:
        """The restart under way began at ``began`` (the caller's monotonic clock); ``expected_s``: what such a
        switch took here before (core/engine/speculation/switch_cost.py), or None when never measured."""
        self.began, self.expected_s = began, expected_s

    def elapsed(self, now: float) -> float:
        return now - self.began if self.began is not None else 0.0

    def progress(self, now: float) -> int | None:
        """How far the restart under way is, in thousandths of the bar, against what such a switch took here
        before: never full before the server is (95 % at the expected time, then slower, at most 99 %).
        None: no restart, or nothing to measure against (no bar)."""
        if self.pending is None or not self.expected_s:
            return None
        return min(990, round(950 * self.elapsed(now) / self.expected_s))

    def restart_status(self, now: float) -> str:
        """The status line at ``now`` while a restart is under way: :meth:`restarting` on the timed clock."""
        return self.restarting(self.elapsed(now), self.expected_s)

    def restarting(self, elapsed_s: float, expected_s: float | None = None) -> str:
        """The status line while a restart is under way; ``expected_s``: what such a switch took here
        before (core/engine/speculation/switch_cost.py), said beside the seconds so far."""
        if self.pending is None:
            return self.status
        of = f" of about {max(1, round(expected_s))} s" if expected_s else ""
        return f"restarting {self.how(self.pending, self.served)}… {elapsed_s:.1f} s{of}"

    def restart_done(self, took_s: float, went: str = RESTARTED, note: str = "") -> Mode | None:
        """The restart's server is ready: the pending mode is in effect (returned; None when none was pending).
        ``went``: how (core/engine/speculation/standby.py): restarted, loaded beside the running server, or swapped back
        to the server kept loaded. ``note``: what the restart did with the conversation's cache, said once
        (core/serving/slot_carry.py: kept, or why not)."""
        if self.pending is None:
            return None
        mode, self.pending, self.began = self.pending, None, None
        before, self.served = self.served, mode
        self.last_switch_s = took_s
        self.mode = mode
        self._refresh()
        label = next((o.label for o in self.options if o.key == mode), mode.label)
        how = self.how(mode, before)
        if went == SWAPPED:
            said = f"{label}: switched to the server kept loaded {how} in {took_s:.1f} s (nothing loaded)"
        elif went == LOADED_BESIDE:
            said = (f"{label}: loaded the server {how} beside the other in {took_s:.1f} s; both stay loaded, "
                    "so switching back loads nothing")
        else:
            said = f"{label}: restarted the server {how} in {took_s:.1f} s"
        if note:
            said += f"; {note}"
        self._say(said, news=True)
        return mode

    def restart_failed(self) -> None:
        if self.pending is None:
            return
        self.pending = self.began = None
        self._refresh()
        self._say("switch failed: see the server log", news=True)  # the failure panel says it lastingly

    def _say(self, status: str, news: bool = False) -> None:
        """The status line: ``news`` reports what a switch did (true when said, stale later: it goes at
        :meth:`clear_news` or :meth:`server_stopped`); otherwise it says what lasts (a restart under way, a
        check, why the switch is held or off)."""
        self.status, self.news = status, news

    def tell(self, text: str) -> None:
        """What a switch turned out to do, learnt after it (the first reply's figures): said as news."""
        self._say(text, news=True)

    def clear_news(self) -> None:
        """The report of what a switch did is old now (the view's clock): the line goes; a lasting one stays."""
        if self.news:
            self._say("")

    def server_stopped(self) -> None:
        """The server stopped (Stop, a crash): a report such as "both stay loaded" is no longer true. The stop
        of a restart under way is part of it: its line stays."""
        if self.pending is None:
            self.clear_news()

    def set_per_request(self, honoured: bool | None, why: str = "") -> None:
        """What a check (or a contradicting reply) showed; the status says which path is used now."""
        self.per_request = honoured
        if why:
            self.path_note = why[0].upper() + why[1:] + "."
        if self.dflash_profile() and self.pending is None:
            how = ("per request: the draft stays loaded, no restart" if self.path() == PER_REQUEST
                   else "by restarting the server without the draft")
            self._say(f"Baseline switches {how}", news=True)

    def contradicted(self, drafted: int) -> Decision | None:
        """A reply sent as baseline per request came back with ``drafted`` draft tokens: this engine ignores
        the field after all. The restart path from now on, and a restart now if in baseline."""
        self.set_per_request(False, f"this engine drafted {drafted} tokens in a reply that asked for none, so "
                                    "Baseline restarts the server without the draft")
        if self.mode == Mode.BASELINE and self.served != Mode.BASELINE and self.profile is not None and self.pending is None:
            return self._restart(Mode.BASELINE)
        return None

    def contradicts(self, mode: Mode | None, drafted: int) -> bool:
        """Whether a reply (its mode and draft count) contradicts the per-request verdict: sent as baseline per
        request, it came back drafted. The session then forgets the remembered verdict for this build."""
        return mode == Mode.BASELINE and bool(drafted) and self.path() == PER_REQUEST

    def reply_finished(self, mode: Mode | None, drafted: int) -> Decision | None:
        """A reply ended (its mode and draft count). A per-request baseline reply that drafted contradicts
        the verdict: see :meth:`contradicted`. Returns the restart it asks for, if any."""
        if self.contradicts(mode, drafted):
            return self.contradicted(drafted)
        return None

    # -- the per-request check ---------------------------------------------------------------
    def server_ready(self, caps: EngineCaps | None, remembered: Callable[[EngineCaps], bool | None]) -> bool:
        """A server is ready: True when its engine build must be checked now (it runs with its DFlash draft,
        was not checked this session and no verdict is remembered for it; the status says a check is under
        way). A remembered verdict (``remembered(caps)``) is used instead of a check."""
        if caps is None or not self.server_has_draft() or caps.path in self.checked:
            return False
        known = remembered(caps)
        if known is not None:
            self.set_per_request(known, "checked earlier on this engine build: it " + (
                "honours a per-request 'no drafts'" if known else "ignores a per-request 'no drafts'"))
            return False
        self.checked.add(caps.path)
        self._say(CHECKING)
        return True

    def check_done(self, verdict: PerRequestVerdict) -> None:
        self.set_per_request(verdict.honoured, verdict.describe())

    def check_failed(self, why: str) -> None:
        self.set_per_request(None, f"the check failed ({why}), so Baseline restarts the server")

    # -- a server BeeDeck did not start -------------------------------------------------------
    def attach(self, info: RemoteInfo) -> bool:
        """A server BeeDeck did not start is attached. True: a per-request check must decide (see
        :meth:`remote_checked`; meanwhile the switch is off and says it checks). False: the switch is held on
        what the server runs (or off, without speculation), with the reason as :attr:`held`."""
        self.attached = info
        reason = toggle_reason(info)
        if reason is None:
            self._off(CHECKING_REASON, CHECKING_STATUS)
            return True
        if info.speculative:
            self._hold(info, reason)
        else:
            self._off(reason)
        return False

    def remote_checked(self, info: RemoteInfo, verdict: PerRequestVerdict) -> None:
        """The check's verdict on an attached server (ignored once it is detached or replaced)."""
        if self.attached is not info:
            return
        if verdict.honoured:
            self.configure(served_settings(info), None, per_request=True, local_files=False)
            self.set_per_request(True, verdict.describe())
        else:
            self._hold(info, verdict_reason(verdict))

    def remote_check_failed(self, info: RemoteInfo, why: str) -> None:
        if self.attached is info:
            self._hold(info, check_failed_reason(why))

    def restart_refused(self) -> None:
        """A restart was asked of a server BeeDeck did not start (a "baseline" reply drafted after all): the
        per-request path is wrong there, so the switch is held on what the server runs."""
        if self.attached is not None:
            self._hold(self.attached, NO_RESTART_REASON)

    def detach(self) -> None:
        """The attached server is gone (disconnected, or it stopped answering)."""
        self.attached = None

    def _hold(self, info: RemoteInfo, reason: str) -> None:
        """On the mode the server runs, disabled: replies are labelled with what made them."""
        self.configure(served_settings(info), None, per_request=False, local_files=False)
        self.held = reason
        self._say(HELD_STATUS)

    def _off(self, reason: str, status: str = OFF_STATUS) -> None:
        self.configure(None, None)
        self.held = reason
        self._say(status)

    def standby_settings(self) -> LaunchSettings | None:
        """The other server worth keeping loaded beside this one (core/engine/speculation/standby.py): on the
        restart path, once a check showed this engine ignores per-request speculation, the Baseline server
        beside a server with its draft, or the profile's own mode beside Baseline. None otherwise."""
        if self.profile is None or self.pending is not None or self.per_request is not False:
            return None
        own = self.profile.spec_mode
        if own == Mode.BASELINE or self.served not in (Mode.BASELINE, own):
            return None
        other = Mode.BASELINE if self.served == own else own
        chosen = option(self.options, other)
        if chosen is None or not chosen.available:
            return None
        return settings_for_mode(self.profile, other, self.caps)

    def server_has_draft(self) -> bool:
        """Whether the running server was started with the DFlash draft (the per-request path's case)."""
        return self.served == Mode.DFLASH
