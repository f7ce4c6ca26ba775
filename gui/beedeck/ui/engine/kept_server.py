"""The other mode's server kept loaded beside the running one (core/engine/speculation/standby.py): the part
of :class:`~beedeck.ui.engine.server_controller.ServerController` that loads it (now, for the switch, or ahead
of it), serves from it again, and forgets it when it stops. A mixin: its methods run on the controller."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.restart import fast_restart_settings
from beedeck.core.engine.speculation.standby import LOADED_BESIDE, SWAPPED, Parked

STOP_TIMEOUT_S = 10.0  # a server's graceful stop, then its process tree is killed


class _Host(Protocol):
    """What the mixin uses of the controller."""

    line_received: Any
    ready: Any
    standby: bool
    state: str
    engine: str
    settings: LaunchSettings | None
    caps: EngineCaps | None
    base_url: str
    last_start_s: float | None
    last_switch: str
    default_port: int
    _proc: Any
    _token: object
    _asked: LaunchSettings | None
    _parked: Parked | None
    _closed: bool
    _lock: threading.Lock
    _ready_timeout_s: float
    _free_now: Callable[[], tuple[list[int] | None, int | None]]

    def is_remote(self) -> bool: ...
    def _spawn(self, job: Callable[[], None]) -> None: ...
    def _launcher(self) -> Callable[..., Any]: ...
    def _set_state(self, state: object) -> None: ...
    def _on_proc_state(self, state: object, failure: object = None) -> None: ...
    def _ready(self, engine: str, settings: LaunchSettings, proc: Any, took_s: float, switch: bool) -> None: ...
    def _start_beside(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None,
                      serve: bool = True) -> bool: ...
    def _state_cb(self, token: object) -> Callable[..., None]: ...
    def _drop_parked(self) -> None: ...


def state_name(state: object) -> str:
    value = getattr(state, "value", None)
    return str(value if value is not None else state).lower()


class KeptServer:
    """Mixin of ServerController: the other mode kept loaded."""

    settings: LaunchSettings | None
    last_start_s: float | None
    _parked: Parked | None
    _asked: LaunchSettings | None

    def preload(self: _Host, settings: LaunchSettings) -> None:
        """Load ``settings``' server beside the running one now, when memory allows, for the switch to it (which
        then loads nothing); the running server keeps serving, no ``ready`` is emitted."""

        if self._parked is not None:
            return  # one kept server at the most: every later ready (a swap) asks again, for nothing

        def job() -> None:
            if self._parked is None and self.state == "ready" and self.settings is not None:
                self._start_beside(self.engine, settings, self.caps, serve=False)

        self._spawn(job)

    def _start_beside(self: _Host, engine: str, settings: LaunchSettings, caps: EngineCaps | None, serve: bool = True) -> bool:
        """Load ``settings``' server on a second port while the running one keeps serving, then serve from it
        and keep the old one loaded (``serve`` False: keep the new one loaded instead). False (the log says
        why) when it does not fit or does not start: the caller restarts as before."""
        running, current = self._proc, self.settings
        if not self.standby or caps is None or running is None or current is None or self._closed or self.is_remote():
            return False
        gpu_free, ram = self._free_now()
        from beedeck.core.launcher import standby_preflight  # imported lazily: the GUI opens without it
        checked = standby_preflight(caps, settings, gpu_free=gpu_free, ram_available=ram)
        if not checked.ok:
            self.line_received.emit(f"BeeDeck: mode switch restarts the server: the other mode cannot stay loaded "
                                    f"beside it ({checked.refusals[0].message})")
            return False
        self._drop_parked()  # a third mode's server: only two are ever kept
        from beedeck.core.engine.ports import app_port  # imported lazily: the GUI opens without it

        t0 = time.monotonic()
        port, _ = app_port(settings.host, (current.port or self.default_port) + 1)
        beside, token, proc = replace(settings, port=port), object(), None
        self.line_received.emit(f"BeeDeck: mode switch loads the other mode on port {port} beside port {current.port}")
        try:
            proc = self._launcher()(engine, caps, fast_restart_settings(beside, caps), on_line=self.line_received.emit,
                                    on_state=self._state_cb(token), stop_leftover=False)
            proc.wait_ready(self._ready_timeout_s)
        except Exception as exc:  # no room after all, a crash: the restart path does what it always did
            if proc is not None:
                proc.stop(STOP_TIMEOUT_S)
            self.line_received.emit(f"BeeDeck: the other mode did not load beside the running server ({exc}); "
                                    "restarting instead")
            return False
        with self._lock:
            closed = self._closed
            if not closed and not serve:
                self._parked = Parked(proc, beside, replace(settings), token)
            elif not closed:
                self._parked = Parked(running, current, self._asked or current, self._token)
                self._proc, self._token, self._asked = proc, token, replace(settings)
        if closed or not serve:  # shutdown() ran meanwhile (it stopped the running one), or kept for later
            if closed:
                proc.stop(STOP_TIMEOUT_S)
            self.line_received.emit(f"BeeDeck: the other mode is loaded on port {port}: switching to it loads nothing")
            return True
        self.settings, self.last_switch = beside, LOADED_BESIDE
        self._ready(engine, beside, proc, time.monotonic() - t0, True)
        return True

    def _swap_parked(self: _Host, settings: LaunchSettings) -> bool:
        """The kept server runs ``settings``: serve from it again (no load) and keep the running one loaded."""
        with self._lock:
            parked, current = self._parked, self.settings
            if parked is None or parked.asked != settings or self._proc is None or current is None:
                return False
            self._parked = Parked(self._proc, current, self._asked or current, self._token)
            self._proc, self._token, self._asked = parked.proc, parked.token, parked.asked
            self.settings = parked.settings
        self.line_received.emit(f"BeeDeck: mode switch: the server kept loaded on port {parked.settings.port} serves "
                                f"again (nothing loaded); the one on port {current.port} stays loaded")
        self.base_url, self.last_start_s, self.last_switch = parked.proc.base_url, 0.0, SWAPPED
        self._set_state("ready")
        self.ready.emit(self.base_url)
        return True

    def _drop_parked(self: _Host) -> None:
        with self._lock:
            parked, self._parked = self._parked, None
        if parked is not None:
            parked.proc.stop(STOP_TIMEOUT_S)

    def _state_cb(self: _Host, token: object) -> Callable[..., None]:
        """The state callback of the process ``token`` names: the active one's reach the window; a kept one
        that stops is forgotten (the next switch loads again), said in the log."""

        def on_state(state: object, failure: object = None) -> None:
            if token is self._token:
                self._on_proc_state(state, failure)
                return
            parked = self._parked
            if parked is not None and parked.token is token and state_name(state) in ("failed", "stopped"):
                with self._lock:
                    if self._parked is parked:
                        self._parked = None
                self.line_received.emit("BeeDeck: the server kept loaded for the other mode stopped; the next "
                                        "switch loads it again")

        return on_state

