"""Opening the chat history so that a damaged file loses as little as possible, and says so.

``open_store`` checks the database before use (``PRAGMA quick_check``: a corrupt page in the middle
passes a plain open and only fails the queries that touch it). A damaged or unreadable file is kept
aside under a name no earlier one has, a fresh database takes its place, and every conversation and
message that can still be read is copied into it, row by row, so one bad page costs only the rows on
it. The :class:`Recovery` says what was kept and what was lost, for the person at the window.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from beedeck.core import paths
from beedeck.core.chat.store import ChatStore, ChatStoreError, damaged, default_path, store_error, uri


@dataclass
class Recovery:
    """What happened to a damaged chat history; ``notice()`` is the sentence to show."""

    kept_aside: Path
    reason: str
    conversations: int = 0
    messages: int = 0
    lost_conversations: int = 0
    lost_messages: int = 0
    problems: list[str] = field(default_factory=list)

    def notice(self) -> str:
        lost = ""
        if self.lost_conversations or self.lost_messages:
            lost = (f" {self.lost_messages} message(s) and {self.lost_conversations} conversation(s) were on "
                    "damaged pages and could not be read.")
        why = f" (nothing could be read: {'; '.join(self.problems)})" if self.problems and not self.messages else ""
        return (f"The chat history was damaged ({self.reason}). BeeDeck kept the damaged file as "
                f"{self.kept_aside} and recovered {self.conversations} conversation(s) with {self.messages} "
                f"message(s) into a fresh one{why}.{lost}")


def set_aside(db: Path, tag: str = "damaged") -> Path:
    """Move a database (with its WAL files) to a name no earlier one has; returns the new path."""
    aside = paths.keep_aside(db, tag)
    for suffix in ("-wal", "-shm"):  # the newest commits may still live in the WAL file
        side = db.with_name(db.name + suffix)
        if side.exists():
            side.replace(aside.with_name(aside.name + suffix))
    return aside


def check(path: Path) -> str | None:
    """None when the file is a healthy database (or does not exist yet), else what is wrong. Only what SQLite
    calls corrupt is damage: a file another process holds locked (ChatStoreError ``in_use``), or one that
    cannot be read for another reason, raises ChatStoreError instead, and is never set aside."""
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(uri(path), uri=True, timeout=2)
        try:
            rows = db.execute("PRAGMA quick_check").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        if not damaged(exc):  # locked, unreadable, a bug: said as such, the file left where it is
            raise store_error(path, exc, "checking the chat history") from exc
        return str(exc)
    results = [str(r[0]) for r in rows]
    return None if results == ["ok"] else "; ".join(results[:3])


MAX_RUN = 2000  # consecutive unreadable or missing ids after which a table is given up


def _max_id(db: sqlite3.Connection, table: str, path: Path) -> int:
    try:
        row = db.execute(f"SELECT max(id) FROM {table}").fetchone()
        return int(row[0] or 0)
    except sqlite3.DatabaseError:
        # The table's tree is damaged where its largest id lives: probe ids up to what the file could
        # hold (a row takes at least ~20 bytes), giving up after a long run of gaps or errors.
        return max(1, min(10_000_000, path.stat().st_size // 20))


def salvage(damaged: Path, store: ChatStore, rec: Recovery) -> None:
    """Copy every readable conversation and message of ``damaged`` into ``store`` (ids kept)."""
    try:
        src = sqlite3.connect(uri(damaged), uri=True)
        tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
    except sqlite3.DatabaseError as exc:
        rec.problems.append(f"not readable as a database: {exc}")
        return
    if not {"conversations", "messages"} <= tables:
        src.close()
        rec.problems.append("it holds no BeeDeck chats")
        return
    db = store.connection
    conv_cols = "id, title, system_prompt, created, updated"
    msg_cols = "id, conversation_id, role, content, stats, complete, created, reasoning, parent_id, active"
    try:
        names = {"reasoning", "parent_id", "active"}
        with contextlib.suppress(sqlite3.DatabaseError):
            names = {r[1] for r in src.execute("PRAGMA table_info(messages)").fetchall()}
        if "reasoning" not in names:
            msg_cols = msg_cols.replace(", reasoning", ", '' AS reasoning")
        if "parent_id" not in names:  # before schema 3: no versions, every row shown
            msg_cols = msg_cols.replace(", parent_id, active", ", NULL AS parent_id, 1 AS active")
        kept_convs: set[int] = set()
        for table, cols in (("conversations", conv_cols), ("messages", msg_cols)):
            top, run, errors = _max_id(src, table, damaged), 0, 0
            for rid in range(1, top + 1):
                try:
                    row = src.execute(f"SELECT {cols} FROM {table} WHERE id=?", (rid,)).fetchone()
                except sqlite3.DatabaseError:
                    run += 1
                    errors += 1
                    if run > MAX_RUN:
                        errors -= run  # past the last row: these ids never existed
                        break
                    continue
                if row is None:
                    run += 1
                    if run > MAX_RUN:
                        break
                    continue
                run = 0
                if table == "conversations":
                    rec.lost_conversations += errors
                else:
                    rec.lost_messages += errors
                errors = 0
                if table == "conversations":
                    db.execute(f"INSERT INTO conversations({conv_cols}) VALUES(?,?,?,?,?)", row)
                    kept_convs.add(int(row[0]))
                    rec.conversations += 1
                elif int(row[1]) in kept_convs:
                    db.execute("INSERT INTO messages(id, conversation_id, role, content, stats, complete, created, "
                               "reasoning, parent_id, active) VALUES(?,?,?,?,?,?,?,?,?,?)", row)
                    rec.messages += 1
                else:
                    rec.lost_messages += 1  # its conversation was on a damaged page
    finally:
        src.close()


def open_store(path: Path | None = None) -> tuple[ChatStore, Recovery | None]:
    """The chat store, repaired first if its file is damaged. Raises ChatStoreError only when not
    even a fresh database can be created (a read-only or full disk)."""
    path = path or default_path()
    if path.exists() and not writable(path):
        store = ChatStore(path, read_only=True)
        store.notice = (f"The chat history folder {path.parent} is read-only for BeeDeck, so the chats in it are "
                        "shown but nothing new is saved: make the folder and the file writable (chmod u+w) and "
                        "restart BeeDeck.")
        return store, None
    problem = check(path)
    if problem is None:
        return ChatStore(path), None  # a healthy file (a newer schema still raises: not damage)
    aside = set_aside(path)
    rec = Recovery(aside, problem)
    store = ChatStore(path)
    try:
        store.connection.execute("BEGIN")
        salvage(aside, store, rec)
        store.connection.execute("COMMIT")
    except sqlite3.Error as exc:  # a full disk while copying: keep what the fresh file holds
        with contextlib.suppress(sqlite3.Error):
            store.connection.execute("ROLLBACK")
        rec.problems.append(f"copying stopped: {exc}")
    return store, rec


def writable(path: Path) -> bool:
    """Whether this process may write the database and create its -wal/-shm files beside it."""
    return os.access(path.parent, os.W_OK, effective_ids=os.access in os.supports_effective_ids) and (
        not path.exists() or os.access(path, os.W_OK, effective_ids=os.access in os.supports_effective_ids))


def fallback(exc: ChatStoreError, path: Path | None = None) -> tuple[ChatStore, str]:
    """When the history cannot be opened: a damaged file, or one a newer BeeDeck wrote, is kept aside and a
    fresh one started; any other (in use by another BeeDeck, a folder that cannot be written, an error of
    BeeDeck's own) stays exactly as it is and this window's chats live in memory. Returns the store and the
    notice."""
    path = path or default_path()
    if (exc.damaged or exc.newer) and path.exists() and writable(path):
        with contextlib.suppress(OSError, ChatStoreError):
            kept = set_aside(path, "unreadable")
            return ChatStore(path), (f"{exc} BeeDeck kept it as {kept} and started a fresh chat history; copy it "
                                     "back when it can be read.")
    return ChatStore(Path(":memory:")), f"{exc} This window's chats are not saved."
