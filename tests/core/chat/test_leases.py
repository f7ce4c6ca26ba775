"""A window's lease on the chat it shows: one window per chat, a crashed window's lease gone with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from beedeck.core.chat.leases import ChatLeases

HOLDER = """
import sys, time
from pathlib import Path
from beedeck.core import paths
from beedeck.core.chat.leases import ChatLeases
paths.set_role("a BeeDeck window")
leases = ChatLeases(Path(sys.argv[1]))
assert leases.take(int(sys.argv[2])) is None
print("held", flush=True)
time.sleep(600)
"""


def test_two_windows_never_hold_one_chat_and_closing_frees_it(tmp_path: Path) -> None:
    history = tmp_path / "chats.sqlite3"
    first, second = ChatLeases(history), ChatLeases(history)  # two windows of one process conflict too
    assert first.take(1) is None and first.held == 1
    assert second.take(1) == f"another BeeDeck process (pid {os.getpid()})" and second.held is None
    assert second.holder(1) is not None and first.holder(1) is None  # its own chat is nobody else's
    assert second.take(2) is None
    assert first.take(2) is not None and first.held == 1  # refused: it keeps the chat it had
    first.release()
    assert second.holder(1) is None and second.take(1) is None and second.held == 1
    assert first.take(2) is None  # the second window gave chat 2 up when it took chat 1


def test_a_killed_windows_lease_is_gone_with_it(tmp_path: Path) -> None:
    history = tmp_path / "chats.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(history), "7"], stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"held"
        mine = ChatLeases(history)
        assert mine.take(7) == f"a BeeDeck window (pid {child.pid})"
        child.send_signal(signal.SIGKILL)  # no handler runs: the kernel drops its lock
        child.wait(10)
        assert mine.take(7) is None and mine.held == 7
    finally:
        child.kill()
        child.wait(10)


def test_a_history_in_memory_has_no_leases() -> None:
    memory = ChatLeases(Path(":memory:"))
    assert memory.take(1) is None and ChatLeases(Path(":memory:")).take(1) is None and memory.folder is None
