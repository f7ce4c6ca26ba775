"""The chat database's schema and its migrations (core/chat/store.py opens and uses it).

Schema changes go through :data:`MIGRATIONS`: ``schema_version`` in the ``meta`` table says which
ones already ran; add new steps at the end, never change an old one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

SCHEMA_VERSION = 3


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


def _migrate_to_3(db: sqlite3.Connection) -> None:
    _run_statements(
        db,
        """
        ALTER TABLE messages ADD COLUMN parent_id INTEGER;
        ALTER TABLE messages ADD COLUMN active INTEGER NOT NULL DEFAULT 1;
        UPDATE messages SET parent_id = coalesce((SELECT max(p.id) FROM messages p
            WHERE p.conversation_id = messages.conversation_id AND p.id < messages.id), 0);
        CREATE INDEX messages_by_parent ON messages(conversation_id, parent_id)
        """,
    )


def _run_statements(db: sqlite3.Connection, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


# version -> function that brings a database from version-1 to version. Add new steps at the end.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _migrate_to_1,
    2: _migrate_to_2,
    3: _migrate_to_3,
}
