"""Faults: the disk fills up, on a real (24 MB tmpfs) file system where the machine allows mounting
one, else by an injected ENOSPC at the same place. Whatever was written before stays; what could not
be written is kept in memory and written once there is room; the message says which disk and what to do.
"""

from __future__ import annotations

import errno
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.download import DiskFullError, download_file
from tests.fakes.fake_hub import FakeFile, FakeHub

from .conftest import Beedeck, Tmpfs

DATA = random.Random(11).randbytes(6_000_000)


def test_a_download_that_cannot_fit_is_refused_before_a_byte_is_fetched(beedeck: Beedeck, small_disk: Tmpfs) -> None:
    # On the 24 MB disk the 6 MB file does not fit with BeeDeck's headroom; without one, a file the hub
    # says is 6 TB fits on no disk. Either way the check is the real one, against the real file system.
    claimed = None if small_disk.real else 6_000_000_000_000
    with FakeHub() as hub:
        hub.add_repo("org/m-GGUF", {"m.gguf": FakeFile(DATA, claimed_size=claimed)})
        done = beedeck.run("models", "get", "org/m-GGUF", "m.gguf", "--dest", str(small_disk.path),
                           HF_ENDPOINT=hub.endpoint, HF_HOME=str(beedeck.workdir / "hf"))
        assert hub.cdn_gets() == []
    assert done.returncode == 1
    need = "6.0 MB" if small_disk.real else "6.0 TB"
    assert f"Not enough disk space in {small_disk.path}: the download needs {need} more" in done.stderr
    assert "free some space or choose another download folder, then retry" in done.stderr


class _RoomFor:
    """``open`` for the download module, where no tmpfs can be mounted: files written through it take
    ``room`` bytes, then fail with ENOSPC as a full disk does."""

    def __init__(self, room: int) -> None:
        self.room = room

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fh = open(*args, **kwargs)
        outer = self

        class Full:
            def __enter__(self) -> Full:
                return self

            def __exit__(self, *exc: object) -> None:
                fh.close()

            def write(self, data: bytes) -> int:
                if len(data) > outer.room:
                    raise OSError(errno.ENOSPC, "No space left on device")
                outer.room -= len(data)
                return int(fh.write(data))

            def __getattr__(self, name: str) -> Any:
                return getattr(fh, name)

        return Full()


def test_a_disk_that_fills_during_a_download_keeps_the_part_and_resumes(small_disk: Tmpfs,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import beedeck.core.download as dl

    f = FakeFile(DATA)
    ballast: list[Path] = []

    def fill_once(done: int, total: int | None) -> None:
        if done and not ballast and small_disk.real:
            ballast.append(small_disk.fill())  # the rest of the disk, taken by "another program"

    if not small_disk.real:
        monkeypatch.setattr(dl, "open", _RoomFor(1_000_000), raising=False)
    dest = small_disk.path / "m.gguf"
    with FakeHub() as hub:
        hub.add_repo("org/m-GGUF", {"m.gguf": f})
        hub.cdn.throttle_bps = 4_000_000  # progress arrives before the body is complete
        url = f"{hub.cdn_url}/blobs/{f.sha256}"
        with pytest.raises(DiskFullError) as err:
            download_file(url, dest, expected_sha256=f.sha256, expected_size=len(DATA), on_progress=fill_once,
                          disk_margin=0, sleep=lambda s: None)
        assert str(err.value) == ("The disk filled up while downloading m.gguf: free some space and retry; the part "
                                  "already downloaded is kept and the download resumes.")
        part = dest.with_name(dest.name + ".part")
        kept = part.stat().st_size
        assert 0 < kept < len(DATA) and DATA.startswith(part.read_bytes())  # what arrived is kept, intact
        for b in ballast:
            b.unlink()
        monkeypatch.undo()
        hub.cdn.throttle_bps = 0
        download_file(url, dest, expected_sha256=f.sha256, expected_size=len(DATA), disk_margin=0)
        assert hub.cdn_gets()[-1].headers["range"] == f"bytes={kept}-"
    assert dest.read_bytes() == DATA


class _FullDatabase:
    """Where no tmpfs can be mounted: the connection answers writes with sqlite's own full-disk error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")
        return self.db.execute(sql, *args)

    def __enter__(self) -> Any:
        return self.db.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self.db.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)


@pytest.mark.engine
def test_a_disk_that_fills_while_a_reply_streams_keeps_the_reply_and_saves_it_later(
        qtbot: QtBot, starter_window: Any, small_disk: Tmpfs) -> None:
    store = ChatStore(small_disk.path / "chats.sqlite3")
    window = starter_window(store)
    chat = window.chat
    chat.max_tokens = 200
    chat.input.setPlainText("Count from 1 to 100, one number per line.")
    chat.send_button.click()
    qtbot.waitUntil(lambda: chat.view.current_reply() is not None and len(chat.view.current_reply().content) > 10,
                    timeout=120_000)
    if small_disk.real:
        ballast = small_disk.fill()
    else:
        store._db = _FullDatabase(store._db)  # type: ignore[assignment]
    with qtbot.waitSignal(chat.reply_finished, timeout=120_000):
        pass
    assert chat.notice.isVisible()
    assert "The disk holding the chat history is full" in chat.notice.text()
    assert "saved once there is room" in chat.notice.text()
    assert chat.has_unsaved()
    shown = chat.view.current_reply() or chat.view.messages()[-1]
    if small_disk.real:
        ballast.unlink()
    else:
        store._db = store._db.db  # type: ignore[attr-defined]
    qtbot.waitUntil(lambda: not chat.has_unsaved(), timeout=15_000)  # the retry timer saved it
    assert chat.notice.text() == "The reply that could not be saved is saved now."
    saved = store.messages(chat.conversation_id)[-1]
    assert saved.role == "assistant" and saved.complete and saved.content == shown.content
    assert sqlite3.connect(store.path).execute("PRAGMA quick_check").fetchone()[0] == "ok"
