"""The other mode's server loaded beside the running one (core/engine/speculation/standby.py): whether it
fits now, on which port, and its start. The :class:`~beedeck.core.serving.serving.Serving` decides when (a
switch, or ahead of it) and which of the two serves."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.restart import fast_restart_settings
from beedeck.core.serving.parts import STOP_TIMEOUT_S, ServingParts

if TYPE_CHECKING:
    from beedeck.core.launcher import Preflight


def plan_beside(parts: ServingParts, caps: EngineCaps, settings: LaunchSettings, running_port: int,
                kept_port: int | None, on_line: Callable[[str], None]) -> Preflight | None:
    """The launch plan of ``settings``' server beside the one running on ``running_port``: a switch's fast
    start, on the next port up (or a free one; ``kept_port``: held by the server kept now, which stops first),
    when the memory free now holds it with a margin. None when it does not (the log says why)."""
    # imported lazily (the ports' claim, the launcher): the window opens without them
    from beedeck.core.engine.ports import PortRule
    from beedeck.core.launcher import standby_preflight

    gpu_free, ram = parts.free_now()
    port = PortRule(default=running_port + 1, claim=True, freed=frozenset(() if kept_port is None else (kept_port,)))
    checked = standby_preflight(caps, fast_restart_settings(replace(settings, port=0), caps), gpu_free=gpu_free,
                                ram_available=ram, port=port)
    if not checked.ok:
        on_line(f"BeeDeck: mode switch restarts the server: the other mode cannot stay loaded beside it "
                f"({checked.refusals[0].message})")
        return None
    return checked


def start_beside(parts: ServingParts, engine: str, plan: Preflight, on_line: Callable[[str], None],
                 on_state: Callable[[ServerState, ServerFailure | None], None]) -> tuple[Any, float] | None:
    """Start ``plan`` beside the running server (no leftover server is stopped: the running one is ours) and
    wait until it is ready: the process and the seconds it took, or None when it did not start (the log says
    why; nothing is left running): the caller restarts as before."""
    t0, proc = time.monotonic(), None
    try:
        proc = parts.start(engine, plan, on_line=on_line, on_state=on_state, stop_leftover=False)
        proc.wait_ready(parts.ready_timeout_s)
    except Exception as exc:  # no room after all, a crash: the restart path does what it always did
        if proc is not None:
            proc.stop(STOP_TIMEOUT_S)
        on_line(f"BeeDeck: the other mode did not load beside the running server ({exc}); restarting instead")
        return None
    return proc, time.monotonic() - t0
