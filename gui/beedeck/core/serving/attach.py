"""A server BeeDeck did not start, attached: its ``/health`` watched on a thread of its own
(core/engine/remote.py ``watch_health``: a stopped server is noticed in about 0.5 s, a hung one in 1.7 s),
and polled at once when a request to it failed."""

from __future__ import annotations

import threading
from collections.abc import Callable

from beedeck.core.engine.remote import RemoteError, watch_health


class RemoteWatch:
    """Watches the server at ``url`` until :meth:`end`; ``on_end(watch, failure)`` is told once the watch ends,
    with the failure when the server went away (None when it was ended)."""

    def __init__(self, url: str, api_key: str | None, interval_s: float) -> None:
        self.url, self.api_key, self.interval_s = url, api_key, interval_s
        self._stop = threading.Event()
        self._poke = threading.Event()

    def start(self, on_end: Callable[[RemoteWatch, RemoteError | None], None]) -> None:
        def run() -> None:
            on_end(self, watch_health(self.url, self._stop, self.interval_s, api_key=self.api_key, poke=self._poke))

        threading.Thread(target=run, name="beedeck-remote-health", daemon=True).start()

    @property
    def ended(self) -> bool:
        return self._stop.is_set()

    def poke(self) -> None:
        """Check now rather than at the next poll (a chat request to it failed)."""
        self._poke.set()

    def end(self) -> None:
        self._stop.set()
        self._poke.set()  # wakes the watch, which sees it is ended
