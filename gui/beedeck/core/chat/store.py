"""Conversations and messages in SQLite, Qt-free.

The assistant reply is written *as it streams*: the chat pane calls :meth:`ChatStore.update_message`
on its render throttle, and the database runs in WAL mode with ``synchronous=NORMAL``, so a crash of
the app or a dying server loses at most the last fraction of a second of a reply. A reply that was
still streaming when the app died is kept with ``complete = 0`` and shown as interrupted.

Schema changes go through :data:`MIGRATIONS` (core/chat/store_schema.py): ``schema_version`` in the ``meta`` table says which
ones already ran. Version 2 gave messages a ``reasoning`` column: a reasoning model's thinking text
(``delta.reasoning_content``) is part of what the assistant said, not a statistic, so it has its own
column rather than riding in the ``stats`` JSON that is rewritten wholesale when a reply ends.

Version 3 keeps earlier versions: regenerate and edit-and-resend no longer delete. Each message has a
``parent_id`` (the message it follows; 0 for a conversation's first message, NULL where unknown, e.g. a
row salvaged from an older file) and an ``active`` flag (1: on the shown path). Replacing a message
hides it and everything after it (``active = 0``) and adds the new one under the same parent, so the
messages that share a parent and a role are the versions of one turn (:meth:`ChatStore.versions`).
The shown conversation is the active rows in id order: a child is always newer than its parent, and
a damaged file that loses a row loses only that row, never the path through it.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from beedeck.core import paths
from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store_errors import ChatStoreError, busy, damaged, in_use_error, store_error, uri
from beedeck.core.chat.store_schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "ChatStore", "ChatStoreError", "Conversation", "Message", "busy", "damaged",
           "default_path", "in_use_error", "store_error", "uri"]


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
    parent_id: int | None = None  # the message this one follows (0: first; None: unknown); see versions()

    @property
    def facts(self) -> ReplyFacts:
        """The typed form of :attr:`stats` (what is known of a reply)."""
        return ReplyFacts.from_json(self.stats)


F = TypeVar("F", bound=Callable[..., Any])


def _guarded(fn: F) -> F:
    """SQLite errors as ChatStoreError with a cause and a remedy (every public method)."""

    @functools.wraps(fn)
    def wrapper(self: ChatStore, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise store_error(self.path, exc, f"ChatStore.{fn.__name__}") from exc

    return wrapper  # type: ignore[return-value]


def _open_read_only(path: Path) -> sqlite3.Connection:
    """mode=ro; where even that needs to write (a WAL file's -shm in a read-only folder), immutable=1,
    which is safe there: nothing can write the folder."""
    try:
        db = sqlite3.connect(uri(path), uri=True, isolation_level=None, timeout=2)
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:
        if busy(exc):
            raise
        db = sqlite3.connect(uri(path) + "&immutable=1", uri=True, isolation_level=None)
    db.execute("PRAGMA query_only=ON")
    return db


def default_path() -> Path:
    return paths.data_dir() / "chats.sqlite3"


class ChatStore:
    """All of BeeDeck's chats in one SQLite file. Call from one thread (the GUI thread)."""

    def __init__(self, path: Path | None = None, read_only: bool = False) -> None:
        self.path = path or default_path()
        self.read_only = read_only  # a folder BeeDeck cannot write: opened with mode=ro, nothing saved
        self.notice = ""  # a sentence for the person at the window (open_store sets it)
        try:
            if read_only:
                self._db = _open_read_only(self.path)
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode survives an app crash (only an OS crash can lose the last commits).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.Error as exc:
            if not damaged(exc):
                raise store_error(self.path, exc, "opening the chat history") from exc
            raise ChatStoreError(
                f"The chat history at {self.path} cannot be opened ({exc}): move the file aside and restart "
                "BeeDeck to begin a fresh history.", damaged=True
            ) from exc

    # -- schema -------------------------------------------------------------------------------
    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise ChatStoreError(
                f"The chat history at {self.path} was written by a newer BeeDeck (schema {current} > "
                f"{SCHEMA_VERSION}): update BeeDeck or move the file aside.", newer=True
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
        """Newest first. ``search`` matches titles and shown message text (case-insensitive)."""
        if search:
            like = f"%{search}%"
            rows = self._db.execute(
                "SELECT c.id, c.title, c.system_prompt, c.created, c.updated FROM conversations c "
                "WHERE c.title LIKE ? OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id=c.id "
                "AND m.active=1 AND m.content LIKE ?) ORDER BY c.updated DESC, c.id DESC",
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
        parent_id: int | None = None,
    ) -> Message:
        """Append a message to the shown conversation, after ``parent_id``: its last message as the caller
        shows it (0: it is the first). Shown messages after that one which the caller never saw (another
        window wrote them) become an earlier version of this turn, not the middle of it. None: after the
        last shown message, whoever wrote it."""
        now = time.time()
        self._db.execute("BEGIN IMMEDIATE")  # the parent read and the insert see one state of the file
        try:
            if parent_id is None:
                row = self._db.execute(
                    "SELECT max(id) FROM messages WHERE conversation_id=? AND active=1", (conversation_id,)
                ).fetchone()
                parent = int(row[0] or 0)
            else:
                parent = int(parent_id)
                self._show_path_to(conversation_id, parent)
            cur = self._db.execute(
                "INSERT INTO messages(conversation_id, role, content, stats, complete, created, reasoning, "
                "parent_id) VALUES(?,?,?,?,?,?,?,?)",
                (conversation_id, role, content, json.dumps(stats) if stats else None, int(complete), now,
                 reasoning, parent),
            )
            self._touch(conversation_id)
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # SQLite may have rolled it back itself (a full disk)
                self._db.execute("ROLLBACK")
            raise
        return Message(
            int(cur.lastrowid or 0), conversation_id, role, content, dict(stats or {}), complete, now, reasoning, parent
        )

    def _show_path_to(self, conversation_id: int, message_id: int) -> None:
        """Make the path that ends at ``message_id`` (0: none yet) the shown one, in the open transaction: its
        messages shown, any other after its start hidden (kept as other versions). Nothing to do when it ends
        the shown path already (one window: always). Rows whose parent is unknown (salvaged from an older file)
        start the path: the rows before them stay as they are."""
        last = self._db.execute("SELECT max(id) FROM messages WHERE conversation_id=? AND active=1",
                                (conversation_id,)).fetchone()[0]
        if int(last or 0) == message_id:
            return
        path = (  # the ids of message_id and its ancestors, up to a first message (0) or an unknown parent
            "WITH RECURSIVE up(id, parent_id) AS (SELECT id, parent_id FROM messages WHERE id=? AND conversation_id=? "
            "UNION ALL SELECT m.id, m.parent_id FROM messages m JOIN up ON m.id=up.parent_id AND m.id<up.id) ")
        args = (message_id, conversation_id)
        start = self._db.execute(path + "SELECT min(id) FROM up WHERE parent_id IS NULL", args).fetchone()[0]
        self._db.execute(f"UPDATE messages SET active=0 WHERE conversation_id=? AND active=1 AND id>? "
                         f"AND id NOT IN ({path}SELECT id FROM up)", (conversation_id, int(start or 0), *args))
        self._db.execute(f"UPDATE messages SET active=1 WHERE id IN ({path}SELECT id FROM up)", args)

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
        """The shown conversation: the current version of every turn, oldest first."""
        rows = self._db.execute(
            "SELECT id, conversation_id, role, content, stats, complete, created, reasoning, parent_id FROM messages "
            "WHERE conversation_id=? AND active=1 ORDER BY id",
            (conversation_id,),
        ).fetchall()
        return [
            Message(r[0], r[1], r[2], r[3], json.loads(r[4]) if r[4] else {}, bool(r[5]), r[6], r[7] or "", r[8])
            for r in rows
        ]

    @_guarded
    def supersede_from(self, conversation_id: int, message_id: int) -> None:
        """Hide one shown message and everything after it (regenerate, edit-and-resend), keeping them
        as an earlier version: the next :meth:`add_message` becomes that message's newer sibling."""
        self._db.execute(
            "UPDATE messages SET active=0 WHERE conversation_id=? AND active=1 AND id>=?", (conversation_id, message_id)
        )

    @_guarded
    def versions(self, message_id: int) -> list[int]:
        """The ids of every version of a message's turn (itself included), oldest first.

        Versions share the parent and the role; a message whose parent is unknown has only itself.
        """
        row = self._db.execute(
            "SELECT conversation_id, parent_id, role FROM messages WHERE id=?", (message_id,)
        ).fetchone()
        if row is None:
            return []
        if row[1] is None:
            return [message_id]
        return [
            int(r[0])
            for r in self._db.execute(
                "SELECT id FROM messages WHERE conversation_id=? AND parent_id=? AND role=? ORDER BY id", row
            ).fetchall()
        ]

    @_guarded
    def version_positions(self, conversation_id: int) -> dict[int, tuple[int, int]]:
        """For each shown message that has other versions: (its 1-based position, how many)."""
        groups: dict[tuple[int, str], list[int]] = {}
        shown: list[tuple[int, tuple[int, str]]] = []
        for mid, parent, role, active in self._db.execute(
            "SELECT id, parent_id, role, active FROM messages WHERE conversation_id=? AND parent_id IS NOT NULL "
            "ORDER BY id",
            (conversation_id,),
        ).fetchall():
            groups.setdefault((parent, role), []).append(mid)
            if active:
                shown.append((mid, (parent, role)))
        return {
            mid: (groups[key].index(mid) + 1, len(groups[key])) for mid, key in shown if len(groups[key]) > 1
        }

    @_guarded
    def show_version(self, message_id: int) -> None:
        """Show ``message_id`` in place of the shown version of its turn, then, below it, the newest
        version of each following turn it leads to. One transaction: the path is never half-switched."""
        ids = self.versions(message_id)
        row = self._db.execute("SELECT conversation_id FROM messages WHERE id=?", (message_id,)).fetchone()
        if row is None or len(ids) < 2:
            return
        conversation_id = int(row[0])
        marks = ",".join("?" * len(ids))
        shown = self._db.execute(
            f"SELECT min(id) FROM messages WHERE active=1 AND id IN ({marks})", ids
        ).fetchone()[0]
        if shown is None:
            return  # the turn is not on the shown path: switching it would show two branches at once
        self._db.execute("BEGIN")
        try:
            self.supersede_from(conversation_id, int(shown))
            node: int | None = message_id
            while node is not None:
                self._db.execute("UPDATE messages SET active=1 WHERE id=?", (node,))
                child = self._db.execute(
                    "SELECT max(id) FROM messages WHERE conversation_id=? AND parent_id=?", (conversation_id, node)
                ).fetchone()[0]
                node = int(child) if child is not None else None
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    # -- export -------------------------------------------------------------------------------
    # Exports hold the shown conversation only (the current version of every turn), as it reads on
    # screen: an export is something to share or archive, not a backup of every draft.
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
            facts = m.facts.summary() if m.role == "assistant" else ""
            footer = f"\n*{facts}*\n" if facts else ""
            parts.append(f"## {who}{suffix}\n\n{_thinking_markdown(m)}{close_fences(m.content.rstrip())}\n{footer}")
        return "\n".join(parts)


def auto_title(text: str) -> str:
    """The title a conversation takes from its first message: its first non-blank line, 60 characters."""
    return next((line for line in text.splitlines() if line.strip()), "")[:60].strip() or "Untitled"


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def close_fences(text: str) -> str:
    """``text`` with a code fence it leaves open closed (a reply stopped inside a code block): without
    it the export's next heading and every message after it would render as code.

    CommonMark's rule: a fence closes with the same character, at least as long, and nothing after it.
    """
    open_fence = ""
    for line in text.splitlines():
        m = _FENCE.match(line)
        if m is None:
            continue
        fence, rest = m.group(1), m.group(2)
        if not open_fence:
            if not (fence[0] == "`" and "`" in rest):  # a backtick fence's info string has no backtick
                open_fence = fence
        elif fence[0] == open_fence[0] and len(fence) >= len(open_fence) and not rest.strip():
            open_fence = ""
    return f"{text}\n{open_fence}" if open_fence else text


def _thinking_markdown(m: Message) -> str:
    """The thinking text as a collapsed ``<details>`` holding a blockquote (GitHub renders both).

    Blockquoting every line keeps the reasoning's own Markdown (headings, fences) from escaping
    into the answer's structure; an empty ``>`` keeps paragraph breaks inside the quote.
    """
    text = m.reasoning.strip()
    if not text:
        return ""
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in text.splitlines())
    secs = m.facts.reasoning_s
    took = f", {secs:.1f} s" if secs is not None else ""
    return f"<details><summary>Thinking ({len(m.reasoning)} chars{took})</summary>\n\n{quoted}\n\n</details>\n\n"
