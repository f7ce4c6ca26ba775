"""What a restart of the running server does besides its stop and its start, and what the starts teach.

A restart (a mode switch that cannot switch per request, a "baseline" that still drafted) is the one place
where the server stops while the user waits for the same conversation to go on. :class:`RestartSteps` is
what is done around it where the engine can: the launch made ready for it (``prepare``: every start of the
app's server), before the stop (save the slot's KV cache to a file), once the new server is ready, before
anyone is told (restore it), and at the end whatever happened (nothing left behind); ``said`` is what the
user is told of it, once. :class:`NoSteps` does nothing: a restart is a stop and a start. The steps that
carry the conversation across: :class:`beedeck.core.serving.slot_carry.SlotCarry`.

:class:`StartTimes` learns how long starts take here (core/engine/speculation/switch_cost.py) and says what
a switch of the running target is expected to take, in advance (the toggle's "about 5 s").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.modes import uses_draft
from beedeck.core.engine.speculation.switch_cost import StartKey, SwitchCosts


def _nothing(_: str) -> None:
    pass


@dataclass(frozen=True)
class Restart:
    """One restart: the engine, its capabilities, the settings it starts with (as asked), whether it is a mode
    switch of the target that is running and ready (``fast``: core/engine/speculation/restart.py), the running
    server's settings (``before``) and the bytes its launch plan gave its KV cache and recurrent state
    (``kv_bytes``: None when not planned); ``log`` writes a line to the server log (``BeeDeck: ...``). ``again``:
    the start once more after the steps broke the first one (no steps run then). ``sliding_window``: the running
    target has sliding-window layers (its launch plan gave them a window cache)."""

    engine: str
    caps: EngineCaps | None
    settings: LaunchSettings
    fast: bool
    before: LaunchSettings | None = None
    kv_bytes: int | None = None
    log: Callable[[str], None] = _nothing
    again: bool = False
    sliding_window: bool = False


class RestartSteps(Protocol):
    """What a restart does around its stop and its start. All run on the serving's job thread; a step that
    fails must say so in the log and let the restart go on (the server restarts as it always did)."""

    def prepare(self, settings: LaunchSettings, caps: EngineCaps) -> LaunchSettings:
        """The settings a start of the app's server plans and launches (the steps' needs added); cheap."""
        ...

    def before_stop(self, restart: Restart, running: Any) -> None:
        """``running`` (the process about to stop, None when none runs) still serves: save what is worth
        keeping of it."""

    def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
        """``started`` is ready, ``took_s`` after the restart's start; ready is announced once this returns.
        False: the steps broke it (it died): the serving starts it once more, without the steps."""
        ...

    def ended(self, restart: Restart) -> None:
        """The restart is over, its server ready or not: nothing of it may be left behind."""

    def said(self) -> str:
        """What the last restart's steps did, for the user ("" when nothing is worth saying)."""
        ...

    def forecast(self, restart: Restart, running: Any) -> tuple[str, float]:
        """Before the click, no I/O: "" when ``restart`` would keep the conversation (else why not, in words), and
        the seconds the steps add to it (what they took last)."""
        ...

    def reply_read(self, prompt_n: int | None, cache_n: int | None) -> str:
        """A reply ended that read ``prompt_n`` prompt tokens and found ``cache_n`` in the server's cache: where it
        is the first after a restart whose steps promised something of it, "" if the promise held, else what
        happened, in words (the engine's own figures are the proof)."""
        ...


class NoSteps:
    """A restart is a stop and a start."""

    def prepare(self, settings: LaunchSettings, caps: EngineCaps) -> LaunchSettings:
        return settings

    def before_stop(self, restart: Restart, running: Any) -> None:
        pass

    def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
        return True

    def ended(self, restart: Restart) -> None:
        pass

    def said(self) -> str:
        return ""

    def forecast(self, restart: Restart, running: Any) -> tuple[str, float]:
        return "BeeDeck keeps nothing across this restart", 0.0

    def reply_read(self, prompt_n: int | None, cache_n: int | None) -> str:
        return ""


class Guarded:
    """``steps`` as the serving calls them: a step that raises (a bug, a file system that says no in a way nobody
    foresaw) is said in the log (``line``) and the restart goes on as a stop and a start, never stuck halfway."""

    def __init__(self, steps: RestartSteps, line: Callable[[str], None]) -> None:
        self.steps, self.line = steps, line

    def _failed(self, step: str, exc: Exception) -> None:
        self.line(f"BeeDeck: mode switch: {step} failed ({type(exc).__name__}: {exc}); the restart goes on without it")

    def prepare(self, settings: LaunchSettings, caps: EngineCaps) -> LaunchSettings:
        try:
            return self.steps.prepare(settings, caps)
        except Exception as exc:  # see the class: never a stuck restart
            self._failed("preparing the launch", exc)
            return settings

    def before_stop(self, restart: Restart, running: Any) -> None:
        try:
            self.steps.before_stop(restart, running)
        except Exception as exc:  # see the class
            self._failed("the step before the stop", exc)

    def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
        try:
            return self.steps.after_ready(restart, started, took_s) is not False
        except Exception as exc:  # see the class
            self._failed("the step after the start", exc)
            return True

    def ended(self, restart: Restart) -> None:
        try:
            self.steps.ended(restart)
        except Exception as exc:  # see the class
            self._failed("the end of the restart", exc)

    def said(self) -> str:
        try:
            return self.steps.said()
        except Exception as exc:  # see the class
            self._failed("its note", exc)
            return ""

    def forecast(self, restart: Restart, running: Any) -> tuple[str, float]:
        try:
            return self.steps.forecast(restart, running)
        except Exception as exc:  # see the class
            self._failed("its forecast", exc)
            return "not known", 0.0

    def reply_read(self, prompt_n: int | None, cache_n: int | None) -> str:
        try:
            return self.steps.reply_read(prompt_n, cache_n)
        except Exception as exc:  # see the class
            self._failed("the check of the reply after it", exc)
            return ""


class StartTimes:
    """The seconds each start took (``costs``, kept across sessions), and what a switch of the running target
    to a mode with its draft file or without is expected to take (the median of the last ones: no I/O when
    asked, it is worked out on every ready)."""

    def __init__(self, costs: SwitchCosts) -> None:
        self.costs = costs
        self._draft_of: dict[str, str] = {}  # the draft file last loaded beside each target
        self._expected: dict[bool, float | None] = {}

    def started(self, engine: str, settings: LaunchSettings, took_s: float, switch: bool) -> None:
        """A start of ``settings`` became ready after ``took_s`` (``switch``: right after a start of the same
        target, its file in the page cache)."""
        self.costs.record(StartKey(engine, settings.target, settings.draft if uses_draft(settings) else None, switch),
                          took_s)
        if settings.draft and uses_draft(settings):  # (settings.draft: so the type narrows)
            self._draft_of[settings.target] = settings.draft
        draft = self._draft_of.get(settings.target)
        self._expected = {
            True: self.costs.expected(StartKey(engine, settings.target, draft, True)) if draft else None,
            False: self.costs.expected(StartKey(engine, settings.target, None, True)),
        }

    def expected(self, with_draft: bool) -> float | None:
        """Seconds a switch of the running target to a mode that loads its draft file (or not) took before;
        None when never measured."""
        return self._expected.get(with_draft)
