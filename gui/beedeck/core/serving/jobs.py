"""Where a :class:`~beedeck.core.serving.serving.Serving` runs its jobs (a probe, a preflight, a start, a stop):
one after another, so a stop asked for during a start waits for it. :class:`JobThread` runs them off the
caller's thread (the app: the GUI never waits on a server); :class:`Inline` runs each at once (plain tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

Job = Callable[[], None]


class Jobs(Protocol):
    """Runs jobs in the order they are submitted."""

    def submit(self, job: Job) -> None: ...
    def busy(self) -> bool: ...
    def wait(self, timeout_s: float | None = None) -> bool: ...


class JobThread:
    """Each job on a background thread of its own that first waits for the one before (a chain), so the jobs
    run in order and nothing waits on the submitting thread."""

    def __init__(self, name: str = "beedeck-server") -> None:
        self.name = name
        self._last: threading.Thread | None = None

    def submit(self, job: Job) -> None:
        previous = self._last

        def run() -> None:
            if previous is not None:
                previous.join()  # jobs run in order: a stop issued during a start waits for it
            job()

        self._last = threading.Thread(target=run, name=self.name, daemon=True)
        self._last.start()

    def busy(self) -> bool:
        """Whether a job runs or waits to run."""
        last = self._last
        return last is not None and last.is_alive()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the jobs submitted so far (at most ``timeout_s``); whether they are all done."""
        last = self._last
        if last is not None:
            last.join(timeout_s)
        return not self.busy()


class Inline:
    """Runs each job at once, on the submitting thread (deterministic: the serving rules' plain tests)."""

    def submit(self, job: Job) -> None:
        job()

    def busy(self) -> bool:
        return False

    def wait(self, timeout_s: float | None = None) -> bool:
        return True
