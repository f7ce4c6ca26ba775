"""A remote profile in the UI: the controller attaches instead of launching, the binding turns Start/Stop
into Connect/Disconnect, and the Baseline | DFlash toggle is offered only where the per-request check
proves a "no drafts" request honoured. The check talks HTTP to the protocol-level fake llama-server
(a real BeeLlama 0.1-0.3 DFlash server is what honours it; tests/engine covers real servers)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.remote import KEY_WRONG, RemoteError, RemoteInfo
from beedeck.core.engine.speculation.switching import NO_DRAFTS
from beedeck.core.profile import Profile, remote_profile
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.remote_binding import RemoteBinding, toggle_reason
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.speculation.mode_toggle import ModeToggle
from tests.fakes.inline_runner import run_inline
from tests.fakes.sse_server import FakeLlamaServer, SSEScript

INFO = RemoteInfo(url="", model="/m/Target.gguf", n_ctx=8192, n_ctx_train=None, total_slots=1, build_info="b1-x",
                  engine="BeeLlama", speculative=True, spec_types="", metrics=True, slots=True, needs_key=False)


class Window:
    """The parts of the window the binding needs."""

    def set_notice(self, text: str) -> None:
        self.notices.append(text)

    def __init__(self, inspect_info: RemoteInfo | Exception) -> None:
        def inspect(url: str, key: str | None) -> RemoteInfo:
            if isinstance(inspect_info, Exception):
                raise inspect_info
            return replace(inspect_info, url=url)

        self.controller = ServerController(inspect=inspect, health_interval_s=0.2)
        self.start_action, self.stop_action = QAction("Start"), QAction("Stop")
        self.mode = ModeToggle(runner=run_inline)
        self.engine_label, self.pair_label, self.endpoint = QLabel(), QLabel(), EndpointLabel()
        self.client_factory = LlamaClient
        self.notices: list[str] = []
        self.chat = self  # the chat pane's set_notice
        self.binding = RemoteBinding.for_host(self)
        self.binding.runner = run_inline
        self.controller.ready.connect(self.endpoint.set_base_url)


def _attach(qtbot: QtBot, w: Window, url: str) -> None:
    w.binding.profile_set(remote_profile(url))
    with qtbot.waitSignal(w.controller.remote_attached, timeout=5000):
        w.controller.start(url, LaunchSettings())


def test_connect_disconnect_labels_follow_the_profile(qtbot: QtBot) -> None:
    w = Window(INFO)
    w.binding.profile_set(remote_profile("pod:8080"))
    assert (w.start_action.text(), w.stop_action.text()) == ("Connect", "Disconnect")
    assert "http://pod:8080" in w.start_action.toolTip()
    w.binding.profile_set(Profile("/bin/llama-server", LaunchSettings(target="/m/x.gguf")))
    assert (w.start_action.text(), w.stop_action.text()) == ("Start", "Stop")


def test_an_honoured_no_drafts_offers_the_toggle_per_request(qtbot: QtBot) -> None:
    script = SSEScript(tokens=["1, "] * 8, draft_n=12, draft_n_accepted=10, honours_no_drafts=True)
    with FakeLlamaServer(script) as fake:
        w = Window(INFO)
        _attach(qtbot, w, fake.base_url)
        assert len(fake.requests) >= 2  # the check's two replies
    assert w.mode.isEnabled() and w.mode.offered() == ["baseline", "dflash"]
    assert w.binding.reason == "" and "Target.gguf" in w.pair_label.text()
    assert "context 8,192" in w.pair_label.text() and "BeeLlama b1-x" in w.engine_label.text()
    w.mode.request_mode("baseline")
    assert w.mode.provider() == ("baseline", NO_DRAFTS)  # per request: no restart of a server not ours
    assert "Target.gguf" in w.endpoint.label.toolTip()
    w.controller.shutdown()


def test_an_ignored_no_drafts_disables_the_toggle_with_the_reason(qtbot: QtBot) -> None:
    script = SSEScript(tokens=["1, "] * 8, draft_n=12, draft_n_accepted=10, honours_no_drafts=False)
    with FakeLlamaServer(script) as fake:
        w = Window(INFO)
        with qtbot.waitSignal(w.binding.toggle_checked, timeout=5000):
            _attach(qtbot, w, fake.base_url)
    assert not w.mode.isEnabled() and w.mode.provider() == ("dflash", {})  # labelled with what the server runs
    assert "did not start this server" in w.mode.toolTip() and "ignores a per-request" in w.mode.toolTip()
    w.controller.restart(LaunchSettings())  # what a contradicted per-request baseline asks for: refused
    assert not w.mode.isEnabled() and "still drafted" in w.mode.toolTip()
    w.controller.shutdown()


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
        w = Window(info)
        _attach(qtbot, w, fake.base_url)
        assert not any(r.method == "POST" for r in fake.requests)  # no check replies were sent
    assert not w.mode.isEnabled() and words in w.mode.toolTip() and w.mode.provider() == (mode, {})
    w.controller.shutdown()


def test_a_refused_connect_is_a_failure_and_disconnect_keeps_nothing(qtbot: QtBot) -> None:
    err = RemoteError(KEY_WRONG, "The server refused the API key (HTTP 401).", "Enter the key.")
    w = Window(err)
    with qtbot.waitSignal(w.controller.failed, timeout=5000) as failed:
        w.controller.start("http://127.0.0.1:1", LaunchSettings(api_key="k"))
    assert failed.args[0] is err and w.controller.state == "failed" and w.controller.remote is None

    with FakeLlamaServer() as fake:
        w = Window(replace(INFO, speculative=False))
        _attach(qtbot, w, fake.base_url)
        assert w.controller.is_remote() and w.controller.is_running()
        with qtbot.waitSignal(w.controller.stopped, timeout=5000):
            w.controller.stop()
    assert w.controller.state == "stopped" and w.controller.base_url == ""
    assert w.pair_label.text() == "model: —" and w.endpoint.label.toolTip() == ""
    assert w.notices[0].startswith("Connecting to http://127.0.0.1:") and "Press Connect" in w.notices[-1]
