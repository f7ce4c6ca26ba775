"""The app's server and its rules (core/serving/serving.py), in plain pytest: the real preflight plans each launch
(a real GGUF header, the real port rule, the planner), and only the process is faked (tests/fakes/fake_launch.py).
Jobs run inline, so each command has happened when it returns."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from beedeck.core import launcher
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.ports import free_port
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.standby import LOADED_BESIDE, RESTARTED, SWAPPED
from beedeck.core.engine.speculation.switch_cost import SwitchCosts
from beedeck.core.launcher import Preflight, Room
from beedeck.core.serving import (
    Inline,
    JobThread,
    NoSteps,
    Replacing,
    Restart,
    Serving,
    ServingEvents,
    ServingParts,
)
from tests.fakes.fake_launch import FakeProc, mainline_caps, recording_start
from tests.fixtures.meta_gguf import tiny_model

GiB = 1 << 30
ENGINE = "/opt/llama-server"


@dataclass
class Heard:
    """Everything a Serving reported, in order (``log``: each event's name)."""

    log: list[str] = field(default_factory=list)
    states: list[ServerState] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    ready: list[str] = field(default_factory=list)
    failed: list[ServerFailure] = field(default_factory=list)
    moved: list[tuple[int, int, str]] = field(default_factory=list)
    refused: list[ServerFailure] = field(default_factory=list)
    attached: list[RemoteInfo] = field(default_factory=list)
    failure: threading.Event = field(default_factory=threading.Event)  # set on each failure (from any thread)

    def _failed(self, failure: ServerFailure) -> None:
        self.failed.append(failure)
        self.failure.set()

    def events(self) -> ServingEvents:
        def note(name: str, store: Callable[..., object] | None = None) -> Callable[..., None]:
            def heard(*args: Any) -> None:
                self.log.append(name)
                if store is not None:
                    store(*args)
            return heard

        return ServingEvents(
            state_changed=note("state", self.states.append), line=note("line", self.lines.append),
            ready=note("ready", self.ready.append), failed=note("failed", self._failed), stopped=note("stopped"),
            caps_known=note("caps"), port_moved=note("moved", lambda *a: self.moved.append(a)),
            attached=note("attached", self.attached.append), refused=note("refused", self.refused.append),
            replace_started=note("replace_started"))


@pytest.fixture
def model(tmp_path: Path) -> str:
    return str(tiny_model(tmp_path / "t.gguf"))


@pytest.fixture
def caps() -> EngineCaps:
    ml = mainline_caps(ENGINE)
    return replace(ml, flags=frozenset({*ml.flags, "--fit", "--no-mmap", "--mlock"}))


def serving(tmp_path: Path, procs: list[FakeProc], *, ram: int = 64 * GiB, make: Any = FakeProc,
            **parts: Any) -> tuple[Serving, Heard]:
    """A Serving over fake processes, ``ram`` bytes of host memory free (no GPU), jobs inline."""
    heard = Heard()
    made = ServingParts(start=recording_start(procs, make), room=lambda stopping: Room(None, ram),
                        free_now=lambda: (None, ram), costs=SwitchCosts(tmp_path / "times.json"),
                        default_port=free_port(), **parts)
    return Serving(made, jobs=Inline(), events=heard.events()), heard


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


# -- starting ------------------------------------------------------------------------------


def test_port_0_starts_on_the_default_port_every_time(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    s.standby = False  # a restart, not a second server beside
    settings = LaunchSettings(target=model, n_gpu_layers="0")
    assert s.start_if_idle(ENGINE, settings, caps)
    s.restart(settings)
    port = s.parts.default_port
    assert [p.port for p in procs] == [port, port] and heard.ready == [f"http://127.0.0.1:{port}"] * 2
    assert heard.moved == [] and s.port_note == "" and s.settings is not None and s.settings.port == port
    assert heard.states == [ServerState.STARTING, ServerState.READY, ServerState.STOPPED, ServerState.STARTING,
                            ServerState.READY]
    assert s.is_running() and procs[0].stopped and not procs[1].stopped


@pytest.mark.parametrize("chosen", [False, True], ids=["default-port", "user-port"])
def test_a_taken_port_falls_back_to_a_free_one_and_says_so(tmp_path: Path, model: str, caps: EngineCaps,
                                                           held_port: int, chosen: bool) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    if not chosen:
        s.parts.default_port = held_port
    s.start(ENGINE, LaunchSettings(target=model, n_gpu_layers="0", port=held_port if chosen else 0), caps)
    [(wanted, used, message)] = heard.moved
    assert wanted == held_port and used not in (0, held_port) and [p.port for p in procs] == [used]
    assert heard.ready == [f"http://127.0.0.1:{used}"] and s.port_note == message
    assert f"Port {held_port} is taken" in message and "Settings → Server" in message
    assert f"BeeDeck: {message}" in heard.lines
    assert f"--port {used}" in " ".join(procs[0].plan.argv.argv if procs[0].plan.argv else [])  # what runs
    s.stop()
    assert s.port_note == "" and procs[0].stopped and heard.log[-1] == "stopped"


def test_a_start_runs_the_argument_list_its_preflight_built_once(tmp_path: Path, model: str, caps: EngineCaps,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: build_argv ran three times per launch (the preflight before a stop, the launch's own, the
    start's); the plan the preflight made is what starts, for a start, a replace and a restart."""
    from beedeck.core.engine import argv

    built: list[LaunchSettings] = []
    real = argv.build_argv

    def counting(settings: LaunchSettings, engine: EngineCaps) -> Any:
        built.append(settings)
        return real(settings, engine)

    monkeypatch.setattr(launcher, "build_argv", counting)
    started: list[Preflight] = []

    def start_server(engine: str, engine_caps: EngineCaps, plan: Any, **kw: Any) -> Any:
        started.append(plan)
        return FakeProc(Preflight(argv=plan, settings=built[-1], caps=engine_caps))

    monkeypatch.setattr(launcher, "start_server", start_server)
    heard = Heard()
    s = Serving(ServingParts(room=lambda stopping: Room(None, 64 * GiB), costs=SwitchCosts(tmp_path / "t.json"),
                             default_port=free_port()), jobs=Inline(), events=heard.events())
    settings = LaunchSettings(target=model, n_gpu_layers="0")
    s.start(ENGINE, settings, caps)
    assert len(built) == 1 and started[0].argv[started[0].argv.index("--port") + 1] == str(s.parts.default_port)
    assert s.replace(ENGINE, replace(settings, ctx_size=1024), caps) is Replacing.PREFLIGHT
    s.restart(replace(settings, ctx_size=2048))
    assert len(built) == 3 and len(started) == 3 and heard.failed == []
    assert [b.ctx_size for b in built] == [settings.ctx_size, 1024, 2048]


def test_a_missing_model_fails_and_a_running_server_is_not_started_twice(tmp_path: Path, caps: EngineCaps,
                                                                         model: str) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    s.start(ENGINE, LaunchSettings(target=str(tmp_path / "nowhere.gguf")), caps)
    assert procs == [] and s.state == ServerState.FAILED and heard.states == [ServerState.STARTING, ServerState.FAILED]
    assert heard.failed[0].code == "model_missing" and "does not exist" in heard.failed[0].message
    assert s.start_if_idle(ENGINE, LaunchSettings(target=model, n_gpu_layers="0"), caps)
    assert not s.start_if_idle(ENGINE, LaunchSettings(target=model, n_gpu_layers="0"), caps)
    assert len(procs) == 1


def test_a_server_that_dies_while_serving_is_a_failure(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    s.start(ENGINE, LaunchSettings(target=model, n_gpu_layers="0"), caps)
    procs[0].on_state(ServerState.FAILED, ServerFailure("crashed_signal", "llama-server crashed.", "See its log."))
    assert s.state == ServerState.FAILED and heard.failed[-1].code == "crashed_signal"


def test_shutdown_during_the_probe_launches_nothing(tmp_path: Path, model: str) -> None:
    """The app quits while the engine is still being probed (the wait times out): the start must not launch
    a server afterwards, since nobody would ever stop it."""
    procs: list[FakeProc] = []
    release, probing = threading.Event(), threading.Event()

    def slow_probe(path: str) -> EngineCaps:
        probing.set()
        release.wait(10)
        return mainline_caps(path)

    heard = Heard()
    jobs = JobThread()
    s = Serving(ServingParts(start=recording_start(procs), probe=slow_probe, room=lambda stopping: Room(None, None),
                             costs=SwitchCosts(tmp_path / "t.json"), default_port=free_port()),
                jobs=jobs, events=heard.events())
    s.start(ENGINE, LaunchSettings(target=model, n_gpu_layers="0"))
    assert probing.wait(5) and s.is_busy()
    s.shutdown(timeout_s=0.1)  # the probe is still running: the wait gives up
    release.set()
    assert jobs.wait(5) and not s.is_busy()
    assert procs == [] and heard.failed == [] and heard.ready == []


# -- replacing (Settings → Launch) ---------------------------------------------------------


class ListeningProc(FakeProc):
    """A fake server that holds its port as a real one does, until it stops."""

    def __init__(self, plan: Preflight, on_state: Any = None) -> None:
        super().__init__(plan, on_state)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.listen()

    def stop(self, timeout: float) -> None:
        super().stop(timeout)
        self.sock.close()


def test_a_replace_is_planned_before_the_stop_and_keeps_the_port(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """The new launch's preflight counts the port the running server holds as free (it stops first), as it
    counts its memory: the new server listens where the old one did, and the plan checked is what starts."""
    procs: list[FakeProc] = []
    checked: list[Preflight] = []

    def preflight(*a: Any, **kw: Any) -> Preflight:
        checked.append(launcher.preflight(*a, **kw))
        return checked[-1]

    s, heard = serving(tmp_path, procs, make=ListeningProc, preflight=preflight)
    settings = LaunchSettings(target=model, n_gpu_layers="0")
    s.start(ENGINE, settings, caps)
    heard.log.clear()
    in_mode = lambda asked: replace(asked, threads=asked.threads + 2)  # noqa: E731  # the switch's mode
    assert s.replace(ENGINE, replace(settings, threads=3), caps, in_mode=in_mode) is Replacing.PREFLIGHT
    assert heard.log[:3] == ["replace_started", "state", "stopped"] and heard.moved == []
    assert procs[0].stopped and procs[1].port == procs[0].port == s.parts.default_port
    assert procs[1].plan is checked[-1] and len(checked) == 2 and procs[1].settings.threads == 5
    s.shutdown()


def test_a_refused_replace_keeps_the_running_server(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs, ram=1024)  # the second launch cannot fit... nor could the first:
    s.parts.room = lambda stopping: Room(None, 64 * GiB if not procs else 1024)
    settings = LaunchSettings(target=model, n_gpu_layers="0")
    s.start(ENGINE, settings, caps)
    assert s.replace(ENGINE, replace(settings, ctx_size=4096), caps) is Replacing.PREFLIGHT
    assert [r.code for r in heard.refused] == ["out_of_memory"] and "replace_started" not in heard.log
    assert not procs[0].stopped and len(procs) == 1 and s.state == ServerState.READY


def test_a_replace_whose_engine_cannot_be_probed_is_refused(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    def broken(path: str) -> EngineCaps:
        raise RuntimeError("llama-server --help exited with 127.")

    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs, probe=broken)
    s.start(ENGINE, LaunchSettings(target=model, n_gpu_layers="0"), caps)
    s.replace("/other/llama-server", LaunchSettings(target=model, n_gpu_layers="0"))
    assert heard.refused[0].code == "engine_missing" and "exited with 127" in heard.refused[0].message
    assert not procs[0].stopped and s.state == ServerState.READY


def test_nothing_running_is_replaced_by_nothing_and_a_connection_at_once(tmp_path: Path, model: str,
                                                                         caps: EngineCaps) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs, inspect=lambda url, key: _info(url))
    settings = LaunchSettings(target=model, n_gpu_layers="0")
    asked: list[LaunchSettings] = []
    assert s.replace(ENGINE, settings, caps, in_mode=lambda x: asked.append(x) or x) is Replacing.NONE
    assert procs == [] and heard.log == [] and asked == []  # the mode is asked only of what replaces
    s.start(ENGINE, settings, caps)
    assert s.replace("http://127.0.0.1:9", LaunchSettings(), None) is Replacing.AT_ONCE
    assert procs[0].stopped and s.is_remote() and s.state == ServerState.READY and heard.attached
    assert s.replace(ENGINE, settings, caps) is Replacing.AT_ONCE  # from the connection back to our own
    assert not s.is_remote() and len(procs) == 2 and s.remote is None


# -- restarting, the switch's fast start, and the server kept beside -----------------------


def test_a_mode_switch_restarts_from_the_page_cache_and_learns_its_time(tmp_path: Path, caps: EngineCaps,
                                                                        model: str) -> None:
    """Issue 25: a Baseline <-> mode switch restarts the target that just loaded: mapped from the page cache
    (--no-mmap --mlock dropped) and without the fit pass, and its time is kept so the toggle can say it the
    next time. The first start is left as set."""
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    s.standby = False
    first = LaunchSettings(target=model, n_gpu_layers="0", mmap=False, mlock=True, spec_mode=Mode.MODEL_FREE)
    s.start(ENGINE, first, caps)
    assert not procs[0].settings.mmap and procs[0].settings.mlock and "--fit" not in procs[0].settings.extra_args
    assert s.expected_switch_s(with_draft=False) is None  # never switched: nothing promised
    baseline = replace(first, spec_mode=Mode.BASELINE)
    s.restart(baseline)
    fast = procs[1].settings
    assert fast.mmap and not fast.mlock and fast.extra_args[-2:] == ["--fit", "off"] and s.last_switch == RESTARTED
    assert s.settings is not None and not s.settings.mmap and s.settings.spec_mode == Mode.BASELINE  # as asked
    assert any("skips the engine's fit pass" in line for line in heard.lines)
    s.restart(first)
    assert s.expected_switch_s(with_draft=False) is not None


def test_a_restart_of_other_settings_is_no_switch(tmp_path: Path, caps: EngineCaps, model: str,
                                                  tmp_path_factory: pytest.TempPathFactory) -> None:
    procs: list[FakeProc] = []
    s, _ = serving(tmp_path, procs)
    other = str(tiny_model(tmp_path_factory.mktemp("other") / "o.gguf"))
    s.start(ENGINE, LaunchSettings(target=model, n_gpu_layers="0", mmap=False), caps)
    s.restart(LaunchSettings(target=other, n_gpu_layers="0", mmap=False))
    assert not procs[1].settings.mmap and procs[0].stopped and len(procs) == 2


def _modes(model: str) -> tuple[LaunchSettings, LaunchSettings]:
    first = LaunchSettings(target=model, n_gpu_layers="0", spec_mode=Mode.MODEL_FREE)
    return first, replace(first, spec_mode=Mode.BASELINE)


def test_a_switch_with_room_keeps_the_other_mode_loaded_and_switches_back_loading_nothing(
        tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """core/engine/speculation/standby.py: with memory free for both, the first switch loads the other mode
    beside the running server (which keeps serving), every later one only changes the server served."""
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.restart(other)
    assert s.last_switch == LOADED_BESIDE and len(procs) == 2 and not procs[0].stopped
    assert procs[1].port == procs[0].port + 1 and heard.ready[-1] == procs[1].base_url
    assert any("beside port" in line for line in heard.lines)
    assert procs[1].settings.mmap and procs[1].settings.extra_args[-2:] == ["--fit", "off"]  # a switch's start
    assert s.expected_switch_s(with_draft=False) is None  # the kept server's kind of mode: nothing to load
    s.restart(first)
    assert s.last_switch == SWAPPED and len(procs) == 2 and not any(p.stopped for p in procs)
    assert heard.ready[-1] == procs[0].base_url and s.settings is not None and s.settings.spec_mode == Mode.MODEL_FREE
    s.restart(other)
    assert s.last_switch == SWAPPED and heard.ready[-1] == procs[1].base_url and len(procs) == 2
    assert heard.states.count(ServerState.STOPPED) == 0
    s.shutdown()
    assert all(p.stopped for p in procs)  # nothing is left running


def test_a_switch_without_room_restarts_and_says_why(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    s.parts.free_now = lambda: (None, 1024)
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.restart(other)
    assert s.last_switch == RESTARTED and procs[0].stopped and len(procs) == 2
    assert any("cannot stay loaded beside it" in line and "host memory" in line for line in heard.lines), heard.lines


def test_standby_off_restarts_and_a_kept_server_that_dies_is_forgotten(tmp_path: Path, model: str,
                                                                       caps: EngineCaps) -> None:
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    s.standby = False
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.restart(other)
    assert s.last_switch == RESTARTED and procs[0].stopped
    s.standby = True
    s.restart(first)
    assert s.last_switch == LOADED_BESIDE and not procs[1].stopped and s.kept is not None
    failed = len(heard.failed)
    procs[1].die()  # the kept one dies: no failure reported
    assert len(heard.failed) == failed and s.kept is None
    assert any("kept loaded for the other mode stopped" in line for line in heard.lines)
    s.restart(other)
    assert s.last_switch == LOADED_BESIDE and len(procs) == 4  # loaded again, not swapped to a dead one


def test_a_third_mode_replaces_the_kept_server_on_its_port(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """Only two servers are ever kept: a switch to a third mode stops the kept one first, and takes its port
    (the next one up from the running server's)."""
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs, make=ListeningProc)
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.preload(other)
    assert procs[1].port == procs[0].port + 1
    s.restart(replace(first, spec_model_free_type="ngram-simple"))
    assert s.last_switch == LOADED_BESIDE and len(procs) == 3 and procs[1].stopped and not procs[0].stopped
    assert procs[2].port == procs[1].port and heard.ready[-1] == procs[2].base_url
    s.shutdown()


def test_a_preload_keeps_the_other_mode_loaded_and_the_first_switch_loads_nothing(
        tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """The switch offers the other mode once the restart path is known: no ``ready`` (the chat keeps its
    server), the running server stays the one served, and the switch to it is a swap."""
    procs: list[FakeProc] = []
    s, heard = serving(tmp_path, procs)
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.preload(other)
    assert len(procs) == 2 and heard.ready == [procs[0].base_url] and s.base_url == procs[0].base_url
    assert s.kept is not None and not procs[0].stopped
    s.preload(other)  # already kept: nothing more is loaded
    s.standby = False
    s.kept = None
    s.preload(other)  # standby off: nothing is loaded
    assert len(procs) == 2


def test_the_restart_steps_run_around_the_stop_and_before_ready(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """The seam issue 36 fills (a slot's KV cache saved before the stop, restored once the new server is up):
    ``before_stop`` while the old server still serves, ``after_ready`` before anyone hears of the new one."""
    procs: list[FakeProc] = []
    seen: list[tuple[str, Restart, bool]] = []
    heard_ref: list[Heard] = []

    class Steps:
        def prepare(self, settings: LaunchSettings, caps: EngineCaps) -> LaunchSettings:
            return replace(settings, extra_args=["--slots", *settings.extra_args])  # what every start launches

        def before_stop(self, restart: Restart, running: Any) -> None:
            seen.append(("before_stop", restart, running is procs[-1] and not running.stopped))

        def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
            seen.append(("after_ready", restart, started is procs[-1] and took_s >= 0
                         and len(heard_ref[0].ready) == 1))  # the first start's only: not told yet
            return True

        def ended(self, restart: Restart) -> None:
            seen.append(("ended", restart, len(heard_ref[0].ready) == 2))

        def said(self) -> str:
            seen[-1][1].log("said")  # the restart's own log line, before ready is told
            return "kept the conversation"

    s, heard = serving(tmp_path, procs, restart_steps=Steps())
    heard_ref.append(heard)
    s.standby = False
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    assert seen == []  # a first start is no restart
    s.restart(other)
    assert [(name, ok) for name, _, ok in seen] == [("before_stop", True), ("after_ready", True), ("ended", True)]
    restart = seen[0][1]
    assert restart is seen[1][1] is seen[2][1] and (restart.engine, restart.caps, restart.settings, restart.fast) == (
        ENGINE, caps, other, True)
    assert restart.before is not None and restart.before.spec_mode == first.spec_mode and restart.kv_bytes
    assert s.restart_note == "kept the conversation" and heard.lines[-1] == "BeeDeck: said"  # before ready is told
    assert all(p.settings.extra_args[0] == "--slots" for p in procs)  # every start, the first one too


def test_the_restart_steps_end_a_restart_whose_start_failed(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """A restart whose new server never becomes ready still ends its steps (a saved slot's file goes)."""
    procs: list[FakeProc] = []
    seen: list[str] = []

    class Steps(NoSteps):
        def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
            seen.append("after_ready")
            return True

        def ended(self, restart: Restart) -> None:
            seen.append("ended")

    s, heard = serving(tmp_path, procs, restart_steps=Steps())
    s.standby = False
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.restart(replace(other, ctx_size=-5))  # refused by its preflight: no server, no ready
    assert seen == ["ended"] and heard.failed and s.restart_note == ""


def test_the_servers_a_launch_stops_first_are_counted_as_free(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    class Pid(FakeProc):
        def __init__(self, plan: Preflight, on_state: Any = None) -> None:
            super().__init__(plan, on_state)
            self.pid = 4242 + len(procs)

    procs: list[FakeProc] = []
    s, _ = serving(tmp_path, procs, make=Pid)
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.preload(other)
    assert [(h.pid, h.settings.spec_mode) for h in s.stopping()] == [(4242, Mode.MODEL_FREE), (4243, Mode.BASELINE)]
    assert s.held_gpu_memory([]) == []


def _info(url: str) -> RemoteInfo:
    return RemoteInfo(url=url, model="/m/Target.gguf", n_ctx=8192, n_ctx_train=None, total_slots=1, build_info="b1",
                      engine="mainline", speculative=False, spec_types="", metrics=True, slots=True, needs_key=False)


def test_a_server_the_restart_steps_broke_starts_again_without_them(tmp_path: Path, model: str, caps: EngineCaps) -> None:
    """A restore that kills the new server (mainline aborts on a cut cache file) never ends a switch without a
    server: it starts once more, without the steps, and the user hears of one ready server."""
    procs: list[FakeProc] = []
    calls: list[str] = []

    class Breaks(NoSteps):
        def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
            calls.append("after_ready")
            started.die()
            return False

        def said(self) -> str:
            return "could not be kept"

    s, heard = serving(tmp_path, procs, restart_steps=Breaks())
    s.standby = False
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.restart(other)
    assert calls == ["after_ready"] and len(procs) == 3 and procs[1].stopped and not procs[2].stopped
    assert len(heard.ready) == 2 and heard.failed == [] and s.is_running() and s.proc is procs[2]
    assert procs[2].settings.spec_mode == other.spec_mode and procs[2].settings.extra_args[-2:] == ["--fit", "off"]
    assert s.restart_note == "could not be kept" and any("starts again without them" in line for line in heard.lines)


def test_restart_steps_that_raise_are_logged_and_the_restart_goes_on(tmp_path: Path, model: str,
                                                                       caps: EngineCaps) -> None:
    """A step with a bug (or a file system that says no as nobody foresaw: a slot folder that became a file made
    ``unlink`` raise NotADirectoryError) must not leave the switch stuck with no server: it is said and skipped."""
    procs: list[FakeProc] = []

    class Raises(NoSteps):
        def prepare(self, settings: LaunchSettings, caps: EngineCaps) -> LaunchSettings:
            raise NotADirectoryError("slots")

        def before_stop(self, restart: Restart, running: Any) -> None:
            raise NotADirectoryError("slots/carry.bin")

        def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
            raise RuntimeError("a bug")

        def ended(self, restart: Restart) -> None:
            raise RuntimeError("another")

    s, heard = serving(tmp_path, procs, restart_steps=Raises())
    s.standby = False
    first, other = _modes(model)
    s.start(ENGINE, first, caps)
    s.restart(other)
    assert s.is_running() and len(procs) == 2 and len(heard.ready) == 2 and heard.failed == []
    failed = [line for line in heard.lines if "failed (" in line]
    assert [line.split(" failed")[0] for line in failed] == [
        "BeeDeck: mode switch: preparing the launch", "BeeDeck: mode switch: the step before the stop",
        "BeeDeck: mode switch: preparing the launch", "BeeDeck: mode switch: the step after the start",
        "BeeDeck: mode switch: the end of the restart"]
    assert "(NotADirectoryError: slots/carry.bin); the restart goes on without it" in failed[1]
