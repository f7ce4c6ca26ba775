"""ServerController over the real core.server: failures arrive as signals, the GUI thread never blocks.
The happy path (a real llama-server) is in tests/engine/test_ui_e2e.py."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from pytestqt.qtbot import QtBot

from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.ui.engine.server_controller import ServerController
from tests.fixtures.meta_gguf import tiny_model

ENGINES = Path(__file__).resolve().parents[2] / "fixtures" / "engines"


def mainline_caps(path: str):  # type: ignore[no-untyped-def]
    help_text = (ENGINES / "mainline-b11434-cpu.help.txt").read_text()
    return caps_from_texts(path, "version: 11434 (abcdef0)\nbuilt with GNU 12.2.0 for Linux x86_64", help_text)


def test_missing_model_fails_without_starting_anything(qtbot: QtBot) -> None:
    c = ServerController()
    states: list[str] = []
    c.state_changed.connect(states.append)
    with qtbot.waitSignal(c.failed, timeout=10_000) as blocker:
        t0 = time.perf_counter()
        c.start("/bin/false", LaunchSettings(target="/nowhere/model.gguf"), mainline_caps("/bin/false"))
        assert time.perf_counter() - t0 < 0.2  # start() returns at once
    failure = blocker.args[0]
    assert failure.code == "model_missing" and "does not exist" in failure.message
    qtbot.waitUntil(lambda: states[-1:] == ["failed"], timeout=2000)
    assert states[0] == "starting"
    c.shutdown()
    assert not c.is_running()


def test_engine_that_exits_is_classified(qtbot: QtBot, tmp_path: Path) -> None:
    engine = shutil.which("false") or "/bin/false"
    model = tiny_model(tmp_path / "tiny.gguf")
    c = ServerController()
    with qtbot.waitSignal(c.failed, timeout=20_000) as blocker:
        c.start(engine, LaunchSettings(target=str(model), n_gpu_layers="0"), mainline_caps(engine))
    failure = blocker.args[0]
    assert failure.exit_code == 1
    assert failure.message and failure.remedy
    assert c.state == "failed" and c.base_url == ""
    c.shutdown()


def test_shutdown_during_probe_launches_nothing(qtbot: QtBot, tmp_path: Path) -> None:
    """The app quits while the engine is still being probed (shutdown's join times out): the start
    thread must not launch llama-server afterwards, since nobody would ever stop it."""
    import contextlib
    import os
    import signal
    import threading

    pid_file = tmp_path / "engine.pid"
    engine = tmp_path / "llama-server"
    engine.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    engine.chmod(0o755)
    model = tiny_model(tmp_path / "tiny.gguf")
    release, probing = threading.Event(), threading.Event()

    def slow_probe(path: str):  # type: ignore[no-untyped-def]
        probing.set()
        release.wait(10)
        return mainline_caps(path)

    c = ServerController(probe=slow_probe)
    c.start(str(engine), LaunchSettings(target=str(model), n_gpu_layers="0"))
    assert probing.wait(5)
    worker = c._thread
    assert worker is not None
    try:
        c.shutdown(timeout_s=0.1)  # the probe is still running: the join gives up
        release.set()
        worker.join(5)  # the start job ends at once instead of launching
        assert not worker.is_alive()
        assert not pid_file.exists(), "llama-server was launched after shutdown()"
    finally:
        release.set()
        c._do_stop()
        if pid_file.exists():  # only without the fix: stop the orphan the test provoked
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
