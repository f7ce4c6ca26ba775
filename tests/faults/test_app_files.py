"""Faults: BeeDeck's own files damaged between runs (a crash, a bad disk, a hand edit).

Every file BeeDeck reads back is checked; a bad one is kept aside under a name no earlier one has,
the app goes on, and the person at the window (or the terminal) is told what was kept and where.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core import paths
from beedeck.core.chat.recovery import open_store
from beedeck.core.chat.store import ChatStore, default_path
from beedeck.core.engine.probe import probe_engine, release_of, sidecar_path, write_release
from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin
from beedeck.core.engine.speculation.switching import PerRequestMemory
from beedeck.core.starter import starter_model
from beedeck.ui.window import app as app_mod
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fakes.fake_nvml import detect_no_gpu

from .conftest import Beedeck, place_starter


def _window(qtbot: QtBot) -> app_mod.MainWindow:
    window = app_mod.build_window(no_autostart=True, detect=detect_no_gpu)
    qtbot.addWidget(window)
    return window


def _notice(window: app_mod.MainWindow) -> str:
    assert window.notices.isVisibleTo(window), "no notice in the window"
    return window.notices.text()


@pytest.mark.parametrize("text", ["{not json", '{"engine": "/x", "settings": ["x"]}',
                                  '{"engine": "/x", "settings": {"ctx_size": -5}}'],
                         ids=["garbage", "wrong-types", "out-of-range"])
def test_a_damaged_profile_is_kept_aside_and_the_window_opens(qtbot: QtBot, beedeck_home: Path, text: str,
                                                              starter_model_path: Path) -> None:
    place_starter(beedeck_home, starter_model_path)
    path = paths.config_dir() / "profile.json"
    path.write_text(text)
    window = _window(qtbot)
    notice = _notice(window)
    assert "saved launch profile could not be used" in notice and "kept as" in notice
    (kept,) = path.parent.glob("profile.json.corrupt-*")
    assert kept.read_text() == text  # the user's file, byte for byte
    qtbot.waitUntil(lambda: window.session.profile is not None, timeout=30_000)  # the starter takes its place
    window.close()


def test_a_damaged_settings_file_is_kept_aside_and_the_defaults_used(qtbot: QtBot, beedeck_home: Path) -> None:
    path = paths.config_dir() / "settings.json"
    path.write_text('{"theme": 42, "chat_font_pt": "huge"')
    window = _window(qtbot)
    assert "settings" in _notice(window).lower() and "kept" in _notice(window)
    assert [p.read_text() for p in path.parent.glob("settings.json.corrupt-*")] == ['{"theme": 42, "chat_font_pt": "huge"']
    window.close()


def test_a_damaged_engine_list_is_kept_aside_and_said_in_the_window_and_the_cli(
        qtbot: QtBot, beedeck: Beedeck) -> None:
    reg = EngineRegistry()
    reg.save(EngineRecord(id="good", origin=Origin.EXISTING, binary=str(beedeck.engine)))
    (reg.root / "broken").mkdir()
    (reg.root / "broken" / "manifest.json").write_text("{half a manifest")
    (reg.root / "registry.json").write_text("[not an object]")
    done = beedeck.run("engine", "list")
    assert done.returncode == 0 and "good" in done.stdout
    assert "could not be read" in done.stderr and "beedeck engine add" in done.stderr
    assert len(list((reg.root / "broken").glob("manifest.json.corrupt-*"))) == 1
    assert len(list(reg.root.glob("registry.json.corrupt-*"))) == 1
    (reg.root / "broken" / "manifest.json").write_text("{damaged again")  # a second time: a second copy
    window = _window(qtbot)
    assert "engine manifest" in _notice(window) and "kept as" in _notice(window)
    assert len(list((reg.root / "broken").glob("manifest.json.corrupt-*"))) == 2
    window.close()


def _fill_history(path: Path, conversations: int = 3, messages: int = 60) -> None:
    store = ChatStore(path)
    for c in range(conversations):
        conv = store.create_conversation(f"chat {c}")
        for m in range(messages):
            store.add_message(conv.id, "user" if m % 2 == 0 else "assistant", f"message {m} of chat {c} " + "x" * 300)
    store.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def test_a_chat_history_with_a_corrupt_page_in_the_middle_is_salvaged_and_said(qtbot: QtBot,
                                                                                beedeck_home: Path) -> None:
    db = default_path()
    _fill_history(db)
    page = 4096
    data = bytearray(db.read_bytes())
    middle = len(data) // page // 2
    data[middle * page:(middle + 1) * page] = b"\xa5" * page  # one page of noise, the rest intact
    db.write_bytes(bytes(data))
    window = _window(qtbot)
    notice = _notice(window)
    assert "The chat history was damaged" in notice and "kept the damaged file as" in notice
    assert "recovered 3 conversation(s)" in notice and "could not be read" in notice
    store = window.store
    recovered = sum(len(store.messages(c.id)) for c in store.list_conversations())
    assert 150 <= recovered < 180  # one page of rows lost, every other row kept
    assert store.list_conversations("message 7 of chat") != []  # search works again
    (aside,) = (p for p in db.parent.glob("chats.sqlite3.damaged-*") if not p.name.endswith(("-wal", "-shm")))
    assert aside.read_bytes() == bytes(data)  # the damaged file itself is kept for the user
    window.close()


def test_a_chat_history_that_is_not_a_database_is_kept_aside(qtbot: QtBot, beedeck_home: Path) -> None:
    db = default_path()
    db.write_bytes(b"not a database at all " * 200)
    window = _window(qtbot)
    assert "The chat history was damaged" in _notice(window) and "recovered 0 conversation(s)" in _notice(window)
    assert window.store.list_conversations() == [] or window.store.list_conversations()[0].title == "New chat"
    kept = [p for p in db.parent.glob("chats.sqlite3.damaged-*") if not p.name.endswith(("-wal", "-shm"))]
    assert [p.read_bytes() for p in kept] == [b"not a database at all " * 200]
    window.close()


def test_a_chat_history_from_a_newer_beedeck_is_kept_aside_untouched(qtbot: QtBot, beedeck_home: Path) -> None:
    db = default_path()
    ChatStore(db).close()
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    original = db.read_bytes()
    window = _window(qtbot)
    assert "newer" in _notice(window) and "copy it back when it can be read" in _notice(window)
    (kept,) = (p for p in db.parent.glob("chats.sqlite3.unreadable-*") if not p.name.endswith(("-wal", "-shm")))
    assert kept.read_bytes() == original
    window.close()


def test_a_damaged_probe_cache_is_probed_again(starter_engine_path: Path) -> None:
    first = probe_engine(str(starter_engine_path), use_cache=False)
    from beedeck.core.engine import probe as probe_mod

    probe_mod._memory_cache.clear()
    (cache,) = (paths.cache_dir() / "probe").glob("*.json")
    cache.write_text('{"schema": 1, "key": ["x"], "caps": 3')
    again = probe_engine(str(starter_engine_path))
    assert again.flags == first.flags and again.generation == first.generation
    assert json.loads(cache.read_text())["caps"]  # rewritten whole


def test_damaged_sidecars_and_caches_count_as_unknown(tmp_path: Path, starter_engine_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_bytes(b"")
    write_release(binary, "v0.4.3")
    sidecar_path(binary).write_text("{\x00garbage")
    assert release_of(binary) == ""  # unknown release: the planner and guard fall back to the binary's --version
    memory = PerRequestMemory(tmp_path / "per-request.json")
    memory.path.write_text("[1, 2")
    caps = probe_engine(str(starter_engine_path))
    assert memory.get(caps) is None  # unknown: the toggle restarts the server until it is measured again


def test_a_damaged_partial_download_record_restarts_the_file_cleanly(beedeck: Beedeck) -> None:
    data = bytes(range(256)) * 8000
    dest = beedeck.workdir / "models"
    dest.mkdir()
    (dest / "m.gguf.part").write_bytes(b"bytes of who knows what" * 100)
    (dest / "m.gguf.part.json").write_text("{\"url\": ")  # cut off mid-write by a crash
    with FakeHub() as hub:
        hub.add_repo("org/m-GGUF", {"m.gguf": FakeFile(data)})
        done = beedeck.run("models", "get", "org/m-GGUF", "m.gguf", "--dest", str(dest), HF_ENDPOINT=hub.endpoint,
                           HF_HOME=str(beedeck.workdir / "hf"))
        assert [r.headers.get("range") for r in hub.cdn_gets()] == [None]  # the unknown bytes were not resumed
    assert done.returncode == 0, done.stderr
    assert (dest / "m.gguf").read_bytes() == data


def test_a_damaged_starter_check_stamp_is_checked_again(beedeck_home: Path, starter_model_path: Path) -> None:
    place_starter(beedeck_home, starter_model_path)
    stamp = paths.models_dir() / "starter" / (starter_model_path.name + ".verified.json")
    stamp.write_text("{not json")
    model = starter_model()
    assert model.resolve() == starter_model_path.resolve()  # re-hashed, found good, not rebuilt
    assert json.loads(stamp.read_text())["size"] == starter_model_path.stat().st_size


def test_a_damaged_server_record_is_dropped_and_serve_still_works(beedeck: Beedeck) -> None:
    records = beedeck.home / "state" / "servers"
    records.mkdir(parents=True)
    (records / "12345.json").write_text("{\"pid\": ")
    done = beedeck.run("serve", *beedeck.starter_args(), "--exit-when-ready")
    assert done.returncode == 0, done.stderr
    assert not (records / "12345.json").exists()


def test_a_chat_store_opened_twice_by_two_windows_keeps_both_writes(beedeck_home: Path) -> None:
    """Two BeeDeck windows on one history (sqlite's locking in WAL mode): no write is lost."""
    a, _ = open_store()
    b, _ = open_store()
    ca = a.create_conversation("from window A")
    cb = b.create_conversation("from window B")
    a.add_message(ca.id, "user", "hello from A")
    b.add_message(cb.id, "user", "hello from B")
    titles = {c.title for c in ChatStore().list_conversations()}
    assert titles == {"from window A", "from window B"}
    a.close()
    b.close()
