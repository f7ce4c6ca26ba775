"""A failed connection said in words: what happened, read from the exception an HTTP client raised and the
OS error under it (refused, a name that does not resolve, no answer in time, no route, a broken secure
connection), never the exception's class name ("(ConnectError)" told a user nothing).

Callers add their own remedy: ``f"Cannot reach the Hugging Face Hub: {what_happened(exc, host)}. Check ..."``.
"""

from __future__ import annotations

import errno
import socket
import ssl

_NO_ROUTE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN, errno.EHOSTDOWN}
_RESET = {errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE}


def os_error_of(exc: BaseException) -> OSError | None:
    """The OS error under ``exc`` (httpx wraps it twice), or None."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def _timed_out(exc: BaseException) -> bool:
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, TimeoutError | socket.timeout) or "Timeout" in type(cause).__name__:
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def what_happened(exc: BaseException, host: str) -> str:
    """What went wrong connecting to ``host``, as a clause: "the connection was refused (nothing listens at
    huggingface.co)", "the name huggingface.co could not be resolved (no network, or no DNS server answers)"..."""
    os_error = os_error_of(exc)
    if isinstance(os_error, socket.gaierror):
        return f"the name {host} could not be resolved (no network, or no DNS server answers)"
    if isinstance(os_error, ConnectionRefusedError) or (os_error is not None and os_error.errno == errno.ECONNREFUSED):
        return f"the connection was refused (nothing listens at {host}, or a firewall turns it away)"
    if isinstance(os_error, ssl.SSLError):
        return f"the secure connection to {host} failed ({os_error.reason or 'TLS error'})"
    if _timed_out(exc):
        return f"{host} did not answer in time"
    if os_error is not None and os_error.errno in _NO_ROUTE:
        return f"there is no route to {host} (the network is down or unreachable)"
    if isinstance(os_error, ConnectionResetError | ConnectionAbortedError | BrokenPipeError) or (
            os_error is not None and os_error.errno in _RESET):
        return f"the connection to {host} was cut off"
    if os_error is not None and os_error.strerror:
        return f"the connection to {host} failed: {os_error.strerror.lower()}"
    text = str(exc).strip()
    return f"the connection to {host} failed" + (f": {text}" if text else "")
