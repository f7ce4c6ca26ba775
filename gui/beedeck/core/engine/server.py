"""The llama-server process: start it, stream its log, follow its health, classify failures, stop it.

Health follows docs/reference/engine-facts.md §3.1: the HTTP socket is bound before the model loads, so ``/health``
goes connection refused -> 503 "Loading model" -> 200. A process that exits is classified from its
log tail (:func:`beedeck.core.engine.logparse.classify_failure`). Stopping is staged (SIGTERM to the
process group, then SIGKILL after a named timeout), and a pid file lets the next start find a
server a crashed BeeDeck left behind.

Callbacks (``on_line``, ``on_state``) run on the wrapper's background threads; the UI adapts them
to signals.
"""

from __future__ import annotations

import atexit
import hashlib
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any

import psutil

from beedeck.core import paths
from beedeck.core.engine import spawn
from beedeck.core.engine.argv import ArgNote, LaunchPlan, LaunchRefused, Refusal, redact
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.keyfile import KeyFileError, key_path, key_via_file, remove_orphans
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import (
    MemoryReport,
    ServerFailed,
    ServerFailure,
    classify_failure,
    parse_memory,
)
from beedeck.core.engine.pidfile import (
    SIGKILL,
    record_path,
    remove_record,
    signal_group,
    stop_leftovers,
    write_record,
)
from beedeck.core.engine.ports import claim_port, claimed_free_port, free_port, port_taken, release_port
from beedeck.core.engine.server_state import ServerState

__all__ = [
    "ServerFailed",
    "ServerFailure",
    "ServerProcess",
    "ServerState",
    "free_port",
    "key_refusal",
    "start_server",
]


_POLL_S = 0.01  # health poll period while starting; a refused connect costs microseconds
_HEAD_LINES = 3000  # the load log (memory lines) is kept whole ...
_TAIL_LINES = 5000  # ... and the rest as a ring
# A server on a port BeeDeck picked (any free one) that dies at once is started again on another: the port
# was free when looked at, but another program may bind it before llama-server does, and llama-server's
# own "couldn't bind" line can be lost (its logger is asynchronous and never flushed at such an early exit).
_PORT_RETRIES = 2
# Lines llama-server writes only once it holds its port (it binds before it loads the model).
_PAST_BIND = re.compile(r"\bloading model\b|\blistening\b|load_model:")
_QUICK_EXIT_S = 15.0

_live: weakref.WeakSet[ServerProcess] = weakref.WeakSet()
_hooks_installed = False


def _stop_all_live() -> None:
    for proc in list(_live):
        try:
            proc.stop(timeout=5.0)
        except Exception:  # best effort at interpreter exit
            pass


def install_exit_hooks() -> None:
    """Stop our servers when Python exits, and on SIGTERM/SIGHUP (a closed terminal) when nobody else
    handles them. A BeeDeck killed outright takes its servers along through spawn's parent-death
    signal; these hooks make the ordinary exits graceful."""
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_stop_all_live)
    if threading.current_thread() is not threading.main_thread() or sys.platform == "win32":
        return

    def on_signal(signum: int, frame: object) -> None:
        _stop_all_live()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:  # the Qt app and test runners own theirs
            signal.signal(sig, on_signal)


def _argv_value(argv: list[str], *names: str) -> str | None:
    value = None
    for i, arg in enumerate(argv[:-1]):
        if arg in names:
            value = argv[i + 1]
    return value


def _with_value(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag``'s value replaced (appended when it has none)."""
    out = list(argv)
    if flag in out and out.index(flag) + 1 < len(out):
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def argv_hash(engine: str | Path, argv: list[str]) -> str:
    return hashlib.sha256(json.dumps([str(engine), *argv]).encode()).hexdigest()[:16]


def _listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a listening TCP socket on ``port`` (True when the OS will not say)."""
    try:
        conns = psutil.Process(pid).net_connections(kind="inet")
    except psutil.AccessDenied:
        return True
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in conns)


class ServerProcess:
    """One llama-server child process. ``argv`` excludes the binary path (``build_argv`` output).

    ``start()`` returns at once; ``wait_ready()`` blocks. States: STOPPED (not started) -> STARTING ->
    LOADING -> READY, or FAILED; STOPPED after ``stop()``. ``state_times`` maps each state reached to
    its ``time.monotonic()`` stamp.
    """

    def __init__(
        self,
        engine: str | Path,
        argv: list[str],
        *,
        on_line: Callable[[str], None] | None = None,
        on_state: Callable[[ServerState, ServerFailure | None], None] | None = None,
        pid_file: Path | None = None,
        env: dict[str, str] | None = None,
        api_key: str | None = None,
        any_port: bool = False,
    ) -> None:
        self.engine = Path(engine)
        self.argv = list(argv)
        self.on_line = on_line
        self.on_state = on_state
        self.pid_file = pid_file  # None: records_dir()/<server pid>.json, decided at start
        self._record_named = pid_file is not None
        self.env = env
        self.host = _argv_value(self.argv, "--host") or "127.0.0.1"
        # Listening everywhere: talk to it over loopback.
        self._connect_host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host.strip("[]")
        self.port = int(_argv_value(self.argv, "--port") or 8080)
        self.api_key = api_key if api_key is not None else _argv_value(self.argv, "--api-key")
        self.state = ServerState.STOPPED
        self.failure: ServerFailure | None = None
        self.state_times: dict[ServerState, float] = {}
        self.exit_code: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._cond = threading.Condition()
        self._head: list[str] = []
        self._tail: deque[str] = deque(maxlen=_TAIL_LINES)
        self._stopping = False
        self._t_start = 0.0
        self._threads: list[threading.Thread] = []
        self.notes: tuple[Any, ...] = ()  # start(): build_argv's ArgNotes and the guard's warnings
        self.caps: EngineCaps | None = None  # start_server(): the engine, for failure explanations
        self.secret_files: list[Path] = []  # start_server(): the API-key file, removed on stop
        # The port was BeeDeck's choice (port 0: any free one), so a start that loses it may take another.
        self.any_port = any_port
        self.port_retries = 0  # starts again on another port (see _PORT_RETRIES)
        self._t_spawn = 0.0
        self._past_bind = False  # the running process showed it has its port (see _lost_port)

    # ---- properties ----

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def base_url(self) -> str:
        host = self._connect_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def memory(self) -> MemoryReport:
        return parse_memory(self.log_lines())

    def log_lines(self) -> list[str]:
        with self._cond:
            return self._head + list(self._tail)

    def command(self) -> list[str]:
        """The full command (binary first) this wrapper runs."""
        return [str(Path(self.engine).absolute()), *self.argv]  # a relative path is not looked up in PATH

    def __repr__(self) -> str:
        return f"ServerProcess(pid={self.pid}, port={self.port}, state={self.state.value})"

    # ---- state ----

    def _set_state(self, state: ServerState, failure: ServerFailure | None = None) -> None:
        with self._cond:
            if self.state == state:
                return
            if self.state in (ServerState.FAILED, ServerState.STOPPED) and state != ServerState.STARTING:
                return  # terminal: a late health answer must not resurrect a dead server
            self.state = state
            if failure is not None:
                self.failure = failure
            self.state_times[state] = time.monotonic()
            self._cond.notify_all()
        if self.on_state is not None:
            self.on_state(state, failure)

    # ---- lifecycle ----

    def start(self) -> ServerProcess:
        """Spawn the process and the reader and health threads; returns without waiting."""
        if self._proc is not None:
            raise RuntimeError("this ServerProcess was already started; make a new one to restart")
        install_exit_hooks()
        self._t_start = time.monotonic()
        self.state_times.clear()
        self._set_state(ServerState.STARTING)
        holder = claim_port(self.port, self)  # held until it stops: no other BeeDeck picks this port meanwhile
        if holder is not None:
            taken = port_taken(self.port, holder)
            assert taken is not None
            self._set_state(ServerState.FAILED, taken)
            raise ServerFailed(taken)
        try:
            self._spawn()
        except OSError as exc:
            failure = ServerFailure(
                "exited",
                f"Could not run {self.engine}: {exc.strerror or exc}.",
                "Check that the engine file exists and is executable, or pick another engine.",
            )
            self._set_state(ServerState.FAILED, failure)
            release_port(self.port, self)
            raise ServerFailed(failure) from exc
        return self

    def _spawn(self) -> None:
        """Run the command, with its reader and health threads and its ownership record. Raises OSError."""
        self._t_spawn, self._past_bind = time.monotonic(), False
        self._proc = spawn.popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # llama-server logs on stderr; one ordered stream
            env=self.env,
            start_new_session=True,  # its own process group: stop() signals the whole group
            death_signal=signal.SIGKILL,  # even a stopped (SIGSTOP) server dies with BeeDeck
        )
        _live.add(self)
        if not self._record_named:
            self.pid_file = None  # named by this process's pid (a start on another port is another process)
        self._write_pid_file()
        for target, name in ((self._read_output, "reader"), (self._poll_health, "health")):
            t = threading.Thread(target=target, name=f"llama-server-{name}-{self._proc.pid}", daemon=True)
            t.start()
            self._threads.append(t)

    def _lost_port(self, rc: int, failure: ServerFailure) -> bool:
        """Whether this exit is a start that lost its port to another program: a port BeeDeck chose, an exit
        with a status (not a signal) within seconds, before the engine showed it had its port (no answer on it,
        no "loading model" or "listening" line: llama-server binds before it loads), and either its own
        "couldn't bind" or no reason at all (the line lost with the rest of its asynchronous log)."""
        if not self.any_port or self.port_retries >= _PORT_RETRIES or rc <= 0:
            return False
        if self.state != ServerState.STARTING or self._past_bind:
            return False
        if time.monotonic() - self._t_spawn > _QUICK_EXIT_S:
            return False
        if failure.code == "port_in_use":
            return True
        return failure.code == "exited" and not any("cleaning up before exit" in x for x in self.log_lines())

    def _respawn_elsewhere(self) -> bool:
        """Start the same command again on another free port (claimed for it); False when a stop came first
        or no start was possible. Said in the log first, so the user reads why the port is not the first one."""
        old = self.port
        try:
            port = claimed_free_port(self.host)
        except Exception:  # HostError (a ValueError) or OSError: the exit stays the failure
            return False
        note = (f"BeeDeck: llama-server stopped at once on port {old}, most likely because another program took "
                f"the port as it started; starting it again on port {port}.")
        with self._cond:
            if self._stopping:
                release_port(port)
                return False
            claim_port(port, self)
            self.port = port
            self.argv = _with_value(self.argv, "--port", str(port))
            self.port_retries += 1
        self._keep_line(note)
        with self._cond:
            if self._stopping:
                release_port(port, self)
                return False
            try:
                self._spawn()
            except Exception:  # the engine could not be run again: the first exit is the failure
                release_port(port, self)
                return False
            self.exit_code = None
        return True

    def _keep_line(self, line: str) -> None:
        """One log line kept (the load log whole, then a ring) and handed to ``on_line``."""
        with self._cond:
            if len(self._head) < _HEAD_LINES:
                self._head.append(line)
            else:
                self._tail.append(line)
        if self.on_line is not None:
            try:
                self.on_line(line)
            except Exception:  # a faulty consumer must not stop the log pump
                pass

    def _read_output(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not self._past_bind and _PAST_BIND.search(line):
                self._past_bind = True
            self._keep_line(line)
        rc = proc.wait()
        self._on_exit(rc)

    def _on_exit(self, rc: int) -> None:
        self.exit_code = rc
        self._remove_pid_file()
        release_port(self.port, self)
        _live.discard(self)
        if self._stopping:
            self._set_state(ServerState.STOPPED)
            return
        sig = -rc if rc < 0 else None
        failure = classify_failure(self.log_lines(), rc, sig, self.caps)
        if self._lost_port(rc, failure):
            if self._respawn_elsewhere():
                return
            if self._stopping:  # a stop came while it was to start again: stopped, not failed
                self._set_state(ServerState.STOPPED)
                return
        if failure.code == "port_in_use" and (taken := port_taken(self.port)) is not None:
            failure = replace(failure, message=taken.message, remedy=taken.remedy)
        self._set_state(ServerState.FAILED, failure)

    def _health_status(self) -> int | None:
        conn = http.client.HTTPConnection(self._connect_host, self.port, timeout=2.0)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status
        except OSError:
            return None
        except http.client.HTTPException:
            return None
        finally:
            conn.close()

    def _poll_health(self) -> None:
        proc = self._proc
        assert proc is not None
        owned = False
        while not self._stopping and proc.poll() is None:
            status = self._health_status()
            if status is not None and not owned:
                # Something answers on the port: our server, or another one that already had the port
                # (then ours is about to fail to bind). Only our own listening socket counts.
                owned = _listens_on(proc.pid, self.port)
                if not owned:
                    status = None
            if status == 200:
                self._set_state(ServerState.READY)
                return
            if status is not None:
                self._set_state(ServerState.LOADING)
            with self._cond:
                if self.state in (ServerState.FAILED, ServerState.STOPPED):
                    return
                self._cond.wait(_POLL_S)

    def wait_ready(self, timeout: float = 300.0) -> float:
        """Block until READY; return seconds from start() to ready. Raises ServerFailed on failure or timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.state not in (ServerState.READY, ServerState.FAILED, ServerState.STOPPED):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            state = self.state
        if state == ServerState.READY:
            return self.state_times[ServerState.READY] - self._t_start
        if state == ServerState.FAILED and self.failure is not None:
            raise ServerFailed(self.failure)
        if state == ServerState.STOPPED:
            raise ServerFailed(ServerFailure("exited", "The server was stopped before it became ready.", "Start it again.",
                                             self.exit_code, self.log_lines()[-40:]))
        failure = ServerFailure(
            "timeout",
            f"llama-server did not become ready within {timeout:.0f} s (state: {state.value}).",
            "A big model on a slow disk can take longer: wait longer, or read the log for where it stopped.",
            None,
            self.log_lines()[-40:],
        )
        raise ServerFailed(failure)

    def wait_exit(self, timeout: float | None = None) -> int | None:
        """Wait for the process to end by itself; the exit code, or None if it still runs."""
        for t in self._threads:
            if t.name.startswith("llama-server-reader"):
                t.join(timeout)
        return self.exit_code

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``timeout`` seconds; returns the exit code."""
        with self._cond:  # one lock with _respawn_elsewhere: a stop either sees its new process or prevents it
            self._stopping = True
            proc = self._proc
            self._cond.notify_all()
        if proc is None:
            return None
        if proc.poll() is None:
            signal_group(proc.pid, signal.SIGTERM)
            if hasattr(signal, "SIGCONT"):
                signal_group(proc.pid, signal.SIGCONT)  # a stopped (hung) server must run to see the SIGTERM
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                signal_group(proc.pid, SIGKILL)
                proc.wait(5.0)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(5.0)
        if proc.stdout is not None:
            proc.stdout.close()
        if self.exit_code is None:
            self._on_exit(proc.returncode)
        elif self.state != ServerState.FAILED:
            self._set_state(ServerState.STOPPED)
        self._remove_pid_file()
        release_port(self.port, self)
        for secret in self.secret_files:  # the 0600 API-key file outlives nothing it protected
            secret.unlink(missing_ok=True)
        _live.discard(self)
        return proc.returncode

    def __enter__(self) -> ServerProcess:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ---- ownership record ----

    def _write_pid_file(self) -> None:
        assert self._proc is not None
        if self.pid_file is None:
            self.pid_file = record_path(self._proc.pid)
        write_record(self.pid_file, self._proc.pid, str(self.engine), self.port, argv_hash(self.engine, self.argv))

    def _remove_pid_file(self) -> None:
        if self._proc is not None and self.pid_file is not None:
            remove_record(self.pid_file, self._proc.pid)


# ---- starting from settings ----


def key_refusal(settings: LaunchSettings, caps: EngineCaps) -> Refusal | None:
    """An API key this engine could only take on its command line (no --api-key-file), where every local user
    reads it (ps): refused (the launch preflight says it too)."""
    return _key_refusal(settings.api_key, caps)


def _key_refusal(api_key: str | None, caps: EngineCaps) -> Refusal | None:
    if api_key and not caps.has("--api-key-file"):
        return Refusal("unknown_argument", "This engine has no --api-key-file option, so its API key would be on the "
                       "command line, where every local user can read it (ps).", "Use an engine build that has "
                       "--api-key-file, or keep the server on 127.0.0.1 without a key.", setting="api_key")
    return None


def start_server(
    engine: str | Path,
    caps: EngineCaps,
    plan: LaunchPlan,
    *,
    on_line: Callable[[str], None] | None = None,
    on_state: Callable[[ServerState, ServerFailure | None], None] | None = None,
    pid_file: Path | None = None,
    env: dict[str, str] | None = None,
    stop_leftover: bool = True,
    any_port: bool = False,
) -> ServerProcess:
    """Start ``plan``'s argument list (``build_argv`` made it, on its port) as it is, after stopping a leftover
    server; returns the running wrapper (``any_port``: the port was BeeDeck's pick, so a start that loses it to
    another program goes on on another). Its API key goes to the engine through a private file, never on the
    command line (an engine without --api-key-file is refused).

    Checks nothing about the model files: :func:`beedeck.core.launcher.preflight` made ``plan`` and
    :func:`beedeck.core.launcher.start` runs it. Raises ServerFailed or LaunchRefused before starting anything.
    """
    api_key = _argv_value(plan.argv, "--api-key")
    why_key = _key_refusal(api_key, caps)
    if why_key is not None:
        raise LaunchRefused([why_key])
    cleaned = stop_leftovers() if stop_leftover else []  # only a gone BeeDeck's servers, never a live session's
    argv = plan.argv
    remove_orphans(paths.state_dir())  # the key files of a killed BeeDeck, which could not remove them
    key_file = key_path(paths.state_dir())
    if api_key:
        try:
            argv = key_via_file(argv, api_key, key_file)
        except KeyFileError as exc:
            raise ServerFailed(exc.failure) from None
    proc = ServerProcess(engine, argv, on_line=on_line, on_state=on_state, pid_file=pid_file, env=env,
                         api_key=api_key, any_port=any_port)
    proc.notes = (*plan.notes, *(ArgNote("leftover", "info", done) for done in cleaned))
    proc.caps = caps
    if argv is not plan.argv:
        proc.secret_files.append(key_file)
    return proc.start()


def describe(proc: ServerProcess) -> dict[str, Any]:
    """A JSON-able summary (no API key) for the CLI's --json output."""
    return {
        "pid": proc.pid,
        "state": proc.state.value,
        "base_url": proc.base_url,
        "argv": redact(proc.argv),
        "failure": None if proc.failure is None else {
            "code": proc.failure.code, "message": proc.failure.message, "remedy": proc.failure.remedy,
            "exit_code": proc.failure.exit_code,
        },
    }
