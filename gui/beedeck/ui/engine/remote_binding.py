"""What changes in the window when the profile is a server BeeDeck did not start.

Start/Stop read Connect/Disconnect; once attached, the status bar says what the server is (model,
context, speculation, engine) and the endpoint label's tooltip repeats it. The Baseline | DFlash
toggle cannot restart a server BeeDeck did not start, so it is offered only where the per-request
check (:func:`beedeck.core.engine.speculation.switching.check_per_request`, two short replies off the GUI thread)
proves a "no drafts" request is honoured; otherwise it is disabled on the mode the server runs (so
each reply is labelled with what really produced it) and its tooltip says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel

from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.remote import RemoteError, RemoteInfo
from beedeck.core.engine.speculation.switching import PerRequestVerdict, check_per_request
from beedeck.core.profile import Profile
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.speculation.mode_toggle import ModeToggle

NOT_OURS = "BeeDeck did not start this server, so it cannot restart it with or without a draft"
# Speculation types whose drafts a per-request "no drafts" could switch off (a DFlash draft; a
# BeeLlama 0.1-0.3 server reports no type and treats any draft as DFlash).
_DFLASH_LIKE = ("", "on", "dflash", "draft-dflash")


class NoticeTarget(Protocol):
    """Where the binding says what the chat is waiting for (the chat pane)."""

    def set_notice(self, text: str) -> None: ...


class RemoteHost(Protocol):
    """What the binding needs of the window (the window itself, by composition)."""

    start_action: QAction
    stop_action: QAction
    mode: ModeToggle
    engine_label: QLabel
    pair_label: QLabel
    endpoint: EndpointLabel
    client_factory: Callable[[str, str | None], Any]

    @property
    def chat(self) -> NoticeTarget: ...

    @property
    def controller(self) -> ServerController: ...


def served_settings(info: RemoteInfo) -> LaunchSettings:
    """What the attached server runs, as launch settings the toggle understands (its mode only)."""
    first = info.spec_types.split(",")[0].strip()
    mode = {"draft-mtp": SpecMode.MTP, "draft-eagle3": SpecMode.EAGLE3, "draft-dspark": SpecMode.DSPARK}.get(first)
    if mode is None and first.startswith("ngram"):
        return LaunchSettings(target=info.model, spec_mode=SpecMode.MODEL_FREE, spec_model_free_type=first)
    mode = mode or SpecMode.DFLASH
    return LaunchSettings(target=info.model, draft=None if mode == SpecMode.MTP else "(loaded on the server)",
                          spec_mode=mode)


def toggle_reason(info: RemoteInfo) -> str | None:
    """Why the toggle cannot be offered on this server before any check (None: check per request)."""
    if info.speculative is None:
        return f"{NOT_OURS}, and it does not tell whether it speculates (its /slots endpoint is off)."
    if not info.speculative:
        return f"This server runs without speculation, and {NOT_OURS[0].lower()}{NOT_OURS[1:]}: replies use Baseline."
    if info.spec_types not in _DFLASH_LIKE and "dflash" not in info.spec_types:
        return (f"This server speculates with {info.spec_types}; BeeDeck switches a running server only between "
                f"Baseline and DFlash, per request, and {NOT_OURS[0].lower()}{NOT_OURS[1:]}.")
    return None


class RemoteBinding(QObject):
    """Binds a remote profile's behaviour to the window's actions, labels and mode toggle.

    Call :meth:`profile_set` whenever the window shows a new profile. Signal ``toggle_checked(object)``
    carries the PerRequestVerdict (or the exception) of a check on an attached server.
    ``runner`` runs the per-request check (tests: inline); ``client_factory(url, key)`` makes its client.
    """

    toggle_checked = Signal(object)

    def __init__(self, controller: ServerController, start_action: QAction, stop_action: QAction,
                 toggle: ModeToggle, engine_label: QLabel, pair_label: QLabel, endpoint: EndpointLabel,
                 client_factory: Callable[[str, str | None], Any], parent: QObject | None = None, *,
                 runner: Runner | None = None, notice: NoticeTarget | None = None) -> None:
        super().__init__(parent)
        self.controller, self.toggle = controller, toggle
        self.start_action, self.stop_action = start_action, stop_action
        self.engine_label, self.pair_label, self.endpoint = engine_label, pair_label, endpoint
        self.client_factory = client_factory
        self.notice = notice
        self.runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self.profile: Profile | None = None
        self.info: RemoteInfo | None = None
        self.reason = ""  # why the toggle is off on the attached server ("" when it is offered)
        controller.remote_attached.connect(self._on_attached)
        controller.state_changed.connect(self._on_state)
        controller.failed.connect(self._on_failed)

    @classmethod
    def for_host(cls, host: RemoteHost) -> RemoteBinding:
        """The binding of a window's parts; the client factory is looked up at use (tests replace it)."""
        return cls(host.controller, host.start_action, host.stop_action, host.mode, host.engine_label,
                   host.pair_label, host.endpoint, lambda url, key: host.client_factory(url, key),
                   host if isinstance(host, QObject) else None, notice=host.chat)

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

    # -- attached --------------------------------------------------------------------------
    def _on_attached(self, info: RemoteInfo) -> None:
        self.info = info
        ctx = f"{info.n_ctx:,} tokens" if info.n_ctx else "?"
        self.pair_label.setText(f"model: {info.model_name} · context {ctx} · speculation {info.speculation()}")
        self.engine_label.setText(f"engine: {info.engine} {info.build_info} (running server)")
        self.endpoint.set_details(info.summary())
        reason = toggle_reason(info)
        if reason is not None:
            if info.speculative:
                self._freeze(info, reason)
            else:
                self._disable(reason)
            return
        self._disable(f"{NOT_OURS}: checking whether it honours a per-request 'no drafts'…", "checking…")
        api_key = self.controller.settings.api_key if self.controller.settings else None
        client = self.client_factory(info.url, api_key)

        def done(verdict: PerRequestVerdict) -> None:
            self._on_verdict(info, verdict)

        def failed(exc: BaseException) -> None:
            if self.info is info:
                self._freeze(info, f"{NOT_OURS}, and the per-request check failed ({exc}).")
            self.toggle_checked.emit(exc)

        self.runner(lambda: check_per_request(client), done, failed)

    def _on_verdict(self, info: RemoteInfo, verdict: PerRequestVerdict) -> None:
        if self.info is not info:
            return  # disconnected (or reconnected) meanwhile
        if verdict.honoured:
            self.toggle.configure(served_settings(info), None, per_request=True, local_files=False)
            self.toggle.set_per_request(True, verdict.describe())
            self.reason = ""
        else:
            what = verdict.describe().split(", so ")[0]
            self._freeze(info, f"{NOT_OURS}, and {what}: Baseline cannot be honest here.")
        self.toggle_checked.emit(verdict)

    def _on_failed(self, failure: object) -> None:
        """A restart was asked of a server not ours (a "baseline" reply drafted after all): the
        per-request path is wrong here, so the toggle stays on what the server runs."""
        if isinstance(failure, RemoteError) and failure.kind == "no-restart" and self.info is not None:
            self._freeze(self.info, f"{NOT_OURS}, and a reply that asked for no drafts still drafted: this server "
                                    "ignores a per-request 'no drafts'.")

    def _freeze(self, info: RemoteInfo, reason: str) -> None:
        """The toggle on the mode the server runs, disabled: replies are labelled with what made them."""
        self.reason = reason
        self.toggle.configure(served_settings(info), None, per_request=False, local_files=False)
        self.toggle.setEnabled(False)
        self.toggle.set_status("the server's own speculation; no switching here")
        self.toggle.setToolTip(reason)

    def _disable(self, reason: str, status: str = "no switching on this server") -> None:
        self.reason = reason
        self.toggle.configure(None, None)
        self.toggle.set_status(status)
        self.toggle.setToolTip(reason)

    def _on_state(self, state: str) -> None:
        remote = self.profile is not None and self.profile.is_remote
        if remote and self.notice is not None and state in ("starting", "stopped"):
            assert self.profile is not None
            self.notice.set_notice(f"Connecting to {self.profile.engine}…" if state == "starting" else
                                   f"Not connected. Press Connect to chat with the server at {self.profile.engine}.")
        if state in ("ready", "starting", "loading") or self.info is None:
            return
        self.info, self.reason = None, ""
        self.endpoint.set_details("")
        if self.profile is not None and self.profile.is_remote:
            self.pair_label.setText("model: —")
            # Never "(running server)" once it is gone: disconnected, or it stopped answering.
            gone = "not connected" if state == "stopped" else "not answering"
            self.engine_label.setText(f"engine: {self.profile.label or self.profile.engine} ({gone})")
