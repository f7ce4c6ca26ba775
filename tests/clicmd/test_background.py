"""Ctrl-C during `beedeck bench` / `beedeck tune`: the work is cancelled, never abandoned. A real SIGINT
is sent to this (the main) thread while it waits, as a terminal would."""

from __future__ import annotations

import signal
import threading
import time

from beedeck.clicmd.background import run_interruptible


def _sigint_after(delay: float) -> threading.Timer:
    timer = threading.Timer(delay, lambda: signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_cancels_and_waits_for_the_works_own_result() -> None:
    cancel = threading.Event()
    finished_after_cancel: list[bool] = []

    def work() -> str:
        cancel.wait(30)
        time.sleep(0.5)  # the work stops its server and writes what it has: the caller must wait for it
        finished_after_cancel.append(True)
        return "partial report"

    timers = [_sigint_after(0.3), _sigint_after(0.6)]  # two presses: still one clean wait
    out = run_interruptible(work, cancel, "test-work")
    for t in timers:
        t.join()
    assert out.interrupted and cancel.is_set() and out.error is None
    assert out.result == "partial report" and finished_after_cancel == [True]
    assert not [t for t in threading.enumerate() if t.name == "test-work"]


def test_an_error_in_the_work_reaches_the_caller() -> None:
    def work() -> None:
        raise OSError("disk full")

    out = run_interruptible(work, threading.Event(), "test-work")
    assert isinstance(out.error, OSError) and not out.interrupted and out.result is None
