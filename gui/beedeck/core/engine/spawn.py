"""Start child processes that die with BeeDeck, however BeeDeck dies.

A server or build BeeDeck starts must not outlive it: not when the window closes (BeeDeck stops it),
not on SIGTERM or SIGHUP (signal handlers stop it), and not when BeeDeck is killed outright (SIGKILL,
an out-of-memory kill, a crash), where no handler runs. For that last case each child asks the Linux
kernel for SIGTERM when its parent goes (``PR_SET_PDEATHSIG``). The kernel ties that signal to the
*thread* that forked the child, not to the process: a server started from a short-lived worker thread
would be killed as soon as that thread ended. So every child is forked from one spawner thread that
lives as long as the process. Elsewhere (macOS, Windows) children are started directly.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from beedeck.core.secrets import child_env

PR_SET_PDEATHSIG = 1

_prctl: Callable[..., int] | None = None
if sys.platform.startswith("linux"):
    try:
        _prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        _prctl = None

_jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _spawner() -> None:
    while True:
        fn, fut = _jobs.get()
        if not fut.set_running_or_notify_cancel():
            continue
        try:
            fut.set_result(fn())
        except BaseException as exc:  # delivered to the caller, never lost on this thread
            fut.set_exception(exc)


def _ensure_thread() -> None:
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_spawner, name="beedeck-spawner", daemon=True)
            _thread.start()


def _die_with_parent(parent: int, death_signal: int = signal.SIGTERM) -> Callable[[], None]:
    prctl = _prctl

    def preexec() -> None:  # runs in the child between fork and exec: no imports, no locks
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(death_signal), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the request took effect
                os._exit(1)

    return preexec


# A tree of processes (cmake -> ninja -> a compiler per job) outlives a parent-death signal sent to
# its root alone: ninja puts every job in a process group of its own, and a dying cmake leaves them
# running. They all stay in the session the root started, though, so this guard (the session's
# leader, bound to BeeDeck by the parent-death signal) ends the whole session when it is signalled:
# SIGTERM to every member, SIGKILL to what is left after about 3 s.
_SESSION_GUARD = r"""
stop() {
  trap '' TERM HUP INT
  for sig in TERM TERM TERM TERM TERM TERM KILL; do
    left=0
    for d in /proc/[0-9]*; do
      pid=${d#/proc/}
      [ "$pid" = "$$" ] && continue
      read -r line < "$d/stat" 2>/dev/null || continue
      set -- ${line##*) }
      if [ "$4" = "$$" ]; then kill -$sig "$pid" 2>/dev/null && left=1; fi
    done
    [ $left = 0 ] && break
    sleep 0.5
  done
  exit 143
}
trap stop TERM HUP INT
"$@" &
wait $!
"""


def popen(argv: Sequence[str], *, session_guard: bool = False, **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **kwargs)``, from the spawner thread, with the child bound to this
    process's life on Linux. Pass ``start_new_session=True`` as usual for a process group.

    ``session_guard`` (with ``start_new_session``): the child is a tree of processes that must all go
    together (a build); a small shell guard leads the session and ends every member of it when
    BeeDeck dies or the guard is signalled. The exit status is the command's.

    The child's environment (``env``, else this process's) never carries BeeDeck's secrets
    (``secrets.child_env``).

    ``death_signal`` (a keyword, default SIGTERM): what the kernel sends when BeeDeck dies. SIGTERM lets a
    child stop in order, but a stopped child (SIGSTOP, a debugger) keeps it pending and lives on,
    orphaned: a child that has nothing to save when BeeDeck is gone (a llama-server) asks for SIGKILL,
    which ends it in any state."""
    kwargs["env"] = child_env(kwargs.get("env"))
    death_signal = int(kwargs.pop("death_signal", signal.SIGTERM))
    if _prctl is None:
        return subprocess.Popen(list(argv), **kwargs)
    if session_guard and kwargs.get("start_new_session") and os.path.exists("/bin/sh"):
        argv = ["/bin/sh", "-c", _SESSION_GUARD, "beedeck-build-guard", *argv]
    _ensure_thread()
    fut: Future[subprocess.Popen[Any]] = Future()
    parent = os.getpid()
    _jobs.put((lambda: subprocess.Popen(list(argv), preexec_fn=_die_with_parent(parent, death_signal), **kwargs), fut))
    return fut.result()


def binds_children() -> bool:
    """True where children die with BeeDeck even when it is killed (Linux)."""
    return _prctl is not None
