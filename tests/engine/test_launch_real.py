"""Settings → Launch with the REAL starter engine (mainline llama-server on CPU + SmolLM2-135M): a launch
the preflight refuses (a missing target, a text file renamed .gguf) leaves the working server serving and
says why; a good one restarts it; Launch starts a stopped server too, and clears a stale failure panel."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import httpx2
import psutil
import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.server import free_port
from beedeck.core.engine.server_state import ServerState
from beedeck.core.profile import Profile, remote_profile
from beedeck.core.starter import StarterProfile
from beedeck.ui.window.main_window import MainWindow
from tests.engine.conftest import StartServer


@pytest.mark.engine
def test_a_refused_launch_keeps_the_working_server(qtbot: QtBot, tmp_path: Path, starter_engine_path: Path,
                                                   starter_model_path: Path) -> None:
    window = MainWindow(ChatStore(tmp_path / "chats.sqlite3"))
    qtbot.addWidget(window)
    window.show()
    engine = str(starter_engine_path)
    good = replace(StarterProfile(starter_engine_path, starter_model_path).settings(), port=free_port(), ctx_size=1024)
    window.session.set_profile(Profile(engine, good, "starter (CPU)"))
    with qtbot.waitSignal(window.session.controller.ready, timeout=240_000):
        window.session.start_server()
    pid, url = window.session.server.proc.pid, window.session.server.base_url

    fake = tmp_path / "fake.gguf"
    fake.write_text("this is a text file\n")
    for target, words in (("/nonexistent/model.gguf", "does not exist"), (str(fake), "is not a GGUF model")):
        with qtbot.waitSignal(window.session.controller.refused, timeout=60_000) as blocker:
            window.session.apply_profile(Profile(engine, replace(good, target=target), "starter (CPU)"), start=True)
        assert words in blocker.args[0].message
        assert window.failure.isVisible() and "Not launched: the running server keeps serving" in window.failure.title.text()
        assert words in window.failure.what.text()
        assert window.session.server.state == ServerState.READY and window.session.server.proc.pid == pid  # never stopped
        assert window.session.profile is not None and window.session.profile.settings is good  # still shown
        assert httpx2.get(url + "/health", timeout=5).status_code == 200

    # A launch that passes restarts the server, and the stale panel goes.
    with qtbot.waitSignal(window.session.controller.ready, timeout=240_000):
        window.session.apply_profile(Profile(engine, replace(good, ctx_size=2048), "starter (CPU)"), start=True)
    assert not window.failure.isVisible() and window.session.server.proc.pid != pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

    # Launch when the server is stopped starts it (it used to do nothing).
    with qtbot.waitSignal(window.session.controller.stopped, timeout=30_000):
        window.session.stop_server()
    with qtbot.waitSignal(window.session.controller.ready, timeout=240_000):
        window.session.apply_profile(Profile(engine, good, "starter (CPU)"), start=True)
    assert window.state_label.text() == "server: ready"
    window.close()
    assert window.session.server.state == ServerState.STOPPED


@pytest.mark.engine
def test_back_to_the_local_server_after_disconnect_and_when_the_remote_dies(
    qtbot: QtBot, tmp_path: Path, start_server: StartServer, starter_engine_path: Path, starter_model_path: Path
) -> None:
    """The issue: after Disconnect (or a remote that died) only Settings led back to the local server, the
    status bar still said "(running server)", and a dead remote took 3-15 s to notice."""
    window = MainWindow(ChatStore(tmp_path / "chats.sqlite3"))
    qtbot.addWidget(window)
    window.show()
    local = Profile(str(starter_engine_path), replace(StarterProfile(starter_engine_path, starter_model_path)
                                                      .settings(), port=free_port(), ctx_size=1024), "starter (CPU)")
    window.session.set_profile(local)  # the last local profile, as a user who used the starter first has
    pod = start_server(port=free_port(), ctx_size=1024)
    pod.wait_ready(120)
    with qtbot.waitSignal(window.session.controller.remote_attached, timeout=30_000):
        window.session.apply_profile(remote_profile(pod.base_url, None, "pod"), start=True)

    with qtbot.waitSignal(window.session.controller.stopped, timeout=10_000):
        window.stop_action.trigger()  # Disconnect
    assert not window.failure.isHidden() and not window.failure.local_button.isHidden()
    assert "(running server)" not in window.engine_label.text() and "not connected" in window.engine_label.text()

    with qtbot.waitSignal(window.session.controller.ready, timeout=30_000):
        window.start_action.trigger()  # Connect again
    t0 = time.perf_counter()
    with qtbot.waitSignal(window.session.controller.failed, timeout=20_000):
        pod.stop(5.0)
    print(f"\n[measure] a dead remote noticed after {time.perf_counter() - t0:.2f} s (goal: within 2 s)")
    assert not window.failure.isHidden() and not window.failure.local_button.isHidden()
    assert "(running server)" not in window.engine_label.text()

    with qtbot.waitSignal(window.session.controller.ready, timeout=240_000):
        window.failure.local_button.click()  # "Use the local server"
    assert window.session.profile is local and not window.session.server.is_remote()
    window.close()
