"""ServerController, the Qt face of the app's server (core/serving): the serving's events arrive as typed signals
on the GUI thread, and the GUI thread never waits for a server. The rules themselves are plain pytest
(tests/core/serving/); the happy path with a real llama-server is in tests/engine/test_ui_e2e.py."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path

from pytestqt.qtbot import QtBot

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.standby import LOADED_BESIDE
from beedeck.core.engine.speculation.switch_cost import SwitchCosts
from beedeck.core.launcher import Room
from beedeck.core.serving import Serving, ServingParts
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.server_controller import ServerController
from tests.fakes.fake_launch import FakeProc, mainline_caps, recording_start
from tests.fixtures.meta_gguf import tiny_model

GiB = 1 << 30


def test_a_missing_model_fails_as_typed_signals_and_start_returns_at_once(qtbot: QtBot) -> None:
    c = ServerController()
    states: list[ServerState] = []
    c.state_changed.connect(states.append)
    with qtbot.waitSignal(c.failed, timeout=10_000) as blocker:
        t0 = time.perf_counter()
        c.serving.start("/bin/false", LaunchSettings(target="/nowhere/model.gguf"), mainline_caps("/bin/false"))
        assert time.perf_counter() - t0 < 0.2  # start() returns at once
    failure = blocker.args[0]
    assert failure.code == "model_missing" and "does not exist" in failure.message
    qtbot.waitUntil(lambda: states[-1:] == [ServerState.FAILED], timeout=2000)
    assert states[0] is ServerState.STARTING and all(isinstance(s, ServerState) for s in states)
    c.serving.shutdown()
    assert not c.serving.is_running()


def test_an_engine_that_exits_is_classified(qtbot: QtBot, tmp_path: Path) -> None:
    engine = shutil.which("false") or "/bin/false"
    model = tiny_model(tmp_path / "tiny.gguf")
    c = ServerController()
    with qtbot.waitSignal(c.failed, timeout=20_000) as blocker:
        c.serving.start(engine, LaunchSettings(target=str(model), n_gpu_layers="0"), mainline_caps(engine))
    failure = blocker.args[0]
    assert failure.exit_code == 1
    assert failure.message and failure.remedy
    assert c.serving.state == ServerState.FAILED and c.serving.base_url == ""
    c.serving.shutdown()


def test_the_serving_reports_on_the_gui_thread_a_moved_port_and_a_switch(qtbot: QtBot, tmp_path: Path) -> None:
    """Every event crosses from the serving's job thread as a queued signal: the receivers run on the GUI
    thread, in the order the serving reported."""
    procs: list[FakeProc] = []
    serving = Serving(ServingParts(start=recording_start(procs), room=lambda stopping: Room(None, 64 * GiB),
                                   free_now=lambda: (None, 64 * GiB), costs=SwitchCosts(tmp_path / "t.json")))
    c = ServerController(serving=serving)
    gui = threading.current_thread()
    heard: list[tuple[str, bool]] = []
    c.state_changed.connect(lambda s: heard.append((f"state {s.value}", threading.current_thread() is gui)))
    c.ready.connect(lambda url: heard.append(("ready", threading.current_thread() is gui)))
    first = LaunchSettings(target=str(tiny_model(tmp_path / "t.gguf")), n_gpu_layers="0",
                           spec_mode=Mode.MODEL_FREE)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        serving.parts.default_port = busy = holder.getsockname()[1]
        with qtbot.waitSignal(c.port_fallback_used, timeout=5000) as moved, qtbot.waitSignal(c.ready, timeout=5000):
            serving.start("/opt/llama-server", first, mainline_caps("/opt/llama-server"))
    wanted, used, message = moved.args
    assert wanted == busy and used == procs[0].port and f"Port {busy} is taken" in message
    with qtbot.waitSignal(c.ready, timeout=5000) as switched:
        serving.restart(replace(first, spec_mode=Mode.BASELINE))
    assert serving.last_switch == LOADED_BESIDE and switched.args == [procs[1].base_url]
    assert heard == [("state starting", True), ("state ready", True), ("ready", True), ("ready", True)]
    serving.shutdown()
    assert all(p.stopped for p in procs)


def test_the_endpoint_shows_the_real_port_and_why_it_moved(qtbot: QtBot) -> None:
    label = EndpointLabel()
    qtbot.addWidget(label)
    label.set_base_url("http://127.0.0.1:41234", "Port 8477 is taken by another program")
    assert label.endpoint() == "http://127.0.0.1:41234/v1"
    assert "41234" in label.label.text() and "⚠" in label.label.text()
    assert label.label.toolTip() == "Port 8477 is taken by another program"
    label.set_base_url("http://127.0.0.1:8477")
    assert "⚠" not in label.label.text() and label.label.toolTip() == ""


def test_the_default_serving_listens_on_beedecks_port() -> None:
    from beedeck.core.engine.launch_settings import DEFAULT_PORT

    assert ServerController().serving.parts.default_port == DEFAULT_PORT
