"""What the main window's Benchmark and Tune dialogs share: a note and a button above their view, the
engine's capabilities (probed off the GUI thread when the session does not know them yet), stopping
the chat server so the view can start its own (started again when the dialog closes), and teaching
the learnt advice what a run measured. They get the session and a parent widget."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from beedeck.core.bench.advice_feed import AdviceSample
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.ui.background import run_in_background
from beedeck.ui.bench.run_view import RunView
from beedeck.ui.screen_fit import available_area, fit_to
from beedeck.ui.session import Session


class ChatServerDialog(QDialog):
    """Base of the dialogs: subclasses make ``view`` and call :meth:`_lay_out`, and implement
    :meth:`configure` (set the view up from the session's profile) and :meth:`_use_caps`."""

    view: RunView

    def __init__(self, session: Session, parent: QWidget | None, title: str) -> None:
        super().__init__(parent)
        self.session = session
        self.stopped_chat_server = False
        self.setWindowTitle(title)
        self.note = QLabel()
        self.note.setWordWrap(True)

    def _lay_out(self, button: QPushButton, height: int) -> None:
        """The note and ``button`` (hidden until needed) in a row above the view."""
        button.hide()
        row = QHBoxLayout()
        row.addWidget(self.note, 1)
        row.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        fit_to(self, (1040, height), available_area(self, self.parentWidget()))

    def configure(self) -> None:
        raise NotImplementedError

    def _use_caps(self, caps: EngineCaps) -> None:
        raise NotImplementedError

    def _with_caps(self, engine: str) -> None:
        """:meth:`_use_caps` with ``engine``'s capabilities: at once when the session knows them, else
        once probed in the background (the session then learns them)."""
        caps = self.session.known_caps.get(engine)
        if caps is not None:
            self._use_caps(caps)
            return
        self.note.setText("Probing the engine…")
        probe = self.session.probe
        run_in_background(lambda: probe(engine), lambda caps: self._on_probed(engine, caps),
                          lambda exc: self.note.setText(f"The engine could not be probed: {exc}"), owner=self)

    def _on_probed(self, engine: str, caps: EngineCaps) -> None:
        self.session.learn_caps(engine, caps)
        if self.session.profile is not None and self.session.profile.engine == engine:
            self._use_caps(caps)

    def _stop_chat_server(self, button: QPushButton) -> None:
        """Stop the session's chat server (``button`` asked for it), then :meth:`configure` again."""
        button.setEnabled(False)
        self.note.setText("Stopping the chat server…")
        self.stopped_chat_server = True
        # A bound slot: the controller's thread delivers it on the GUI thread. "failed" counts too:
        # a server that was still starting may fail instead of stopping.
        self.session.controller.state_changed.connect(self._on_chat_server_state)
        self.session.stop_server()

    def _on_chat_server_state(self, state: ServerState) -> None:
        if state in (ServerState.STOPPED, ServerState.FAILED):
            self.session.controller.state_changed.disconnect(self._on_chat_server_state)
            self.configure()

    def _learn(self, advice: WorkloadAdvice, key: str, samples: list[AdviceSample], what: str) -> None:
        """Teach ``advice`` the measured replies off the GUI thread (it writes a file); a failure is
        said in the note, naming ``what`` taught it."""
        run_in_background(lambda: advice.learn(key, samples), lambda _n: None,
                          lambda exc: self.note.setText(f"The speed advice could not learn from this {what}: {exc}"),
                          owner=self)

    def _closed(self) -> None:
        """What a subclass releases when the dialog closes, before the chat server starts again."""

    def done(self, result: int) -> None:
        self.view.shutdown()
        super().done(result)
        self._closed()
        if self.stopped_chat_server and not self.session.closing and not self.session.server.is_running():
            self.session.start_server()
            self.stopped_chat_server = False
