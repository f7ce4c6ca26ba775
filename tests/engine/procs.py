"""Process helpers of the real-engine tests: whether a process outlived its test, and stopping one
that a test started itself."""

from __future__ import annotations

import subprocess

import psutil


def pid_alive(pid: int | None) -> bool:
    """Whether process ``pid`` still runs (a zombie, not yet reaped, does not count)."""
    if pid is None:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc`` if it still runs; kill it when it has not ended 15 s later."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
