"""A QThread worker that runs one core callable with BeeDeck's callback protocol.

Core functions report through plain callbacks (``on_progress(done, total)``, ``on_line(text)``) and
stop when a ``threading.Event`` is set (house-style.md). :class:`TaskRunner` adapts them to Qt
signals, so a widget never touches a worker and a worker never touches a widget.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, QThread, Signal

log = logging.getLogger(__name__)


class TaskFn(Protocol):
    """What a task is: a callable taking the three keyword callbacks and returning a result."""

    def __call__(
        self,
        *,
        on_progress: Callable[[int, int | None], None],
        on_line: Callable[[str], None],
        cancel_event: threading.Event,
    ) -> Any: ...


class _Worker(QObject):
    progress = Signal(object, object)
    eta = Signal(object)
    line = Signal(str)
    done = Signal(object)
    error = Signal(object)

    def __init__(self, fn: TaskFn, cancel: threading.Event) -> None:
        super().__init__()
        self._fn = fn
        self._cancel = cancel

    def run(self) -> None:
        try:
            result = self._fn(on_progress=self._progress, on_line=self.line.emit, cancel_event=self._cancel)
        except BaseException as exc:  # every failure must reach the GUI as a message, never vanish
            log.debug("task failed: %s", traceback.format_exc())
            self.error.emit(exc)
            return
        self.done.emit(result)

    def _progress(self, done: object, total: object, eta: float | None = None) -> None:
        """``on_progress(done, total)``, or a build's ``(done, total, seconds left)``."""
        self.progress.emit(done, total)
        if eta is not None:
            self.eta.emit(eta)


class TaskRunner(QObject):
    """Runs one task at a time on its own QThread.

    Signals: ``started_running()``, ``progress_changed(int, int)`` (done, total; total 0 = unknown),
    ``eta_changed(float)`` (seconds left, where the task reports it: a build), ``line_received(str)``, ``finished(object)`` (the result), ``failed(str)`` (a message for people;
    the exception is in :attr:`last_error`), ``cancelled()``.
    """

    started_running = Signal()
    progress_changed = Signal(int, int)
    eta_changed = Signal(float)
    line_received = Signal(str)
    finished = Signal(object)
    failed = Signal(str)
    cancelled = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: _Worker | None = None
        self._cancel = threading.Event()
        self.last_error: BaseException | None = None

    def is_running(self) -> bool:
        return self._thread is not None

    def start(self, fn: TaskFn, *, here: bool = False) -> None:
        """Run ``fn`` in the background (``here``: on this thread, at once, with the same signals: a short task
        that changes what this thread owns, such as the setup's save). Raises RuntimeError if a task is already
        running."""
        if self._thread is not None:
            raise RuntimeError("A task is already running: wait for it or cancel it first.")
        self._cancel = threading.Event()
        self.last_error = None
        if here:
            self._run_here(fn)
            return
        thread = QThread()
        worker = _Worker(fn, self._cancel)
        worker.moveToThread(thread)
        thread.started.connect(worker.run)
        worker.progress.connect(self._on_worker_progress)
        worker.eta.connect(lambda seconds: self.eta_changed.emit(float(seconds)))
        worker.line.connect(self.line_received)
        worker.done.connect(self._on_worker_done)
        worker.error.connect(self._on_worker_error)
        self._thread, self._worker = thread, worker
        thread.start()
        self.started_running.emit()

    def _run_here(self, fn: TaskFn) -> None:
        self.started_running.emit()

        def progress(done: object, total: object, eta: float | None = None) -> None:
            self._on_worker_progress(done, total)
            if eta is not None:
                self.eta_changed.emit(float(eta))

        try:
            result = fn(on_progress=progress, on_line=self.line_received.emit, cancel_event=self._cancel)
        except Exception as exc:  # said as a task's failure, as from a worker
            log.debug("task failed: %s", traceback.format_exc())
            self._on_worker_error(exc)
            return
        self.finished.emit(result)

    def cancel(self) -> None:
        """Ask the task to stop; thread-safe and immediate (an Event, not a queued slot)."""
        self._cancel.set()

    def shutdown(self, timeout_ms: int | None = None) -> None:
        """Cancel and wait for the thread: call from the owner's close handler.

        By default it waits until the task has returned: every core task stops its children on
        cancel (a build needs up to 2 x STOP_GRACE_S to kill its compilers), and a QThread destroyed
        while running aborts the whole app, leaving the build's process group behind.
        """
        self.cancel()
        if self._thread is not None:
            self._thread.quit()
            if timeout_ms is None:
                self._thread.wait()
            else:
                self._thread.wait(timeout_ms)

    def _on_worker_progress(self, done: object, total: object) -> None:
        # Byte counts of model files pass 2**31: scale both to keep within a C int.
        d, t = int(done or 0), int(total or 0)  # type: ignore[call-overload]
        scale = 1
        while max(d, t) // scale > 2**31 - 1:
            scale *= 1024
        self.progress_changed.emit(d // scale, t // scale)

    def _finish(self) -> None:
        thread = self._thread
        self._thread, self._worker = None, None
        if thread is not None:
            thread.quit()
            thread.wait()
            thread.deleteLater()

    def _on_worker_done(self, result: object) -> None:
        self._finish()
        self.finished.emit(result)

    def _on_worker_error(self, exc: object) -> None:
        self._finish()
        assert isinstance(exc, BaseException)
        self.last_error = exc
        if self._cancel.is_set():
            self.cancelled.emit()
            return
        self.failed.emit(str(exc) or type(exc).__name__)
