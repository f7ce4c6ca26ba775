"""Ports: a free one for a headless server, BeeDeck's stable default for the app's (with a fallback
that says so when another program holds it)."""

from __future__ import annotations

import errno
import socket
import sys

from beedeck.core.engine.pidfile import stop_leftovers


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (another program may still take it before we do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host if host not in ("0.0.0.0", "", "localhost") else "127.0.0.1", 0))
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
