"""app_port: the app's server keeps its port unless another program listens there; then a free port
and a line that says so. The CLI's port 0 (any free port) is start_server's and unchanged."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from beedeck.core.engine.ports import app_port, free_port


@contextmanager
def listener() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_free_port_is_kept() -> None:
    port = free_port()
    assert app_port("127.0.0.1", port) == (port, None)
    assert app_port("localhost", port) == (port, None)


def test_a_listened_port_falls_back_with_a_reason() -> None:
    with listener() as busy:
        for host in ("127.0.0.1", "0.0.0.0"):
            port, why = app_port(host, busy)
            assert port not in (0, busy)
            assert why is not None and f"Port {busy} is taken" in why and f"port {port}" in why


def test_a_just_stopped_server_does_not_count_as_taken() -> None:
    """A restart must find its port again: the stopped server's closed connections (TIME_WAIT) do not
    hold it, since llama-server binds with SO_REUSEADDR."""
    port = free_port()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()  # the server side closes first: its end waits in TIME_WAIT on the port
        client.close()
    with socket.socket() as naive, pytest.raises(OSError):
        naive.bind(("127.0.0.1", port))  # the TIME_WAIT is there: a check without SO_REUSEADDR would move
    assert app_port("127.0.0.1", port) == (port, None)


def test_an_address_of_another_machine_is_left_to_the_server() -> None:
    port = free_port()
    assert app_port("192.0.2.1", port) == (port, None)  # TEST-NET-1: not this machine's; the server says so


CLAIMER = """
import sys
from beedeck.core import paths
from beedeck.core.engine.ports import app_port
paths.set_role(sys.argv[2])
port, why = app_port("127.0.0.1", int(sys.argv[1]))
print(port, why, flush=True)
sys.stdin.read()  # holds the claim, as a window does between picking the port and its server binding it
"""


@contextmanager
def claimed_elsewhere(port: int, role: str) -> Iterator[int]:
    """Another BeeDeck process that picked ``port`` for its server and has not bound it yet."""
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", CLAIMER, str(port), role], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert child.stdout is not None and child.stdout.readline().split()[:2] == [str(port).encode(), b"None"]
        yield child.pid
    finally:
        child.kill()
        child.wait(10)


def test_a_port_another_beedeck_just_picked_is_not_picked_again_and_it_is_named() -> None:
    """Two BeeDeck processes started at the same moment both found the port free before either server bound
    it: the claim makes the second one move, and say which BeeDeck process has it (not "another program")."""
    from beedeck.core.engine.ports import release_port

    wanted = free_port()
    with claimed_elsewhere(wanted, "a BeeDeck window") as pid:
        port, why = app_port("127.0.0.1", wanted)
        assert port != wanted and why is not None
        assert f"Port {wanted} is being taken by a BeeDeck window (pid {pid})" in why and "another program" not in why
        release_port(port)
    port, why = app_port("127.0.0.1", wanted)  # that process gone, its claim is gone with it
    assert (port, why) == (wanted, None)
    release_port(wanted)


def test_a_port_a_beedeck_server_listens_on_names_that_server_and_its_beedeck() -> None:
    import json
    import subprocess
    import sys
    import time

    import psutil

    from beedeck.core.engine.pidfile import records_dir
    from beedeck.core.engine.ports import release_port

    server = subprocess.Popen([sys.executable, "-c", "import socket, sys, time\ns = socket.socket()\n"
                               "s.bind(('127.0.0.1', 0)); s.listen(); print(s.getsockname()[1], flush=True)\n"
                               "time.sleep(600)"], stdout=subprocess.PIPE)
    owner = subprocess.Popen(["sleep", "600"])
    try:
        assert server.stdout is not None
        wanted = int(server.stdout.readline())
        records_dir().mkdir(parents=True, exist_ok=True)
        (records_dir() / f"{server.pid}.json").write_text(json.dumps({
            "pid": server.pid, "create_time": psutil.Process(server.pid).create_time(), "engine": "llama-server",
            "port": wanted, "argv_hash": "x", "owner_pid": owner.pid,
            "owner_create_time": psutil.Process(owner.pid).create_time(), "started": time.time(),
            "owner_role": "`beedeck serve`"}))
        port, why = app_port("127.0.0.1", wanted)
        assert port != wanted and why is not None and "another program" not in why
        assert f"Port {wanted} is taken by BeeDeck's own llama-server (pid {server.pid}) of `beedeck serve` " \
               f"(pid {owner.pid})" in why and "Stop that one to have it back" in why
        release_port(port)
    finally:
        for p in (server, owner):
            p.kill()
            p.wait(10)
