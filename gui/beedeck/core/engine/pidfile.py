"""Which llama-servers BeeDeck owns, so one session never stops another's.

Every server BeeDeck starts leaves a record in ``state_dir()/servers/<server pid>.json`` that names
the server (pid, start time, engine, port) and the BeeDeck process that owns it (pid and start time,
so a reused pid is not mistaken for it). Before starting a server BeeDeck cleans up only *leftovers*:
servers whose owner is gone (a BeeDeck that crashed or was killed). A server whose owner still runs
belongs to a sibling session (another window, ``beedeck serve``, ``chat``, ``bench``) and is left
alone. Also the process-group signalling the server wrapper uses. A record names what its owner is
(``paths.set_role``: "`beedeck serve`", "a BeeDeck window"), so that another process's messages name it as
BeeDeck's own rather than "another program".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from beedeck.core import paths

SIGKILL = int(getattr(signal, "SIGKILL", signal.SIGTERM))
RECORDS = "servers"
_SAME_START_S = 2.0  # create times are rounded differently by platforms; a reused pid starts later
log = logging.getLogger(__name__)


def signal_group(pid: int, sig: int) -> None:
    if not hasattr(os, "killpg"):  # Windows: no process groups here; os.kill means TerminateProcess
        try:
            os.kill(pid, sig)
        except OSError:
            pass
        return
    try:
        os.killpg(pid, sig)  # start_new_session=True made pid the group id
    except ProcessLookupError:
        pass
    except PermissionError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def records_dir() -> Path:
    return paths.state_dir() / RECORDS


def _create_time(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


_OWNER: tuple[int, float] | None = None
def owner_identity() -> tuple[int, float]:
    """(pid, start time) of this BeeDeck process."""
    global _OWNER
    if _OWNER is None or _OWNER[0] != os.getpid():
        _OWNER = (os.getpid(), _create_time(os.getpid()) or time.time())
    return _OWNER


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    create_time: float
    engine: str
    port: int
    argv_hash: str
    owner_pid: int
    owner_create_time: float
    started: float
    owner_role: str = ""  # what the owning BeeDeck process is (set_role); "" in records of earlier versions

    def server_alive(self) -> bool:
        t = _create_time(self.pid)
        return t is not None and abs(t - self.create_time) <= _SAME_START_S

    def owner_alive(self) -> bool:
        t = _create_time(self.owner_pid)
        return t is not None and abs(t - self.owner_create_time) <= _SAME_START_S

    def mine(self) -> bool:
        return (self.owner_pid, self.owner_create_time) == owner_identity()

    def owner(self) -> str:
        """The owning BeeDeck process in words: "`beedeck serve` (pid N)"."""
        return f"{self.owner_role or 'another BeeDeck process'} (pid {self.owner_pid})"


def record_path(pid: int, folder: Path | None = None) -> Path:
    return (folder or records_dir()) / f"{pid}.json"


def write_record(path: Path, pid: int, engine: str, port: int, argv_hash: str) -> ServerRecord:
    owner, owner_t = owner_identity()
    rec = ServerRecord(pid, _create_time(pid) or time.time(), engine, port, argv_hash, owner, owner_t, time.time(),
                       paths.process_role())
    with contextlib.suppress(OSError):  # a read-only state folder must not stop the server
        paths.atomic_write_text(path, json.dumps(asdict(rec)))
    return rec


def read_record(path: Path) -> ServerRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ServerRecord(int(data["pid"]), float(data["create_time"]), str(data["engine"]), int(data["port"]),
                            str(data["argv_hash"]), int(data["owner_pid"]), float(data["owner_create_time"]),
                            float(data["started"]), str(data.get("owner_role", "")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("unreadable server record %s (%s): removed", path, exc)
        with contextlib.suppress(OSError):
            path.unlink()
        return None


def remove_record(path: Path, pid: int) -> None:
    rec = read_record(path)
    if rec is not None and rec.pid == pid:
        with contextlib.suppress(OSError):
            path.unlink()


def live_records(folder: Path | None = None) -> list[ServerRecord]:
    """Records of servers that still run (stale files of dead servers are removed on the way)."""
    folder = folder or records_dir()
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        rec = read_record(path)
        if rec is None:
            continue
        if rec.server_alive():
            out.append(rec)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return out


def sibling_on_port(port: int, folder: Path | None = None) -> ServerRecord | None:
    """A live server of another live BeeDeck session on ``port``, if any."""
    return next((r for r in live_records(folder) if r.port == port and not r.mine() and r.owner_alive()), None)


def stop_process(pid: int, timeout: float = 10.0) -> None:
    """SIGTERM the process group, SIGKILL it after ``timeout``."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    signal_group(pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        signal_group(pid, SIGKILL)
        with contextlib.suppress(psutil.TimeoutExpired):
            proc.wait(5)


def stop_leftovers(folder: Path | None = None, timeout: float = 10.0) -> list[str]:
    """Stop servers whose BeeDeck is gone; never a live session's. Returns what was done, for the log."""
    done = []
    for rec in live_records(folder):
        if rec.owner_alive():
            continue  # a sibling session's server (or this session's own): not ours to stop
        stop_process(rec.pid, timeout)
        with contextlib.suppress(OSError):
            record_path(rec.pid, folder).unlink()
        done.append(f"stopped a llama-server (pid {rec.pid}, port {rec.port}) left running by a BeeDeck that "
                    f"is gone (pid {rec.owner_pid})")
        log.info(done[-1])
    return done
