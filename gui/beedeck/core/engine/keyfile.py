"""The server's API key on disk: a 0600 file llama-server reads through ``--api-key-file``.

A key on the command line is visible to every local user through ``ps``; a 0600 file is not. The file
is named after the BeeDeck process that wrote it (``api-key-<pid>-<random>.key``) so that the next
start removes the files of owners that are gone (a ``serve`` killed with SIGKILL cannot remove its
own), and it is written whole or not at all: on a full disk nothing is left behind and the launch is
refused with a message instead of a traceback.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from pathlib import Path

import psutil

from beedeck.core.engine.logparse import ServerFailure

_NAME = re.compile(r"^api-key-(?:(?P<pid>\d+)-)?[0-9a-f]{32}\.key$")


class KeyFileError(Exception):
    """The key file could not be written; ``failure`` says why and what to do."""

    def __init__(self, failure: ServerFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


def key_path(folder: Path) -> Path:
    """A fresh key file name in ``folder``, owned by this process."""
    return folder / f"api-key-{os.getpid()}-{uuid.uuid4().hex}.key"


def remove_orphans(folder: Path) -> list[Path]:
    """Delete the key files in ``folder`` whose writer is no longer running (files of BeeDeck
    versions that did not name their owner count as orphans: their server read the key at start)."""
    removed = []
    with contextlib.suppress(OSError):
        for p in folder.iterdir():
            m = _NAME.match(p.name)
            if m is None:
                continue
            pid = int(m.group("pid")) if m.group("pid") else None
            if pid is not None and (pid == os.getpid() or psutil.pid_exists(pid)):
                continue
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed.append(p)
    return removed


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def write_key(key_file: Path, key: str) -> None:
    """Write ``key`` to ``key_file`` (mode 0600 from its first byte): a temporary file, fsync'd, renamed.
    Raises KeyFileError, with nothing left on disk, when it cannot be written."""
    tmp = key_file.with_name(f".{key_file.name}.tmp")
    try:
        key_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            if hasattr(os, "fchmod"):  # POSIX: the mode, whatever the umask
                os.fchmod(fd, 0o600)
            _write_all(fd, (key + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, key_file)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise KeyFileError(ServerFailure(
            "disk_full" if full else "key_file",
            f"The server's API key could not be written to {key_file.parent} "
            f"({'the disk is full' if full else exc.strerror or exc}).",
            "Free some space on that disk, then start again." if full else
            "Check that BeeDeck's state folder is writable, then start again.")) from None


def key_via_file(argv: list[str], key: str, key_file: Path) -> list[str]:
    """Swap ``--api-key KEY`` for ``--api-key-file`` pointing at ``key_file`` (written 0600)."""
    if "--api-key" not in argv[:-1]:
        return list(argv)
    write_key(key_file, key)
    i = argv.index("--api-key")
    return [*argv[:i], "--api-key-file", str(key_file), *argv[i + 2:]]
