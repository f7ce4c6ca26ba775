"""A long command's work on a worker thread, so that Ctrl-C cancels it cleanly (the server is stopped,
what was measured is kept) instead of tearing through it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    """What the work returned or raised, and whether Ctrl-C was pressed while it ran."""

    result: T | None = None
    error: BaseException | None = None
    interrupted: bool = False

    def unwrap(self) -> T:
        """The result, or the work's own exception raised again here."""
        if self.error is not None:
            raise self.error
        assert self.result is not None, "the work returned nothing"
        return self.result


def run_interruptible(work: Callable[[], T], cancel: threading.Event, name: str) -> Outcome[T]:
    """Run ``work`` on a thread; each Ctrl-C sets ``cancel`` (which ``work`` watches) and the wait goes on
    until ``work`` has returned. Polled with sleep, not Thread.join: a Ctrl-C that lands inside join()
    can leave is_alive() False while the worker still runs (measured on the tune command: the result was
    read before the search had returned it)."""
    out: Outcome[T] = Outcome()
    finished = threading.Event()

    def run() -> None:
        try:
            out.result = work()
        except BaseException as exc:  # handed to the caller, on its own thread
            out.error = exc
        finally:
            finished.set()

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    while not finished.is_set():
        try:
            time.sleep(0.2)
        except KeyboardInterrupt:
            out.interrupted = True
            cancel.set()
    worker.join()
    return out
