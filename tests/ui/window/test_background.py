"""run_in_background: the job runs off the GUI thread; the result or error comes back on it."""

from __future__ import annotations

import threading

import pytest
import shiboken6
from PySide6.QtCore import QThreadPool
from pytestqt.qtbot import QtBot

from beedeck.ui.background import run_in_background


def test_result_arrives_on_the_gui_thread(qtbot: QtBot) -> None:
    pool = QThreadPool()
    gui = threading.current_thread()
    ran_on: list[threading.Thread] = []
    got: list[tuple[object, threading.Thread]] = []

    def job() -> int:
        ran_on.append(threading.current_thread())
        return 42

    run_in_background(job, lambda r: got.append((r, threading.current_thread())), pool=pool)
    qtbot.waitUntil(lambda: bool(got), timeout=5000)
    assert got == [(42, gui)] and ran_on[0] is not gui
    pool.waitForDone()


def test_error_arrives_with_its_traceback(qtbot: QtBot) -> None:
    pool = QThreadPool()
    errors: list[BaseException] = []

    def job() -> None:
        raise FileNotFoundError("no engine at /x: pick one in Settings")

    run_in_background(job, lambda r: pytest.fail("must not succeed"), errors.append, pool=pool)
    qtbot.waitUntil(lambda: bool(errors), timeout=5000)
    assert isinstance(errors[0], FileNotFoundError)
    assert "FileNotFoundError" in errors[0].__beedeck_traceback__  # type: ignore[attr-defined]
    pool.waitForDone()


def test_result_for_a_destroyed_owner_is_dropped(qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QLabel

    pool = QThreadPool()
    release = threading.Event()
    got: list[object] = []
    alive: list[object] = []
    owner = QLabel("window that will close")
    run_in_background(lambda: release.wait(5) and 1, got.append, got.append, pool=pool, owner=owner)
    run_in_background(lambda: release.wait(5) and 2, alive.append, pool=pool)
    owner.deleteLater()
    qtbot.waitUntil(lambda: not shiboken6.isValid(owner), timeout=5000)
    release.set()
    qtbot.waitUntil(lambda: bool(alive), timeout=5000)  # a job without an owner still reports
    pool.waitForDone()
    qtbot.wait(50)  # let any queued delivery run: there must be none for the dead owner
    assert got == [] and alive == [2]
