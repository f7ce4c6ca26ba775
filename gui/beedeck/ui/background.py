"""``run_in_background(fn, on_done)``: short blocking jobs (probe a binary, read a GGUF header, list
GPUs) off the GUI thread, with the result delivered back on the GUI thread (Anki's pattern)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal


class _Relay(QObject):
    """Lives on the GUI thread; its signals carry the result back there (queued)."""

    done = Signal(object)
    errored = Signal(object)


class _Job(QRunnable):
    def __init__(self, fn: Callable[[], Any], relay: _Relay) -> None:
        super().__init__()
        self._fn = fn
        self._relay = relay

    def run(self) -> None:
        try:
            result = self._fn()
        except BaseException as exc:  # every failure must reach the GUI, never vanish
            exc.__beedeck_traceback__ = traceback.format_exc()  # type: ignore[attr-defined]
            self._emit(self._relay.errored, exc)
            return
        self._emit(self._relay.done, result)

    def _emit(self, signal: Any, value: object) -> None:
        # The app may be quitting (its QObjects deleted) while a job still runs: nobody is left to tell.
        if shiboken6.isValid(self._relay):
            try:
                signal.emit(value)
            except RuntimeError:
                pass


_live: set[_Relay] = set()  # keeps relays alive until their job reported


# What views take to run short jobs: ``runner(fn, on_done, on_error)``. run_in_background is the
# real one; tests pass a synchronous runner.
Runner = Callable[[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]], None]


def run_in_background(
    fn: Callable[[], Any],
    on_done: Callable[[Any], None],
    on_error: Callable[[BaseException], None] | None = None,
    pool: QThreadPool | None = None,
    owner: QObject | None = None,
) -> None:
    """Run ``fn()`` on a pool thread; call ``on_done(result)`` or ``on_error(exc)`` on the GUI thread.

    Must be called from the GUI thread. ``pool`` can be injected (tests use a private pool and wait
    on it). With ``owner`` (the widget the callbacks touch), a result that arrives after the owner
    was destroyed is dropped instead of reaching a deleted widget.
    """
    relay = _Relay()
    _live.add(relay)

    def owner_gone() -> bool:
        return owner is not None and not shiboken6.isValid(owner)

    def finish_ok(result: object) -> None:
        _live.discard(relay)
        if not owner_gone():
            on_done(result)

    def finish_err(exc: object) -> None:
        _live.discard(relay)
        if owner_gone():
            return
        if on_error is not None:
            on_error(exc)  # type: ignore[arg-type]
        else:
            raise exc  # type: ignore[misc]

    relay.done.connect(finish_ok)
    relay.errored.connect(finish_err)
    (pool or QThreadPool.globalInstance()).start(_Job(fn, relay))
