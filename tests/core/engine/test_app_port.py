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
