"""llama.cpp's RPC workers: a model spread over several machines, driven as the engine does it.

A worker is the engine's own ``ggml-rpc-server`` (``rpc-server`` in older trees and BeeLlama), built
beside llama-server with ``GGML_RPC=ON``. It lends its devices to a main ``llama-server --rpc
host:port,...``, which lists them with ``--list-devices`` and places layers on them like on local GPUs
(RPC devices first, then the local GPUs: ``src/llama.cpp``). The RPC protocol has no authentication
and no encryption, so a worker listens on 127.0.0.1 unless told otherwise, and BeeDeck says so.

This module: worker addresses, finding the worker binary, running one worker (:class:`WorkerProcess`,
in its own process group, bound to BeeDeck's life by ``core/engine/spawn.py``), and probing workers
through the engine (:func:`probe_workers`) with a specific message for each way that fails.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from beedeck.core.engine import spawn

RPC_BINARIES = ("ggml-rpc-server", "rpc-server")  # llama.cpp since tools/rpc; BeeLlama and older trees
DEFAULT_WORKER_PORT = 50052  # ggml-rpc-server's own default
PROBE_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 5.0
NO_AUTH_WARNING = (
    "The RPC protocol has no authentication and no encryption: anyone who can reach this port can run "
    "code on this machine's devices and read what passes through it. Use it only on a trusted network, "
    "or keep the worker on 127.0.0.1 and reach it through an SSH tunnel (ssh -L 50052:127.0.0.1:50052 host)."
)

# RpcError kinds
BAD_ADDRESS = "bad-address"
NO_RPC = "no-rpc"  # the engine was built without GGML_RPC
NO_WORKER_BINARY = "no-worker-binary"
VERSION = "version"  # the worker's protocol differs from the engine's: a different build
UNREACHABLE = "unreachable"
NOT_LOOPBACK = "not-loopback"
WORKER_FAILED = "worker-failed"
PROBE_FAILED = "probe-failed"


class RpcError(RuntimeError):
    """A worker problem: ``kind``, ``message`` (what happened) and ``remedy`` (what to do)."""

    def __init__(self, kind: str, message: str, remedy: str) -> None:
        super().__init__(f"{message} {remedy}")
        self.kind = kind
        self.code = f"rpc:{kind}"
        self.message = message
        self.remedy = remedy


@dataclass(frozen=True)
class Worker:
    """One worker's address as ``--rpc`` takes it."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_workers(text: str | Sequence[str]) -> list[Worker]:
    """``"host:port,host:port"`` (or a list of entries) to workers, each checked; duplicates refused."""
    entries = [e.strip() for e in (text.split(",") if isinstance(text, str) else text)]
    out: list[Worker] = []
    for entry in entries:
        if not entry:
            continue
        host, sep, port_text = entry.rpartition(":")
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise RpcError(BAD_ADDRESS, f"'{entry}' is not a worker address.",
                           f"Write host:port, e.g. 192.168.1.21:{DEFAULT_WORKER_PORT}; separate workers with commas.")
        if ":" in host or host.startswith("["):
            raise RpcError(BAD_ADDRESS, f"'{entry}' is an IPv6 address, which --rpc cannot take.",
                           "Use the worker's IPv4 address or host name.")
        worker = Worker(host, int(port_text))
        if worker in out:
            raise RpcError(BAD_ADDRESS, f"The worker {worker} is listed twice.", "List each worker once.")
        out.append(worker)
    return out


def worker_binary(engine: str | Path) -> Path | None:
    """The RPC worker built beside ``engine`` (llama-server), or None."""
    folder = Path(engine).resolve().parent
    for name in RPC_BINARIES:
        for candidate in (folder / name, folder / f"{name}.exe"):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
    return None


def require_worker_binary(engine: str | Path) -> Path:
    binary = worker_binary(engine)
    if binary is None:
        raise RpcError(NO_WORKER_BINARY, f"There is no RPC worker ({' or '.join(RPC_BINARIES)}) beside {engine}.",
                       "Use an engine built with RPC (CMake -DGGML_RPC=ON builds the worker next to llama-server; "
                       "BeeDeck's packaged starter engine has it), or point --engine at such a build.")
    return binary


def worker_argv(binary: str | Path, host: str = "127.0.0.1", port: int = DEFAULT_WORKER_PORT,
                devices: Sequence[str] = (), threads: int | None = None, cache: bool = False) -> list[str]:
    """The worker's command line (ggml-rpc-server / rpc-server take the same short options)."""
    argv = [str(binary), "-H", host, "-p", str(port)]
    if devices:
        argv += ["-d", ",".join(devices)]
    if threads:
        argv += ["-t", str(threads)]
    if cache:
        argv.append("-c")
    return argv


class WorkerProcess:
    """One running RPC worker in its own process group. ``lines`` keeps its recent output. The worker
    writes through C stdio, which a pipe buffers, but it flushes at every client connection, and
    :meth:`wait_listening`'s check is one: its banner and device list arrive as it starts."""

    def __init__(self, argv: list[str], host: str, port: int, on_line: Callable[[str], None] | None = None) -> None:
        self.argv, self.host, self.port = argv, host, port
        self.on_line = on_line
        self.lines: deque[str] = deque(maxlen=400)
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def address(self) -> Worker:
        return Worker(self.host, self.port)

    def start(self) -> WorkerProcess:
        self._proc = spawn.popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
                                 start_new_session=True)
        self._reader = threading.Thread(target=self._read, name="beedeck-rpc-worker-log", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            line = line.rstrip("\n")
            self.lines.append(line)
            if self.on_line is not None:
                self.on_line(line)

    def poll(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status, or None if it still runs after ``timeout`` seconds."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def wait_listening(self, timeout: float = 30.0) -> None:
        """Until the worker accepts connections; RpcError(WORKER_FAILED) with its last lines if it exits."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rc = self.poll()
            if rc is not None:
                if self._reader is not None:
                    self._reader.join(2)
                tail = " | ".join(list(self.lines)[-4:]) or "no output"
                remedy = ("Another program (or another worker) holds that port: pick another with --port."
                          if "bind" in tail.lower() or "address already in use" in tail.lower()
                          else "See its output above; check --device names with --list-devices.")
                raise RpcError(WORKER_FAILED, f"The RPC worker exited with status {rc} ({tail}).", remedy)
            host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
            try:
                with socket.create_connection((host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RpcError(WORKER_FAILED, f"The RPC worker did not listen on {self.address} within {timeout:g} s.",
                       "See its output; the machine may be overloaded.")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM to its process group, then SIGKILL: nothing of it is left running."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            _signal_group(proc, kill=False)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, kill=True)
                proc.wait(5)
        if self._reader is not None:
            self._reader.join(2)
        return proc.returncode

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(proc: subprocess.Popen[str], kill: bool) -> None:
    """SIGTERM (or SIGKILL) to the worker's whole process group; Windows has no groups: the process."""
    if os.name != "posix":
        if kill:
            proc.kill()
        else:
            proc.terminate()
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass


def start_worker(binary: str | Path, host: str = "127.0.0.1", port: int = DEFAULT_WORKER_PORT,
                 devices: Sequence[str] = (), threads: int | None = None, cache: bool = False,
                 allow_network: bool = False, on_line: Callable[[str], None] | None = None) -> WorkerProcess:
    """Start a worker (not waited for: call ``wait_listening``). A host other than loopback needs
    ``allow_network``: the protocol has no authentication (:data:`NO_AUTH_WARNING`)."""
    if not is_loopback(host) and not allow_network:
        raise RpcError(NOT_LOOPBACK, f"A worker on {host} would be reachable from the network, and {NO_AUTH_WARNING}",
                       "Keep the default 127.0.0.1 (and an SSH tunnel), or allow it explicitly (--allow-network).")
    argv = worker_argv(binary, host, port, devices, threads, cache)
    return WorkerProcess(argv, host, port, on_line).start()
