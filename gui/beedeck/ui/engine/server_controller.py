"""The GUI's face of the app's server: the Qt-free :class:`~beedeck.core.serving.serving.Serving` (which owns the
server, its rules and its job thread) reports through typed signals, delivered on the GUI thread (queued from
the serving's job thread). No rule lives here: commands go to ``serving``."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.server_state import ServerState
from beedeck.core.serving import Serving, ServingEvents


class ServerController(QObject):
    """The ``serving``'s events as signals (:class:`~beedeck.core.serving.parts.ServingEvents` says when each
    comes): ``state_changed(ServerState)``, ``line_received(str)``, ``failed(ServerFailure)``, ``ready(str)``
    (base URL), ``stopped()``, ``caps_known(EngineCaps)``, ``port_fallback_used(int, int, str)`` (the port
    wanted, the port used instead, a line for the user), ``remote_attached(RemoteInfo)``,
    ``refused(ServerFailure)`` (Settings → Launch refused: the running server kept) and
    ``replace_started(str)`` (it passed: the running server stops now). ``serving`` defaults to one with
    the real parts; tests pass their own."""

    state_changed = Signal(ServerState)
    line_received = Signal(str)
    failed = Signal(ServerFailure)
    ready = Signal(str)
    stopped = Signal()
    caps_known = Signal(EngineCaps)
    port_fallback_used = Signal(int, int, str)
    remote_attached = Signal(RemoteInfo)
    refused = Signal(ServerFailure)
    replace_started = Signal(str)

    def __init__(self, parent: QObject | None = None, serving: Serving | None = None) -> None:
        super().__init__(parent)
        self.serving = serving if serving is not None else Serving()
        self.serving.events = ServingEvents(
            state_changed=self.state_changed.emit, line=self.line_received.emit, ready=self.ready.emit,
            failed=self.failed.emit, stopped=self.stopped.emit, caps_known=self.caps_known.emit,
            port_moved=self.port_fallback_used.emit, attached=self.remote_attached.emit, refused=self.refused.emit,
            replace_started=self.replace_started.emit)
