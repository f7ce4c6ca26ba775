"""A mode switch that keeps the conversation, when keeping it fails: the real window on the real starter engine
(mainline b11434, CPU), Baseline -> N-gram by restart (the 24 GB case: nothing kept loaded beside). Whatever
breaks the carried cache (core/serving/slot_carry.py), the switch goes on, the next reply reads the
conversation again as before, the toggle says so once, and no cache file is left behind."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from beedeck.core import paths
from beedeck.core.engine.client import SlotFile
from beedeck.core.engine.mode import Mode
from beedeck.core.serving import SlotCarry
from tests.fixtures.llama_server import send

from .conftest import Tmpfs

QUESTION = "Tell me about bees and their decks. " * 60  # about 500 tokens to carry
REREAD = "the next reply reads the conversation again"


def _switch_after_a_long_turn(qtbot: Any, window: Any, before_click: Callable[[], None]) -> tuple[dict[str, Any], str]:
    """One long turn on Baseline, ``before_click``, then the click on N-gram (a restart) and one more turn: that
    turn's facts and what the toggle said after the switch."""
    window.session.server.standby = False  # a 24 GB card: no room beside, the switch restarts
    window.chat.max_tokens = 16
    first = send(qtbot, window, QUESTION, 16, 180_000)
    assert first["prompt_n"] > 400, first
    before_click()
    with qtbot.waitSignal(window.session.switching.mode_changed, timeout=120_000):
        assert window.session.request_mode(Mode.MODEL_FREE) is True
    said = window.mode.status.line()  # the whole line (the label elides what does not fit)
    after = send(qtbot, window, "Go on.", 16, 180_000)
    return after, said


def _slots() -> Path:
    return paths.state_dir() / "slots"


def _no_cache_files() -> bool:
    return not list(_slots().glob("carry-*.bin")) if _slots().is_dir() else True


def test_a_slot_save_that_fails_keeps_the_switch_and_says_so(qtbot: Any, starter_window: Any) -> None:
    window = starter_window()

    def break_folder() -> None:  # the engine's folder becomes a file: its save cannot open the file it writes
        shutil.rmtree(_slots())
        _slots().write_text("not a folder")

    after, said = _switch_after_a_long_turn(qtbot, window, break_folder)
    assert "N-gram: restarted the server" in said and "could not be kept (the engine did not save it:" in said, said
    assert "Unable to save slot" in said and said.endswith(REREAD)
    assert after["mode"] == "model-free" and after["prompt_n"] > 400, after  # read again, as said
    assert _slots().read_text() == "not a folder"  # nothing of BeeDeck's written over it


def test_a_full_disk_keeps_the_switch_and_says_so(qtbot: Any, starter_window: Any, small_disk: Tmpfs,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    window = starter_window()

    def fill() -> None:  # the slot folder on a disk with 1 MB left
        shutil.rmtree(_slots())
        os.symlink(small_disk.path, _slots())
        small_disk.fill(leave=1 << 20)
        if not small_disk.real:  # no tmpfs here: the free space a full disk would report
            real = shutil.disk_usage
            monkeypatch.setattr("beedeck.core.serving.slot_carry.shutil.disk_usage",
                                lambda p: real(p)._replace(free=1 << 20) if Path(p) == _slots() else real(p))

    after, said = _switch_after_a_long_turn(qtbot, window, fill)
    assert "could not be kept (the disk has 0.0 GiB free and the cache may take up to" in said, said
    assert "BeeDeck keeps 1 GiB free" in said and said.endswith(REREAD)
    assert after["prompt_n"] > 400 and _no_cache_files()
    assert not [p for p in small_disk.path.iterdir() if p.name.startswith("carry-")]


def _wrap_slot_client(window: Any, before_restore: Callable[[str], None]) -> Callable[[], None]:
    """A step that makes the window's slot client call ``before_restore(filename)`` before each restore (then the
    real restore, on the real engine)."""
    carry = window.session.server.parts.restart_steps
    assert isinstance(carry, SlotCarry)
    engine_client = carry._client

    class Wrapped:
        def __init__(self, url: str, key: str | None) -> None:
            self.real = engine_client(url, key)

        def slot_file(self, slot: int, action: str, filename: str) -> SlotFile:
            if action == "restore":
                before_restore(filename)
            return self.real.slot_file(slot, action, filename)

    return lambda: setattr(carry, "_client", Wrapped)


def test_a_cache_file_cut_before_the_restore_is_never_handed_to_the_engine(qtbot: Any, starter_window: Any) -> None:
    """mainline b11434 aborts on a cut state file (GGML_ASSERT in state_seq_load_file, measured): BeeDeck checks
    the file is the one the engine wrote before it asks for the restore."""
    window = starter_window()
    restores: list[str] = []

    def cut(filename: str) -> None:
        restores.append(filename)

    def cut_now() -> None:  # cut the file as soon as it is written, before the new server is even started
        _wrap_slot_client(window, cut)()
        carry = window.session.server.parts.restart_steps
        real_save = carry._save

        def save_then_cut(restart: Any, running: Any, folder: Path) -> None:
            real_save(restart, running, folder)
            for path in folder.glob("carry-*.bin"):
                with path.open("r+b") as fh:
                    fh.truncate(path.stat().st_size // 2)

        carry._save = save_then_cut

    after, said = _switch_after_a_long_turn(qtbot, window, cut_now)
    assert "could not be kept (the saved file holds" in said and "the engine wrote)" in said, said
    assert restores == [] and said.endswith(REREAD) and after["prompt_n"] > 400 and _no_cache_files()


def test_an_engine_that_dies_restoring_the_cache_is_started_again(qtbot: Any, starter_window: Any) -> None:
    """The new server killed at the restore (as a cut file kills mainline): the switch starts it once more
    without the cache and says so; the chat goes on."""
    window = starter_window()
    killed: list[int] = []

    def kill(_filename: str) -> None:
        pid = window.session.server.proc.pid
        killed.append(pid)
        os.kill(pid, signal.SIGKILL)

    after, said = _switch_after_a_long_turn(qtbot, window, _wrap_slot_client(window, kill))
    assert "could not be kept (the new server stopped while restoring it (" in said and "so it was started again" in said
    assert said.endswith(REREAD) and after["mode"] == "model-free" and after["prompt_n"] > 400, (said, after)
    assert killed and window.session.server.proc.pid != killed[0] and _no_cache_files()
    assert not window.failure.isVisibleTo(window)  # no failure panel: the switch went on
