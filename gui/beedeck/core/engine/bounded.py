"""HTTP GETs with a ceiling on size and on time: for answers from servers BeeDeck does not control.

httpx's timeouts are per read: a server that sends one byte of its headers every two seconds, or a
``/health`` body that never ends, keeps a plain ``get`` busy (and growing) for ever. :func:`bounded_get`
reads at most ``limit`` bytes of body (then raises :class:`BodyTooLarge`) and gives the whole exchange,
connect, headers and body, one deadline: a watchdog shuts the connection's socket when it passes, and
the call raises ``httpx2.ReadTimeout``. Each call uses a connection of its own, so the watchdog always
holds the socket it has to shut.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2
# httpx2 is imported where a request is made: the chat store's import chain reaches this module, and
# httpx2 cost the window's cold start ~50 ms (benchmarks/app_start.py --importtime).

MiB = 1 << 20


class BodyTooLarge(Exception):
    """The answer's body went past the ``limit`` the caller allowed."""

    def __init__(self, url: str, limit: int) -> None:
        super().__init__(f"{url} answered with more than {limit:,} bytes")
        self.url = url
        self.limit = limit


@dataclass(frozen=True)
class Fetched:
    """A whole, bounded answer: status, headers and body."""

    status_code: int
    headers: httpx2.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON; raises ValueError when it is not JSON (or nests too deep to parse)."""
        try:
            return json.loads(self.content)
        except RecursionError:
            raise ValueError("the JSON nests too deep") from None


class _Watchdog:
    """Shuts the request's socket down at the deadline, so a blocked read returns at once."""

    def __init__(self, deadline_s: float) -> None:
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.fired = False
        self._timer = threading.Timer(deadline_s, self._fire)
        self._timer.daemon = True

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                self._sock = sock if isinstance(sock, socket.socket) else None
                if self.fired:
                    self._shut()

    def _shut(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shut()

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def bounded_get(url: str, *, headers: dict[str, str] | None = None, limit: int = 16 * MiB,
                deadline_s: float = 30.0, connect_s: float | None = None) -> Fetched:
    """GET ``url``: at most ``limit`` body bytes, the whole exchange within ``deadline_s`` seconds.

    Raises ``httpx2.TransportError`` subclasses as httpx does (``httpx2.ReadTimeout`` once the deadline
    passed), and :class:`BodyTooLarge`."""
    import httpx2

    timeout = httpx2.Timeout(deadline_s, connect=min(connect_s or deadline_s, deadline_s))
    with _Watchdog(deadline_s) as dog, httpx2.Client(timeout=timeout, trust_env=False) as client:
        try:
            # identity: a compressed body could grow a thousandfold between two checks of its size
            with client.stream("GET", url, headers={"Accept-Encoding": "identity", **(headers or {})},
                               extensions={"trace": dog.trace}) as resp:
                body = bytearray()
                for block in resp.iter_bytes():
                    body += block
                    if len(body) > limit:
                        raise BodyTooLarge(url, limit)
                return Fetched(resp.status_code, resp.headers, bytes(body))
        except (httpx2.TransportError, OSError) as exc:
            if dog.fired and not isinstance(exc, httpx2.ConnectError):  # refused is refused, however late
                raise httpx2.ReadTimeout(f"no whole answer from {url} within {deadline_s:g} s") from exc
            raise
