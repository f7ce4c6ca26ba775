"""Which llama-servers BeeDeck owns: the pid file each server writes, and what to do with a server
a previous BeeDeck run left behind. Also the process-group signalling the server wrapper uses.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from beedeck.core import paths

SIGKILL = int(getattr(signal, "SIGKILL", signal.SIGTERM))


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


def adopt_or_stop_leftover(pid_file: Path | None = None, *, stop: bool = True, timeout: float = 10.0) -> str:
    """Deal with a server a previous BeeDeck run left behind.

    Returns "none" (no pid file), "stale" (the process is gone or is not that engine: the file was
    removed), "stopped" (it was still running and is now stopped) or "adoptable" (``stop=False``
    and it still runs; the file is kept).
    """
    import psutil

    pid_file = pid_file if pid_file is not None else paths.state_dir() / "server.pid"
    try:
        record = json.loads(pid_file.read_text())
        pid = int(record["pid"])
        engine = str(record["engine"])
    except FileNotFoundError:
        return "none"
    except (OSError, ValueError, KeyError, TypeError):
        pid_file.unlink(missing_ok=True)
        return "stale"
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
        matches = bool(cmdline) and (cmdline[0] == engine or os.path.basename(cmdline[0]) == os.path.basename(engine)) \
            and proc.create_time() <= float(record.get("started", time.time())) + 5
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        matches = False
    if not matches:
        pid_file.unlink(missing_ok=True)
        return "stale"
    if not stop:
        return "adoptable"
    signal_group(pid, signal.SIGTERM)
    try:
        proc.wait(timeout)
    except psutil.TimeoutExpired:
        signal_group(pid, SIGKILL)
        try:
            proc.wait(5)
        except psutil.TimeoutExpired:
            pass
    pid_file.unlink(missing_ok=True)
    return "stopped"
