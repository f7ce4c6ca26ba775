"""What a restart of the running server does besides its stop and its start, and what the starts teach.

A restart (a mode switch that cannot switch per request, a "baseline" that still drafted) is the one place
where the server stops while the user waits for the same conversation to go on. :class:`RestartSteps` is
the seam for what may be done around it where the engine can: before the stop (issue 36: save the slot's KV
cache to a file) and once the new server is ready, before anyone is told (restore it; and the switch's own
measured cost). :class:`NoSteps` does nothing: a restart is a stop and a start.

:class:`StartTimes` learns how long starts take here (core/engine/speculation/switch_cost.py) and says what
a switch of the running target is expected to take, in advance (the toggle's "about 5 s").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.modes import uses_draft
from beedeck.core.engine.speculation.switch_cost import StartKey, SwitchCosts


@dataclass(frozen=True)
class Restart:
    """One restart: the engine, its capabilities, the settings it starts with (as asked) and whether it is a
    mode switch of the target that is running and ready (``fast``: core/engine/speculation/restart.py)."""

    engine: str
    caps: EngineCaps | None
    settings: LaunchSettings
    fast: bool


class RestartSteps(Protocol):
    """What a restart does around its stop and its start. Both run on the serving's job thread; a step that
    fails must say so in the log and let the restart go on (the server restarts as it always did)."""

    def before_stop(self, restart: Restart, running: Any) -> None:
        """``running`` (the process about to stop, None when none runs) still serves: save what is worth
        keeping of it."""

    def after_ready(self, restart: Restart, started: Any, took_s: float) -> None:
        """``started`` is ready, ``took_s`` after the restart's start; ready is announced once this returns."""


class NoSteps:
    """A restart is a stop and a start."""

    def before_stop(self, restart: Restart, running: Any) -> None:
        pass

    def after_ready(self, restart: Restart, started: Any, took_s: float) -> None:
        pass


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
