"""What RPC workers lend, as the main engine sees them: ``llama-server --rpc A,B --list-devices``.

The engine itself connects to each worker (the same handshake a launch does), so what comes back is
what a launch will get: every device with its total and free memory, workers first. A worker of
another build fails the handshake (``RPC server version mismatch``: the protocol changes between
releases) and is refused with the engine's own words; an engine built without RPC, a worker that is
not running and one that is something else each get their own message. A server that died because a
worker went away in the middle of the work is explained by :func:`explain_failure`.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace

from beedeck.core.engine import spawn
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.rpc.workers import (
    NO_RPC,
    PROBE_FAILED,
    PROBE_TIMEOUT_S,
    UNREACHABLE,
    VERSION,
    RpcError,
    Worker,
)

MiB = 1024 * 1024
_DEVICE = re.compile(r"^\s+(?P<name>\S+): (?P<desc>.*?) \((?P<total>\d+) MiB, (?P<free>\d+) MiB free\)\s*$")
_MISMATCH = re.compile(r"RPC server version mismatch: (?P<v>\d+\.\d+\.\d+)")
_HANDSHAKE = re.compile(r"RPC handshake failed for (?P<ep>\S+)")
_CONNECT = re.compile(r"Failed to connect to (?P<ep>\S+)")
_CRASHED = "Remote RPC server crashed or returned malformed response"


@dataclass(frozen=True)
class RpcDevice:
    """One device a launch can place layers on: a worker's (``worker`` set) or this machine's."""

    name: str  # as the engine names it, e.g. "RPC0" or "CUDA0"
    description: str
    total_mib: int
    free_mib: int
    worker: Worker | None = None

    @property
    def free_bytes(self) -> int:
        return self.free_mib * MiB

    @property
    def local(self) -> bool:
        return self.worker is None


def parse_devices(text: str, workers: Sequence[Worker] = ()) -> list[RpcDevice]:
    """``--list-devices`` output to devices; a device whose name or description names a worker's
    address (``RPC0[host:port]``) is that worker's."""
    out = []
    for line in text.splitlines():
        m = _DEVICE.match(line)
        if not m:
            continue
        name, desc = m.group("name"), m.group("desc")
        owner = next((w for w in workers if str(w) in name or str(w) in desc), None)
        if owner is None and name.startswith("RPC") and len(workers) == 1:
            owner = workers[0]
        out.append(RpcDevice(name, desc, int(m.group("total")), int(m.group("free")), owner))
    return out


def _worker_of(endpoint: str, workers: Sequence[Worker]) -> str:
    return next((str(w) for w in workers if str(w) == endpoint), endpoint)


def classify_probe(output: str, returncode: int | None, workers: Sequence[Worker]) -> RpcError | None:
    """The RpcError a failed probe means, from the engine's own lines (None when it succeeded)."""
    # mainline says the first; BeeLlama (0.1.2, 0.4.3) built without GGML_RPC does not know the flag at all
    if "RPC not supported in this build" in output or "invalid argument: --rpc" in output:
        return RpcError(NO_RPC, "This engine was built without RPC, so it cannot use workers.",
                        "Use an engine built with RPC (CMake -DGGML_RPC=ON; BeeDeck's packaged starter engine has it): "
                        "one with a ggml-rpc-server beside its llama-server.")
    if m := _MISMATCH.search(output):
        ep = _HANDSHAKE.search(output)
        who = f"The worker at {_worker_of(ep.group('ep'), workers)}" if ep else "A worker"
        return RpcError(VERSION, f"{who} speaks RPC protocol {m.group('v')}, which this engine does not: it was "
                                 "built from another release than the main engine (the engine said: RPC server "
                                 f"version mismatch: {m.group('v')}).",
                        "Run a worker built from the same release as the main engine: `beedeck worker --engine` with "
                        "the same engine on that machine, or rebuild both from one source.")
    if m := _CONNECT.search(output):
        return RpcError(UNREACHABLE, f"The engine could not connect to the worker at {_worker_of(m.group('ep'), workers)}.",
                        "Start it there (`beedeck worker`; on another machine with --host and --allow-network, or "
                        "through an SSH tunnel), and check the address and port.")
    if m := _HANDSHAKE.search(output):
        return RpcError(VERSION, f"The worker at {_worker_of(m.group('ep'), workers)} answered, but not as an RPC "
                                 "worker of this engine (the handshake failed).",
                        "Check the port: another program may hold it; otherwise run a worker of the same build.")
    if returncode not in (0, None):
        tail = " | ".join(x for x in output.strip().splitlines()[-3:]) or "no output"
        return RpcError(PROBE_FAILED, f"Listing the workers' devices failed (status {returncode}: {tail}).",
                        "See the engine's words above; check each worker's address.")
    return None


def reachable(worker: Worker, timeout: float = 2.0) -> bool:
    """Something accepts TCP connections at the worker's address (checked before the engine
    connects, so a worker that is down is named without waiting for the engine's abort)."""
    try:
        with socket.create_connection((worker.host, worker.port), timeout=timeout):
            return True
    except OSError:
        return False


def probe_workers(engine: str, workers: Sequence[Worker], timeout: float = PROBE_TIMEOUT_S) -> list[RpcDevice]:
    """Every device a launch with these workers gets (workers' first), through the engine itself.
    Raises RpcError with the specific reason when a worker cannot be used."""
    for w in workers:
        if not reachable(w):
            raise RpcError(UNREACHABLE, f"Nothing accepts connections at the worker address {w}.",
                           "Start the worker there (`beedeck worker`), check the address and port, and on another "
                           "machine allow it through the firewall (or use an SSH tunnel).")
    # No workers: this machine's devices alone (an empty --rpc aborts the engine with SIGABRT)
    argv = [engine, *(["--rpc", ",".join(str(w) for w in workers)] if workers else []), "--list-devices"]
    try:  # bound to BeeDeck's life (spawn.popen): a probe never outlives the app, connected to the workers
        proc = spawn.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                           errors="replace")
    except OSError as exc:
        raise RpcError(PROBE_FAILED, f"The engine {engine} could not be run ({exc}).", "Check the engine path.") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RpcError(UNREACHABLE, f"The engine did not finish listing the workers' devices in {timeout:g} s.",
                       "A worker accepts connections but does not answer: restart it, or check the network.") from None
    error = classify_probe(stdout + "\n" + stderr, proc.returncode, workers)
    if error is not None:
        raise error
    devices = parse_devices(stdout, workers)
    missing = [w for w in workers if not any(d.worker == w for d in devices)]
    if missing and len([d for d in devices if d.name.startswith("RPC")]) < len(workers):
        raise RpcError(PROBE_FAILED, f"The engine lists no device of the worker(s) {', '.join(map(str, missing))}.",
                       "The worker may have been started with --device naming nothing: start it without --device.")
    return devices


def explain_failure(failure: object, workers: Sequence[str], log: Sequence[str] = ()) -> RpcError | None:
    """A dead server's failure that a worker caused, said plainly; None when the log shows no RPC
    trouble. ``log``: the server's whole log where the caller has it (an abort's backtrace can push
    the engine's reason out of the failure's ``log_tail``)."""
    lines = [*log, *(getattr(failure, "log_tail", None) or [])]
    text = "\n".join(lines)
    if _CRASHED in text:
        gone = [w for w in workers if not reachable(_as_worker(w), 1.0)]
        who = f"The RPC worker at {', '.join(gone)}" if gone else "An RPC worker"
        return RpcError("worker-lost", f"{who} stopped answering in the middle of the work, so llama-server "
                                       "stopped: the layers it held are gone (the engine said: "
                                       f"{_CRASHED}).",
                        "The conversation is kept. Start the worker again (`beedeck worker` on that machine) or "
                        "remove it from the worker list, then start the server again.")
    return classify_probe(text, None, [_as_worker(w) for w in workers])


def _as_worker(text: str) -> Worker:
    host, _, port = text.rpartition(":")
    return Worker(host, int(port) if port.isdigit() else 0)


def with_rpc_reason(failure: object, workers: Sequence[str] = (), log: Sequence[str] = ()) -> object:
    """``failure`` restated when it is a ServerFailure that RPC workers caused; otherwise unchanged."""
    return restate(failure, workers, log) if isinstance(failure, ServerFailure) else failure


def restate(failure: ServerFailure, workers: Sequence[str] = (), log: Sequence[str] = ()) -> ServerFailure:
    """A dead server's failure in RPC terms when its log shows RPC trouble (a worker gone in the middle
    of the work, another build, one not reachable); unchanged otherwise. ``workers``: the ``--rpc``
    list, to name the worker that went away."""
    why = explain_failure(failure, workers, log)
    if why is None:
        return failure
    return replace(failure, code=why.code, message=why.message, remedy=why.remedy)
