"""What the benchmark and auto-tune views share: a core call (``run_bench``, ``tune``) run by a
:class:`CoreWorker` on a QThread, its callbacks arriving as queued signals, so no widget is touched
off the GUI thread; the :class:`RunView` base that starts, ends and shuts down that thread; and the
results table.

Signals of a :class:`RunView`: ``run_started()``, ``progress_changed(int, int, str)``,
``run_finished(object)`` (the result, partial when cancelled; None when the run failed).

No subclass overrides a ``@Slot`` of :class:`RunView`: PySide6 6.11 then calls the override directly
on the worker's thread under AutoConnection, and never at all under QueuedConnection (a progress
bar painted from the worker thread crashed the app: SIGSEGV in QProgressBar::paintEvent, 1 run in 6
of the window's benchmark test). Subclasses listen to the signals instead.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal, Slot
from PySide6.QtWidgets import (
    QFileDialog,
    QHeaderView,
    QLabel,
    QProgressBar,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from beedeck.core.bench.suites import BenchError
from beedeck.core.engine.ports import HostError


def results_table(columns: Sequence[str]) -> QTableWidget:
    """An empty table with these headings, every heading readable in full however narrow the window."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.verticalHeader().setVisible(False)
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    return table


def append_row(table: QTableWidget, cells: Iterable[str]) -> None:
    row = table.rowCount()
    table.insertRow(row)
    for col, text in enumerate(cells):
        table.setItem(row, col, QTableWidgetItem(text))


class CoreWorker(QObject):
    """Runs ``fn(**kwargs, on_progress=..., cancel_event=cancel)`` on its QThread; core callbacks become
    queued signals. ``what`` names the run in the message of an unexpected failure; subclasses add
    callbacks in :meth:`callbacks`."""

    progressed = Signal(int, int, str)
    finished = Signal(object)
    failed = Signal(str)
    what = "The run"

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any], cancel: threading.Event) -> None:
        super().__init__()
        self.fn, self.kwargs, self.cancel = fn, kwargs, cancel

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        return {"on_progress": self.progressed.emit}

    @Slot()
    def run(self) -> None:
        try:
            result = self.fn(**self.kwargs, **self.callbacks(), cancel_event=self.cancel)
        except (BenchError, HostError) as exc:  # said as it is: a bad --host is no crash
            self.failed.emit(str(exc))
            return
        except Exception as exc:  # every failure must reach the view, never vanish in a thread
            self.failed.emit(f"{self.what} stopped unexpectedly: {type(exc).__name__}: {exc}")
            return
        self.finished.emit(result)


class RunView(QWidget):
    """A view that runs one :class:`CoreWorker` at a time. Subclasses make ``status`` and ``progress``,
    show a result in :meth:`_show` and set their buttons back in :meth:`_after_run`."""

    run_started = Signal()
    progress_changed = Signal(int, int, str)
    run_finished = Signal(object)

    status: QLabel
    progress: QProgressBar

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._thread: QThread | None = None
        self._worker: CoreWorker | None = None
        self._cancel = threading.Event()

    @property
    def running(self) -> bool:
        return self._thread is not None

    def _write_to_chosen_folder(self, title: str, write: Callable[[Path], list[Path]], done: str) -> None:
        """Ask for a folder, write the reports there and say how many files went where, or why none did."""
        folder = QFileDialog.getExistingDirectory(self, title)
        if not folder:
            return
        try:
            files = write(Path(folder))
        except OSError as exc:
            self.status.setText(f"The files could not be written to {folder}: {exc}. Pick a writable folder.")
            return
        self.status.setText(f"{done} {len(files)} files to {folder}.")

    def _begin(self, worker: CoreWorker) -> QThread:
        """Put ``worker`` on a new thread of this view, wired to the slots below; the caller starts it."""
        self._thread = QThread(self)
        self._worker = worker
        worker.moveToThread(self._thread)
        self._thread.started.connect(worker.run)
        worker.progressed.connect(self._on_progressed)
        worker.finished.connect(self._on_finished)
        worker.failed.connect(self._on_failed)
        return self._thread

    def _end_thread(self) -> None:
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait()
            self._thread.deleteLater()
        if self._worker is not None:
            self._worker.deleteLater()
        self._thread = self._worker = None
        self._after_run()

    def _after_run(self) -> None:
        """The buttons as they are between runs."""

    def shutdown(self) -> None:
        """Cancel a run and wait for its thread (the owner calls this on close)."""
        if self.running:
            self._cancel.set()
            self._end_thread()

    @Slot(int, int, str)
    def _on_progressed(self, done: int, total: int, label: str) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.status.setText(label)
        self.progress_changed.emit(done, total, label)

    @Slot(str)
    def _on_failed(self, message: str) -> None:
        self._end_thread()
        self.status.setText(message)
        self.run_finished.emit(None)

    @Slot(object)
    def _on_finished(self, result: object) -> None:
        self._end_thread()
        self._show(result)
        self.run_finished.emit(result)

    def _show(self, result: Any) -> None:
        raise NotImplementedError
