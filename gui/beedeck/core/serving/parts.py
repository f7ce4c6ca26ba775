"""What a :class:`~beedeck.core.serving.serving.Serving` is made of: how it reports (:class:`ServingEvents`,
typed callbacks), what it uses of the world (:class:`ServingParts`: the preflight, the process start, the
probe, the memory free...; tests replace what needs an engine or a GPU) and one server it started
(:class:`Served`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.remote import HEALTH_INTERVAL_S, RemoteInfo, inspect_server
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.standby import free_now
from beedeck.core.engine.speculation.switch_cost import SwitchCosts
from beedeck.core.serving.restarts import RestartSteps
from beedeck.core.serving.slot_carry import SlotCarry

if TYPE_CHECKING:  # the launcher (the process, the planner, psutil) is imported when a launch is planned:
    from beedeck.core.engine.ports import PortRule  # the window opens without it
    from beedeck.core.launcher import Held, Preflight, Room

READY_TIMEOUT_S = 600.0  # loading a big model from a slow disk can take minutes
STOP_TIMEOUT_S = 10.0  # a server's graceful stop, then its process tree is killed


def _nothing(*_: object) -> None:
    pass


@dataclass
class ServingEvents:
    """How a Serving reports, each callback on the thread the work runs on (its job thread; a refused restart
    at once, on the caller's). The Qt adapter (``ui/engine/server_controller.py``) passes its signals' ``emit``.

    ``state_changed(ServerState)``; ``line(str)``: the engine's log and BeeDeck's own lines ("BeeDeck: ...");
    ``ready(base_url)``; ``failed(ServerFailure)`` (a refused launch, a crash, a remote gone); ``stopped()``;
    ``caps_known(EngineCaps)`` of the engine being launched; ``port_moved(wanted, used, why)`` when another
    program held the port; ``attached(RemoteInfo)`` once a server BeeDeck did not start is attached;
    ``refused(ServerFailure)`` when :meth:`Serving.replace` found the new launch refused (the running server
    kept); ``replace_started(engine)`` when it passed: the running server stops now and the new one starts."""

    state_changed: Callable[[ServerState], None] = _nothing
    line: Callable[[str], None] = _nothing
    ready: Callable[[str], None] = _nothing
    failed: Callable[[ServerFailure], None] = _nothing
    stopped: Callable[[], None] = _nothing
    caps_known: Callable[[EngineCaps], None] = _nothing
    port_moved: Callable[[int, int, str], None] = _nothing
    attached: Callable[[RemoteInfo], None] = _nothing
    refused: Callable[[ServerFailure], None] = _nothing
    replace_started: Callable[[str], None] = _nothing


class Preflighting(Protocol):
    """:func:`beedeck.core.launcher.preflight` as a Serving calls it (the launch plan, or why not)."""

    def __call__(self, caps: EngineCaps, settings: LaunchSettings, *, devices: list[int] | None,
                 host_ram: int | None, port: PortRule) -> Preflight: ...


class Starting(Protocol):
    """:func:`beedeck.core.launcher.start`: the process of a launch plan that passed, started (not yet ready)."""

    def __call__(self, engine: str, plan: Preflight, *, on_line: Callable[[str], None],
                 on_state: Callable[[ServerState, ServerFailure | None], None], stop_leftover: bool = True) -> Any: ...


def _preflight(caps: EngineCaps, settings: LaunchSettings, *, devices: list[int] | None, host_ram: int | None,
               port: PortRule) -> Preflight:
    from beedeck.core import launcher

    return launcher.preflight(caps, settings, devices=devices, host_ram=host_ram, port=port)


def _start(engine: str, plan: Preflight, *, on_line: Callable[[str], None],
           on_state: Callable[[ServerState, ServerFailure | None], None], stop_leftover: bool = True) -> Any:
    from beedeck.core import launcher

    return launcher.start(engine, plan, on_line=on_line, on_state=on_state, stop_leftover=stop_leftover)


def _room(stopping: Sequence[Held]) -> Room:
    from beedeck.core import launcher

    return launcher.room_now(stopping)


def _probe(engine: str) -> EngineCaps:
    from beedeck.core.engine.probe import probe_engine

    return probe_engine(engine)


@dataclass
class ServingParts:
    """What a Serving uses of the world, each replaceable (tests replace what needs an engine or a GPU):
    ``preflight`` plans a launch, ``start`` starts a plan's process, ``probe`` reads an engine's capabilities,
    ``inspect`` reads what a running server BeeDeck did not start is, ``room`` the memory free for a launch
    (the servers it stops first counted as free), ``free_now`` the memory free beside the running server,
    ``costs`` the start times remembered, ``restart_steps`` what a restart does around its stop and start (by
    default it keeps the conversation's cache where the engine can: core/serving/slot_carry.py).
    ``default_port`` is what port 0 means for the app's server; the rest are timeouts."""

    preflight: Preflighting = _preflight
    start: Starting = _start
    probe: Callable[[str], EngineCaps] = _probe
    inspect: Callable[[str, str | None], RemoteInfo] = inspect_server
    room: Callable[[Sequence[Held]], Room] = _room
    free_now: Callable[[], tuple[list[int] | None, int | None]] = free_now
    costs: SwitchCosts = field(default_factory=SwitchCosts)
    restart_steps: RestartSteps = field(default_factory=SlotCarry)
    default_port: int = DEFAULT_PORT
    ready_timeout_s: float = READY_TIMEOUT_S
    health_interval_s: float = HEALTH_INTERVAL_S  # a server BeeDeck did not start: /health this often


@dataclass
class Served:
    """A server a Serving started: its process, its settings (on its port), the settings as asked (what a switch
    back compares) and the token its state callbacks carry (which server a callback is about)."""

    proc: Any
    settings: LaunchSettings
    asked: LaunchSettings
    token: object
