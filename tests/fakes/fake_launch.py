"""The process side of a launch, faked where no engine runs: what the serving (core/serving) starts once the
real preflight passed a plan (``ServingParts.start``), a process that is ready at once, remembers being stopped
and can die on its own (its ``on_state`` told, as a real ServerProcess tells it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.launcher import Preflight

ENGINES = Path(__file__).resolve().parents[1] / "fixtures" / "engines"


def mainline_caps(path: str) -> EngineCaps:
    """The capabilities of mainline llama.cpp b11434 (its real --help), at ``path``."""
    help_text = (ENGINES / "mainline-b11434-cpu.help.txt").read_text()
    return caps_from_texts(path, "version: 11434 (abcdef0)\nbuilt with GNU 12.2.0 for Linux x86_64", help_text)


class FakeProc:
    """What the serving uses of a started ServerProcess, on the port its plan chose: ready at once; ``stopped``
    once stopped; ``die()`` as the engine crashing (its state callback told)."""

    def __init__(self, plan: Preflight, on_state: Any = None) -> None:
        assert plan.ok and plan.settings is not None and plan.argv is not None, plan.refusals
        self.plan, self.settings = plan, plan.settings
        self.port = plan.settings.port
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.notes: tuple[object, ...] = ()
        self.on_state = on_state
        self.stopped = False

    def wait_ready(self, timeout: float) -> None:
        pass

    def stop(self, timeout: float) -> None:
        self.stopped = True

    def die(self) -> None:
        from beedeck.core.engine.server_state import ServerState

        self.on_state(ServerState.FAILED, None)


def recording_start(procs: list[FakeProc], make: Callable[..., FakeProc] = FakeProc) -> Callable[..., FakeProc]:
    """A ``ServingParts.start`` that starts a :class:`FakeProc` (``make``) per plan and keeps it in ``procs``."""

    def start(engine: str, plan: Preflight, **kw: Any) -> FakeProc:
        procs.append(make(plan, kw.get("on_state")))
        return procs[-1]

    return start

