"""Faults: concurrent BeeDeck sessions, and signals to every kind of BeeDeck process.

Each child runs in its own session (as from its own terminal); ``no_orphans`` checks that every
llama-server it started is gone afterwards.
"""

from __future__ import annotations

import json
import signal
import subprocess

import psutil
import pytest

from beedeck.core.engine.server import free_port

from .conftest import Beedeck, Child, alive, place_starter, wait_for

pytestmark = pytest.mark.engine

LONG_PROMPT = "Count from 1 to 400, one number per line."


def serve(bd: Beedeck, port: int | None = None) -> Child:
    args = ["serve", *bd.starter_args()]
    if port is not None:
        args += ["--port", str(port)]
    child = bd.spawn(*args)
    child.wait_text("ready in", 120, "out")
    return child


def server_of(child: Child) -> int:
    pids = wait_for(child.servers, 30, "the llama-server of a BeeDeck process")
    assert len(pids) == 1
    return int(next(iter(pids)))


def gone(pid: int, timeout: float = 10.0) -> None:
    wait_for(lambda: not alive(pid), timeout, f"process {pid} to end")


def test_chat_beside_a_running_serve_leaves_it_running(beedeck: Beedeck) -> None:
    """Sibling sessions: `beedeck chat` starts its own server and stops only that one."""
    first = serve(beedeck)
    first_server = server_of(first)
    done = beedeck.run("chat", "Say hi.", "--max-tokens", "8", *beedeck.starter_args())
    assert done.returncode == 0, done.stderr
    assert "generation:" in done.stdout
    assert alive(first_server) and first.proc.poll() is None  # the sibling's server was not touched
    first.proc.send_signal(signal.SIGINT)
    assert first.wait(30) == 0
    gone(first_server)


def test_second_serve_on_a_taken_port_names_the_session_that_has_it(beedeck: Beedeck) -> None:
    port = free_port()
    first = serve(beedeck, port)
    first_server = server_of(first)
    second = beedeck.run("serve", *beedeck.starter_args(), "--port", str(port), "--exit-when-ready")
    assert second.returncode == 1
    assert f"Port {port} is taken by another BeeDeck session's llama-server (pid {first_server}" in second.stderr
    assert f"started by BeeDeck pid {first.pid}" in second.stderr and "what to do:" in second.stderr
    assert alive(first_server) and first.proc.poll() is None
    first.proc.send_signal(signal.SIGTERM)
    first.wait(30)
    gone(first_server)


def test_a_server_left_by_a_killed_beedeck_is_stopped_by_the_next_one_and_said(beedeck: Beedeck) -> None:
    """A leftover of a dead BeeDeck (one whose parent-death signal could not fire, e.g. a server that
    was re-parented): the next BeeDeck stops it and says so; a live session's server it never touches."""
    port = free_port()
    stray = subprocess.Popen([str(beedeck.engine), "-m", str(beedeck.model), "--port", str(port), "-t", "1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    owner = subprocess.Popen(["sleep", "0"])
    owner.wait()  # a BeeDeck pid that is gone
    records = beedeck.home / "state" / "servers"
    records.mkdir(parents=True)
    (records / f"{stray.pid}.json").write_text(json.dumps({
        "pid": stray.pid, "create_time": psutil.Process(stray.pid).create_time(), "engine": str(beedeck.engine),
        "port": port, "argv_hash": "x", "owner_pid": owner.pid, "owner_create_time": 1.0, "started": 1.0}))
    done = beedeck.run("serve", *beedeck.starter_args(), "--exit-when-ready")
    assert done.returncode == 0, done.stderr
    assert f"note: stopped a llama-server (pid {stray.pid}, port {port}) left running by a BeeDeck that is gone" \
        in done.stdout
    assert stray.wait(10) is not None


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_serve_stops_its_server_on_hangup_terminate_and_interrupt(beedeck: Beedeck, sig: signal.Signals) -> None:
    child = serve(beedeck)
    server = server_of(child)
    child.proc.send_signal(sig)
    code = child.wait(30)
    assert code in (0, -sig)  # Ctrl+C is a normal exit; a hang-up or terminate ends it by that signal
    gone(server)
    assert not list((beedeck.home / "state" / "servers").glob("*.json"))  # its ownership record went too


def test_serve_killed_outright_takes_its_server_along(beedeck: Beedeck) -> None:
    """SIGKILL leaves BeeDeck no time for anything: the kernel's parent-death signal stops the server."""
    child = serve(beedeck)
    server = server_of(child)
    child.proc.kill()
    child.wait(10)
    gone(server)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_chat_hung_up_or_killed_mid_reply_leaves_no_server(beedeck: Beedeck, sig: signal.Signals) -> None:
    child = beedeck.spawn("chat", LONG_PROMPT, "--max-tokens", "2000", *beedeck.starter_args())
    child.wait_text("ready in", 120, "err")
    server = server_of(child)
    wait_for(lambda: child.stdout().strip(), 60, "the first streamed tokens")
    child.proc.send_signal(sig)
    child.wait(30)
    gone(server)


def test_bench_killed_mid_run_leaves_no_server(beedeck: Beedeck) -> None:
    child = beedeck.spawn("bench", "--engine", str(beedeck.engine), "--target", str(beedeck.model), "--threads",
                          "1", "--reps", "5", "--no-charts", "--out", str(beedeck.workdir / "bench-out"))
    server = server_of(child)
    wait_for(lambda: psutil.Process(server).status() != psutil.STATUS_ZOMBIE, 30, "the bench server")
    child.proc.kill()
    child.wait(10)
    gone(server)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_the_window_hung_up_or_killed_leaves_no_server(beedeck: Beedeck, sig: signal.Signals) -> None:
    """The app started from a terminal that closes (SIGHUP: the window closes as if the user did), or
    killed outright (SIGKILL: the parent-death signal), on the no-GPU first start that autostarts."""
    place_starter(beedeck.home, beedeck.model)
    child = beedeck.spawn("--no-gpu", module="tests.faults.gui_child")
    server = server_of(child)
    wait_for(lambda: (beedeck.home / "state" / "servers" / f"{server}.json").exists(), 30, "its record")
    child.proc.send_signal(sig)
    child.wait(30)
    gone(server)
    if sig == signal.SIGHUP:
        assert child.proc.returncode == 0  # an orderly close, not a crash


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=lambda s: s.name)
def test_a_build_hung_up_or_killed_leaves_no_compiler_running_and_registers_nothing(
        beedeck: Beedeck, sig: signal.Signals) -> None:
    import shutil

    from tests.conftest import FIXTURES

    source = beedeck.workdir / "src"
    shutil.copytree(FIXTURES / "mini_cmake", source)
    child = beedeck.spawn("engine", "build", "--source", str(source), "--cpu", "-D", "MINI_SLOW=ON", "-j", "1")

    def slow_step() -> list[int]:
        try:
            kids = psutil.Process(child.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [k.pid for k in kids if "sleep" in " ".join(_cmdline(k))]

    wait_for(slow_step, 120, "the build's slow step")
    tools = [k.pid for k in psutil.Process(child.pid).children(recursive=True)]
    child.proc.send_signal(sig)
    child.wait(30)
    for pid in tools:
        gone(pid)
    done = beedeck.run("engine", "list", "--json")
    assert done.returncode == 0, done.stderr
    built = [e for e in json.loads(done.stdout)["engines"] if e["origin"] == "built" and e.get("ready")]
    assert built == []  # nothing half-built is offered for use
    again = beedeck.run("engine", "build", "--source", str(source), "--cpu", "-j", "1")  # and building again works
    assert again.returncode == 0, again.stderr[-2000:]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []
