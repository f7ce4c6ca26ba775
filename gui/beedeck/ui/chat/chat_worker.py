"""One streaming reply in a QThread: a Qt-free :class:`~beedeck.core.engine.client.ChatStream` iterated on
a worker, its pieces forwarded as signals.

Cancel is called from the GUI thread *directly* (``stream.cancel()`` is thread-safe: an event plus a
socket shutdown). Connecting a button to a slot of the worker object would queue the call to the
worker's thread, which is busy inside the stream, so it would run only after the reply ended
(docs/reference/python-stack.md §5).

Pieces cross to the GUI thread in batches: the worker appends each piece to a locked buffer and posts
one "pieces ready" event only when the buffer was empty, so however fast the server streams (10,000
tokens/s) the GUI thread handles one queued call per turn of its event loop, not one per token, and
takes everything that arrived meanwhile at once.
"""

from __future__ import annotations

import threading
from typing import Protocol

from PySide6.QtCore import QMetaMethod, QObject, QThread, Signal, Slot

from beedeck.core.engine.client.answers import ChatResult, PromptProgress


class _Delta(Protocol):
    content: str
    reasoning: str
    progress: PromptProgress | None


class StreamLike(Protocol):
    """What :class:`ChatWorker` needs from a stream (``core.client.ChatStream`` has it)."""

    def __iter__(self) -> object: ...
    def cancel(self) -> None: ...
    @property
    def result(self) -> ChatResult: ...


class ChatWorker(QObject):
    """Runs one stream on a worker thread.

    Signals: ``delta_received(str)`` content pieces, ``reasoning_received(str)`` thinking pieces (both
    emitted on the worker thread: connect them directly, the GUI takes :meth:`take_pieces`),
    ``pieces_ready()`` the buffer went from empty to not empty, ``progress_received(PromptProgress)`` how far
    the server has read the prompt (a few per reply, before its first token), ``finished(ChatResult)`` (also
    after a cancel, with ``cancelled`` set), ``failed(str)`` a readable error (the stream raised).
    """

    delta_received = Signal(str)
    progress_received = Signal(object)
    reasoning_received = Signal(str)
    pieces_ready = Signal()
    finished = Signal(ChatResult)
    failed = Signal(str)

    def __init__(self, stream: StreamLike) -> None:
        super().__init__()
        self.stream = stream
        self._lock = threading.Lock()
        self._pieces: list[tuple[bool, str]] = []  # (is thinking, text), in arrival order

    def take_pieces(self) -> list[tuple[bool, str]]:
        """Everything that arrived since the last call (any thread)."""
        with self._lock:
            pieces, self._pieces = self._pieces, []
        return pieces

    def _put(self, thinking: bool, text: str) -> None:
        with self._lock:
            was_empty = not self._pieces
            self._pieces.append((thinking, text))
        if was_empty:
            self.pieces_ready.emit()

    @Slot()
    def run(self) -> None:
        try:
            for delta in self.stream:  # type: ignore[attr-defined]
                if delta.progress is not None:
                    self.progress_received.emit(delta.progress)
                if delta.content:
                    self.delta_received.emit(delta.content)
                    self._put(False, delta.content)
                if delta.reasoning:
                    self.reasoning_received.emit(delta.reasoning)
                    self._put(True, delta.reasoning)
        except Exception as exc:  # the GUI shows every failure; nothing may die silently
            self.failed.emit(str(exc) or type(exc).__name__)
            return
        self.finished.emit(self.stream.result)


class ChatRun(QObject):
    """Owns a :class:`ChatWorker` and its thread for one reply; forwards the worker's signals.

    Signals: ``pieces_received(list)`` the batch of (is thinking, text) pieces that arrived since the
    last one; ``delta_received(str)``, ``reasoning_received(str)`` the same, one piece at a time;
    ``progress_received(PromptProgress)`` how far the prompt is read; ``finished(ChatResult)``, ``failed(str)``
    after the last batch, and ``ended()`` once the thread has stopped (after finished/failed).
    """

    pieces_received = Signal(list)
    progress_received = Signal(object)
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
        self._worker.pieces_ready.connect(self._deliver)  # queued: the worker lives on its thread
        self._worker.progress_received.connect(self.progress_received)  # queued too, in order with the pieces
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

    def _deliver(self) -> None:
        pieces = self._worker.take_pieces()
        if not pieces:
            return
        self.pieces_received.emit(pieces)
        # One piece at a time only for whoever listens that way: at 10,000 tokens/s, 40,000 emits a reply
        # with nobody connected cost the GUI thread about a second (benchmarks/ui_stream.py).
        answer = self.isSignalConnected(QMetaMethod.fromSignal(self.delta_received))
        thinking_too = self.isSignalConnected(QMetaMethod.fromSignal(self.reasoning_received))
        if answer or thinking_too:
            for thinking, text in pieces:
                if thinking and thinking_too:
                    self.reasoning_received.emit(text)
                elif not thinking and answer:
                    self.delta_received.emit(text)

    def _on_worker_finished(self, result: ChatResult) -> None:
        self._stop_thread()
        self._deliver()  # the pieces that arrived after the last "ready" was handled
        self.finished.emit(result)

    def _on_worker_failed(self, message: str) -> None:
        self._stop_thread()
        self._deliver()
        self.failed.emit(message)
