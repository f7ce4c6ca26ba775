"""Only SQLite's own corruption is damage: a programming error, a lock or a deleted chat is said as what it
is, and never moves a healthy chat history aside."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from beedeck.core.chat import store_schema
from beedeck.core.chat.recovery import fallback, open_store
from beedeck.core.chat.store import ChatStore, ChatStoreError
from beedeck.core.chat.store_errors import damaged, store_error


def _healthy(path: Path) -> bytes:
    store = ChatStore(path)
    conv = store.create_conversation("kept")
    store.add_message(conv.id, "user", "a message to keep")
    store.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path.read_bytes()


def test_a_wrong_argument_type_is_a_bug_in_beedeck_not_a_damaged_history(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    before = _healthy(db)
    store = ChatStore(db)
    with pytest.raises(ChatStoreError) as exc:
        store.add_message(1, "user", {"not": "text"})  # type: ignore[arg-type]
    message = str(exc.value)
    assert not exc.value.damaged and "damaged" not in message and "keeps the damaged file aside" not in message
    assert "bug in BeeDeck, not damage" in message and "ChatStore.add_message" in message
    assert "left as it is" in message
    store.close()
    reopened, recovery = open_store(db)  # the next start finds it healthy: nothing is set aside
    assert recovery is None and [c.title for c in reopened.list_conversations()] == ["kept"]
    reopened.close()
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir() if ".sqlite3." in p.name) == []


def test_a_programming_error_while_opening_never_moves_the_history_aside(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A future migration with a bug must not cost the user the history it failed to migrate."""
    db = tmp_path / "chats.sqlite3"
    before = _healthy(db)

    def buggy(conn: sqlite3.Connection) -> None:
        conn.execute("SELECT ?", ({"a": 1},))  # ProgrammingError: a dict bound as a parameter

    version = store_schema.SCHEMA_VERSION + 1
    with monkeypatch.context() as patch:
        patch.setitem(store_schema.MIGRATIONS, version, buggy)
        patch.setattr("beedeck.core.chat.store.SCHEMA_VERSION", version)
        with pytest.raises(ChatStoreError) as exc:
            ChatStore(db)
    assert not exc.value.damaged and "bug in BeeDeck, not damage" in str(exc.value)
    store, notice = fallback(exc.value, db)  # what the window does with it
    assert "not saved" in notice and "kept it as" not in notice
    store.close()
    assert db.read_bytes() == before and [p.name for p in tmp_path.iterdir() if "unreadable" in p.name] == []


def test_a_message_for_a_chat_deleted_elsewhere_is_said_as_such(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    mine, other = ChatStore(db), ChatStore(db)
    conv = mine.create_conversation()
    other.delete_conversation(conv.id)  # another window deleted it
    with pytest.raises(ChatStoreError) as exc:
        mine.add_message(conv.id, "user", "hello")
    assert not exc.value.damaged and "deleted in another BeeDeck window" in str(exc.value)
    mine.close()
    other.close()


def test_only_sqlites_corruption_codes_mean_damage(tmp_path: Path) -> None:
    text = tmp_path / "not-a-db.sqlite3"
    text.write_bytes(b"this is not a database" * 100)
    with pytest.raises(sqlite3.DatabaseError) as notadb:
        sqlite3.connect(text).execute("SELECT * FROM sqlite_master").fetchall()
    assert damaged(notadb.value) and store_error(text, notadb.value, "test").damaged
    with pytest.raises(sqlite3.ProgrammingError) as bug:
        sqlite3.connect(":memory:").execute("SELECT ?", ([],))
    assert not damaged(bug.value) and not store_error(text, bug.value, "test").damaged
    with pytest.raises(sqlite3.OperationalError) as syntax:
        sqlite3.connect(":memory:").execute("SELEC 1")
    assert not damaged(syntax.value) and "bug in BeeDeck" in str(store_error(text, syntax.value, "test"))
