"""What changes in the window's labels and actions when the profile is a server BeeDeck did not start.

Start/Stop read Connect/Disconnect; once attached, the status bar says what the server is (model,
context, speculation, engine) and the endpoint label's tooltip repeats it; once it is gone, the labels
say so. Whether the Baseline | <modes> switch can switch such a server is the switch's rule
(:mod:`beedeck.core.engine.speculation.remote_switch`), carried out by the session.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.server_state import ServerState
from beedeck.core.profile import Profile
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.server_controller import ServerController


class RemoteBinding(QObject):
    """Binds a remote profile to the window's Start/Stop actions, its engine and model labels and the
    endpoint label. Call :meth:`profile_set` whenever the window shows a new profile."""

    def __init__(self, controller: ServerController, start_action: QAction, stop_action: QAction,
                 engine_label: QLabel, pair_label: QLabel, endpoint: EndpointLabel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.start_action, self.stop_action = start_action, stop_action
        self.engine_label, self.pair_label, self.endpoint = engine_label, pair_label, endpoint
        self.profile: Profile | None = None
        self.info: RemoteInfo | None = None
        controller.remote_attached.connect(self._on_attached)
        controller.state_changed.connect(self._on_state)

    def profile_set(self, profile: Profile | None) -> None:
        self.profile = profile
        remote = profile is not None and profile.is_remote
        self.start_action.setText("Connect" if remote else "Start")
        self.stop_action.setText("Disconnect" if remote else "Stop")
        if remote:
            assert profile is not None
            self.start_action.setToolTip(f"Connect to the llama-server at {profile.engine}")
            self.stop_action.setToolTip("Disconnect (the server keeps running where it is)")
        else:
            self.start_action.setToolTip("Start the server with the current profile")
            self.stop_action.setToolTip("Stop the server")

    def _on_attached(self, info: RemoteInfo) -> None:
        self.info = info
        ctx = f"{info.n_ctx:,} tokens" if info.n_ctx else "?"
        self.pair_label.setText(f"model: {info.model_name} · context {ctx} · speculation {info.speculation()}")
        self.engine_label.setText(f"engine: {info.engine} {info.build_name} (running server)")
        self.endpoint.set_details(info.summary())

    def _on_state(self, state: ServerState) -> None:
        if state.running or self.info is None:
            return
        self.info = None
        self.endpoint.set_details("")
        if self.profile is not None and self.profile.is_remote:
            self.pair_label.setText("model: —")
            # Never "(running server)" once it is gone: disconnected, or it stopped answering.
            gone = "not connected" if state == ServerState.STOPPED else "not answering"
            self.engine_label.setText(f"engine: {self.profile.label or self.profile.engine} ({gone})")
