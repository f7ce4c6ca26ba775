"""Start a llama-server from launch settings: the pre-launch guard, then the engine.

The one way the app, the CLI and the benchmark start a server, so none of them can skip the guard.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from beedeck.core.engine.argv import ArgNote
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server import ServerProcess, ServerState, start_server
from beedeck.core.models.guard import check_launch


def launch(
    engine: str | Path,
    caps: EngineCaps,
    settings: LaunchSettings,
    *,
    on_line: Callable[[str], None] | None = None,
    on_state: Callable[[ServerState, ServerFailure | None], None] | None = None,
    pid_file: Path | None = None,
    env: dict[str, str] | None = None,
    stop_leftover: bool = True,
) -> ServerProcess:
    """Check the launch against the model files, then start it; returns the running wrapper, whose
    ``notes`` carry build_argv's notes and the guard's warnings.

    Raises ServerFailed (with a code) or LaunchRefused before starting anything.
    """
    warnings = check_launch(caps, settings)
    proc = start_server(engine, caps, settings, on_line=on_line, on_state=on_state, pid_file=pid_file, env=env,
                        stop_leftover=stop_leftover)
    proc.notes = (*proc.notes, *(ArgNote("known_issue", "warning", str(w)) for w in warnings))
    return proc
