"""What an SQLite error means for the chat history, said for the person at the window.

Only what SQLite itself calls corrupt (``SQLITE_CORRUPT``, ``SQLITE_NOTADB``) is damage, after which
BeeDeck may set the file aside and recover what it can. A lock held by another process, a full disk,
a permission and an error of BeeDeck's own (a wrong argument: ``ProgrammingError``) are said as what they
are, and a healthy history is never moved aside for them.
"""

from __future__ import annotations

import logging
import sqlite3
import urllib.parse
from pathlib import Path

log = logging.getLogger("beedeck.core.chat.store")


class ChatStoreError(RuntimeError):
    """The chat database cannot be used; the message says why and what to do. ``disk_full`` marks the
    one failure the user can fix on the spot (free space) and after which saving resumes; ``in_use``
    a file another process holds locked; ``damaged`` what SQLite itself calls corrupt (the only error
    after which the file may be set aside); ``newer`` a file a newer BeeDeck wrote."""

    def __init__(self, message: str, disk_full: bool = False, in_use: bool = False, damaged: bool = False,
                 newer: bool = False) -> None:
        super().__init__(message)
        self.disk_full = disk_full
        self.in_use = in_use  # locked by another process: not damage, never to be moved aside
        self.damaged = damaged
        self.newer = newer


def uri(path: Path, mode: str = "ro") -> str:
    """The SQLite URI of ``path``, escaped: a '%41' or '#' in a folder name is part of the name, not an
    escape or the start of a fragment (which made a healthy file look damaged, or a stray database)."""
    return f"file:{urllib.parse.quote(str(path))}?mode={mode}"


def _code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None  # the primary code of an extended one


def busy(exc: sqlite3.Error) -> bool:
    return _code(exc) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "database is locked" in str(exc)


def damaged(exc: sqlite3.Error) -> bool:
    """Whether SQLite itself says the file is damaged (SQLITE_CORRUPT, SQLITE_NOTADB): the only errors that
    may mean damage. A wrong argument, a bug in BeeDeck, a lock, a full disk or a permission says nothing
    about the file, and must never move a healthy history aside."""
    return _code(exc) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


# The file or its folder cannot be read or written as it is: the user fixes that, not BeeDeck.
_ACCESS = frozenset({sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM, sqlite3.SQLITE_IOERR,
                     sqlite3.SQLITE_AUTH, sqlite3.SQLITE_NOLFS})


def in_use_error(path: Path, exc: sqlite3.Error) -> ChatStoreError:
    return ChatStoreError(f"The chat history at {path} is in use by another BeeDeck ({exc}): close the other BeeDeck "
                          "(or wait for it to finish), then start again. The file was left as it is.", in_use=True)


def store_error(path: Path, exc: sqlite3.Error, during: str) -> ChatStoreError:
    """What an SQLite error in ``during`` (the store's method) means for the person at the window."""
    code, text = _code(exc), str(exc)
    if busy(exc):
        return in_use_error(path, exc)
    if code == sqlite3.SQLITE_FULL or (isinstance(exc, sqlite3.OperationalError) and "full" in text):
        return ChatStoreError(f"The disk holding the chat history is full ({path.parent}): free some space; what is "
                              "on screen is kept and saved once there is room.", disk_full=True)
    if damaged(exc):
        return ChatStoreError(f"The chat history file is damaged ({exc}): restart BeeDeck, which keeps the damaged file "
                              "aside and recovers every conversation it can still read.", damaged=True)
    if code in _ACCESS:
        return ChatStoreError(f"The chat history could not be used ({text}): check that {path} and its folder are "
                              "readable and writable.")
    if isinstance(exc, sqlite3.IntegrityError):
        return ChatStoreError(f"The chat history refused this change ({text}): the chat it belongs to may have been "
                              "deleted in another BeeDeck window. The history file is healthy and was left as it is.")
    log.error("chat store: %s failed", during, exc_info=exc)
    lost = "; only this change was not saved" if during.startswith("ChatStore.") else ""
    return ChatStoreError(f"BeeDeck made an error using the chat history ({type(exc).__name__} in {during}: {text}). "
                          f"This is a bug in BeeDeck, not damage: the history file is healthy and was left as it is"
                          f"{lost}. Please report it with these words.")
