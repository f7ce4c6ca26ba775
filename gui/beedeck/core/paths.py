"""Where BeeDeck keeps its files: one place that knows dev, installed and frozen layouts.

``BEEDECK_HOME`` (used by tests and portable installs) puts config, data and cache under one folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import platformdirs

from beedeck import APP_NAME


def _home() -> Path | None:
    value = os.environ.get("BEEDECK_HOME")
    return Path(value).expanduser() if value else None


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    home = _home()
    return _ensure(home / "config" if home else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)))


def data_dir() -> Path:
    home = _home()
    return _ensure(home / "data" if home else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)))


def cache_dir() -> Path:
    home = _home()
    return _ensure(home / "cache" if home else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)))


def state_dir() -> Path:
    """Run-time state: pid files, logs."""
    home = _home()
    return _ensure(home / "state" if home else Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)))


def models_dir() -> Path:
    return _ensure(data_dir() / "models")


def engines_dir() -> Path:
    return _ensure(data_dir() / "engines")


def resource_path(*parts: str) -> Path:
    """A file under ``resources/``, in a source checkout, an installed wheel or a PyInstaller bundle."""
    candidates = []
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        candidates.append(Path(frozen_root) / "resources")
    candidates.append(Path(__file__).resolve().parents[3] / "resources")  # checkout: gui/beedeck/core
    candidates.append(Path(sys.prefix) / "share" / APP_NAME / "resources")
    for root in candidates:
        if root.is_dir():
            return root.joinpath(*parts)
    return candidates[0].joinpath(*parts)


def keep_aside(path: Path, tag: str = "corrupt") -> Path:
    """Move a file BeeDeck cannot use to ``<name>.<tag>-<time>[-n]``, a name no earlier one has, so a
    second failure never overwrites the copy kept the first time; returns the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.{tag}-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.{tag}-{stamp}-{n}")
    path.replace(aside)
    return aside


def safe_join(root: Path, *parts: str) -> Path:
    """``root/parts...`` for parts that come from remote or user data (an ETag, a commit, a file name in
    a repo, a revision), refused with ValueError unless the result stays inside ``root``.

    Each part must be a relative path without ``..``, ``.``-only or empty components, NUL or a
    backslash (a separator elsewhere); the joined path is then resolved (symlinks already on disk
    included) and must lie under the resolved ``root``. The path returned is ``root``'s resolved
    form joined with the parts, not resolved further: a snapshot pointer stays the pointer.
    """
    base = Path(root).resolve()
    joined = base
    for part in parts:
        text = str(part)
        pieces = text.split("/")
        if (not text or "\0" in text or "\\" in text or text.startswith("/")
                or any(p in ("", ".", "..") for p in pieces)):
            raise ValueError(f"{text!r} is not a plain relative name: it could point outside {base}")
        joined = joined.joinpath(*pieces)
    try:
        inside = joined.resolve().is_relative_to(base)
    except (OSError, RuntimeError):  # a symbolic-link loop
        inside = False
    if not inside:
        raise ValueError(f"{joined} leads outside {base} (through a symbolic link)")
    return joined


# BeeDeck's own JSON files (profile, settings) are a few KB: anything past this is not one it wrote.
CONFIG_MAX_BYTES = 1 << 20


class NotARegularFileError(OSError):
    """A path BeeDeck reads as a file is a FIFO, a device, a socket, a folder or too large; the message
    says which, ``kind`` names it ("a FIFO (named pipe)", "a folder", "too large" ...)."""

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def open_regular(path: Path, max_bytes: int | None = None) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file (after links), else NotARegularFileError.

    The open itself never blocks: O_NONBLOCK makes a FIFO with no writer open at once (then refused),
    and a device such as /dev/zero (behind a link) is refused before a byte is read. ``max_bytes``
    refuses a file larger than that, so a config file can never be read for ever."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        kind = next((name for test, name in _KINDS if test(st.st_mode)), None)
        if kind is None and not stat.S_ISREG(st.st_mode):
            kind = "not a regular file"
        if kind is not None:
            raise NotARegularFileError(f"{path} is {kind}, not a regular file: BeeDeck reads only regular files "
                                       "there; replace it with the real file", kind)
        if max_bytes is not None and st.st_size > max_bytes:
            raise NotARegularFileError(f"{path} is {st.st_size:,} bytes, more than the {max_bytes:,} such a file "
                                       "can be: it is not one BeeDeck wrote", "too large")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_text(path: Path, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` (a config file): see open_regular."""
    with open_regular(path, max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew after the check
        raise NotARegularFileError(f"{path} grew past {max_bytes:,} bytes while it was read", "too large")
    return data.decode("utf-8")


def config_object_on_disk(path: Path) -> dict[str, Any] | None:
    """A JSON config file's object as it is now (before a save, to keep what this BeeDeck does not know); None
    when there is none or it cannot be read."""
    try:
        data = json.loads(read_regular_text(path, CONFIG_MAX_BYTES))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file so that a crash leaves either the old or the new content, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Unique per writer: two threads (or processes) saving the same file must not share a temp file.
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a full disk leaves the old file and no half-written temp file behind
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_file(path: Path) -> str:
    """The file's sha256 as hex, read a MiB at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created with its folder) for the ``with`` block: one process
    at a time, e.g. one builder per cache folder (POSIX: flock)."""
    import fcntl  # POSIX only: imported here so this module loads anywhere

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class Held:
    """An exclusive hold on a lock file, taken by :func:`try_hold`: given back by :meth:`release`, or by the
    kernel when the process ends, however it ends, so a holder that crashed never keeps it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the lock


def try_hold(path: Path, note: str = "") -> Held | None:
    """Hold ``path`` (created with its folder) unless someone else holds it: None then, at once (it never
    waits). ``note`` (who holds it, for messages) is written into the file: :func:`holder_note`. Two holds
    of one path conflict within one process too (flock: one lock per open file). Raises OSError when the
    file cannot be created (a read-only folder). The file is never removed: removing a lock file lets two
    holders lock two files of one name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        if not _lock(fd):
            os.close(fd)
            return None
        with contextlib.suppress(OSError):  # a full disk: held all the same, only the note is missing
            os.ftruncate(fd, 0)
            os.write(fd, note.encode("utf-8"))  # at offset 0: the file was just opened
    except BaseException:
        os.close(fd)
        raise
    return Held(path, fd)


def _lock(fd: int) -> bool:
    try:
        import fcntl
    except ImportError:  # Windows: a lock on the first byte
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined,unused-ignore]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def holder_note(path: Path) -> str:
    """What the holder of ``path`` wrote there (:func:`try_hold`); "" when unknown."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:1000]
    except OSError:
        return ""


_ROLE = ""


def set_role(role: str) -> None:
    """Say what this BeeDeck process is ("`beedeck serve`", "a BeeDeck window"), for the messages another
    BeeDeck process shows about what this one holds (a port, a server, a chat)."""
    global _ROLE
    _ROLE = role


def process_role() -> str:
    return _ROLE or "another BeeDeck process"


def owner_note() -> str:
    """Who this process is, as a line another process reads back from a held file (:func:`describe_note`)."""
    return json.dumps({"pid": os.getpid(), "role": process_role()})


def describe_note(note: str) -> str | None:
    """"`beedeck serve` (pid N)" from an :func:`owner_note`; None when it cannot be read. (The note of a file
    someone holds is its holder's: the kernel drops a dead process's hold.)"""
    try:
        data = json.loads(note)
        return f"{data['role']} (pid {int(data['pid'])})" if isinstance(data["role"], str) else None
    except (ValueError, KeyError, TypeError):
        return None
