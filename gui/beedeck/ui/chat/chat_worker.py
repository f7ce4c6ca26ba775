"""One streaming reply in a QThread: a Qt-free :class:`~beedeck.core.engine.client.ChatStream` iterated on
a worker, its pieces forwarded as signals.

Cancel is called from the GUI thread *directly* (``stream.cancel()`` is thread-safe: an event plus a
socket shutdown). Connecting a button to a slot of the worker object would queue the call to the
worker's thread, which is busy inside the stream, so it would run only after the reply ended
(docs/reference/python-stack.md §5).
"""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, QThread, Signal, Slot

from beedeck.core.engine.client_types import ChatResult


class _Delta(Protocol):
    content: str
    reasoning: str


class StreamLike(Protocol):
    """What :class:`ChatWorker` needs from a stream (``core.client.ChatStream`` has it)."""

    def __iter__(self) -> object: ...
    def cancel(self) -> None: ...
    @property
    def result(self) -> ChatResult: ...


class ChatWorker(QObject):
    """Runs one stream on a worker thread.

    Signals: ``delta_received(str)`` content pieces, ``reasoning_received(str)`` thinking pieces,
    ``finished(ChatResult)`` (also after a cancel, with ``cancelled`` set),
    ``failed(str)`` a readable error (the stream raised).
    """

    delta_received = Signal(str)
    reasoning_received = Signal(str)
    finished = Signal(ChatResult)
    failed = Signal(str)

    def __init__(self, stream: StreamLike) -> None:
        super().__init__()
        self.stream = stream

    @Slot()
    def run(self) -> None:
        try:
            for delta in self.stream:  # type: ignore[attr-defined]
                if delta.content:
                    self.delta_received.emit(delta.content)
                if delta.reasoning:
                    self.reasoning_received.emit(delta.reasoning)
        except Exception as exc:  # the GUI shows every failure; nothing may die silently
            self.failed.emit(str(exc) or type(exc).__name__)
            return
        self.finished.emit(self.stream.result)


class ChatRun(QObject):
    """Owns a :class:`ChatWorker` and its thread for one reply; forwards the worker's signals.

    Signals: ``delta_received(str)``, ``reasoning_received(str)``, ``finished(ChatResult)``,
    ``failed(str)``, and ``ended()`` once the thread has stopped (after finished/failed).
    """

    delta_received = Signal(str)
    reasoning_received = Signal(str)
    finished = Signal(ChatResult)
    failed = Signal(str)
    ended = Signal()

    def __init__(self, stream: StreamLike, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._stream = stream
        self._thread = QThread()
        self._thread.setObjectName("beedeck-chat")
        self._worker = ChatWorker(stream)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.delta_received.connect(self.delta_received)
        self._worker.reasoning_received.connect(self.reasoning_received)
        self._worker.finished.connect(self._on_worker_finished)
        self._worker.failed.connect(self._on_worker_failed)
        self._thread.finished.connect(self.ended)

    @property
    def worker(self) -> ChatWorker:
        return self._worker

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Thread-safe, immediate: the worker ends within ~100 ms and still emits ``finished``."""
        self._stream.cancel()

    def is_running(self) -> bool:
        return self._thread.isRunning()

    def wait(self, ms: int = 5000) -> bool:
        """Block until the worker thread ended (used on shutdown only, after :meth:`cancel`).

        The thread's event loop only ends on ``quit()``, which normally comes from the GUI thread
        once the worker's last signal is handled there; at shutdown that never happens, so quit
        here (exec() returns at once when quit came first). Without it the wait always timed out
        and the QThread was destroyed while still running.
        """
        self._thread.quit()
        return self._thread.wait(ms)

    def _stop_thread(self) -> None:
        # run() has returned by the time its last (queued) signal is handled here, so this wait is
        # a few microseconds; it guarantees no QThread is ever destroyed while running.
        self._thread.quit()
        self._thread.wait(5000)

    def _on_worker_finished(self, result: ChatResult) -> None:
        self._stop_thread()
        self.finished.emit(result)

    def _on_worker_failed(self, message: str) -> None:
        self._stop_thread()
        self.failed.emit(message)
