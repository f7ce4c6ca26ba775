"""Ports: a free one for a headless server, BeeDeck's stable default for the app's (with a fallback
that says so when another program, or another BeeDeck process, holds it), and the one rule every launch's port
follows (:class:`PortRule`).

A port is *claimed* before it is used: :func:`claim_port` holds ``state_dir()/ports/<port>.lock`` (an
exclusive lock the kernel drops when the process ends, however it ends) from the moment a process picks the
port until its server stops. Two BeeDeck processes started at the same moment (two windows, a window and
``beedeck serve``) each find the port free when they look; the claim makes only one of them take it, and
the other is told which BeeDeck process has it.
"""

from __future__ import annotations

import errno
import socket
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths
from beedeck.core.engine.launch_settings import DEFAULT_PORT
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.pidfile import (
    live_records,
    sibling_on_port,
    stop_leftovers,
)

CLAIMS = "ports"
_claims: dict[int, tuple[paths.Held, object | None]] = {}  # port -> (the lock, the server that took it over)
_claims_lock = threading.Lock()


class HostError(ValueError):
    """The host to listen on is not an address of this machine's kind nor a name it resolves."""


def _bind_address(host: str) -> tuple[socket.AddressFamily, str]:
    """The family and address a server listening on ``host`` binds: IPv4, IPv6 (``::``, ``::1``, in
    brackets or not) or the first address a host name resolves to."""
    first = host.split(",")[0].strip().strip("[]")
    if first in ("", "0.0.0.0", "localhost"):
        return socket.AF_INET, "127.0.0.1"
    if ":" in first:
        return socket.AF_INET6, first
    try:
        socket.inet_aton(first)
        return socket.AF_INET, first
    except OSError:
        pass
    try:
        family, _type, _proto, _name, addr = socket.getaddrinfo(first, 0, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise HostError(f"The host {first!r} cannot be resolved ({exc}): listen on an address such as "
                        "127.0.0.1 (this machine only) or 0.0.0.0 (the LAN, with an API key), or a name this "
                        "machine resolves.") from None
    return socket.AddressFamily(family), str(addr[0])


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (another program may still take it before we do). Raises
    HostError when ``host`` is a name that does not resolve, or an address this machine cannot bind."""
    family, address = _bind_address(host)
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, 0))
        except OSError as exc:
            raise HostError(f"BeeDeck cannot listen on {address} ({exc.strerror or exc}): it is not an address "
                            "of this machine; pick one it has (127.0.0.1, ::1, 0.0.0.0).") from None
        return int(s.getsockname()[1])


def _claim_path(port: int) -> Path:
    return paths.state_dir() / CLAIMS / f"{port}.lock"


def claim_port(port: int, owner: object | None = None) -> str | None:
    """Claim ``port`` for a server of this process: None when it is this process's now (or was already),
    else the BeeDeck process that holds it, in words ("`beedeck serve` (pid N)"). ``owner`` (the server
    that will listen there) takes over a claim made for it without one; only its :func:`release_port` ends
    it. Where the claims folder cannot be written, every claim succeeds (the bind check still holds)."""
    with _claims_lock:
        if port in _claims:
            mine, current = _claims[port]
            if current is None and owner is not None:
                _claims[port] = (mine, owner)
            return None
        try:
            held = paths.try_hold(_claim_path(port), paths.owner_note())
        except OSError:
            return None
        if held is None:
            return paths.describe_note(paths.holder_note(_claim_path(port))) or "another BeeDeck process"
        _claims[port] = (held, owner)
        return None


def release_port(port: int, owner: object | None = None) -> None:
    """End this process's claim on ``port``: the one ``owner`` took over, or (``owner`` None) one nobody took
    over yet (a launch refused before its server started)."""
    with _claims_lock:
        entry = _claims.get(port)
        if entry is None or entry[1] is not owner:
            return
        del _claims[port]
    entry[0].release()


def claimed_free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on and this process has claimed (see :func:`free_port`)."""
    for _ in range(20):
        port = free_port(host)
        if claim_port(port) is None:
            return port
    return free_port(host)  # twenty claimed ports in a row: the bind check alone


def _bindable(host: str, port: int) -> bool:
    """Whether a server could listen on ``port`` now. SO_REUSEADDR, as llama-server binds: a stopped server's
    TIME_WAIT sockets do not count, a listener does."""
    bind_host = "127.0.0.1" if host in ("", "localhost") else host.strip("[]")
    with socket.socket(socket.AF_INET6 if ":" in bind_host else socket.AF_INET, socket.SOCK_STREAM) as s:
        if sys.platform == "win32":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)
        else:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((bind_host, port))
        except socket.gaierror:
            return True  # not an address to check here (a host name, a socket path): the server judges it
        except OSError as exc:
            return exc.errno == errno.EADDRNOTAVAIL  # not this machine's address: the server says so
    return True


def listener_of(port: int) -> str | None:
    """The BeeDeck server listening on ``port``, in words, from the servers' records; None when no BeeDeck
    server has it (another program, as far as BeeDeck can tell)."""
    rec = next((r for r in live_records() if r.port == port and (r.mine() or r.owner_alive())), None)
    if rec is None:
        return None
    if rec.mine():
        return f"this BeeDeck's own other llama-server (pid {rec.pid})"
    return f"BeeDeck's own llama-server (pid {rec.pid}) of {rec.owner()}"


def port_taken(port: int, holder: str | None = None) -> ServerFailure | None:
    """Port ``port`` held by another BeeDeck process (its server listens there, or ``holder``, the process
    that claimed it, is starting one), said as BeeDeck's own; None when no BeeDeck process is known to hold it."""
    sibling = sibling_on_port(port)
    if sibling is not None:
        what = f", {sibling.owner_role}" if sibling.owner_role else ""
        message = (f"Port {port} is taken by another BeeDeck session's llama-server (pid {sibling.pid}, started by "
                   f"BeeDeck pid {sibling.owner_pid}{what}), which BeeDeck leaves running.")
    elif holder is not None:
        message = f"Port {port} is being taken by {holder}, which is starting its server there; BeeDeck leaves it be."
    else:
        return None
    return ServerFailure("port_in_use", message,
                         "Use another port for this one (or 0 for any free port), or stop the other session first.")


def app_port(host: str, wanted: int) -> tuple[int, str | None]:
    """The port for the app's server, claimed for it (:func:`claim_port`): ``wanted`` when no other BeeDeck
    process claimed it and nothing listens there, else a free one and a line for the user that says who has
    ``wanted``. A server left running by a BeeDeck that is gone may hold ``wanted``: it is stopped first, as
    start_server would (never a live session's). The CLI keeps port 0 = any free port."""
    holder = claim_port(wanted)
    if holder is None and (_bindable(host, wanted) or (stop_leftovers() and _bindable(host, wanted))):
        return wanted, None
    if holder is None:
        release_port(wanted)  # ours only for the look (a claim a server of ours took over stays)
    server = listener_of(wanted)
    if server is not None:
        taken = f"is taken by {server}"
    elif holder is not None:
        taken = f"is being taken by {holder}, which is starting its server there"
    else:
        taken = "is taken by another program"
    holder = server or holder
    port = claimed_free_port(host)
    remedy = ("Stop that one to have it back" if holder else f"Close the program that holds port {wanted}")
    return port, (f"Port {wanted} {taken}, so the server listens on port {port} this time: editors and scripts set "
                  f"to port {wanted} will not reach it. {remedy}, or pick another port under Settings → Server.")


# -- the port rule: what port 0 means, and whether the port is claimed now ---------------------------


@dataclass(frozen=True)
class PortChoice:
    """The port a launch listens on: ``wanted`` (the settings' port, 0 read as the rule says), ``used``, and
    ``note``: why they differ (another program holds ``wanted``), for the user; None when they do not."""

    wanted: int
    used: int
    note: str | None = None


@dataclass(frozen=True)
class PortRule:
    """How a launch's port is chosen, in one place for every launch (core/launcher.py ``preflight`` applies it).

    ``default``: what port 0 means: this port (the app: :data:`DEFAULT_PORT`, so editors keep one URL), or None:
    any free port (the CLI, the benchmark). ``claim``: look now whether the port is free; the app's port, when
    another program or BeeDeck process holds it, falls back to a free one and says so (:func:`app_port`);
    a claimed port is this process's until its server stops or the launch is refused; a port given to the CLI is
    used as given (a taken one fails as the engine says). Unclaimed (the form, a check before a stop) 0 shows as
    ``default``, never ``--port 0``. ``freed``: ports the servers a launch stops first hold, free for it."""

    default: int | None = DEFAULT_PORT
    claim: bool = False
    freed: frozenset[int] = frozenset()

    def choose(self, host: str, port: int) -> PortChoice:
        """The port for ``host`` and the settings' ``port``. Raises HostError (claiming a port on a host that
        does not resolve, or is no address of this machine)."""
        if self.default is None:  # any free port
            if port or not self.claim:
                return PortChoice(port, port or DEFAULT_PORT)
            return PortChoice(0, claimed_free_port(host))
        wanted = port or self.default
        if not self.claim or wanted in self.freed:
            return PortChoice(wanted, wanted)
        used, why = app_port(host, wanted)
        return PortChoice(wanted, used, why)


SHOWN = PortRule()  # judged, not claimed: 0 is BeeDeck's default port (the form, a check, a held server's plan)
ANY_FREE = PortRule(default=None, claim=True)  # the CLI and the benchmark: 0 is any free port, claimed at launch


def app_rule(default: int = DEFAULT_PORT, freed: Iterable[int] = ()) -> PortRule:
    """The app's server: 0 is ``default``, claimed now (``freed``: held by the servers it stops first)."""
    return PortRule(default=default, claim=True, freed=frozenset(freed))
