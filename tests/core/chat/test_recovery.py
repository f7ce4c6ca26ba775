"""Salvaging a damaged chat history keeps what the rows say, versions included (schema 3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from beedeck.core.chat.recovery import open_store
from beedeck.core.chat.store import ChatStore


def _damage_a_middle_page(db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db.read_bytes())
    page = 4096
    middle = len(data) // page // 2
    data[middle * page:(middle + 1) * page] = b"\x5a" * page
    db.write_bytes(bytes(data))


def test_versions_survive_a_salvage(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    store = ChatStore(db)
    conv = store.create_conversation("regenerated")
    store.add_message(conv.id, "user", "Write a function.")
    first = store.add_message(conv.id, "assistant", "first answer").id
    store.supersede_from(conv.id, first)
    second = store.add_message(conv.id, "assistant", "second answer").id
    filler = store.create_conversation("filler")  # pages enough that the damage misses the first chat
    for i in range(400):
        store.add_message(filler.id, "user", f"filler {i} " + "x" * 300)
    store.close()
    _damage_a_middle_page(db)
    fixed, rec = open_store(db)
    assert rec is not None and rec.conversations == 2
    assert [m.content for m in fixed.messages(conv.id)] == ["Write a function.", "second answer"]
    assert fixed.versions(second) == [first, second]  # the earlier answer is still one click away
    fixed.close()


def test_a_file_from_before_versions_recovers_every_message_shown(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES('schema_version', '2');"
        "CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT, system_prompt TEXT, created REAL, updated REAL);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, conversation_id INTEGER, role TEXT, content TEXT, stats TEXT,"
        " complete INTEGER, created REAL, reasoning TEXT NOT NULL DEFAULT '');"
        "INSERT INTO conversations VALUES(1, 'old', '', 1, 1);"
    )
    con.executemany("INSERT INTO messages VALUES(?, 1, ?, ?, '{}', 1, 1, '')",
                    [(i, "user" if i % 2 else "assistant", f"old message {i} " + "y" * 400) for i in range(1, 120)])
    con.commit()
    con.close()
    _damage_a_middle_page(db)
    fixed, rec = open_store(db)
    assert rec is not None and rec.messages > 80
    shown = fixed.messages(1)
    assert len(shown) == rec.messages and all(m.content.startswith("old message") for m in shown)
    fixed.close()
