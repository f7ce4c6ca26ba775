"""Conversations and messages in SQLite, Qt-free.

The assistant reply is written *as it streams*: the chat pane calls :meth:`ChatStore.update_message`
on its render throttle, and the database runs in WAL mode with ``synchronous=NORMAL``, so a crash of
the app or a dying server loses at most the last fraction of a second of a reply. A reply that was
still streaming when the app died is kept with ``complete = 0`` and shown as interrupted.

Schema changes go through :data:`MIGRATIONS`: ``schema_version`` in the ``meta`` table says which
ones already ran. Version 2 gave messages a ``reasoning`` column: a reasoning model's thinking text
(``delta.reasoning_content``) is part of what the assistant said, not a statistic, so it has its own
column rather than riding in the ``stats`` JSON that is rewritten wholesale when a reply ends.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from beedeck.core import paths

SCHEMA_VERSION = 2


def _migrate_to_1(db: sqlite3.Connection) -> None:
    # Statement by statement: executescript() would commit and break the migration's transaction.
    _run_statements(
        db,
        """
        CREATE TABLE conversations (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            title TEXT NOT NULL,
            system_prompt TEXT NOT NULL DEFAULT '',
            created REAL NOT NULL,
            updated REAL NOT NULL
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            stats TEXT,
            complete INTEGER NOT NULL DEFAULT 1,
            created REAL NOT NULL
        );
        CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
        """,
    )


def _migrate_to_2(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''")


def _run_statements(db: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


# version -> function that brings a database from version-1 to version. Add new steps at the end.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _migrate_to_1, 2: _migrate_to_2}


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    system_prompt: str
    created: float
    updated: float


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str  # "user" | "assistant" | "system"
    content: str
    stats: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    created: float = 0.0
    reasoning: str = ""  # a reasoning model's thinking; shown and exported, never sent back


class ChatStoreError(RuntimeError):
    """The chat database cannot be used; the message says why and what to do. ``disk_full`` marks the
    one failure the user can fix on the spot (free space) and after which saving resumes."""

    def __init__(self, message: str, disk_full: bool = False) -> None:
        super().__init__(message)
        self.disk_full = disk_full


F = TypeVar("F", bound=Callable[..., Any])


def _guarded(fn: F) -> F:
    """SQLite errors as ChatStoreError with a cause and a remedy (every public method)."""

    @functools.wraps(fn)
    def wrapper(self: ChatStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "full" in text:
                raise ChatStoreError(
                    f"The disk holding the chat history is full ({self.path.parent}): free some space; what is "
                    "on screen is kept and saved once there is room.", disk_full=True) from exc
            raise ChatStoreError(f"The chat history could not be used ({text}): check that {self.path} is "
                                 "writable.") from exc
        except sqlite3.DatabaseError as exc:
            raise ChatStoreError(
                f"The chat history file is damaged ({exc}): restart BeeDeck, which keeps the damaged file "
                "aside and recovers every conversation it can still read.") from exc

    return wrapper  # type: ignore[return-value]


def default_path() -> Path:
    return paths.data_dir() / "chats.sqlite3"


class ChatStore:
    """All of BeeDeck's chats in one SQLite file. Call from one thread (the GUI thread)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(self.path), isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode survives an app crash (only an OS crash can lose the last commits).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise ChatStoreError(
                f"The chat history at {self.path} cannot be opened ({exc}): move the file aside and restart "
                "BeeDeck to begin a fresh history."
            ) from exc

    # -- schema -------------------------------------------------------------------------------
    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise ChatStoreError(
                f"The chat history at {self.path} was written by a newer BeeDeck (schema {current} > "
                f"{SCHEMA_VERSION}): update BeeDeck or move the file aside."
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            self._db.execute("BEGIN")
            try:
                MIGRATIONS[version](self._db)
                self._db.execute(
                    "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (str(version),),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection (for recovery, which copies rows in with their ids)."""
        return self._db

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self._db.close()

    # -- conversations ------------------------------------------------------------------------
    @_guarded
    def create_conversation(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO conversations(title, system_prompt, created, updated) VALUES(?,?,?,?)",
            (title, system_prompt, now, now),
        )
        return Conversation(int(cur.lastrowid or 0), title, system_prompt, now, now)

    @_guarded
    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(
            "SELECT id, title, system_prompt, created, updated FROM conversations WHERE id=?", (conversation_id,)
        ).fetchone()
        return Conversation(*row) if row else None

    @_guarded
    def list_conversations(self, search: str = "") -> list[Conversation]:
        """Newest first. ``search`` matches titles and message text (case-insensitive)."""
        if search:
            like = f"%{search}%"
            rows = self._db.execute(
                "SELECT c.id, c.title, c.system_prompt, c.created, c.updated FROM conversations c "
                "WHERE c.title LIKE ? OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id=c.id "
                "AND m.content LIKE ?) ORDER BY c.updated DESC, c.id DESC",
                (like, like),
            ).fetchall()
        else:
            rows = self._db.execute(
                "SELECT id, title, system_prompt, created, updated FROM conversations "
                "ORDER BY updated DESC, id DESC"
            ).fetchall()
        return [Conversation(*r) for r in rows]

    @_guarded
    def rename(self, conversation_id: int, title: str) -> None:
        self._db.execute("UPDATE conversations SET title=? WHERE id=?", (title.strip() or "Untitled", conversation_id))

    @_guarded
    def set_system_prompt(self, conversation_id: int, system_prompt: str) -> None:
        self._db.execute("UPDATE conversations SET system_prompt=? WHERE id=?", (system_prompt, conversation_id))

    @_guarded
    def delete_conversation(self, conversation_id: int) -> None:
        self._db.execute("DELETE FROM conversations WHERE id=?", (conversation_id,))

    def _touch(self, conversation_id: int) -> None:
        self._db.execute("UPDATE conversations SET updated=? WHERE id=?", (time.time(), conversation_id))

    # -- messages -----------------------------------------------------------------------------
    @_guarded
    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        stats: dict[str, Any] | None = None,
        complete: bool = True,
        reasoning: str = "",
    ) -> Message:
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO messages(conversation_id, role, content, stats, complete, created, reasoning) "
            "VALUES(?,?,?,?,?,?,?)",
            (conversation_id, role, content, json.dumps(stats) if stats else None, int(complete), now, reasoning),
        )
        self._touch(conversation_id)
        return Message(
            int(cur.lastrowid or 0), conversation_id, role, content, dict(stats or {}), complete, now, reasoning
        )

    @_guarded
    def update_message(
        self,
        message_id: int,
        content: str,
        stats: dict[str, Any] | None = None,
        complete: bool | None = None,
        reasoning: str | None = None,
    ) -> None:
        """Rewrite a message's text (called on the streaming throttle) and, at the end, its stats.

        ``reasoning`` (the thinking text so far) is left as it is when None.
        """
        sets, args = ["content=?"], [content]
        if reasoning is not None:
            sets.append("reasoning=?")
            args.append(reasoning)
        if stats is not None:
            sets.append("stats=?")
            args.append(json.dumps(stats))
        if complete is not None:
            sets.append("complete=?")
            args.append(str(int(complete)))
        self._db.execute(f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*args, message_id))

    @_guarded
    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute(
            "SELECT id, conversation_id, role, content, stats, complete, created, reasoning FROM messages "
            "WHERE conversation_id=? ORDER BY id",
            (conversation_id,),
        ).fetchall()
        return [
            Message(r[0], r[1], r[2], r[3], json.loads(r[4]) if r[4] else {}, bool(r[5]), r[6], r[7] or "")
            for r in rows
        ]

    @_guarded
    def delete_messages_from(self, conversation_id: int, message_id: int) -> None:
        """Delete one message and everything after it (regenerate, edit-and-resend)."""
        self._db.execute("DELETE FROM messages WHERE conversation_id=? AND id>=?", (conversation_id, message_id))

    # -- export -------------------------------------------------------------------------------
    @_guarded
    def export_json(self, conversation_id: int) -> str:
        conv = self.conversation(conversation_id)
        if conv is None:
            raise KeyError(conversation_id)
        data = {
            "format": "beedeck-chat",
            "schema_version": SCHEMA_VERSION,
            "title": conv.title,
            "system_prompt": conv.system_prompt,
            "created": conv.created,
            "messages": [
                {
                    "role": m.role,
                    "content": m.content,
                    "reasoning": m.reasoning,
                    "stats": m.stats,
                    "complete": m.complete,
                    "created": m.created,
                }
                for m in self.messages(conversation_id)
            ],
        }
        return json.dumps(data, indent=2, ensure_ascii=False)

    @_guarded
    def export_markdown(self, conversation_id: int) -> str:
        conv = self.conversation(conversation_id)
        if conv is None:
            raise KeyError(conversation_id)
        parts = [f"# {conv.title}\n"]
        if conv.system_prompt:
            parts.append(f"> **System:** {conv.system_prompt}\n")
        for m in self.messages(conversation_id):
            who = {"user": "You", "assistant": "Assistant"}.get(m.role, m.role.title())
            suffix = "" if m.complete else " *(interrupted)*"
            parts.append(f"## {who}{suffix}\n\n{_thinking_markdown(m)}{m.content.rstrip()}\n")
        return "\n".join(parts)


def _thinking_markdown(m: Message) -> str:
    """The thinking text as a collapsed ``<details>`` holding a blockquote (GitHub renders both).

    Blockquoting every line keeps the reasoning's own Markdown (headings, fences) from escaping
    into the answer's structure; an empty ``>`` keeps paragraph breaks inside the quote.
    """
    text = m.reasoning.strip()
    if not text:
        return ""
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines())
    secs = m.stats.get("reasoning_s")
    took = f", {secs:.1f} s" if isinstance(secs, (int, float)) else ""
    return f"<details><summary>Thinking ({len(m.reasoning)} chars{took})</summary>\n\n{quoted}\n\n</details>\n\n"
