"""The launch form's RPC worker list: which machines lend their devices, checked through the engine.

Each edit is probed off the GUI thread with ``llama-server --rpc ... --list-devices``
(:func:`beedeck.core.engine.rpc.probe.probe_workers`): the devices and free memory found feed the
memory plan; a worker of another build, one that is not running or an engine without RPC is
named, and Launch stays greyed until the list checks out: :meth:`RpcWorkersEditor.result` is what the
launch preflight (:func:`beedeck.core.launcher.preflight`, ``rpc=``) judges, as a launch judges its own probe.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton, QVBoxLayout, QWidget

from beedeck.core.engine.rpc import NO_AUTH_WARNING, PROBE_FAILED, RpcError, Worker, parse_workers
from beedeck.core.engine.rpc.probe import RpcDevice, probe_workers
from beedeck.core.launcher import UNSET, Unset
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.wrap_label import WrapLabel


class RpcWorkersEditor(QWidget):
    """A ``host:port, host:port`` field, a Check button and what the check found.

    Signals: ``workers_changed()`` on an edit; ``devices_probed(list)`` with the list of RpcDevice
    (workers first) once a check succeeded, or an empty list when it failed or the list was cleared.
    ``probe`` (engine, workers) and ``runner`` are injectable for tests.
    """

    workers_changed = Signal()
    devices_probed = Signal(list)

    def __init__(self, parent: QWidget | None = None, *, runner: Runner | None = None,
                 probe: Callable[[str, Sequence[Worker]], list[RpcDevice]] = probe_workers) -> None:
        super().__init__(parent)
        self._runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self._probe = probe
        self.engine: str | None = None
        self.devices: list[RpcDevice] = []
        self._problem: RpcError | None = None  # why the last check of the current list failed
        self._checked: tuple[str | None, tuple[Worker, ...]] | None = None  # what self.devices are of
        self._probing = 0
        self._in_flight: tuple[str | None, tuple[Worker, ...]] | None = None  # the list being probed now
        self.edit = QLineEdit(placeholderText="none (this machine only); e.g. 192.168.1.21:50052")
        self.edit.setToolTip("RPC workers (`beedeck worker` on each machine) that hold part of the model.\n"
                             + NO_AUTH_WARNING)
        self.edit.editingFinished.connect(lambda: self.check(force=False))  # focus-out: only what is new
        self.edit.textChanged.connect(self._on_text_changed)
        self.check_button = QPushButton("Check workers")
        self.check_button.clicked.connect(lambda: self.check(force=True))
        self.status = WrapLabel()
        self.status.setObjectName("rpc-status")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addWidget(self.check_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.status)
        self._on_text_changed()

    # -- values ----------------------------------------------------------------------------
    def _parsed(self) -> tuple[list[Worker], RpcError | None]:
        try:
            return parse_workers(self.edit.text()), None
        except RpcError as exc:
            return [], exc

    def workers(self) -> list[str]:
        """The valid worker addresses, as LaunchSettings.rpc_workers stores them."""
        return [str(w) for w in self._parsed()[0]]

    def set_workers(self, workers: Sequence[str]) -> None:
        if ", ".join(workers) != self.edit.text():
            self.edit.setText(", ".join(workers))
            self.check(force=False)

    def set_engine(self, engine: str | None) -> None:
        if engine != self.engine:
            self.engine = engine
            self.check(force=False)

    def result(self) -> list[RpcDevice] | RpcError | Unset:
        """What the preflight judges: the devices of the list as checked (empty: no workers), why the list
        cannot be used (an address that does not parse, a worker the check refused), or UNSET while the list
        is not checked yet (Launch waits for it)."""
        workers, error = self._parsed()
        if error:
            return error
        if not workers:
            return []
        if self._checked != (self.engine, tuple(workers)):
            return UNSET
        return self._problem or self.devices

    # -- checking --------------------------------------------------------------------------
    def _on_text_changed(self) -> None:
        workers, error = self._parsed()
        self.check_button.setEnabled(bool(workers) and self.engine is not None)
        if error:
            self._show(f"{error.message} {error.remedy}", bad=True)
        elif not workers:
            self._show("")
        if self.devices and self._checked != (self.engine, tuple(workers)):
            self.devices = []
            self.devices_probed.emit([])
        self.workers_changed.emit()

    def check(self, force: bool = True) -> None:
        """Probe the listed workers through the engine (off the GUI thread). Without ``force`` (a
        focus-out, a form load) a list already checked, or being checked, is not probed again: each
        probe runs the engine and may wait seconds on a worker."""
        workers, error = self._parsed()
        if error or not workers:
            self._problem = None
            self._on_text_changed()
            return
        if self.engine is None:
            self._problem = None
            self._show("Pick the engine first: the workers are checked through it.", bad=True)
            return
        engine, key = self.engine, (self.engine, tuple(workers))
        if not force and (key == self._checked or key == self._in_flight):
            return
        self._problem = None
        self._in_flight = key
        self._probing += 1
        self._show(f"Checking {', '.join(map(str, workers))}…")

        def done(devices: list[RpcDevice]) -> None:
            self._probing -= 1
            if self._in_flight == key:
                self._in_flight = None
            if (self.engine, tuple(self._parsed()[0])) != key:
                return  # edited meanwhile: a newer check follows
            self.devices, self._checked, self._problem = devices, key, None
            self._show("; ".join(f"{d.worker or 'this machine'}: {d.name} {d.description}, "
                                 f"{d.free_mib:,} of {d.total_mib:,} MiB free" for d in devices))
            self.devices_probed.emit(devices)
            self.workers_changed.emit()

        def failed(exc: BaseException) -> None:
            self._probing -= 1
            if self._in_flight == key:
                self._in_flight = None
            if (self.engine, tuple(self._parsed()[0])) != key:
                return
            error = exc if isinstance(exc, RpcError) else RpcError(
                PROBE_FAILED, f"The check failed: {exc}", "Check the engine and the workers, then Check workers again.")
            self.devices, self._checked, self._problem = [], key, error
            self._show(f"{error.message} {error.remedy}", bad=True)
            self.devices_probed.emit([])
            self.workers_changed.emit()

        self._runner(lambda: self._probe(engine, workers), done, failed)

    def is_checking(self) -> bool:
        return self._probing > 0

    def _show(self, text: str, bad: bool = False) -> None:
        self.status.setStyleSheet("color: #d62728;" if bad else "color: palette(placeholder-text);")
        self.status.setText(html.escape(text) if text else "")
        self.status.setVisible(bool(text))
