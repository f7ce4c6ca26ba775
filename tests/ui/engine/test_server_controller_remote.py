"""A remote profile in the UI: the controller attaches instead of launching, the binding turns Start/Stop
into Connect/Disconnect, and the session's switch (the toggle shows it) is offered only where the per-request
check proves a "no drafts" request honoured. The check talks HTTP to the protocol-level fake llama-server
(a real BeeLlama 0.1-0.3 DFlash server is what honours it; tests/engine covers real servers)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import as_failure
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.remote import KEY_WRONG, RemoteError, RemoteInfo
from beedeck.core.engine.server import ServerState
from beedeck.core.engine.speculation.remote_switch import toggle_reason
from beedeck.core.engine.speculation.switching import NO_DRAFTS
from beedeck.core.profile import Profile, remote_profile
from beedeck.core.serving import Serving, ServingParts
from beedeck.core.settings import AppSettings
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.remote_binding import RemoteBinding
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.session import Session
from beedeck.ui.speculation.mode_toggle import ModeToggle
from tests.fakes.inline_runner import run_inline
from tests.fakes.sse_server import FakeLlamaServer, SSEScript

INFO = RemoteInfo(url="", model="/m/Target.gguf", n_ctx=8192, n_ctx_train=None, total_slots=1, build_info="b1-x",
                  engine="BeeLlama", speculative=True, spec_types="", metrics=True, slots=True, needs_key=False)


class Window:
    """The session over a real controller (what the server is: faked), with the remote labels and the toggle
    bound as the window binds them."""

    def __init__(self, qtbot: QtBot, inspect_info: RemoteInfo | Exception, health_interval_s: float = 0.2) -> None:
        def inspect(url: str, key: str | None) -> RemoteInfo:
            if isinstance(inspect_info, Exception):
                raise inspect_info
            return replace(inspect_info, url=url)

        self.controller = ServerController(serving=Serving(ServingParts(inspect=inspect,
                                                                        health_interval_s=health_interval_s)))
        self.serving = self.controller.serving
        self.session = Session(AppSettings(), self.controller, saver=lambda s: None, runner=run_inline)
        self.session.client_factory = LlamaClient
        self.start_action, self.stop_action = QAction("Start"), QAction("Stop")
        self.engine_label, self.pair_label, self.endpoint = QLabel(), QLabel(), EndpointLabel()
        self.binding = RemoteBinding(self.controller, self.start_action, self.stop_action, self.engine_label,
                                     self.pair_label, self.endpoint)
        self.session.profile_changed.connect(self.binding.profile_set)
        self.mode = ModeToggle(self.session.switch)
        qtbot.addWidget(self.mode)
        self.mode.mode_clicked.connect(self.session.request_mode)
        self.session.switching.changed.connect(self.mode.show_switch)
        self.notices: list[str] = []
        self.session.notice_changed.connect(self.notices.append)  # what the chat pane is told
        self.controller.ready.connect(self.endpoint.set_base_url)


def _attach(qtbot: QtBot, w: Window, url: str) -> None:
    w.session.set_profile(remote_profile(url))
    w.notices.clear()  # what connecting says, from here
    with qtbot.waitSignal(w.controller.remote_attached, timeout=5000):
        w.serving.start(url, LaunchSettings())


def test_connect_disconnect_labels_follow_the_profile(qtbot: QtBot) -> None:
    w = Window(qtbot, INFO)
    w.binding.profile_set(remote_profile("pod:8080"))
    assert (w.start_action.text(), w.stop_action.text()) == ("Connect", "Disconnect")
    assert "http://pod:8080" in w.start_action.toolTip()
    w.binding.profile_set(Profile("/bin/llama-server", LaunchSettings(target="/m/x.gguf")))
    assert (w.start_action.text(), w.stop_action.text()) == ("Start", "Stop")


def test_an_honoured_no_drafts_offers_the_toggle_per_request(qtbot: QtBot) -> None:
    script = SSEScript(tokens=["1, "] * 8, draft_n=12, draft_n_accepted=10, honours_no_drafts=True)
    with FakeLlamaServer(script) as fake:
        w = Window(qtbot, INFO)
        _attach(qtbot, w, fake.base_url)
        assert len(fake.requests) >= 2  # the check's two replies
    assert w.mode.isEnabled() and w.mode.offered() == ["baseline", "dflash"]
    assert w.session.switch.held == "" and "Target.gguf" in w.pair_label.text()
    assert "context 8,192" in w.pair_label.text() and "BeeLlama b1-x" in w.engine_label.text()
    w.session.request_mode(Mode.BASELINE)
    assert w.session.switching.provider() == ("baseline", NO_DRAFTS)  # per request: no restart of a server not ours
    assert "Target.gguf" in w.endpoint.label.toolTip()
    w.serving.shutdown()


def test_an_ignored_no_drafts_disables_the_toggle_with_the_reason(qtbot: QtBot) -> None:
    script = SSEScript(tokens=["1, "] * 8, draft_n=12, draft_n_accepted=10, honours_no_drafts=False)
    with FakeLlamaServer(script) as fake:
        w = Window(qtbot, INFO)
        with qtbot.waitSignal(w.session.switching.checker.remote_checked, timeout=5000):
            _attach(qtbot, w, fake.base_url)
    assert not w.mode.isEnabled() and w.session.switching.provider() == ("dflash", {})  # labelled with what the server runs
    assert "did not start this server" in w.mode.toolTip() and "ignores a per-request" in w.mode.toolTip()
    w.serving.restart(LaunchSettings())  # what a contradicted per-request baseline asks for: refused
    assert not w.mode.isEnabled() and "still drafted" in w.mode.toolTip()
    w.serving.shutdown()


@pytest.mark.parametrize(("info", "words", "mode"), [
    (replace(INFO, speculative=False), "runs without speculation", "baseline"),
    (replace(INFO, speculative=None), "does not tell whether it speculates", "baseline"),
    (replace(INFO, spec_types="ngram-mod"), "speculates with ngram-mod", "model-free"),
    (replace(INFO, spec_types="draft-mtp"), "speculates with draft-mtp", "mtp"),
])
def test_servers_the_toggle_cannot_switch_are_not_asked(qtbot: QtBot, info: RemoteInfo, words: str,
                                                        mode: str) -> None:
    assert toggle_reason(info) is not None
    with FakeLlamaServer() as fake:
        w = Window(qtbot, info)
        _attach(qtbot, w, fake.base_url)
        assert not any(r.method == "POST" for r in fake.requests)  # no check replies were sent
    assert not w.mode.isEnabled() and words in w.mode.toolTip() and w.session.switching.provider() == (mode, {})
    w.serving.shutdown()


def test_a_refused_connect_is_a_failure_and_disconnect_keeps_nothing(qtbot: QtBot) -> None:
    err = RemoteError(KEY_WRONG, "The server refused the API key (HTTP 401).", "Enter the key.")
    w = Window(qtbot, err)
    with qtbot.waitSignal(w.controller.failed, timeout=5000) as failed:
        w.serving.start("http://127.0.0.1:1", LaunchSettings(api_key="k"))
    assert failed.args[0] == as_failure(err) and w.serving.state == ServerState.FAILED and w.serving.remote is None

    with FakeLlamaServer() as fake:
        w = Window(qtbot, replace(INFO, speculative=False))
        _attach(qtbot, w, fake.base_url)
        assert w.serving.is_remote() and w.serving.is_running()
        with qtbot.waitSignal(w.controller.stopped, timeout=5000):
            w.serving.stop()
    assert w.serving.state == ServerState.STOPPED and w.serving.base_url == ""
    assert w.pair_label.text() == "model: —" and w.endpoint.label.toolTip() == ""
    assert w.notices[0].startswith("Connecting to http://127.0.0.1:") and "Press Connect" in w.notices[-1]


class ChatStub(QObject):
    """The chat pane's failed-reply signal."""

    reply_failed = Signal(str)


def test_a_chat_reply_that_fails_on_the_remote_reports_it_at_once(qtbot: QtBot) -> None:
    """Issue 22: a dead remote noticed at the next health poll or at the failing request. The watch polls
    every 10 s here: only the failed reply (the chat pane's reply_failed, wired to the controller as the main
    window wires it) can tell."""
    w = Window(qtbot, replace(INFO, speculative=False), health_interval_s=10.0)
    chat = ChatStub()
    chat.reply_failed.connect(w.serving.request_failed)
    with FakeLlamaServer() as fake:
        _attach(qtbot, w, fake.base_url)
    t0 = time.monotonic()
    with qtbot.waitSignal(w.controller.failed, timeout=5000) as failed:
        chat.reply_failed.emit("The server closed the connection.")
    assert time.monotonic() - t0 < 2.0 and failed.args[0].code == "remote:refused"
    assert w.serving.state == ServerState.FAILED and w.serving.remote is None
    w.serving.request_failed()  # nothing attached any more: nothing to check
    w.serving.shutdown()
