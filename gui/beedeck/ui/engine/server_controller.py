"""The GUI's handle on one llama-server (and the other mode's, kept loaded beside it when memory allows:
core/engine/speculation/standby.py): starts, stops and restarts it on a background thread and turns the core's
callbacks into Qt signals. Nothing here blocks the GUI thread, except :meth:`shutdown` at exit. The app's server
keeps one port across starts: port 0 means :data:`DEFAULT_PORT`, so editor integrations keep one URL; when another
program holds it, the server takes a free one for that run and ``port_fallback_used`` says so.

A server BeeDeck did not start (a remote profile: the "engine" is an ``http(s)://`` URL) is attached
instead of launched: :meth:`ServerController.start` reads what it is (``core/engine/remote.py``) and
becomes ready, :meth:`stop` only disconnects, a restart is refused, and a watcher polls ``/health``
so a server that goes away is reported like one that crashed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from beedeck.core.engine.argv import LaunchRefused
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings
from beedeck.core.engine.logparse import ServerFailure, as_failure
from beedeck.core.engine.remote import (
    HEALTH_INTERVAL_S,
    NO_RESTART,
    RemoteError,
    RemoteInfo,
    inspect_server,
    is_remote_engine,
    watch_health,
)
from beedeck.core.engine.rpc.probe import with_rpc_reason
from beedeck.core.engine.speculation.modes import uses_draft
from beedeck.core.engine.speculation.restart import describe_fast_restart, fast_restart_settings
from beedeck.core.engine.speculation.standby import RESTARTED, Parked, free_now
from beedeck.core.engine.speculation.switch_cost import StartKey, SwitchCosts
from beedeck.ui.engine.kept_server import STOP_TIMEOUT_S, KeptServer, state_name

if TYPE_CHECKING:
    from beedeck.core.launcher import Held, Room

READY_TIMEOUT_S = 600.0  # loading a big model from a slow disk can take minutes
REMOTE_HEALTH_S = HEALTH_INTERVAL_S  # a server BeeDeck did not start: /health this often (a dead one: within 2 s)


def _start_key(engine: str, settings: LaunchSettings, switch: bool) -> StartKey:
    return StartKey(engine, settings.target, settings.draft if uses_draft(settings) else None, switch)




class ServerController(QObject, KeptServer):
    """Owns the running ``ServerProcess``.

    Signals: ``state_changed(str)`` (starting/loading/ready/failed/stopped), ``line_received(str)``,
    ``failed(ServerFailure)`` (an exception before the process existed too: :func:`as_failure`), ``ready(str)``
    (base URL), ``stopped()``, ``caps_known(EngineCaps)`` (EngineCaps of the engine being launched), ``port_fallback_used(int, int, str)``
    (the port wanted, the port used instead, a line for the user) when another program held the port,
    ``remote_attached(RemoteInfo)`` once a running server BeeDeck did not start is attached;
    ``refused(ServerFailure)`` when :meth:`replace` found the new launch refused (the running server kept),
    ``replace_started(str)`` (the engine) when it passed: the running server stops now and the new one starts.

    ``launch`` (default: :func:`beedeck.core.launcher.launch`), ``inspect`` (default:
    :func:`beedeck.core.engine.remote.inspect_server`) and ``default_port`` are injectable for tests.
    """

    state_changed = Signal(str)
    line_received = Signal(str)
    failed = Signal(ServerFailure)
    ready = Signal(str)
    stopped = Signal()
    caps_known = Signal(EngineCaps)
    port_fallback_used = Signal(int, int, str)
    remote_attached = Signal(RemoteInfo)
    refused = Signal(ServerFailure)
    replace_started = Signal(str)

    def __init__(
        self,
        parent: QObject | None = None,
        probe: Callable[[str], EngineCaps] | None = None,
        ready_timeout_s: float = READY_TIMEOUT_S,
        launch: Callable[..., Any] | None = None,
        default_port: int = DEFAULT_PORT,
        inspect: Callable[..., RemoteInfo] = inspect_server,
        health_interval_s: float = REMOTE_HEALTH_S,
        preflight: Callable[[EngineCaps, LaunchSettings], Any] | None = None,
        costs: SwitchCosts | None = None,
        free_now: Callable[[], tuple[list[int] | None, int | None]] = free_now,
        room: Callable[[Sequence[Held]], Room] | None = None,
    ) -> None:
        super().__init__(parent)
        self._probe = probe
        self._launch = launch
        self._preflight = preflight
        self._room = room  # the memory free for a launch that stops ``stopping()`` first (default: room_now)
        self.default_port = default_port
        self._ready_timeout_s = ready_timeout_s
        self._lock = threading.Lock()
        self._proc: Any = None
        self._thread: threading.Thread | None = None
        self.engine: str = ""
        self.settings: LaunchSettings | None = None
        self.caps: EngineCaps | None = None
        self.base_url: str = ""
        self.port_note: str = ""  # why the running server is not on the port asked for ("" when it is)
        self.state: str = "stopped"
        self.last_start_s: float | None = None  # seconds from start() to ready, for the mode toggle
        self._closed = False  # set by shutdown(): a start still in flight must not leave a server behind
        self._inspect = inspect
        self._health_interval_s = health_interval_s
        self.remote: RemoteInfo | None = None  # the attached server BeeDeck did not start, if any
        self._costs = costs if costs is not None else SwitchCosts()
        self._expected_switch: dict[bool, float | None] = {}
        self._draft_of: dict[str, str] = {}  # the draft file last loaded beside each target
        self._unwatch: threading.Event | None = None
        self._poke = threading.Event()  # the attached server's watch: set, it polls now
        # Keep the other mode's server loaded beside this one when memory allows (AppSettings.standby).
        self.standby = True
        self._free_now = free_now
        self._parked: Parked | None = None
        self._token: object = object()  # names the active process in its state callbacks
        self._asked: LaunchSettings | None = None  # the active server's settings as asked (before the port)
        self.last_switch = RESTARTED  # how the last mode switch went: RESTARTED, LOADED_BESIDE or SWAPPED

    # -- public ---------------------------------------------------------------------------
    def is_busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def is_running(self) -> bool:
        return self.state in ("starting", "loading", "ready")

    def is_remote(self) -> bool:
        """Attached (or attaching) to a server BeeDeck did not start: Start/Stop mean Connect/Disconnect."""
        return is_remote_engine(self.engine)

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        """Probe (if needed), build the command line, launch, wait until ready: all off the GUI thread.
        ``engine`` an ``http(s)://`` URL: connect to that running server instead (``settings.api_key``)."""
        if is_remote_engine(engine):
            self._spawn(lambda: self._do_attach(engine, settings))
            return
        self._spawn(lambda: self._do_start(engine, settings, caps))

    def stop(self) -> None:
        self._spawn(self._do_stop)

    def restart(self, settings: LaunchSettings) -> None:
        """Stop, then start the same engine with new settings (the Baseline|DFlash restart path).

        A restart of the target that is running and ready is a mode switch: it maps the model from the
        page cache and skips the fit pass (core/engine/speculation/restart.py); the settings it keeps are ``settings``."""
        engine, caps = self.engine, self.caps
        switch = (self.state == "ready" and self.settings is not None and not self.is_remote()
                  and self.settings.target == settings.target)
        if is_remote_engine(engine):
            self.failed.emit(as_failure(RemoteError(
                NO_RESTART, "BeeDeck did not start this server, so it cannot restart it with other settings.",
                "Restart it where it runs (with or without its draft), then connect again.")))
            return

        def job() -> None:
            self.last_switch = RESTARTED  # or, set before ready is emitted: SWAPPED / LOADED_BESIDE
            if switch and (self._swap_parked(settings) or self._start_beside(engine, settings, caps)):
                return
            self._do_stop()
            self._do_start(engine, settings, caps, switch=switch)

        self._spawn(job)

    def expected_switch_s(self, with_draft: bool) -> float | None:
        """Seconds a mode switch of the running target took here before: to a mode that loads its draft file or
        to one that does not (median of the last ones, read on the server thread once ready: no I/O); None when
        never measured, or when that mode's server is kept loaded beside this one (the switch loads nothing)."""
        parked = self._parked
        if parked is not None and uses_draft(parked.asked) == with_draft:
            return None
        return self._expected_switch.get(with_draft)

    def replace(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> bool:
        """Settings → Launch: start ``engine`` with ``settings`` whatever runs now, stopping the running server
        only once the new launch passed :func:`beedeck.core.launcher.preflight` (files, GGUF, mode, guard, RPC
        workers, host RAM and GPU memory, counting what the servers it stops hold as free). A refused launch
        leaves the working server serving and emits ``refused``; one that passed emits ``replace_started``
        before the running server stops. Returns whether the preflight decides (False: nothing of ours was
        serving, so it was stopped and the new one started at once)."""
        if is_remote_engine(engine) or is_remote_engine(self.engine) or not (self.is_running() or self.is_busy()):
            self.stop()  # nothing of ours that works to keep (stopped, failed, or a connection): start anew
            self.start(engine, settings, caps)
            return False

        def job() -> None:
            try:
                probed = caps or self._probe_engine(engine)
                checked = self._check(probed, settings)
            except Exception as exc:  # a probe that fails: said, and the working server kept
                self.refused.emit(ServerFailure("engine_missing", f"The engine {engine} cannot be used: {exc}",
                                                "Pick another llama-server under Settings → Engine."))
                return
            if checked is not None:
                self.refused.emit(checked)
                return
            self.replace_started.emit(engine)
            self._do_stop()
            self._do_start(engine, settings, probed)

        self._spawn(job)
        return True

    def _probe_engine(self, engine: str) -> EngineCaps:
        probe = self._probe
        if probe is None:
            from beedeck.core.engine.probe import probe_engine

            probe = probe_engine
        return probe(engine)

    def _check(self, caps: EngineCaps, settings: LaunchSettings) -> ServerFailure | None:
        """The preflight's refusal of this launch, or None: memory as it will be once the running servers
        stopped (what they hold counts as free: :func:`beedeck.core.launcher.room_now`)."""
        if self._preflight is not None:
            return self._preflight(caps, settings)
        from beedeck.core import launcher  # imported lazily: the GUI opens without it

        room = (self._room or launcher.room_now)(self.stopping())
        checked = launcher.preflight(caps, self._with_port_quiet(settings), devices=room.gpus, host_ram=room.host_ram)
        return None if checked.ok else checked.failure()

    def stopping(self) -> list[Held]:
        """The servers a launch now stops first (the active one and the one kept beside it), with what they
        were started with: what they hold counts as free for that launch. Empty for a connection."""
        from beedeck.core.launcher import Held

        with self._lock:
            parked = self._parked
            running = [(self._proc, self.settings), *([(parked.proc, parked.settings)] if parked else [])]
        caps = self.caps
        return [Held(proc.pid, caps, s) for proc, s in running
                if proc is not None and s is not None and caps is not None and isinstance(getattr(proc, "pid", None), int)]

    def held_gpu_memory(self, gpus_free: list[int]) -> list[int]:
        """Blocking (NVML, or the servers' plans): what the servers a launch stops first hold on each GPU
        (``gpus_free``: each GPU's free bytes now), which that launch gets back. Run it off the GUI thread."""
        from beedeck.core.launcher import given_back

        return given_back(self.stopping(), gpus_free)

    @staticmethod
    def _with_port_quiet(settings: LaunchSettings) -> LaunchSettings:
        return settings if settings.port else replace(settings, port=DEFAULT_PORT)

    def shutdown(self, timeout_s: float = STOP_TIMEOUT_S + 5) -> None:
        """Stop the server and wait for it: called when the app quits, so nothing is left running.

        A start still probing or loading when the join times out is not abandoned: ``_closed`` makes
        it stop whatever it launches, and ``_do_stop`` stops what it has launched already.
        """
        with self._lock:
            self._closed = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        self._do_stop()
        self._thread = None

    # -- background -----------------------------------------------------------------------
    def _spawn(self, job: Callable[[], None]) -> None:
        previous = self._thread

        def run() -> None:
            if previous is not None:
                previous.join()  # jobs run in order: a stop issued during a start waits for it
            job()

        self._thread = threading.Thread(target=run, name="beedeck-server", daemon=True)
        self._thread.start()

    def _set_state(self, state: object) -> None:
        name = state_name(state)
        if name == self.state and name != "starting":
            return
        self.state = name
        self.state_changed.emit(name)

    def _with_port(self, settings: LaunchSettings) -> LaunchSettings:
        """``settings`` on the port this start uses: the profile's (0: BeeDeck's default) when nothing
        listens there, else a free one, announced in the log and by ``port_fallback_used``."""
        from beedeck.core.engine.ports import app_port  # imported lazily: the GUI opens without it

        wanted = settings.port or self.default_port
        port, why = app_port(settings.host, wanted)
        self.port_note = why or ""
        if why:
            self.line_received.emit(f"BeeDeck: {why}")
            self.port_fallback_used.emit(wanted, port, why)
        return replace(settings, port=port)

    def _do_start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None, *,
                  switch: bool = False) -> None:
        t0 = time.monotonic()
        self.engine, self.settings, self._asked = engine, replace(settings), replace(settings)
        self._token = token = object()
        self._set_state("starting")
        try:
            if caps is None:
                caps = self._probe_engine(engine)
            self.caps = caps
            if self._closed:
                return  # the app quit while the engine was probed: launch nothing
            self.caps_known.emit(caps)
            launch = self._launcher()
            settings = self._with_port(settings)
            self.settings = replace(settings)
            launched = fast_restart_settings(settings, caps) if switch else settings
            if switch:
                for change in describe_fast_restart(settings, caps):
                    self.line_received.emit(f"BeeDeck: mode switch {change}")
            proc = launch(engine, caps, launched, on_line=self.line_received.emit, on_state=self._state_cb(token))
            for note in getattr(proc, "notes", ()):  # what BeeDeck did on the way, in the log beside the engine's
                self.line_received.emit(f"BeeDeck: {note.message}")
            with self._lock:
                closed = self._closed
                if not closed:
                    self._proc = proc
            if closed:  # shutdown() ran while launch() was starting it: nobody else will stop it
                proc.stop(STOP_TIMEOUT_S)
                return
            proc.wait_ready(self._ready_timeout_s)
        except Exception as exc:  # a refused launch or a missing engine is shown, not raised
            # A timeout leaves the process running: stop it, nothing may be left behind.
            with self._lock:
                proc, self._proc = self._proc, None
            if proc is not None:
                proc.stop(STOP_TIMEOUT_S)
            if self._closed:
                return  # stopped by shutdown(): the window is gone, nothing to show
            self._set_state("failed")
            refused = isinstance(exc, LaunchRefused)  # the preflight's refusals, each with its remedy, as they are
            self.failed.emit(as_failure(exc if refused else self._explain(getattr(exc, "failure", None) or exc, proc)))
            return
        self._ready(engine, settings, proc, time.monotonic() - t0, switch)

    def _ready(self, engine: str, settings: LaunchSettings, proc: Any, took_s: float, switch: bool) -> None:
        self.base_url = proc.base_url
        self.last_start_s = took_s
        self._costs.record(_start_key(engine, settings, switch), self.last_start_s)
        if settings.draft and uses_draft(settings):  # (settings.draft: so the type narrows)
            self._draft_of[settings.target] = settings.draft
        draft = self._draft_of.get(settings.target)
        self._expected_switch = {
            True: self._costs.expected(StartKey(engine, settings.target, draft, True)) if draft else None,
            False: self._costs.expected(StartKey(engine, settings.target, None, True)),
        }
        self._set_state("ready")
        self.ready.emit(self.base_url)

    def _launcher(self) -> Callable[..., Any]:
        from beedeck.core import launcher  # imported lazily: the GUI opens without it

        return self._launch or launcher.launch

    def _explain(self, failure: object, proc: Any = None) -> object:
        """A failure RPC workers caused, said as such (a worker gone mid-reply, another build)."""
        workers = self.settings.rpc_workers if self.settings else []
        if not workers:
            return failure
        proc = proc if proc is not None else self._proc
        log = proc.log_lines() if proc is not None and hasattr(proc, "log_lines") else []
        return with_rpc_reason(failure, workers, log)

    def _do_attach(self, url: str, settings: LaunchSettings) -> None:
        t0 = time.monotonic()
        self.engine, self.settings, self.caps = url, replace(settings), None
        self._set_state("starting")
        self.line_received.emit(f"BeeDeck: connecting to {url}")
        try:
            info = self._inspect(url, settings.api_key)
        except RemoteError as exc:
            if self._closed:
                return
            self.line_received.emit(f"BeeDeck: {exc}")
            self._set_state("failed")
            self.failed.emit(as_failure(exc))
            return
        with self._lock:
            if self._closed:
                return
            self.remote, self.base_url = info, info.url
            self._unwatch, self._poke = stop, poke = threading.Event(), threading.Event()
        self.last_start_s = time.monotonic() - t0
        self.line_received.emit(f"BeeDeck: connected to {info.url}: {info.summary()}")
        self._set_state("ready")
        self.ready.emit(self.base_url)
        self.remote_attached.emit(info)
        threading.Thread(target=self._watch_remote, args=(info.url, stop, poke, settings.api_key),
                         name="beedeck-remote-health", daemon=True).start()

    def request_failed(self, *_: object) -> None:
        """A request to the attached server failed (a chat reply): check its health now rather than at the
        next poll, so a server that went away is reported at once. Nothing for a server BeeDeck started (its
        process says when it dies)."""
        if self._unwatch is not None:
            self._poke.set()

    def _watch_remote(self, url: str, stop: threading.Event, poke: threading.Event, api_key: str | None) -> None:
        # A refused connection misses at once and is confirmed at once: a stopped server is noticed at the next
        # poll (~0.5 s); one that hangs after two answer deadlines (~1.7 s in all; core/engine/remote.py).
        failure = watch_health(url, stop, self._health_interval_s, api_key=api_key, poke=poke)
        with self._lock:
            current = self._unwatch is stop and not stop.is_set()
            if current:
                self.remote, self._unwatch = None, None
        if current and failure is not None:
            self.base_url = ""
            self.line_received.emit(f"BeeDeck: {failure}")
            self._set_state("failed")
            self.failed.emit(as_failure(failure))

    def _on_proc_state(self, state: object, failure: object = None) -> None:
        name = state_name(state)
        # READY and FAILED are announced by _do_start once wait_ready returned, in order with ready().
        if name in ("starting", "loading") or (name in ("failed", "stopped") and self.state == "ready"):
            self._set_state(name)
            if name == "failed" and failure is not None:
                self.failed.emit(as_failure(self._explain(failure)))  # the server died while serving

    def _do_stop(self) -> None:
        self._drop_parked()
        with self._lock:
            proc, self._proc = self._proc, None
            remote, self.remote = self.remote, None
            unwatch, self._unwatch = self._unwatch, None
            poke = self._poke
        if unwatch is not None:
            unwatch.set()
            poke.set()  # wakes the watch, which sees it is stopped
        if remote is not None:  # a server BeeDeck did not start: disconnect, it keeps running
            self.base_url = ""
            self.line_received.emit(f"BeeDeck: disconnected from {remote.url} (it keeps running)")
            self._set_state("stopped")
            self.stopped.emit()
            return
        if proc is None:
            return
        try:
            proc.stop(STOP_TIMEOUT_S)
        finally:
            self.base_url = self.port_note = ""
            self._set_state("stopped")
            self.stopped.emit()
