"""The chat store on a real SQLite file: CRUD, search, export, migrations, and crash durability."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from beedeck.core.chat.store import SCHEMA_VERSION, ChatStore, ChatStoreError, default_path


def test_lives_in_the_data_folder_with_wal(beedeck_home: Path) -> None:
    store = ChatStore()
    assert store.path == default_path() == beedeck_home / "data" / "chats.sqlite3"
    mode = store._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert store.schema_version == SCHEMA_VERSION
    store.close()


def test_conversation_roundtrip_and_order(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    a = store.create_conversation("First", "be terse")
    b = store.create_conversation("Second")
    store.add_message(a.id, "user", "hello")  # touching a moves it to the top
    assert [c.id for c in store.list_conversations()] == [a.id, b.id]
    reply = store.add_message(a.id, "assistant", "", {"mode": "dflash"}, complete=False)
    store.update_message(reply.id, "Hi there")
    msgs = store.messages(a.id)
    assert [(m.role, m.content, m.complete) for m in msgs] == [("user", "hello", True), ("assistant", "Hi there", False)]
    assert msgs[1].stats == {"mode": "dflash"}
    store.update_message(reply.id, "Hi there!", {"tokens": 3, "tps": 12.5}, complete=True)
    last = store.messages(a.id)[-1]
    assert (last.content, last.stats["tokens"], last.complete) == ("Hi there!", 3, True)
    store.rename(a.id, "Renamed")
    store.set_system_prompt(a.id, "be kind")
    conv = store.conversation(a.id)
    assert conv is not None and (conv.title, conv.system_prompt) == ("Renamed", "be kind")


def test_search_matches_titles_and_message_text(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    a = store.create_conversation("Rust lifetimes")
    b = store.create_conversation("Groceries")
    store.add_message(b.id, "user", "how do I write a Python decorator?")
    assert [c.id for c in store.list_conversations("rust")] == [a.id]
    assert [c.id for c in store.list_conversations("DECORATOR")] == [b.id]
    assert store.list_conversations("nothing-like-this") == []


def test_delete_cascades_and_truncate_from(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation()
    ids = [store.add_message(c.id, r, t).id for r, t in [("user", "1"), ("assistant", "2"), ("user", "3"), ("assistant", "4")]]
    store.delete_messages_from(c.id, ids[2])
    assert [m.content for m in store.messages(c.id)] == ["1", "2"]
    store.delete_conversation(c.id)
    assert store.conversation(c.id) is None
    assert store._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


def test_export_markdown_and_json(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation("Sorting", "You are a helpful coder.")
    store.add_message(c.id, "user", "sort a list")
    store.add_message(c.id, "assistant", "```python\nsorted(xs)\n```", {"tps": 40.0})
    store.add_message(c.id, "assistant", "partial", complete=False)
    md = store.export_markdown(c.id)
    assert md.startswith("# Sorting")
    assert "**System:** You are a helpful coder." in md
    assert "## You\n\nsort a list" in md
    assert "```python\nsorted(xs)\n```" in md
    assert "## Assistant *(interrupted)*" in md
    data = json.loads(store.export_json(c.id))
    assert data["format"] == "beedeck-chat" and data["title"] == "Sorting"
    assert [m["role"] for m in data["messages"]] == ["user", "assistant", "assistant"]
    assert data["messages"][1]["stats"] == {"tps": 40.0}
    with pytest.raises(KeyError):
        store.export_json(9999)


def test_migrates_an_unversioned_file_and_refuses_a_newer_one(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    sqlite3.connect(path).close()  # an empty file, as an older/never-initialised one would be
    store = ChatStore(path)
    assert store.schema_version == SCHEMA_VERSION
    store.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(ChatStoreError, match="newer BeeDeck"):
        ChatStore(path)


def test_garbage_file_gives_a_readable_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ChatStoreError, match="move the file aside"):
        ChatStore(path)


def test_streamed_text_survives_a_hard_crash(tmp_path: Path) -> None:
    """A process that dies mid-reply (os._exit, no close) leaves the last throttled update on disk."""
    path = tmp_path / "c.sqlite3"
    code = (
        "import os, sys\n"
        "from beedeck.core.chat.store import ChatStore\n"
        "s = ChatStore(__import__('pathlib').Path(sys.argv[1]))\n"
        "c = s.create_conversation()\n"
        "m = s.add_message(c.id, 'assistant', '', complete=False)\n"
        "for i in range(1, 50):\n"
        "    s.update_message(m.id, 'tok ' * i)\n"
        "os._exit(9)\n"
    )
    rc = subprocess.run([sys.executable, "-c", code, str(path)], check=False, timeout=60).returncode
    assert rc == 9
    store = ChatStore(path)
    (msg,) = store.messages(store.list_conversations()[0].id)
    assert msg.content == "tok " * 49
    assert msg.complete is False


def test_thinking_is_stored_updated_and_exported(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation("Why")
    store.add_message(c.id, "user", "why?")
    reply = store.add_message(c.id, "assistant", "", {"mode": "baseline"}, complete=False, reasoning="Hmm")
    assert reply.reasoning == "Hmm"
    store.update_message(reply.id, "Because", reasoning="Hmm, the user asks why.\n\nSo: because.")
    store.update_message(reply.id, "Because.", {"reasoning_s": 1.25}, complete=True)  # None keeps the thinking
    msgs = store.messages(c.id)
    assert msgs[0].reasoning == ""
    assert (msgs[1].content, msgs[1].reasoning) == ("Because.", "Hmm, the user asks why.\n\nSo: because.")
    md = store.export_markdown(c.id)
    assert "## Assistant\n\n<details><summary>Thinking (37 chars, 1.2 s)</summary>\n\n" in md
    assert "> Hmm, the user asks why.\n>\n> So: because.\n\n</details>\n\nBecause.\n" in md
    assert "<details>" not in md.split("## Assistant")[0]  # nothing for a message without thinking
    data = json.loads(store.export_json(c.id))
    assert [m["reasoning"] for m in data["messages"]] == ["", "Hmm, the user asks why.\n\nSo: because."]


def test_a_version_1_file_gains_the_reasoning_column_and_keeps_its_messages(tmp_path: Path) -> None:
    from beedeck.core.chat.store import MIGRATIONS

    path = tmp_path / "c.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    MIGRATIONS[1](db)  # the schema BeeDeck wrote before thinking was stored
    db.execute("INSERT INTO meta VALUES('schema_version', '1')")
    db.execute("INSERT INTO conversations(title, system_prompt, created, updated) VALUES('Old', '', 1, 1)")
    db.execute(
        "INSERT INTO messages(conversation_id, role, content, stats, complete, created) "
        "VALUES(1, 'assistant', 'old answer', '{\"tps\": 3.0}', 1, 1)"
    )
    db.close()
    store = ChatStore(path)
    assert store.schema_version == SCHEMA_VERSION == 2
    (msg,) = store.messages(1)
    assert (msg.content, msg.reasoning, msg.stats) == ("old answer", "", {"tps": 3.0})
    store.update_message(msg.id, "old answer", reasoning="now with thinking")
    assert store.messages(1)[0].reasoning == "now with thinking"
    store.close()
