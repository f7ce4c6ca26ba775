"""ServerProcess's rule for a start that lost its port (no process is run: the decision alone; the real
engines prove the start again in tests/engine/test_engines_real.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from beedeck.core.engine import ports, server
from beedeck.core.engine.logparse import ServerFailed, ServerFailure
from beedeck.core.engine.server import (
    _PAST_BIND,
    _PORT_RETRIES,
    ServerProcess,
    ServerState,
    _with_value,
    free_port,
)

BIND = ServerFailure("port_in_use", "llama-server could not listen on 127.0.0.1:5 ...", "Pick another port.")
SILENT = ServerFailure("exited", "llama-server stopped with status 1.", "Read the server log for the reason.")
MODEL = ServerFailure("not_gguf", "llama-server failed to load the model.", "Check the file.")


def _proc(any_port: bool = True, state: ServerState = ServerState.STARTING, lines: tuple[str, ...] = (),
          spawned_s_ago: float = 0.5) -> ServerProcess:
    proc = ServerProcess("/bin/false", ["--port", "5"], any_port=any_port)
    proc.state = state
    proc._head = list(lines)
    proc._past_bind = any(_PAST_BIND.search(x) for x in lines)  # as the log reader sets it
    proc._t_spawn = time.monotonic() - spawned_s_ago
    return proc


@pytest.mark.parametrize("failure", [BIND, SILENT])
def test_a_quick_exit_on_a_port_beedeck_picked_is_a_lost_port(failure: ServerFailure) -> None:
    assert _proc()._lost_port(1, failure)
    assert _proc(lines=("warning: no usable GPU found, --gpu-layers option will be ignored",))._lost_port(1, failure)


@pytest.mark.parametrize("why, proc, rc, failure", [
    ("the user named the port", _proc(any_port=False), 1, BIND),
    ("a reason the engine gave", _proc(), 1, MODEL),
    ("a crash (a signal)", _proc(), -11, SILENT),
    ("a stop asked from outside", _proc(lines=("srv    operator(): cleaning up before exit...",)), 1, SILENT),
    ("it was serving", _proc(state=ServerState.READY), 1, BIND),
    ("it answered on its port (it had bound it)", _proc(state=ServerState.LOADING), 1, SILENT),
    ("it said it loads the model (it binds first)", _proc(lines=("main: loading model",)), 1, SILENT),
    ("a reason after the load began", _proc(lines=("0.00.001 I main: loading model",
                                                    "srv load_model: the draft model is not compatible")), 1, SILENT),
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


def _exits_at_once(port: int, tmp_path: Path) -> ServerProcess:
    """A process that exits with status 1 at once and says nothing, as BeeLlama did when its port was taken."""
    return ServerProcess("/bin/sh", ["-c", "exit 1", "--port", str(port)], any_port=True,
                         pid_file=tmp_path / "server.json")


def test_a_start_that_keeps_failing_is_tried_twice_more_then_fails(beedeck_home: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    proc = _exits_at_once(free_port(), tmp_path)
    proc.on_line = lines.append
    first = proc.port
    with pytest.raises(ServerFailed) as info:
        proc.start().wait_ready(30)
    assert info.value.failure.code == "exited" and proc.port_retries == _PORT_RETRIES
    assert len([x for x in lines if x.startswith("BeeDeck: llama-server stopped at once on port")]) == 2
    assert lines[0].startswith(f"BeeDeck: llama-server stopped at once on port {first}, most likely")
    assert proc.port != first and f"--port {proc.port}" in " ".join(proc.argv)
    assert not (tmp_path / "server.json").exists()  # no ownership record outlives it


def test_no_free_port_to_move_to_fails_at_once(beedeck_home: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def no_port(host: str = "127.0.0.1") -> int:
        raise ports.HostError("BeeDeck cannot listen on 127.0.0.1")

    monkeypatch.setattr(server, "claimed_free_port", no_port)
    proc = _exits_at_once(free_port(), tmp_path)
    t0 = time.monotonic()
    with pytest.raises(ServerFailed) as info:
        proc.start().wait_ready(30)
    assert info.value.failure.code == "exited" and proc.port_retries == 0 and time.monotonic() - t0 < 10
