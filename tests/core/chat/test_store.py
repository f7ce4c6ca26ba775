"""The chat store on a real SQLite file: CRUD, search, export, migrations, and crash durability."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from beedeck.core.chat.store import (
    SCHEMA_VERSION,
    ChatStore,
    ChatStoreError,
    auto_title,
    close_fences,
    default_path,
)


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


def test_delete_cascades(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation()
    for r, t in [("user", "1"), ("assistant", "2")]:
        store.add_message(c.id, r, t)
    store.delete_conversation(c.id)
    assert store.conversation(c.id) is None
    assert store._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0


def test_a_replaced_reply_is_kept_as_an_earlier_version(tmp_path: Path) -> None:
    """Regenerate: the old reply leaves the shown conversation but stays, and can be shown again."""
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation()
    u = store.add_message(c.id, "user", "q")
    a1 = store.add_message(c.id, "assistant", "first answer")
    store.supersede_from(c.id, a1.id)
    assert [m.content for m in store.messages(c.id)] == ["q"]
    a2 = store.add_message(c.id, "assistant", "second answer")
    assert a2.parent_id == u.id == a1.parent_id
    assert [m.content for m in store.messages(c.id)] == ["q", "second answer"]
    assert store.versions(a2.id) == [a1.id, a2.id] == store.versions(a1.id)
    assert store.version_positions(c.id) == {a2.id: (2, 2)}
    store.show_version(a1.id)
    assert [m.content for m in store.messages(c.id)] == ["q", "first answer"]
    assert store.version_positions(c.id) == {a1.id: (1, 2)}
    store.show_version(a2.id)
    assert [m.content for m in store.messages(c.id)] == ["q", "second answer"]
    assert store._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 3  # nothing was deleted


def test_an_edited_prompt_keeps_the_old_branch_with_its_later_turns(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation()
    u1 = store.add_message(c.id, "user", "one")
    store.add_message(c.id, "assistant", "reply one")
    store.add_message(c.id, "user", "two")
    store.add_message(c.id, "assistant", "reply two")
    store.supersede_from(c.id, u1.id)  # edit-and-resend of the first prompt
    assert store.messages(c.id) == []
    u1b = store.add_message(c.id, "user", "one, edited")
    store.add_message(c.id, "assistant", "reply to the edit")
    assert u1b.parent_id == 0 and store.versions(u1b.id) == [u1.id, u1b.id]
    assert [m.content for m in store.messages(c.id)] == ["one, edited", "reply to the edit"]
    store.show_version(u1.id)  # back to the original prompt: its whole branch comes back
    assert [m.content for m in store.messages(c.id)] == ["one", "reply one", "two", "reply two"]
    assert store.version_positions(c.id) == {u1.id: (1, 2)}
    store.show_version(u1b.id)
    assert [m.content for m in store.messages(c.id)] == ["one, edited", "reply to the edit"]


def test_showing_a_version_of_a_hidden_turn_changes_nothing(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation()
    u = store.add_message(c.id, "user", "q")
    a1 = store.add_message(c.id, "assistant", "a1")
    store.supersede_from(c.id, a1.id)
    store.add_message(c.id, "assistant", "a2")
    store.supersede_from(c.id, u.id)
    store.add_message(c.id, "user", "q2")
    store.show_version(a1.id)  # a1's turn hangs off the hidden prompt "q"
    assert [m.content for m in store.messages(c.id)] == ["q2"]


def test_rows_with_an_unknown_parent_have_no_versions(tmp_path: Path) -> None:
    """Rows salvaged from an older file carry no parent: each is shown, alone, never grouped."""
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation()
    for content in ("a", "b"):
        store._db.execute(
            "INSERT INTO messages(conversation_id, role, content, complete, created) VALUES(?, 'user', ?, 1, 1)",
            (c.id, content),
        )
    msgs = store.messages(c.id)
    assert [(m.content, m.parent_id) for m in msgs] == [("a", None), ("b", None)]
    assert store.version_positions(c.id) == {} and store.versions(msgs[0].id) == [msgs[0].id]
    reply = store.add_message(c.id, "assistant", "r")
    assert reply.parent_id == msgs[1].id


def test_exports_and_search_hold_only_the_shown_version(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation("Chat")
    store.add_message(c.id, "user", "q")
    old = store.add_message(c.id, "assistant", "old zebra answer")
    store.supersede_from(c.id, old.id)
    store.add_message(c.id, "assistant", "new answer")
    assert "zebra" not in store.export_markdown(c.id) and "new answer" in store.export_markdown(c.id)
    assert [m["content"] for m in json.loads(store.export_json(c.id))["messages"]] == ["q", "new answer"]
    assert store.list_conversations("zebra") == []
    store.show_version(old.id)
    assert [x.id for x in store.list_conversations("zebra")] == [c.id]


def test_a_version_2_file_gains_versions_and_keeps_its_conversations(tmp_path: Path) -> None:
    """The schema BeeDeck wrote before versions: every message follows the one before it, all shown."""
    from beedeck.core.chat.store import MIGRATIONS

    path = tmp_path / "c.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    MIGRATIONS[1](db)
    MIGRATIONS[2](db)
    db.execute("INSERT INTO meta VALUES('schema_version', '2')")
    for title in ("A", "B"):
        db.execute("INSERT INTO conversations(title, system_prompt, created, updated) VALUES(?, '', 1, 1)", (title,))
    rows = [(1, "user", "a1"), (2, "user", "b1"), (1, "assistant", "a2"), (2, "assistant", "b2"), (1, "user", "a3")]
    for cid, role, content in rows:
        db.execute(
            "INSERT INTO messages(conversation_id, role, content, stats, complete, created, reasoning) "
            "VALUES(?, ?, ?, NULL, 1, 1, '')",
            (cid, role, content),
        )
    db.close()
    store = ChatStore(path)
    assert store.schema_version == SCHEMA_VERSION == 3
    a = store.messages(1)
    assert [(m.id, m.content, m.parent_id) for m in a] == [(1, "a1", 0), (3, "a2", 1), (5, "a3", 3)]
    assert [(m.id, m.parent_id) for m in store.messages(2)] == [(2, 0), (4, 2)]
    assert store.version_positions(1) == {}
    store.supersede_from(1, 3)  # regenerate on a migrated conversation works like on a new one
    again = store.add_message(1, "assistant", "a2 again")
    assert store.versions(again.id) == [3, again.id]
    store.close()


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
    assert store.schema_version == SCHEMA_VERSION
    (msg,) = store.messages(1)
    assert (msg.content, msg.reasoning, msg.stats) == ("old answer", "", {"tps": 3.0})
    store.update_message(msg.id, "old answer", reasoning="now with thinking")
    assert store.messages(1)[0].reasoning == "now with thinking"
    store.close()


def test_a_stopped_reply_inside_a_code_block_does_not_leave_the_export_in_code(tmp_path: Path) -> None:
    """The issue: exporting a chat with a stopped reply left a code fence open, so the next heading and
    every message after it rendered as code."""
    store = ChatStore(tmp_path / "c.sqlite3")
    c = store.create_conversation("Fences")
    store.add_message(c.id, "user", "write a list class")
    store.add_message(c.id, "assistant", "Here:\n\n```python\nclass L:\n    def add(self", complete=False)
    store.add_message(c.id, "user", "go on")
    store.add_message(c.id, "assistant", "~~~~\nx = 1\n~~~\nstill code", complete=False)  # a short closer closes nothing
    md = store.export_markdown(c.id)
    stopped, later = md.split("## You", 2)[1:]
    assert "    def add(self\n```\n" in stopped and later.startswith("\n\ngo on")
    assert md.rstrip().endswith("still code\n~~~~")
    # Fences that close stay as they are, and a backtick "fence" with a backtick in its info string is none.
    for text in ("```py\nx\n```", "````\n```\nnested\n```\n````", "``` a`b\nnot a fence", "plain"):
        assert close_fences(text) == text
    assert close_fences("  ```\ncode") == "  ```\ncode\n```"


def test_auto_title_takes_the_first_non_blank_line() -> None:
    assert auto_title("\n  Sort a list  \nplease") == "Sort a list"
    assert auto_title("x" * 80) == "x" * 60
    assert auto_title("   ") == "Untitled"


def test_a_turn_follows_the_last_message_its_window_shows_not_another_windows(tmp_path: Path) -> None:
    """Two windows on one chat (before leases, or where none can be taken): each one's turn follows its own
    last message, so neither is saved as the reply to the other's answer, and after a restart the chat is one
    path with the other window's turns as another version, never both interleaved."""
    a, b = ChatStore(tmp_path / "c.sqlite3"), ChatStore(tmp_path / "c.sqlite3")
    conv = a.create_conversation()
    a1 = a.add_message(conv.id, "user", "A: first", parent_id=0)
    ra1 = a.add_message(conv.id, "assistant", "answer to A", parent_id=a1.id)
    b1 = b.add_message(conv.id, "user", "B: first", parent_id=0)  # B's window showed an empty chat
    rb1 = b.add_message(conv.id, "assistant", "answer to B", parent_id=b1.id)
    a2 = a.add_message(conv.id, "user", "A: follow-up", parent_id=ra1.id)
    assert a2.parent_id == ra1.id  # not rb1: the reply to B's answer is what the defect saved
    assert [m.content for m in a.messages(conv.id)] == ["A: first", "answer to A", "A: follow-up"]
    b2 = b.add_message(conv.id, "user", "B: follow-up", parent_id=rb1.id)
    after_restart = ChatStore(tmp_path / "c.sqlite3")
    assert [m.content for m in after_restart.messages(conv.id)] == ["B: first", "answer to B", "B: follow-up"]
    assert after_restart.versions(b1.id) == [a1.id, b1.id] and b2.parent_id == rb1.id
    after_restart.show_version(a1.id)  # ◀ brings A's path back whole
    assert [m.content for m in after_restart.messages(conv.id)] == ["A: first", "answer to A", "A: follow-up"]
    for store in (a, b, after_restart):
        store.close()


def test_a_turn_after_rows_of_unknown_parent_keeps_them_shown(tmp_path: Path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    conv = store.create_conversation()
    old = [store.add_message(conv.id, "user", f"old {i}") for i in range(3)]
    store.connection.execute("UPDATE messages SET parent_id=NULL")  # salvaged from a file before versions
    store.add_message(conv.id, "assistant", "late", parent_id=old[1].id)
    assert [m.content for m in store.messages(conv.id)] == ["old 0", "old 1", "late"]
    store.close()
