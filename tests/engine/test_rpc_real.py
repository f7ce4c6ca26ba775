"""RPC workers with REAL processes on loopback: the portable starter engine (mainline llama.cpp built by
BeeDeck's builder with GGML_RPC=ON, packaging/build_dist.py) runs two ggml-rpc-server workers on
127.0.0.1 and a main llama-server --rpc serving the starter model split across them. The planner's
per-device figures are checked against the engine's own buffer lines; a worker of another build, a
worker that is not running and an engine without RPC are refused with their own messages; a worker
killed in the middle of a reply ends the server with a message that names it, and nothing is left
running. Prints tokens/s on one process vs split over the two workers."""

from __future__ import annotations

import os
import signal
import socket
import statistics
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine import rpc
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.client import ClientError, LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.rpc import (
    RpcError,
    WorkerProcess,
    parse_workers,
    require_worker_binary,
    start_worker,
)
from beedeck.core.engine.rpc.probe import probe_workers, restate
from beedeck.core.engine.server import ServerProcess, free_port
from beedeck.core.launcher import launch
from beedeck.core.models.gguf import reader as gguf
from beedeck.core.models.planner import MemoryPlan
from beedeck.core.models.planner.devices import DeviceCheck, compare, plan_across
from beedeck.core.starter import StarterProfile
from tests.engine.procs import pid_alive

pytestmark = pytest.mark.engine

StartWorkers = Callable[[int], list[WorkerProcess]]


@pytest.fixture(scope="session")
def rpc_caps(rpc_engine_path: Path) -> EngineCaps:
    return probe_engine(str(rpc_engine_path))


@pytest.fixture
def start_workers(rpc_engine_path: Path) -> Iterator[StartWorkers]:
    started: list[WorkerProcess] = []

    def start(n: int) -> list[WorkerProcess]:
        binary = require_worker_binary(rpc_engine_path)
        workers = [start_worker(binary, "127.0.0.1", free_port(), threads=1) for _ in range(n)]
        started.extend(workers)
        for w in workers:
            w.wait_listening(30)
        return workers

    yield start
    for w in started:
        w.stop()
    assert not [w for w in started if pid_alive(w.pid)], "an RPC worker outlived its test"


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for proc in started:
        proc.stop(5.0)
    assert not [p for p in started if pid_alive(p.pid)], "a llama-server outlived its test"


def _settings(engine: Path, model: Path, **kw: object) -> LaunchSettings:
    return StarterProfile(engine=engine, model=model).settings(**{"ctx_size": 2048, "port": free_port(), **kw})


def _rates(client: LlamaClient, n: int = 3) -> list[float]:
    out = []
    for i in range(n):
        res = client.chat([{"role": "user", "content": f"Write a short paragraph about bees ({i})."}],
                          max_tokens=64, temperature=0.0, extra={"cache_prompt": False})
        assert res.timings is not None and res.text.strip()
        out.append(res.timings.predicted_per_second)
    return out


# The planner's compute error on one device (10 %, tests/engine/test_planner_real.py), or 1.5 MiB on the
# smallest buffers: its one-device formula counts Gemma's 1 MiB of logits beside the layer peak (the
# engine reuses that memory), which is 13 % of a worker's 8.6 MiB buffer at -ub 256.
COMPUTE_TOLERANCE, COMPUTE_FLOOR_MIB = 0.10, 1.5


def _check_plan(mem: MemoryPlan, proc: ServerProcess, n_devices: int) -> list[DeviceCheck]:
    """Every worker's weights and KV exact, every compute buffer (the workers' and the host's) within
    the planner's usual compute error of the engine's own buffer lines."""
    checks = compare(mem, proc.memory)
    for c in checks:
        print(f"\n[measure] {c.device}: weights planned {c.planned_weights_mib:.2f} MiB vs engine "
              f"{c.engine_model_mib:.2f} MiB; KV planned {c.planned_kv_mib:.2f} vs engine {c.engine_kv_mib:.2f} MiB; "
              f"compute planned {c.planned_compute_mib:.2f} vs engine {c.engine_compute_mib:.2f} MiB")
    workers, host = checks[:-1], checks[-1]
    assert len(workers) == n_devices and all(c.engine_model_mib > 0 and c.engine_kv_mib > 0 for c in workers)
    assert all(c.error < 0.01 for c in workers), workers  # weights and KV: exact to the MiB
    assert host.device == "CPU" and host.engine_compute_mib > 0
    assert all(c.engine_compute_mib > 0 for c in checks), checks
    off = [c for c in checks if c.compute_error >= COMPUTE_TOLERANCE
           and abs(c.planned_compute_mib - c.engine_compute_mib) >= COMPUTE_FLOOR_MIB]
    assert off == [], off
    return workers


def test_a_model_split_over_two_workers_matches_the_plan(
    rpc_engine_path: Path, rpc_caps: EngineCaps, starter_model_path: Path, start_workers: StartWorkers,
    servers: list[ServerProcess],
) -> None:
    workers = start_workers(2)
    addresses = [w.address for w in workers]
    devices = probe_workers(str(rpc_engine_path), addresses)
    assert [(d.name, d.worker) for d in devices] == [("RPC0", addresses[0]), ("RPC1", addresses[1])]
    assert all(d.free_mib > 0 for d in devices)

    split = _settings(rpc_engine_path, starter_model_path, n_gpu_layers="all",
                      rpc_workers=[str(a) for a in addresses], extra_args=["-lv", "4"])
    mem = plan_across(gguf.inspect(str(starter_model_path)), None, split, Generation.MAINLINE, devices)
    proc = launch(rpc_engine_path, rpc_caps, split)
    servers.append(proc)
    proc.wait_ready(120)
    assert "--rpc" in proc.command() and ",".join(map(str, addresses)) in proc.command()
    devices_checked = _check_plan(mem, proc, n_devices=2)
    assert devices_checked[0].engine_compute_mib > devices_checked[1].engine_compute_mib  # the pipeline's first
    split_rates = _rates(LlamaClient(proc.base_url))
    proc.stop(5.0)

    one = _settings(rpc_engine_path, starter_model_path)  # the same engine, one process on this CPU
    single = launch(rpc_engine_path, rpc_caps, one)
    servers.append(single)
    single.wait_ready(120)
    one_rates = _rates(LlamaClient(single.base_url))
    print(f"\n[measure] starter model, 64 tokens greedy, median of 3: one process "
          f"{statistics.median(one_rates):.1f} tok/s; split over two loopback RPC workers "
          f"{statistics.median(split_rates):.1f} tok/s")
    assert min(split_rates) > 0 and min(one_rates) > 0


@pytest.mark.parametrize(("model", "n_workers", "kw"), [
    ("starter", 3, {"ctx_size": 4096, "ubatch_size": 256}),  # a pipeline over three workers
    ("starter", 2, {"n_gpu_layers": "20"}),  # 11 layers left on this CPU: no pipeline, the CPU computes too
    ("gemma", 2, {}),  # sliding-window layers: two KQ masks per device
    ("gemma", 2, {"n_gpu_layers": "6", "ubatch_size": 256}),  # a worker with sliding-window layers only
])
def test_the_per_device_plan_follows_the_engine_across_splits(
    model: str, n_workers: int, kw: dict[str, object], rpc_engine_path: Path, starter_model_path: Path,
    gemma_model_path: Path, start_workers: StartWorkers, servers: list[ServerProcess],
) -> None:
    path = starter_model_path if model == "starter" else gemma_model_path
    workers = start_workers(n_workers)
    devices = probe_workers(str(rpc_engine_path), [w.address for w in workers])
    settings = _settings(rpc_engine_path, path, **{"n_gpu_layers": "all", **kw},
                         rpc_workers=[str(w.address) for w in workers], extra_args=["-lv", "4"])
    mem = plan_across(gguf.inspect(str(path)), None, settings, Generation.MAINLINE, devices)
    proc = launch(rpc_engine_path, probe_engine(str(rpc_engine_path)), settings)
    servers.append(proc)
    proc.wait_ready(120)
    pipeline = any("pipeline parallelism enabled" in line for line in proc.log_lines())
    assert pipeline == (kw.get("n_gpu_layers", "all") == "all")  # the planner's _pipeline rule, seen in the log
    _check_plan(mem, proc, n_devices=n_workers)


def test_a_worker_killed_mid_reply_is_named_and_nothing_is_left(
    rpc_engine_path: Path, rpc_caps: EngineCaps, starter_model_path: Path, start_workers: StartWorkers,
    servers: list[ServerProcess],
) -> None:
    workers = start_workers(2)
    settings = _settings(rpc_engine_path, starter_model_path, n_gpu_layers="all",
                         rpc_workers=[str(w.address) for w in workers])
    proc = launch(rpc_engine_path, rpc_caps, settings)
    servers.append(proc)
    proc.wait_ready(120)
    stream = LlamaClient(proc.base_url).stream_chat(
        [{"role": "user", "content": "Tell me a very long story about bees."}], max_tokens=2000, temperature=0.0)
    received: list[str] = []
    with pytest.raises(ClientError):
        for delta in stream:
            received.append(delta.content)
            if len(received) == 5:
                os.kill(workers[1].pid or 0, signal.SIGKILL)  # the machine holding half the layers goes away
    assert len(received) >= 5  # what arrived before is kept (the chat pane stores it as it streams)
    assert proc.wait_exit(30) is not None, "the main server must not hang on a lost worker"
    assert proc.failure is not None
    said = restate(proc.failure, settings.rpc_workers, proc.log_lines())
    assert said.code == "rpc:worker-lost", said
    assert f"The RPC worker at {workers[1].address} stopped answering" in said.message
    assert "conversation is kept" in said.remedy
    assert not pid_alive(proc.pid) and pid_alive(workers[0].pid)  # the other worker is stopped by its owner (teardown)


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None  # a connection that only checked the port (BeeDeck's reachable())
        data += chunk
    return data


class _OldWorker:
    """A worker of another release at the protocol level: it answers the HELLO handshake (ggml-rpc.cpp:
    1 command byte, a u64 size, the request; reply: a u64 size, then major, minor, patch, padding and the
    connection caps) with protocol 3.0.0, as a worker built from an older llama.cpp would."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                try:
                    head = _recv_exact(conn, 9)  # the command byte may come in a segment of its own
                    if head is None:
                        continue
                    size = struct.unpack("<Q", head[1:9])[0]
                    if _recv_exact(conn, size) is None:
                        continue
                    conn.sendall(struct.pack("<Q", 4 + size) + bytes([3, 0, 0, 0]) + bytes(size))
                    conn.recv(1)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_workers_that_cannot_be_used_are_refused_with_their_reason(
    rpc_engine_path: Path, bee_b_path: Path, start_workers: StartWorkers
) -> None:
    good = start_workers(1)[0]
    old = _OldWorker()
    try:
        with pytest.raises(RpcError) as exc:
            probe_workers(str(rpc_engine_path), [good.address, *parse_workers(f"127.0.0.1:{old.port}")])
    finally:
        old.close()
    assert exc.value.kind == rpc.VERSION, exc.value.message
    assert f"The worker at 127.0.0.1:{old.port} speaks RPC protocol 3.0.0" in exc.value.message
    assert "same release" in exc.value.remedy

    closed = parse_workers(f"127.0.0.1:{free_port()}")
    with pytest.raises(RpcError) as exc:
        probe_workers(str(rpc_engine_path), closed)
    assert exc.value.kind == rpc.UNREACHABLE and "beedeck worker" in exc.value.remedy

    with pytest.raises(RpcError) as exc:  # BeeLlama's CPU test build (no --rpc) has no RPC backend
        probe_workers(str(bee_b_path), [good.address])
    assert exc.value.kind == rpc.NO_RPC and "GGML_RPC=ON" in exc.value.remedy

    # No workers at all: this machine's devices (none on a CPU box), where an empty --rpc aborted the engine
    assert [d for d in probe_workers(str(rpc_engine_path), []) if not d.local] == []


def test_cli_worker_and_serve_rpc(
    rpc_engine_path: Path, starter_model_path: Path, start_workers: StartWorkers,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from beedeck.cli import main

    assert main(["worker", "--engine", str(rpc_engine_path), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "no authentication" in err and "--allow-network" in err

    worker = start_workers(1)[0]
    common = ["serve", "--engine", str(rpc_engine_path), "--model", str(starter_model_path), "--gpu-layers", "all"]
    # a worker that is gone: this run cannot go (exit 1, as a server that failed to start), the arguments were fine
    assert main([*common, "--rpc", f"{worker.address},127.0.0.1:{free_port()}", "--exit-when-ready"]) == 1
    assert "Nothing accepts connections at the worker address" in capsys.readouterr().err
    assert main([*common, "--rpc", str(worker.address), "--exit-when-ready", "--json"]) == 0
    out = capsys.readouterr()
    assert f"device: RPC0 {worker.address}" in out.err and f"plan: RPC0[{worker.address}]" in out.err
    assert '"base_url"' in out.out or "http://127.0.0.1" in out.out


def test_the_app_launches_over_workers_and_keeps_the_chat_when_one_dies(
    qtbot: QtBot, rpc_engine_path: Path, rpc_caps: EngineCaps, starter_model_path: Path,
    start_workers: StartWorkers,
) -> None:
    from beedeck.core.chat.store import ChatStore
    from beedeck.core.profile import Profile
    from beedeck.ui.launch.launch_form import LaunchForm
    from beedeck.ui.window.main_window import MainWindow
    from tests.fakes.inline_runner import run_inline

    workers = start_workers(2)
    # The launch form: the worker list is checked through the engine and the plan covers both workers.
    form = LaunchForm(runner=run_inline)
    qtbot.addWidget(form)
    form.set_engine(rpc_caps, str(rpc_engine_path))
    settings = _settings(rpc_engine_path, starter_model_path, n_gpu_layers="all",
                         rpc_workers=[str(w.address) for w in workers], extra_args=["-lv", "4"])
    form.set_settings(settings)
    qtbot.waitUntil(lambda: len(form.rpc_workers.devices) == 2, timeout=30_000)
    assert form.launch_button.isEnabled() and form.settings().rpc_workers == settings.rpc_workers
    mem = form.compute_plan()
    assert mem is not None and [g.name for g in mem.gpus] == [f"RPC0[{w.address}]" for w in workers]
    form.rpc_workers.set_workers([*settings.rpc_workers, f"127.0.0.1:{free_port()}"])
    assert not form.launch_button.isEnabled() and "Nothing accepts connections" in form.launch_button.toolTip()

    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    window.session.set_profile(Profile(str(rpc_engine_path), settings, "split"))
    with qtbot.waitSignal(window.session.controller.ready, timeout=120_000):
        window.start_action.trigger()
    pid = window.session.server.proc.pid
    _check_plan(mem, window.session.server.proc, n_devices=2)  # the form's plan against the app's own server
    window.chat.max_tokens = 2000
    window.chat.input.setPlainText("Tell me a very long story about bees.")
    window.chat.send_button.click()
    deltas: list[str] = []
    window.chat.delta_received.connect(deltas.append)
    qtbot.waitUntil(lambda: len("".join(deltas)) > 20, timeout=60_000)
    with qtbot.waitSignal(window.session.controller.failed, timeout=60_000) as failed:
        os.kill(workers[0].pid or 0, signal.SIGKILL)
    assert failed.args[0].code == "rpc:worker-lost"
    assert f"The RPC worker at {workers[0].address} stopped answering" in failed.args[0].message
    qtbot.waitUntil(lambda: window.failure.isVisible(), timeout=10_000)
    assert "stopped answering" in window.failure.what.text()
    qtbot.waitUntil(lambda: not window.chat.is_generating(), timeout=30_000)
    reply = store.messages(window.chat.conversation_id)[-1]  # type: ignore[arg-type]
    assert reply.role == "assistant" and len(reply.content) > 20 and not reply.complete  # kept, marked unfinished
    window.close()
    assert not pid_alive(pid)
    store.close()


def test_beedeck_worker_serves_until_ctrl_c_and_leaves_nothing(rpc_engine_path: Path, tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "beedeck", "worker", "--engine", str(rpc_engine_path),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "BEEDECK_HOME": str(tmp_path / "home")})
    lines: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 30
        while not any(f"worker listening on 127.0.0.1:{port}" in x for x in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        # The worker's own banner and devices show as it starts, not when it exits (its stdio writes to a
        # pipe, and it flushes on each connection, as the listening check makes one).
        while not any("Starting RPC server" in x for x in lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(f"worker listening on 127.0.0.1:{port}" in x for x in lines), lines
        assert any("Starting RPC server" in x for x in lines) and any(f"127.0.0.1:{port}" in x for x in lines), lines
        children = psutil.Process(proc.pid).children(recursive=True)
        assert any("rpc-server" in c.name() for c in children)
        devices = probe_workers(str(rpc_engine_path), parse_workers(f"127.0.0.1:{port}"))
        assert [d.name for d in devices] == ["RPC0"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) == 0
        deadline = time.monotonic() + 10
        while any(pid_alive(c.pid) for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(pid_alive(c.pid) for c in children), "the worker outlived `beedeck worker`"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_serve_rpc_on_the_starter_profile_gives_the_workers_the_layers(
    rpc_engine_path: Path, starter_model_path: Path, start_workers: StartWorkers, servers: list[ServerProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 37: `beedeck serve --rpc A,B` on the starter profile (a CPU profile: GPU layers 0) launched with
    -ngl 0; the plan printed "RPC0 … 0 MiB" for both workers and "272 target tensors stay in host memory", and
    the workers held none of the model. Now the layers go to the workers by the plan's split: the plan gives
    each worker its share, the command says -ngl all, and each worker's own memory grows by at least the
    weights the plan put on it (the engine sent them there)."""
    import re

    from beedeck.cli import build_parser
    from beedeck.clicmd.engine.serve import start_from_args

    workers = start_workers(2)
    before = [psutil.Process(w.pid).memory_info().rss for w in workers]
    args = build_parser().parse_args(["serve", "--engine", str(rpc_engine_path), "--model", str(starter_model_path),
                                      "--rpc", ",".join(str(w.address) for w in workers)])
    started = start_from_args(args)
    assert isinstance(started, ServerProcess), capsys.readouterr().err
    servers.append(started)
    started.wait_ready(120)
    argv = started.command()
    assert argv[argv.index("-ngl") + 1] == "all"
    err = capsys.readouterr().err
    planned: dict[str, tuple[float, float]] = {}  # per worker: the weights and the KV cache the plan put there
    for w in workers:
        line = next(x for x in err.splitlines() if x.startswith(f"plan: RPC0[{w.address}]:"))
        found = [re.search(rf"{k} ([\d,.]+)", line) for k in ("weights", "kv")]
        planned[str(w.address)] = tuple(float(m.group(1).replace(",", "")) if m else 0.0 for m in found)  # type: ignore[assignment]
    print(f"\n[measure] planned (weights, KV) per worker, MiB: {planned}")
    assert all(weights > 10 and kv > 10 for weights, kv in planned.values()), err  # both workers hold layers
    assert "stay in host memory" not in err  # only the input layer stays here, as in every launch
    grown = [(psutil.Process(w.pid).memory_info().rss - b) / 2**20 for w, b in zip(workers, before, strict=True)]
    print(f"[measure] each worker's memory grew by (MiB): {[round(g, 1) for g in grown]}")
    assert all(g >= 0.9 * sum(planned[str(w.address)]) for g, w in zip(grown, workers, strict=True)), (grown, planned)
    assert LlamaClient(started.base_url).chat([{"role": "user", "content": "Say hi."}], max_tokens=8).text.strip()
