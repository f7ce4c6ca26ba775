"""ServerController over the real core.server: failures arrive as signals, the GUI thread never blocks.
The happy path (a real llama-server) is in tests/engine/test_ui_e2e.py."""

from __future__ import annotations

import contextlib
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings, SpecMode
from beedeck.core.engine.server import free_port
from beedeck.ui.engine.endpoint_label import EndpointLabel
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


class FakeProc:
    """What the controller uses of a started ServerProcess, on the port it was given."""

    def __init__(self, settings: LaunchSettings) -> None:
        self.port = settings.port
        self.base_url = f"http://127.0.0.1:{settings.port}"
        self.notes: tuple[object, ...] = ()

    def wait_ready(self, timeout: float) -> None:
        pass

    def stop(self, timeout: float) -> None:
        pass


def recording_launch(calls: list[LaunchSettings]):  # type: ignore[no-untyped-def]
    def launch(engine: str, caps: object, settings: LaunchSettings, **_: object) -> FakeProc:
        calls.append(settings)
        return FakeProc(settings)

    return launch


@contextlib.contextmanager
def port_held(port: int) -> Iterator[int]:
    """Another program listening on ``port`` (0: any); yields the port."""
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen()
        except OSError:  # something else already listens there: just as taken
            assert port != 0
            yield port
            return
        yield holder.getsockname()[1]


def test_port_0_starts_on_the_default_port_every_time(qtbot: QtBot) -> None:
    assert ServerController().default_port == DEFAULT_PORT
    port = free_port()  # stands in for DEFAULT_PORT, which this machine's user may be using
    calls: list[LaunchSettings] = []
    c = ServerController(launch=recording_launch(calls), default_port=port)
    settings = LaunchSettings(target="/m/t.gguf")
    with qtbot.assertNotEmitted(c.port_fallback_used):
        for _ in range(2):
            with qtbot.waitSignal(c.ready, timeout=5000) as blocker:
                if c.is_running():
                    c.restart(settings)
                else:
                    c.start("/opt/llama-server", settings, mainline_caps("x"))
            assert blocker.args == [f"http://127.0.0.1:{port}"]
    assert [s.port for s in calls] == [port, port] and c.settings is not None and c.settings.port == port
    assert c.port_note == ""
    c.shutdown()


@pytest.mark.parametrize("chosen", [False, True], ids=["default-port", "user-port"])
def test_a_taken_port_falls_back_to_a_free_one_and_says_so(qtbot: QtBot, chosen: bool) -> None:
    calls: list[LaunchSettings] = []
    lines: list[str] = []
    with port_held(0 if chosen else DEFAULT_PORT) as busy:
        c = ServerController(launch=recording_launch(calls))
        c.line_received.connect(lines.append)
        settings = LaunchSettings(target="/m/t.gguf", port=busy if chosen else 0)
        with qtbot.waitSignal(c.port_fallback_used, timeout=5000) as fallback, \
                qtbot.waitSignal(c.ready, timeout=5000) as ready:
            c.start("/opt/llama-server", settings, mainline_caps("x"))
    wanted, used, message = fallback.args
    assert wanted == busy and used not in (0, busy) and [s.port for s in calls] == [used]
    assert ready.args == [f"http://127.0.0.1:{used}"] and c.base_url.endswith(f":{used}")
    assert f"Port {busy} is taken" in message and f"port {used}" in message and "Settings → Server" in message
    assert f"BeeDeck: {message}" in lines and c.port_note == message
    c.shutdown()
    assert c.port_note == ""


def test_the_endpoint_shows_the_real_port_and_why_it_moved(qtbot: QtBot) -> None:
    label = EndpointLabel()
    qtbot.addWidget(label)
    label.set_base_url("http://127.0.0.1:41234", "Port 8477 is taken by another program")
    assert label.endpoint() == "http://127.0.0.1:41234/v1"
    assert "41234" in label.label.text() and "⚠" in label.label.text()
    assert label.label.toolTip() == "Port 8477 is taken by another program"
    label.set_base_url("http://127.0.0.1:8477")
    assert "⚠" not in label.label.text() and label.label.toolTip() == ""


def test_a_mode_switch_restarts_from_the_page_cache_and_learns_its_time(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue 25: a Baseline <-> DFlash switch restarts the target that just loaded: mapped from the page
    cache (the guide's --no-mmap --mlock dropped) and without the fit pass, and its time is kept so the
    toggle can say it the next time. A start of other settings (Settings -> Launch) is left as it is."""
    from dataclasses import replace

    from beedeck.core.engine.speculation.switch_cost import SwitchCosts

    target = tmp_path / "t.gguf"
    target.write_bytes(b"GGUF")
    calls: list[LaunchSettings] = []
    caps = replace(mainline_caps("x"), flags=frozenset({*mainline_caps("x").flags, "--fit", "--no-mmap", "--mlock"}))
    c = ServerController(launch=recording_launch(calls), default_port=free_port(),
                         costs=SwitchCosts(tmp_path / "times.json"))
    guide = LaunchSettings.guide_dflash(str(target), str(tmp_path / "d.gguf"))
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.start("/opt/llama-server", guide, caps)
    assert not calls[0].mmap and calls[0].mlock and "--fit" not in calls[0].extra_args  # the first start as set
    assert c.expected_switch_s(with_draft=False) is None  # never switched: nothing promised
    baseline = replace(guide, draft=None, spec_mode=SpecMode.OFF)
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.restart(baseline)
    fast = calls[1]
    assert fast.mmap and not fast.mlock and fast.extra_args[-2:] == ["--fit", "off"] and fast.draft is None
    assert c.settings is not None and not c.settings.mmap  # what the profile says is kept
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.restart(guide)
    assert c.expected_switch_s(with_draft=False) is not None and c.expected_switch_s(with_draft=True) is not None
    c.shutdown()


class StoppableProc(FakeProc):
    """A FakeProc that remembers being stopped and can die on its own (its launch's on_state told)."""

    def __init__(self, settings: LaunchSettings, on_state: object) -> None:
        super().__init__(settings)
        self.stopped = False
        self.on_state = on_state

    def stop(self, timeout: float) -> None:
        self.stopped = True


def _standby_setup(tmp_path: Path, ram: int):  # type: ignore[no-untyped-def]
    """A controller over fake processes with a real GGUF target (the preflight plans it) and ``ram`` bytes
    of host memory free; returns (controller, the processes launched, DFlash-ish and Baseline settings)."""
    from dataclasses import replace

    procs: list[StoppableProc] = []

    def launch(engine: str, caps: object, settings: LaunchSettings, **kw: object) -> StoppableProc:
        procs.append(StoppableProc(settings, kw.get("on_state")))
        return procs[-1]

    target = tiny_model(tmp_path / "t.gguf")
    c = ServerController(launch=launch, default_port=free_port(), free_now=lambda: (None, ram))
    first = LaunchSettings(target=str(target), spec_mode=SpecMode.MODEL_FREE)
    other = replace(first, spec_mode=SpecMode.OFF)
    return c, procs, first, other


def test_a_switch_with_room_keeps_the_other_mode_loaded_and_switches_back_loading_nothing(
        qtbot: QtBot, tmp_path: Path) -> None:
    """core/engine/speculation/standby.py: with memory free for both, the first switch loads the other mode beside the
    running server (which keeps serving), every later one only changes the server the chat talks to."""
    from beedeck.core.engine.speculation.standby import LOADED_BESIDE, SWAPPED

    c, procs, first, other = _standby_setup(tmp_path, ram=64 * 1024**3)
    lines: list[str] = []
    c.line_received.connect(lines.append)
    with qtbot.waitSignal(c.ready, timeout=5000) as started:
        c.start("/opt/llama-server", first, mainline_caps("x"))
    with qtbot.waitSignal(c.ready, timeout=5000) as beside:
        c.restart(other)
    assert c.last_switch == LOADED_BESIDE and len(procs) == 2 and not procs[0].stopped
    assert beside.args != started.args and procs[1].port != procs[0].port  # a second port
    assert any("beside port" in line for line in lines)
    assert c.expected_switch_s(with_draft=False) is None  # the kept server's kind of mode: nothing to load
    with qtbot.waitSignal(c.ready, timeout=5000) as back:
        c.restart(first)
    assert c.last_switch == SWAPPED and len(procs) == 2 and not any(p.stopped for p in procs)
    assert back.args == started.args and c.settings is not None and c.settings.spec_mode == SpecMode.MODEL_FREE
    with qtbot.waitSignal(c.ready, timeout=5000) as again:
        c.restart(other)
    assert c.last_switch == SWAPPED and again.args == beside.args and len(procs) == 2
    c.shutdown()
    assert all(p.stopped for p in procs)  # nothing is left running


def test_a_switch_without_room_restarts_and_says_why(qtbot: QtBot, tmp_path: Path) -> None:
    from beedeck.core.engine.speculation.standby import RESTARTED

    c, procs, first, other = _standby_setup(tmp_path, ram=1024)
    lines: list[str] = []
    c.line_received.connect(lines.append)
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.start("/opt/llama-server", first, mainline_caps("x"))
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.restart(other)
    assert c.last_switch == RESTARTED and procs[0].stopped and len(procs) == 2
    assert any("cannot stay loaded beside it" in line and "host memory" in line for line in lines), lines
    c.shutdown()


def test_standby_off_restarts_and_a_kept_server_that_dies_is_forgotten(qtbot: QtBot, tmp_path: Path) -> None:
    from beedeck.core.engine.speculation.standby import LOADED_BESIDE, RESTARTED

    c, procs, first, other = _standby_setup(tmp_path, ram=64 * 1024**3)
    c.standby = False
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.start("/opt/llama-server", first, mainline_caps("x"))
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.restart(other)
    assert c.last_switch == RESTARTED and procs[0].stopped
    c.standby = True
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.restart(first)
    assert c.last_switch == LOADED_BESIDE and not procs[1].stopped
    lines: list[str] = []
    c.line_received.connect(lines.append)
    with qtbot.assertNotEmitted(c.failed):
        procs[1].on_state("failed", None)  # type: ignore[operator]  # the kept one dies: no failure shown
    assert any("kept loaded for the other mode stopped" in line for line in lines)
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.restart(other)
    assert c.last_switch == LOADED_BESIDE and len(procs) == 4  # loaded again, not swapped to a dead one
    c.shutdown()


def test_a_preload_keeps_the_other_mode_loaded_and_the_first_switch_loads_nothing(
        qtbot: QtBot, tmp_path: Path) -> None:
    """ModeGlue preloads the other mode once the restart path is known: no ``ready`` (the chat keeps its
    server), the running server stays the one served, and the switch to it is a swap."""
    from beedeck.core.engine.speculation.standby import SWAPPED

    c, procs, first, other = _standby_setup(tmp_path, ram=64 * 1024**3)
    with qtbot.waitSignal(c.ready, timeout=5000) as started:
        c.start("/opt/llama-server", first, mainline_caps("x"))
    with qtbot.assertNotEmitted(c.ready, wait=200):
        c.preload(other)
        qtbot.waitUntil(lambda: c._parked is not None, timeout=5000)
    assert len(procs) == 2 and c.base_url == started.args[0] and not procs[0].stopped
    c.preload(other)  # already kept: nothing more is loaded
    with qtbot.waitSignal(c.ready, timeout=5000) as switched:
        c.restart(other)
    assert c.last_switch == SWAPPED and len(procs) == 2 and switched.args[0] == procs[1].base_url
    c.shutdown()
    assert all(p.stopped for p in procs)
