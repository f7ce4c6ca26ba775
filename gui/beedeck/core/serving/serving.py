"""The app's llama-server and its life, Qt-free: the active server and the other mode's kept loaded beside it
when memory allows (core/engine/speculation/standby.py), and the rules of starting, restarting, swapping,
preloading, replacing, attaching, watching and stopping them.

The app's server keeps one port across starts: port 0 means ``ServingParts.default_port`` (BeeDeck's
default), so editor integrations keep one URL; when another program holds it, the server takes a free one
for that run and ``port_moved`` says so (the rule: ``core/engine/ports.py`` ``PortRule``, applied by the
preflight). A server BeeDeck did not start (the "engine" is an ``http(s)://`` URL) is attached instead of
launched: :meth:`Serving.start` reads what it is (``core/engine/remote.py``), :meth:`Serving.stop` only
disconnects, a restart is refused, and a watch polls ``/health`` so a server that goes away is reported like
one that crashed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING, Any

from beedeck.core.engine.argv import LaunchRefused
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure, as_failure
from beedeck.core.engine.remote import NO_RESTART, RemoteError, RemoteInfo, is_remote_engine
from beedeck.core.engine.rpc.probe import with_rpc_reason
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.modes import uses_draft
from beedeck.core.engine.speculation.restart import describe_fast_restart, fast_restart_settings
from beedeck.core.engine.speculation.standby import LOADED_BESIDE, RESTARTED, SWAPPED
from beedeck.core.serving.attach import RemoteWatch
from beedeck.core.serving.beside import plan_beside, start_beside
from beedeck.core.serving.jobs import Jobs, JobThread
from beedeck.core.serving.parts import STOP_TIMEOUT_S, Served, ServingEvents, ServingParts
from beedeck.core.serving.restarts import Guarded, Restart, StartTimes

if TYPE_CHECKING:  # the launcher (the process, the planner, psutil) is imported when a launch is planned:
    from beedeck.core.engine.ports import PortRule  # the window opens without it
    from beedeck.core.launcher import Held, Preflight


class Replacing(Enum):
    """What :meth:`Serving.replace` does with a running server."""

    NONE = "none"  # nothing of ours serves (stopped, failed): nothing replaced, a start is the caller's
    AT_ONCE = "at once"  # a connection on either side: stopped, and the new one started, at once
    PREFLIGHT = "preflight"  # after the new launch's preflight: ``replace_started`` and the stop, or ``refused``


class Serving:
    """Owns the app's running server (``proc``) and the one kept beside it (``kept``).

    Every command returns at once: its work runs on ``jobs`` in order (probe, preflight, start, wait until
    ready, stop), and what happens is reported through ``events`` (:class:`ServingEvents`). The state is read
    on any thread: ``state`` (a :class:`ServerState`), ``engine``, ``settings`` (on the port it listens on),
    ``caps``, ``base_url``, ``port_note`` (why it is not on the port asked for), ``last_start_s``,
    ``last_switch`` (how the last mode switch went: RESTARTED, LOADED_BESIDE or SWAPPED), ``remote`` (the
    attached server BeeDeck did not start, if any). ``standby``: keep the other mode's server loaded beside
    this one when memory allows (AppSettings.standby).
    """

    def __init__(self, parts: ServingParts | None = None, *, jobs: Jobs | None = None,
                 events: ServingEvents | None = None) -> None:
        self.parts = parts if parts is not None else ServingParts()
        self.jobs: Jobs = jobs if jobs is not None else JobThread()
        self.events = events if events is not None else ServingEvents()
        self.times = StartTimes(self.parts.costs)
        self.standby = True
        self.state = ServerState.STOPPED
        self.engine = ""
        self.settings: LaunchSettings | None = None
        self.caps: EngineCaps | None = None
        self.base_url = ""
        self.port_note = ""
        self.last_start_s: float | None = None  # seconds from the start to ready, for the mode toggle
        self.last_switch = RESTARTED
        self.restart_note = ""  # what the last restart's steps did, said once (RestartSteps.said): "" when nothing
        self.remote: RemoteInfo | None = None
        self.kept: Served | None = None
        self._lock = threading.Lock()
        self._proc: Any = None
        self._token: object = object()  # names the active process in its state callbacks
        self._asked: LaunchSettings | None = None  # the active server's settings as asked (before the port)
        self._kv_bytes: int | None = None  # what the active server's plan gave its KV cache (a carried slot's bound)
        self._sliding_window = False  # the active server's plan gave its target a sliding-window cache
        self._watch: RemoteWatch | None = None
        self._closed = False  # set by shutdown(): a start still in flight must not leave a server behind

    # -- what it is ------------------------------------------------------------------------
    @property
    def proc(self) -> Any:
        """The active server's process (None: none, or a connection)."""
        return self._proc

    def is_busy(self) -> bool:
        """A job runs or waits to run."""
        return self.jobs.busy()

    def is_running(self) -> bool:
        return self.state.running

    def is_remote(self) -> bool:
        """Attached (or attaching) to a server BeeDeck did not start: Start/Stop mean Connect/Disconnect."""
        return is_remote_engine(self.engine)

    def expected_switch_s(self, with_draft: bool) -> float | None:
        """Seconds a mode switch of the running target took here before, to a mode that loads its draft file or
        to one that does not (:class:`StartTimes`); None when never measured, or when that mode's server is kept
        loaded beside this one (the switch loads nothing)."""
        kept = self.kept
        if kept is not None and uses_draft(kept.asked) == with_draft:
            return None
        return self.times.expected(with_draft)

    def keeps_conversation(self, settings: LaunchSettings) -> tuple[str, float]:
        """Before a switch to ``settings`` (no I/O): "" when its restart would keep the conversation's cache, else why
        not, and the seconds keeping it adds (core/serving/slot_carry.py)."""
        restart = Restart(self.engine, self.caps, settings, True, self.settings, self._kv_bytes,
                          sliding_window=self._sliding_window)
        return self._steps().forecast(restart, self._proc)

    def reply_read(self, prompt_n: int | None, cache_n: int | None) -> str:
        """A chat reply ended with these prompt figures: "" unless it shows that what the last restart promised of
        the conversation's cache did not hold, said then (core/serving/restarts.py ``RestartSteps.reply_read``)."""
        return self._steps().reply_read(prompt_n, cache_n)

    def stopping(self) -> list[Held]:
        """The servers a launch now stops first (the active one and the one kept beside it), with what they
        were started with: what they hold counts as free for that launch. Empty for a connection."""
        from beedeck.core.launcher import Held

        with self._lock:
            kept = self.kept
            running = [(self._proc, self.settings), *([(kept.proc, kept.settings)] if kept else [])]
        caps = self.caps
        return [Held(proc.pid, caps, s) for proc, s in running
                if proc is not None and s is not None and caps is not None and isinstance(getattr(proc, "pid", None), int)]

    def held_gpu_memory(self, gpus_free: list[int]) -> list[int]:
        """Blocking (NVML, or the servers' plans): what the servers a launch stops first hold on each GPU
        (``gpus_free``: each GPU's free bytes now), which that launch gets back. Run it off the GUI thread."""
        from beedeck.core.launcher import given_back

        return given_back(self.stopping(), gpus_free)

    # -- commands ----------------------------------------------------------------------------
    def start_if_idle(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> bool:
        """Start, unless a server of ours runs or a job is under way (Start, Retry, the app's start): False when
        nothing was done."""
        if self.is_running() or self.is_busy():
            return False
        self.start(engine, settings, caps)
        return True

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        """Probe (if ``caps`` is None), plan, launch, wait until ready: all as a job. ``engine`` an ``http(s)://``
        URL: connect to that running server instead (``settings.api_key``)."""
        if is_remote_engine(engine):
            self.jobs.submit(lambda: self._attach(engine, settings))
        else:
            self.jobs.submit(lambda: self._start(engine, settings, caps))

    def stop(self) -> None:
        self.jobs.submit(self._stop)

    def restart(self, settings: LaunchSettings) -> None:
        """Stop, then start the same engine with new settings (the Baseline|DFlash restart path).

        A restart of the target that is running and ready is a mode switch: the server kept beside it serves
        when it runs ``settings`` (a swap), else ``settings``' server is loaded beside it when memory allows,
        else it restarts mapping the model from the page cache and skipping the fit pass
        (core/engine/speculation/restart.py); the settings it keeps are ``settings``. Around the stop and the
        start, ``ServingParts.restart_steps`` (:class:`~beedeck.core.serving.restarts.RestartSteps`)."""
        engine, caps = self.engine, self.caps
        if is_remote_engine(engine):
            self.events.failed(as_failure(RemoteError(
                NO_RESTART, "BeeDeck did not start this server, so it cannot restart it with other settings.",
                "Restart it where it runs (with or without its draft), then connect again.")))
            return
        switch = self.state == ServerState.READY and self.settings is not None and self.settings.target == settings.target

        def job() -> None:
            self.last_switch = RESTARTED  # or, set before ready is reported: SWAPPED / LOADED_BESIDE
            if switch and (self._swap_kept(settings) or self._load_beside(engine, settings, caps)):
                return
            steps = self._steps()
            restart = Restart(engine, caps, replace(settings), switch, self.settings, self._kv_bytes,
                              lambda text: self.events.line(f"BeeDeck: {text}"), sliding_window=self._sliding_window)
            steps.before_stop(restart, self._proc)
            try:
                self._stop()
                self._start(engine, settings, caps, restart=restart)
            finally:
                steps.ended(restart)

        self.jobs.submit(job)

    def preload(self, settings: LaunchSettings) -> None:
        """Load ``settings``' server beside the running one now, when memory allows and ``standby`` is on, for the
        switch to it (which then loads nothing); the running server keeps serving, no ``ready`` is reported."""
        if self.kept is not None or not self.standby:
            return  # one kept server at the most: every later ready (a swap) asks again, for nothing

        def job() -> None:
            if self.kept is None and self.state == ServerState.READY and self.settings is not None:
                self._load_beside(self.engine, settings, self.caps, serve=False)

        self.jobs.submit(job)

    def replace(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None, *,
                in_mode: Callable[[LaunchSettings], LaunchSettings] | None = None) -> Replacing:
        """Settings → Launch: start ``engine`` with ``settings`` in place of what runs now, stopping the running
        server only once the new launch passed its preflight (files, GGUF, mode, guard, RPC workers, host RAM
        and GPU memory, counting what the servers it stops hold as free, and their ports). A refused launch
        leaves the working server serving and reports ``refused``; one that passed reports ``replace_started``
        before the running server stops, and then starts the plan it checked. ``in_mode``: the settings to
        start ``settings`` with (the mode switch's ``launch_settings``), asked only when something is replaced.
        Nothing of ours serving (:attr:`Replacing.NONE`), nothing is done: a start is the caller's."""
        if not (self.is_running() or self.is_busy()):
            return Replacing.NONE
        settings = in_mode(settings) if in_mode is not None else settings
        if is_remote_engine(engine) or self.is_remote():
            self.stop()  # nothing of ours that works to keep (a connection): start anew
            self.start(engine, settings, caps)
            return Replacing.AT_ONCE

        def job() -> None:
            try:
                probed = caps or self.parts.probe(engine)
                checked = self._plan(probed, settings, self._port_rule(self._ports()), self.stopping())
            except Exception as exc:  # a probe that fails: said, and the working server kept
                self.events.refused(ServerFailure("engine_missing", f"The engine {engine} cannot be used: {exc}",
                                                  "Pick another llama-server under Settings → Engine."))
                return
            if not checked.ok:
                self.events.refused(checked.failure())
                return
            self.events.replace_started(engine)
            self._stop()
            self._start(engine, settings, probed, planned=checked)

        self.jobs.submit(job)
        return Replacing.PREFLIGHT

    def request_failed(self, *_: object) -> None:
        """A request to the attached server failed (a chat reply): check its health now rather than at the
        next poll, so a server that went away is reported at once. Nothing for a server BeeDeck started (its
        process says when it dies)."""
        watch = self._watch
        if watch is not None:
            watch.poke()

    def shutdown(self, timeout_s: float = STOP_TIMEOUT_S + 5) -> None:
        """Stop the servers and wait for them: called when the app quits, so nothing is left running.

        A start still probing or loading when the wait times out is not abandoned: ``_closed`` makes it stop
        whatever it launches, and the stop here stops what it has launched already."""
        with self._lock:
            self._closed = True
        self.jobs.wait(timeout_s)
        self._stop()

    # -- the jobs ----------------------------------------------------------------------------
    def _steps(self) -> Guarded:
        """The restart steps, each guarded: one that raises is logged and skipped (core/serving/restarts.py)."""
        return Guarded(self.parts.restart_steps, self.events.line)

    def _set_state(self, state: ServerState) -> None:
        if state == self.state and state != ServerState.STARTING:
            return
        self.state = state
        self.events.state_changed(state)

    def _plan(self, caps: EngineCaps, settings: LaunchSettings, port: PortRule, stopping: list[Held] | None = None
              ) -> Preflight:
        """The launch plan of ``settings`` (the preflight), with the memory free now (``stopping``: what these
        servers hold counts as free: they stop first) and the port by the rule ``port``."""
        room = self.parts.room(stopping or [])
        settings = self._steps().prepare(settings, caps)  # e.g. the slot folder a switch saves into
        return self.parts.preflight(caps, settings, devices=room.gpus, host_ram=room.host_ram, port=port)

    def _port_rule(self, freed: set[int] | None = None) -> PortRule:
        """The app's port rule: port 0 is ``default_port``, claimed now (``freed``: ports of servers it stops)."""
        from beedeck.core.engine.ports import app_rule

        return app_rule(self.parts.default_port, freed or ())

    def _ports(self) -> set[int]:
        """The ports the active server and the kept one listen on: free for a launch that stops them first."""
        kept = self.kept
        return {s.port for s in (self.settings, kept.settings if kept else None) if s is not None and s.port}

    def _start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None, *,
               restart: Restart | None = None, planned: Preflight | None = None) -> None:
        t0 = time.monotonic()
        self.engine, self.settings, self._asked = engine, replace(settings), replace(settings)
        self._token = token = object()
        self._set_state(ServerState.STARTING)
        fast = restart is not None and restart.fast
        try:
            if caps is None:
                caps = self.parts.probe(engine)
            self.caps = caps
            if self._closed:
                return  # the app quit while the engine was probed: launch nothing
            self.events.caps_known(caps)
            checked = planned or self._plan(caps, fast_restart_settings(settings, caps) if fast else settings,
                                            self._port_rule())
            self._take_port(settings, checked)
            for change in describe_fast_restart(settings, caps) if fast else []:
                self.events.line(f"BeeDeck: mode switch {change}")
            if not checked.ok:
                raise LaunchRefused(checked.refusals)
            memory = checked.memory
            self._kv_bytes = memory.component("kv") + memory.component("recurrent") if memory else None
            self._sliding_window = bool(memory and memory.cells_swa)
            proc = self.parts.start(engine, checked, on_line=self.events.line, on_state=self._state_cb(token))
            for note in getattr(proc, "notes", ()):  # what BeeDeck did on the way, in the log beside the engine's
                self.events.line(f"BeeDeck: {note.message}")
            with self._lock:
                closed = self._closed
                if not closed:
                    self._proc = proc
            if closed:  # shutdown() ran while the start was under way: nobody else will stop it
                proc.stop(STOP_TIMEOUT_S)
                return
            proc.wait_ready(self.parts.ready_timeout_s)
        except Exception as exc:  # a refused launch or a missing engine is reported, not raised
            self._start_failed(exc)
            return
        assert self.settings is not None
        self._ready(engine, self.settings, proc, time.monotonic() - t0, fast, restart)

    def _take_port(self, settings: LaunchSettings, checked: Preflight) -> None:
        """The active server's settings on the port the plan chose; a port that moved is said."""
        choice = checked.port
        self.port_note = ""
        if choice is None:  # refused before a port was chosen (a value out of range)
            return
        self.settings = replace(settings, port=choice.used)
        self.port_note = choice.note or ""
        if choice.note:
            self.events.line(f"BeeDeck: {choice.note}")
            self.events.port_moved(choice.wanted, choice.used, choice.note)

    def _start_failed(self, exc: Exception) -> None:
        # A timeout leaves the process running: stop it, nothing may be left behind.
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            proc.stop(STOP_TIMEOUT_S)
        if self._closed:
            return  # stopped by shutdown(): the window is gone, nothing to show
        self._set_state(ServerState.FAILED)
        refused = isinstance(exc, LaunchRefused)  # the preflight's refusals, each with its remedy, as they are
        self.events.failed(as_failure(exc if refused else self._explain(getattr(exc, "failure", None) or exc, proc)))

    def _ready(self, engine: str, settings: LaunchSettings, proc: Any, took_s: float, switch: bool,
               restart: Restart | None = None) -> None:
        self.base_url = proc.base_url
        self.last_start_s = took_s
        self.times.started(engine, settings, took_s, switch)
        if restart is None:
            self.restart_note = ""
        elif not restart.again:  # (again: the first try's note stays)
            kept = self._steps().after_ready(restart, proc, took_s)
            self.restart_note = self._steps().said()
            if not kept:  # the steps broke the new server (it died restoring a cache): it starts again without them
                self.events.line("BeeDeck: mode switch: the new server stopped during the restart's steps; it "
                                 "starts again without them")
                with self._lock:
                    dead, self._proc = self._proc, None
                if dead is not None:
                    dead.stop(STOP_TIMEOUT_S)
                self._start(engine, self._asked or settings, self.caps, restart=replace(restart, again=True))
                return
        self._set_state(ServerState.READY)
        self.events.ready(self.base_url)

    def _explain(self, failure: object, proc: Any = None) -> object:
        """A failure RPC workers caused, said as such (a worker gone mid-reply, another build)."""
        workers = self.settings.rpc_workers if self.settings else []
        if not workers:
            return failure
        proc = proc if proc is not None else self._proc
        log = proc.log_lines() if proc is not None and hasattr(proc, "log_lines") else []
        return with_rpc_reason(failure, workers, log)

    def _state_cb(self, token: object) -> Callable[[ServerState, ServerFailure | None], None]:
        """The state callback of the process ``token`` names: the active one's are reported; a kept one that
        stops is forgotten (the next switch loads again), said in the log."""

        def on_state(state: ServerState, failure: ServerFailure | None = None) -> None:
            state = ServerState(state)
            if token is self._token:
                self._on_proc_state(state, failure)
                return
            kept = self.kept
            if kept is not None and kept.token is token and state in (ServerState.FAILED, ServerState.STOPPED):
                with self._lock:
                    if self.kept is kept:
                        self.kept = None
                self.events.line("BeeDeck: the server kept loaded for the other mode stopped; the next switch "
                                 "loads it again")

        return on_state

    def _on_proc_state(self, state: ServerState, failure: ServerFailure | None) -> None:
        # READY and FAILED are reported by _start once wait_ready returned, in order with ready.
        if state in (ServerState.STARTING, ServerState.LOADING) or (
                state in (ServerState.FAILED, ServerState.STOPPED) and self.state == ServerState.READY):
            self._set_state(state)
            if state == ServerState.FAILED and failure is not None:
                self.events.failed(as_failure(self._explain(failure)))  # the server died while serving

    # -- the server kept beside --------------------------------------------------------------
    def _load_beside(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None, serve: bool = True) -> bool:
        """Load ``settings``' server on a second port while the running one keeps serving, then serve from it
        and keep the old one loaded (``serve`` False: keep the new one loaded instead). False (the log says
        why) when it does not fit or does not start: the caller restarts as before."""
        running, current = self._proc, self.settings
        if not self.standby or caps is None or running is None or current is None or self._closed or self.is_remote():
            return False
        kept = self.kept
        checked = plan_beside(self.parts, caps, settings, current.port, kept.settings.port if kept else None,
                              self.events.line)
        if checked is None or checked.settings is None:
            return False
        self._drop_kept()  # a third mode's server: only two are ever kept
        port, token = checked.settings.port, object()
        self.events.line(f"BeeDeck: mode switch loads the other mode on port {port} beside port {current.port}")
        started = start_beside(self.parts, engine, checked, self.events.line, self._state_cb(token))
        if started is None:
            return False
        proc, took_s = started
        beside = replace(settings, port=port)
        with self._lock:
            closed = self._closed
            if not closed and not serve:
                self.kept = Served(proc, beside, replace(settings), token)
            elif not closed:
                self.kept = Served(running, current, self._asked or current, self._token)
                self._proc, self._token, self._asked = proc, token, replace(settings)
        if closed or not serve:  # shutdown() ran meanwhile (it stopped the running one), or kept for later
            if closed:
                proc.stop(STOP_TIMEOUT_S)
            self.events.line(f"BeeDeck: the other mode is loaded on port {port}: switching to it loads nothing")
            return True
        self.settings, self.last_switch = beside, LOADED_BESIDE
        self._ready(engine, beside, proc, took_s, True)
        return True

    def _swap_kept(self, settings: LaunchSettings) -> bool:
        """The kept server runs ``settings``: serve from it again (no load) and keep the running one loaded."""
        with self._lock:
            kept, current = self.kept, self.settings
            if kept is None or kept.asked != settings or self._proc is None or current is None:
                return False
            self.kept = Served(self._proc, current, self._asked or current, self._token)
            self._proc, self._token, self._asked = kept.proc, kept.token, kept.asked
            self.settings = kept.settings
        self.events.line(f"BeeDeck: mode switch: the server kept loaded on port {kept.settings.port} serves again "
                         f"(nothing loaded); the one on port {current.port} stays loaded")
        self.base_url, self.last_start_s, self.last_switch = kept.proc.base_url, 0.0, SWAPPED
        self.restart_note = ""
        self._set_state(ServerState.READY)
        self.events.ready(self.base_url)
        return True

    def _drop_kept(self) -> None:
        with self._lock:
            kept, self.kept = self.kept, None
        if kept is not None:
            kept.proc.stop(STOP_TIMEOUT_S)

    # -- a server BeeDeck did not start ------------------------------------------------------
    def _attach(self, url: str, settings: LaunchSettings) -> None:
        t0 = time.monotonic()
        self.engine, self.settings, self.caps = url, replace(settings), None
        self._set_state(ServerState.STARTING)
        self.events.line(f"BeeDeck: connecting to {url}")
        try:
            info = self.parts.inspect(url, settings.api_key)
        except RemoteError as exc:
            if self._closed:
                return
            self.events.line(f"BeeDeck: {exc}")
            self._set_state(ServerState.FAILED)
            self.events.failed(as_failure(exc))
            return
        with self._lock:
            if self._closed:
                return
            self.remote, self.base_url = info, info.url
            self._watch = watch = RemoteWatch(info.url, settings.api_key, self.parts.health_interval_s)
        self.last_start_s = time.monotonic() - t0
        self.events.line(f"BeeDeck: connected to {info.url}: {info.summary()}")
        self._set_state(ServerState.READY)
        self.events.ready(self.base_url)
        self.events.attached(info)
        watch.start(self._remote_gone)

    def _remote_gone(self, watch: RemoteWatch, failure: RemoteError | None) -> None:
        with self._lock:
            current = self._watch is watch and not watch.ended
            if current:
                self.remote, self._watch = None, None
        if current and failure is not None:
            self.base_url = ""
            self.events.line(f"BeeDeck: {failure}")
            self._set_state(ServerState.FAILED)
            self.events.failed(as_failure(failure))

    # -- stopping ----------------------------------------------------------------------------
    def _stop(self) -> None:
        self._drop_kept()
        with self._lock:
            proc, self._proc = self._proc, None
            remote, self.remote = self.remote, None
            watch, self._watch = self._watch, None
        if watch is not None:
            watch.end()
        if remote is not None:  # a server BeeDeck did not start: disconnect, it keeps running
            self.base_url = ""
            self.events.line(f"BeeDeck: disconnected from {remote.url} (it keeps running)")
            self._set_state(ServerState.STOPPED)
            self.events.stopped()
            return
        if proc is None:
            return
        try:
            proc.stop(STOP_TIMEOUT_S)
        finally:
            self.base_url = self.port_note = ""
            self._set_state(ServerState.STOPPED)
            self.events.stopped()
