"""The task runner: a core callable on its own QThread with the callback protocol turned into signals, or (a short
task that changes what the GUI thread owns, such as the setup's save) on the caller's thread with the same
signals."""

from __future__ import annotations

import threading
from typing import Any

from pytestqt.qtbot import QtBot

from beedeck.ui.setup.task_runner import TaskRunner


def _task(seen: list[threading.Thread], fail: bool = False) -> Any:
    def run(*, on_progress: Any, on_line: Any, cancel_event: threading.Event) -> str:
        seen.append(threading.current_thread())
        on_progress(3 << 30, 6 << 30)  # byte counts past a C int: scaled, in proportion
        on_line("half way")
        if fail:
            raise OSError("disk full")
        return "done"

    return run


def test_a_task_runs_on_a_worker_or_here_with_the_same_signals(qtbot: QtBot) -> None:
    runner = TaskRunner()
    for here in (False, True):
        seen: list[threading.Thread] = []
        progress: list[tuple[int, int]] = []
        lines: list[str] = []
        runner.progress_changed.connect(lambda d, t, out=progress: out.append((d, t)))
        runner.line_received.connect(lines.append)
        with qtbot.waitSignal(runner.finished, timeout=10_000) as finished:
            runner.start(_task(seen), here=here)
        assert finished.args == ["done"] and lines == ["half way"] and not runner.is_running()
        assert progress and progress[-1][0] * 2 == progress[-1][1]
        assert (seen[0] is threading.main_thread()) == here
        runner.progress_changed.disconnect()
        runner.line_received.disconnect()


def test_a_task_that_fails_here_is_said_as_a_failure(qtbot: QtBot) -> None:
    runner = TaskRunner()
    with qtbot.waitSignal(runner.failed, timeout=10_000) as failed:
        runner.start(_task([], fail=True), here=True)
    assert failed.args == ["disk full"] and isinstance(runner.last_error, OSError)
