"""ServerProcess's rule for a start that lost its port (no process is run: the decision alone; the real
engines prove the start again in tests/engine/test_engines_real.py)."""

from __future__ import annotations

import time

import pytest

from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server import _PORT_RETRIES, ServerProcess, ServerState, _with_value

BIND = ServerFailure("port_in_use", "llama-server could not listen on 127.0.0.1:5 ...", "Pick another port.")
SILENT = ServerFailure("exited", "llama-server stopped with status 1.", "Read the server log for the reason.")
MODEL = ServerFailure("not_gguf", "llama-server failed to load the model.", "Check the file.")


def _proc(any_port: bool = True, state: ServerState = ServerState.STARTING, lines: tuple[str, ...] = (),
          spawned_s_ago: float = 0.5) -> ServerProcess:
    proc = ServerProcess("/bin/false", ["--port", "5"], any_port=any_port)
    proc.state = state
    proc._head = list(lines)
    proc._t_spawn = time.monotonic() - spawned_s_ago
    return proc


@pytest.mark.parametrize("failure", [BIND, SILENT])
def test_a_quick_exit_on_a_port_beedeck_picked_is_a_lost_port(failure: ServerFailure) -> None:
    assert _proc()._lost_port(1, failure)
    assert _proc(state=ServerState.LOADING)._lost_port(1, failure)


@pytest.mark.parametrize("why, proc, rc, failure", [
    ("the user named the port", _proc(any_port=False), 1, BIND),
    ("a reason the engine gave", _proc(), 1, MODEL),
    ("a crash (a signal)", _proc(), -11, SILENT),
    ("a stop asked from outside", _proc(lines=("srv    operator(): cleaning up before exit...",)), 1, SILENT),
    ("it was serving", _proc(state=ServerState.READY), 1, BIND),
    ("it ran for a while", _proc(spawned_s_ago=60.0), 1, SILENT),
])
def test_other_exits_are_failures_as_they_are(why: str, proc: ServerProcess, rc: int,
                                              failure: ServerFailure) -> None:
    assert not proc._lost_port(rc, failure), why


def test_the_start_is_tried_again_a_bounded_number_of_times() -> None:
    proc = _proc()
    proc.port_retries = _PORT_RETRIES
    assert not proc._lost_port(1, BIND)


def test_the_port_value_is_replaced_in_place() -> None:
    assert _with_value(["-m", "a.gguf", "--port", "5", "--host", "h"], "--port", "7") == \
        ["-m", "a.gguf", "--port", "7", "--host", "h"]
    assert _with_value(["-m", "a.gguf"], "--port", "7") == ["-m", "a.gguf", "--port", "7"]
