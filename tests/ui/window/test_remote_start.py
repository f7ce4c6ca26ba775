"""A saved remote profile at start: the window says Connect, and with autostart it connects to the
running server as a local profile would start (the protocol-level fake llama-server plays the pod)."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from beedeck.core.engine.server import ServerState
from beedeck.core.profile import remote_profile, save_profile
from beedeck.ui.window import app as app_mod
from tests.fakes.sse_server import FakeLlamaServer, SSEScript


def test_a_saved_remote_profile_connects_at_start(qtbot: QtBot) -> None:
    with FakeLlamaServer(SSEScript(api_key="sk-pod", model="/models/Pod-Q4.gguf")) as pod:
        save_profile(remote_profile(pod.base_url, "sk-pod", "GPU pod"))
        window = app_mod.build_window(no_autostart=False)
        qtbot.addWidget(window)
        assert window.session.profile is not None and window.session.profile.is_remote
        assert window.start_action.text() == "Connect" and "GPU pod (running server)" in window.engine_label.text()
        qtbot.waitUntil(lambda: window.session.server.state == ServerState.READY, timeout=10_000)
        qtbot.waitUntil(lambda: "Pod-Q4.gguf" in window.pair_label.text(), timeout=5000)
        assert window.endpoint.endpoint() == pod.base_url + "/v1"
        assert any(r.headers.get("Authorization") == "Bearer sk-pod" for r in pod.requests)
        window.close()
        assert window.session.server.state == ServerState.STOPPED
