"""Where the serving's jobs run (core/serving/jobs.py): in the order they came, off the caller's thread."""

from __future__ import annotations

import threading

from beedeck.core.serving import Inline, JobThread


def test_jobs_run_in_order_off_the_callers_thread() -> None:
    jobs, ran, gate = JobThread(), [], threading.Event()
    caller = threading.current_thread()

    def first() -> None:
        gate.wait(5)
        ran.append(("first", threading.current_thread() is not caller))

    jobs.submit(first)
    jobs.submit(lambda: ran.append(("second", threading.current_thread() is not caller)))
    assert jobs.busy() and ran == []  # submitting waits for nothing
    assert not jobs.wait(0.05)
    gate.set()
    assert jobs.wait(5) and not jobs.busy()
    assert ran == [("first", True), ("second", True)]


def test_inline_jobs_have_run_when_submitted() -> None:
    jobs, ran = Inline(), []
    jobs.submit(lambda: ran.append(1))
    assert ran == [1] and not jobs.busy() and jobs.wait()
