"""Ports: a free one for a headless server, BeeDeck's stable default for the app's (with a fallback
that says so when another program holds it), and the one rule every launch's port follows (:class:`PortRule`)."""

from __future__ import annotations

import errno
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass

from beedeck.core.engine.launch_settings import DEFAULT_PORT
from beedeck.core.engine.pidfile import stop_leftovers


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


def app_port(host: str, wanted: int) -> tuple[int, str | None]:
    """The port for the app's server: ``wanted`` when nothing listens there, else a free one and a line
    for the user that says so. A server left running by a BeeDeck that is gone may hold ``wanted``: it is
    stopped first, as start_server would (never a live session's). The CLI keeps port 0 = any free port."""
    def free(port: int) -> bool:
        # SO_REUSEADDR, as llama-server binds: a stopped server's TIME_WAIT sockets do not count, a listener does.
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

    if free(wanted) or (stop_leftovers() and free(wanted)):
        return wanted, None
    port = free_port(host)
    return port, (f"Port {wanted} is taken by another program, so the server listens on port {port} this time: "
                  f"editors and scripts set to port {wanted} will not reach it. Close the program that holds "
                  f"port {wanted}, or pick another port under Settings → Server.")


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
    another program holds it, falls back to a free one and says so (:func:`app_port`); a port given to the CLI is
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
            return PortChoice(0, free_port(host))
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
