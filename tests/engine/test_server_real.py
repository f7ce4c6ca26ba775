"""ServerProcess and launch() against the real mainline llama-server with Gemma 3 270M (CPU)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from beedeck.clicmd.bench import synthetic_bench_pair
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.pidfile import records_dir, stop_leftovers
from beedeck.core.engine.server import ServerFailed, ServerState
from beedeck.core.models.guard import check_launch
from tests.conftest import PERSISTENT

from .conftest import RawServer, StartServer

pytestmark = pytest.mark.engine


def write_header_only_gguf(path: Path, arch: str) -> Path:
    """A GGUF with just ``general.architecture``: enough for the pre-launch checks, never loaded."""
    key, val = b"general.architecture", arch.encode()
    data = struct.pack("<IIQQ", 0x46554747, 3, 0, 1)
    data += struct.pack("<Q", len(key)) + key + struct.pack("<I", 8) + struct.pack("<Q", len(val)) + val
    path.write_bytes(data)
    return path


def test_start_ready_stop(start_server: StartServer, beedeck_home: Path) -> None:
    seen: list[ServerState] = []
    lines: list[str] = []
    proc = start_server(on_state=lambda s, f: seen.append(s), on_line=lines.append, extra_args=["-lv", "4"])
    ready_s = proc.wait_ready(120)
    assert seen[0] == ServerState.STARTING and seen[-1] == ServerState.READY
    assert set(seen) <= {ServerState.STARTING, ServerState.LOADING, ServerState.READY}
    times = [proc.state_times[s] for s in seen]
    assert times == sorted(times) and 0 < ready_s < 120
    # mainline prints "listening on" just after it marks itself ready (tools/server/server.cpp: is_ready,
    # then "model loaded", then the addresses), so /health can answer first: wait for the line to come.
    deadline = time.monotonic() + 15
    while not any("listening on" in x for x in lines) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any("listening on" in x for x in lines) and proc.log_lines()[: len(lines)] == lines
    # The ownership record names the server and this BeeDeck process, so a later start can tell a
    # leftover of a dead BeeDeck from a running session's server.
    record = json.loads((beedeck_home / "state" / "servers" / f"{proc.pid}.json").read_text())
    assert record["pid"] == proc.pid and record["port"] == proc.port and record["owner_pid"] == os.getpid()
    # -lv 4 shows mainline's buffer lines: the real CPU figures for this model.
    mem = proc.memory
    assert 80 < mem.devices["CPU_Mapped"].model_mib < 100  # the 94 MiB file (SmolLM2 Q4_1), memory-mapped
    # 30 layers x 8192 cells x (3 KV heads x 64) x K and V x 2 bytes (f16) = 180 MiB
    assert mem.devices["CPU"].kv_mib == pytest.approx(180.0)
    assert mem.devices["CPU"].compute_mib > 0
    assert mem.n_ctx_slot == 8192
    rc = proc.stop()
    assert proc.state == ServerState.STOPPED and proc.failure is None and rc is not None
    assert list((beedeck_home / "state" / "servers").iterdir()) == []


def test_memory_counts_a_buffer_reserved_again_on_the_first_request_once(start_server: StartServer) -> None:
    # With a DFlash draft, mainline reserves the target's compute graph again on the first request (a fourth
    # "CPU compute buffer size" line after the three of the load): ServerProcess.memory counts it once.
    target, draft = synthetic_bench_pair(PERSISTENT / "synth-bench")
    proc = start_server(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, ctx_size=4096,
                        flash_attn="auto", extra_args=["-lv", "4", "--threads", "1"])
    proc.wait_ready(120)
    loaded = proc.memory.devices["CPU"].compute_mib
    n_loaded = sum("compute buffer size" in x for x in proc.log_lines())
    req = urllib.request.Request(f"{proc.base_url}/v1/chat/completions", json.dumps(
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode(),
        {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 200
    deadline = time.monotonic() + 10
    while sum("compute buffer size" in x for x in proc.log_lines()) == n_loaded and time.monotonic() < deadline:
        time.sleep(0.05)  # the log reader thread may be a line behind the reply
    assert sum("compute buffer size" in x for x in proc.log_lines()) == n_loaded + 1, proc.log_lines()[-40:]
    assert n_loaded == 3 and proc.memory.devices["CPU"].compute_mib == pytest.approx(loaded)


def test_port_already_in_use(start_server: StartServer) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = start_server(port=port)
        with pytest.raises(ServerFailed) as info:
            proc.wait_ready(60)
    f = info.value.failure
    assert f.code == "port_in_use" and str(port) in f.message and "another port" in f.remedy
    assert proc.state == ServerState.FAILED and f.exit_code == 1


def test_missing_model_refused_before_start(start_server: StartServer, tmp_path: Path) -> None:
    with pytest.raises(ServerFailed) as info:
        start_server(target=str(tmp_path / "nope.gguf"))
    assert info.value.failure.code == "model_missing"


def test_missing_model_reported_by_the_engine(raw_server: RawServer, tmp_path: Path) -> None:
    proc = raw_server(target=str(tmp_path / "nope.gguf"))
    with pytest.raises(ServerFailed) as info:
        proc.wait_ready(60)
    f = info.value.failure
    assert f.code == "model_missing" and "nope.gguf" in f.message, f


def test_not_gguf(start_server: StartServer, raw_server: RawServer, tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"this is not a model at all" * 100)
    with pytest.raises(ServerFailed) as info:
        start_server(target=str(junk))
    assert info.value.failure.code == "not_gguf"
    proc = raw_server(target=str(junk))
    with pytest.raises(ServerFailed) as info:
        proc.wait_ready(60)
    assert info.value.failure.code == "not_gguf", info.value.failure


def test_unknown_argument(raw_server: RawServer) -> None:
    proc = raw_server(extra_argv=["--definitely-not-an-option"])
    with pytest.raises(ServerFailed) as info:
        proc.wait_ready(60)
    f = info.value.failure
    assert f.code == "unknown_argument" and "--definitely-not-an-option" in f.message


def test_bad_value(raw_server: RawServer) -> None:
    proc = raw_server(extra_argv=["--spec-type", "warp-drive"])
    with pytest.raises(ServerFailed) as info:
        proc.wait_ready(60)
    f = info.value.failure
    assert f.code == "bad_value" and "--spec-type" in f.message, f


def test_dflash_prelaunch_refusals(
    starter_caps: EngineCaps, starter_settings: Callable[..., LaunchSettings], tmp_path: Path, gemma_model_path: Path
) -> None:
    make = starter_settings
    assert starter_caps.dflash_draft_arch == "dflash"
    fork_draft = write_header_only_gguf(tmp_path / "fork.gguf", "dflash-draft")
    with pytest.raises(ServerFailed) as info:
        check_launch(starter_caps, make(spec_mode=Mode.DFLASH, draft=str(fork_draft)))
    assert info.value.failure.code == "wrong_draft_format"
    assert "'dflash-draft'" in info.value.failure.message and "BeeLlama 0.1-0.3" in info.value.failure.message
    draft = write_header_only_gguf(tmp_path / "up.gguf", "dflash")
    # A gemma3 target: mainline answers /health, then aborts on the first request.
    with pytest.raises(ServerFailed) as info:
        check_launch(starter_caps, make(spec_mode=Mode.DFLASH, draft=str(draft), target=str(gemma_model_path)))
    assert info.value.failure.code == "dflash_target_unsupported" and "(gemma3)" in info.value.failure.message


def _pretend_owner(record_file: Path, owner: subprocess.Popen[bytes]) -> None:
    data = json.loads(record_file.read_text())
    data["owner_pid"], data["owner_create_time"] = owner.pid, psutil.Process(owner.pid).create_time()
    record_file.write_text(json.dumps(data))


def test_a_dead_beedecks_server_is_stopped_and_a_live_sessions_is_not(start_server: StartServer) -> None:
    first = start_server()
    first.wait_ready(120)
    record = records_dir() / f"{first.pid}.json"
    # Another BeeDeck session (a live process) owns it: the next start must leave it running.
    sibling = subprocess.Popen(["sleep", "60"])
    try:
        _pretend_owner(record, sibling)
        second = start_server()
        second.wait_ready(120)
        assert first.state == ServerState.READY and psutil.pid_exists(first.pid)
        second.stop()
    finally:
        sibling.kill()
        sibling.wait()
    # Its owner is gone now (a crashed BeeDeck): the next start stops the leftover.
    assert stop_leftovers() != [] and first.wait_exit(10) is not None
    assert not record.exists()
    third = start_server()
    third.wait_ready(120)
    assert third.pid != first.pid


def test_api_key_goes_through_a_private_file_not_the_command_line(start_server: StartServer) -> None:
    import stat

    import psutil

    from beedeck.core.engine.client import HTTPStatusError, LlamaClient

    secret = "bd-test-key-7f3a9c"
    proc = start_server(api_key=secret)
    proc.wait_ready(120)
    cmdline = psutil.Process(proc.pid).cmdline()
    assert secret not in " ".join(cmdline)  # `ps` shows the file's path, never the key
    key_file = Path(cmdline[cmdline.index("--api-key-file") + 1])
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    with pytest.raises(HTTPStatusError) as err:
        LlamaClient(proc.base_url).props()
    assert err.value.status == 401
    assert LlamaClient(proc.base_url, api_key=secret).props()["total_slots"] == 1
    proc.stop()
    assert not key_file.exists()  # the key does not outlive the server on disk
