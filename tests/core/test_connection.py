"""A failed connection said in words (core/connection.py): real failures of the HTTP client BeeDeck uses, each
named for what happened, never by the exception's class name."""

from __future__ import annotations

import errno
import socket

import httpx2
import pytest

from beedeck.core.connection import os_error_of, what_happened


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _failure(url: str, timeout: float = 2.0) -> httpx2.HTTPError:
    with pytest.raises(httpx2.HTTPError) as caught:
        httpx2.get(url, timeout=timeout)
    return caught.value


def test_a_refused_connection_is_said_as_refused() -> None:
    port = _closed_port()
    exc = _failure(f"http://127.0.0.1:{port}/")
    said = what_happened(exc, f"127.0.0.1:{port}")
    assert said == f"the connection was refused (nothing listens at 127.0.0.1:{port}, or a firewall turns it away)"
    assert isinstance(os_error_of(exc), ConnectionRefusedError)


def test_a_name_that_does_not_resolve_is_said_as_such() -> None:
    exc = _failure("http://no-such-host.invalid/")  # .invalid never resolves (RFC 2606)
    said = what_happened(exc, "no-such-host.invalid")
    assert said.startswith("the name no-such-host.invalid could not be resolved")


def test_no_answer_in_time_is_said_as_such() -> None:
    with socket.socket() as server:  # listens, never accepts or answers: the read times out
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        exc = _failure(f"http://127.0.0.1:{server.getsockname()[1]}/", timeout=0.3)
    assert what_happened(exc, "here") == "here did not answer in time"


@pytest.mark.parametrize(("code", "said"), [
    (errno.ENETUNREACH, "there is no route to h"), (errno.EHOSTUNREACH, "there is no route to h"),
    (errno.ECONNRESET, "the connection to h was cut off"),
    (errno.EACCES, "the connection to h failed: permission denied"),
])
def test_other_os_errors_under_the_client_error_say_what_happened(code: int, said: str) -> None:
    inner = OSError(code, __import__("os").strerror(code))
    try:
        try:
            raise inner
        except OSError as os_exc:
            raise httpx2.ConnectError(str(os_exc)) from os_exc
    except httpx2.ConnectError as exc:
        text = what_happened(exc, "h")
    assert text.startswith(said) and "Error" not in text
