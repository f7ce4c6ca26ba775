"""core/engine/rpc/workers.py and rpc/probe.py without a real worker: addresses, the worker's command line, the
loopback default, and the engine's own words (copied from ggml-rpc.cpp / common/arg.cpp of the mainline
tree the CI builds) turned into specific messages. The real workers are in tests/engine/test_rpc_real.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine import rpc
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.rpc import RpcError, Worker, parse_workers, start_worker, worker_argv, worker_binary
from beedeck.core.engine.rpc.probe import classify_probe, parse_devices, restate

W1, W2 = Worker("127.0.0.1", 50052), Worker("127.0.0.1", 50053)


def test_worker_lists_parse_and_bad_entries_are_named() -> None:
    assert parse_workers(" 127.0.0.1:50052, pod.lan:50053 ,") == [W1, Worker("pod.lan", 50053)]
    assert [str(w) for w in parse_workers(["127.0.0.1:50052"])] == ["127.0.0.1:50052"]
    for text, words in (("pod", "not a worker address"), ("pod:0", "not a worker address"),
                        ("[::1]:50052", "IPv6"), ("a:1,a:1", "listed twice")):
        with pytest.raises(RpcError) as exc:
            parse_workers(text)
        assert exc.value.kind == rpc.BAD_ADDRESS and words in exc.value.message


def test_the_worker_command_line_and_binary(tmp_path: Path) -> None:
    assert worker_argv("/e/ggml-rpc-server", devices=["CUDA0", "CUDA1"], threads=4, cache=True) == [
        "/e/ggml-rpc-server", "-H", "127.0.0.1", "-p", "50052", "-d", "CUDA0,CUDA1", "-t", "4", "-c"]
    server = tmp_path / "llama-server"
    server.write_text("")
    assert worker_binary(server) is None
    with pytest.raises(RpcError) as exc:
        rpc.require_worker_binary(server)
    assert exc.value.kind == rpc.NO_WORKER_BINARY and "GGML_RPC=ON" in exc.value.remedy
    old = tmp_path / "rpc-server"
    old.write_text("#!/bin/sh\n")
    old.chmod(0o755)
    assert worker_binary(server) == old


def test_a_worker_off_loopback_needs_an_explicit_yes() -> None:
    with pytest.raises(RpcError) as exc:
        start_worker("/nonexistent/ggml-rpc-server", host="0.0.0.0")
    assert exc.value.kind == rpc.NOT_LOOPBACK and "no authentication" in exc.value.message
    assert "SSH tunnel" in exc.value.message and "--allow-network" in exc.value.remedy
    assert rpc.is_loopback("127.0.0.2") and rpc.is_loopback("localhost") and not rpc.is_loopback("192.168.1.2")


LIST = """Available devices:
  RPC0: 127.0.0.1:50052 CPU (64000 MiB, 60000 MiB free)
  RPC1: 127.0.0.1:50053 CPU (64000 MiB, 59000 MiB free)
  CUDA0: NVIDIA GeForce RTX 3090 (24575 MiB, 23000 MiB free)
"""


def test_devices_are_read_and_tied_to_their_worker() -> None:
    devices = parse_devices(LIST, [W1, W2])
    assert [(d.name, d.worker, d.free_mib) for d in devices] == [
        ("RPC0", W1, 60000), ("RPC1", W2, 59000), ("CUDA0", None, 23000)]
    assert devices[2].local and devices[0].free_bytes == 60000 * 1024 * 1024


@pytest.mark.parametrize(("output", "kind", "words"), [
    ('error while handling argument "--rpc": RPC not supported in this build', rpc.NO_RPC, "built without RPC"),
    ("error: invalid argument: --rpc", rpc.NO_RPC, "built without RPC"),  # BeeLlama 0.1.2 and 0.4.3 built without it
    ("RPC server version mismatch: 3.0.0\n/ggml-rpc.cpp:550: RPC handshake failed for 127.0.0.1:50053",
     rpc.VERSION, "The worker at 127.0.0.1:50053 speaks RPC protocol 3.0.0"),
    ("ggml-rpc.cpp:547: Failed to connect to 127.0.0.1:50052", rpc.UNREACHABLE, "could not connect"),
    ("ggml-rpc.cpp:550: RPC handshake failed for 127.0.0.1:50052", rpc.VERSION, "not as an RPC worker"),
])
def test_the_engines_words_become_specific_messages(output: str, kind: str, words: str) -> None:
    err = classify_probe(output, 134, [W1, W2])
    assert err is not None and err.kind == kind and words in err.message
    assert classify_probe(LIST, 0, [W1, W2]) is None


def test_a_server_killed_by_a_lost_worker_says_so() -> None:
    crash = ServerFailure("crashed_signal", "llama-server crashed with SIGABRT.", "see the log", -6,
                          ["/ggml-rpc.cpp:35: Remote RPC server crashed or returned malformed response"])
    said = restate(crash, ["127.0.0.1:1"])  # nothing listens on port 1: that worker is named as gone
    assert said.code == "rpc:worker-lost" and "The RPC worker at 127.0.0.1:1 stopped answering" in said.message
    assert "conversation is kept" in said.remedy and said.log_tail == crash.log_tail
    other = ServerFailure("exited", "llama-server stopped.", "Read the log.", 1, ["main: exiting"])
    assert restate(other, ["127.0.0.1:1"]) is other
