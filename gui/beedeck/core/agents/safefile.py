"""A coding agent's config file, read and replaced without losing anything.

- Read only a regular file of at most 1 MiB (a FIFO, a device or a huge file is refused at once, before a
  byte is read: :func:`beedeck.core.paths.open_regular`); a symbolic link is followed to its file, which is
  what gets written (a dotfiles manager's link stays a link), and a link that dangles or loops is refused.
- Keep what the file is: its mode and owner, its byte-order mark and its line endings (:func:`decode`,
  :func:`encode`).
- Replace it whole or not at all (:func:`replace_file`): the new bytes go into an unnamed file
  (``O_TMPFILE``), fsync'd, given a name only for the instant before the rename; a name left by a kill in
  that instant (or by a system without ``O_TMPFILE``) is removed by the next BeeDeck that writes there
  (:func:`sweep`), since its writer is gone.
- BeeDeck's own copies (backups, undo records) are 0600 in 0700 folders (:func:`private_dir`,
  :func:`write_private`), written durably before the config is touched; one writer at a time
  (:func:`locked`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from beedeck.core import paths
from beedeck.core.agents.formats import AgentConfigError

MAX_BYTES = paths.CONFIG_MAX_BYTES  # 1 MiB: an agent's config is a few KB
TMP_TAG = ".beedeck-tmp-"
LOCK_WAIT_S = 10.0
BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Target:
    """Where a config lives: ``path`` as the agent names it, ``real`` the file written (the end of the link
    when ``path`` is a symbolic link; ``link`` is then what the link says)."""

    path: Path
    real: Path
    link: str | None = None


@dataclass(frozen=True)
class Current:
    """What is there now: the bytes (None: no file) and the file's mode and owner."""

    target: Target
    raw: bytes | None
    mode: int = 0o600
    uid: int = -1
    gid: int = -1


@dataclass(frozen=True)
class Encoding:
    """How the file's text is stored: a UTF-8 byte-order mark, CRLF line endings."""

    bom: bool = False
    crlf: bool = False


def locate(path: Path) -> Target:
    """``path`` and the file behind it (raises AgentConfigError for a link that dangles or loops)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return Target(path, path)
    except OSError as exc:
        raise AgentConfigError(f"{path} cannot be looked at ({exc.strerror}): check the folders above it.") from None
    if not stat.S_ISLNK(st.st_mode):
        return Target(path, path)
    link = os.readlink(path)
    try:
        real = Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        raise AgentConfigError(f"{path} is a symbolic link to {link}, which does not exist: BeeDeck writes through a "
                               "link only into an existing file. Create that file (or remove the link), then write "
                               "again.") from None
    except OSError as exc:
        why = "loops (it leads back to itself)" if exc.errno == errno.ELOOP else f"cannot be followed ({exc.strerror})"
        raise AgentConfigError(f"{path} is a symbolic link that {why}: point it at the real file, then write "
                               "again.") from None
    return Target(path, real, link)


def read(path: Path) -> Current:
    """What ``path`` holds now, read within bounds (see the module docstring)."""
    target = locate(path)
    try:
        fh = paths.open_regular(target.real, MAX_BYTES)
    except FileNotFoundError:
        return Current(target, None)
    except paths.NotARegularFileError as exc:
        raise AgentConfigError(f"{exc}. An agent's config must be a regular file of at most {MAX_BYTES:,} bytes: "
                               "move it aside, then write again.") from None
    except OSError as exc:
        raise AgentConfigError(f"{target.real} cannot be read ({exc.strerror}): check its permissions.") from None
    with fh:
        st = os.fstat(fh.fileno())
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise AgentConfigError(f"{target.real} grew past {MAX_BYTES:,} bytes while it was read: move it aside.")
    return Current(target, data, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)


def decode(raw: bytes, path: Path) -> tuple[str, Encoding]:
    """The text renderers work on (no BOM, LF line endings) and how to store it back."""
    bom = raw.startswith(BOM)
    try:
        text = raw[len(BOM) if bom else 0:].decode("utf-8")
    except UnicodeDecodeError:
        raise AgentConfigError(f"{path} is not UTF-8 text: move it aside, then write again.") from None
    crlf = text.count("\r\n") * 2 > text.count("\n")  # most of its lines end in CRLF
    return (text.replace("\r\n", "\n") if crlf else text), Encoding(bom, crlf)


def encode(text: str, enc: Encoding) -> bytes:
    if enc.crlf:
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    return (BOM if enc.bom else b"") + text.encode("utf-8")


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner may enter (0700), made with its parents."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if stat.S_IMODE(path.stat().st_mode) != 0o700:
        path.chmod(0o700)
    return path


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a folder be fsync'd
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _temp_name(real: Path) -> Path:
    return real.with_name(f".{real.name}{TMP_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def sweep(real: Path, every: bool = False) -> list[Path]:
    """Remove temporary names beside ``real`` whose writer is gone (a kill between naming and renaming);
    ``every``: those of any file in ``real``'s folder (BeeDeck's own folders)."""
    gone = []
    with contextlib.suppress(OSError):
        for p in real.parent.glob(f".*{TMP_TAG}*" if every else f".{real.name}{TMP_TAG}*"):
            pid = p.name.split(TMP_TAG, 1)[1].split("-", 1)[0]
            if pid.isdigit() and int(pid) != os.getpid() and not psutil.pid_exists(int(pid)):
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
                    gone.append(p)
    return gone


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _open_unnamed(folder: Path, mode: int) -> int | None:
    if not hasattr(os, "O_TMPFILE"):
        return None
    try:
        return os.open(folder, os.O_TMPFILE | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            return None  # a file system without unnamed files: a named temporary file instead
        raise


def _keep_owner(fd: int, owner: tuple[int, int] | None, real: Path) -> None:
    if owner is None or owner == (os.geteuid(), os.getegid()):
        return
    try:
        os.fchown(fd, *owner)
    except PermissionError:
        raise AgentConfigError(f"{real} belongs to another user (uid {owner[0]}): written by BeeDeck it would become "
                               "yours. Write it as that user.") from None


def _fill(fd: int, data: bytes, mode: int, owner: tuple[int, int] | None, real: Path) -> None:
    _write_all(fd, data)
    _keep_owner(fd, owner, real)
    os.fchmod(fd, mode)
    os.fsync(fd)


def _name_unnamed(fd: int, folder: Path, real: Path) -> Path | None:
    """Give the unnamed file ``fd`` a temporary name beside ``real`` (None where /proc cannot)."""
    named = _temp_name(real)
    try:
        dir_fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        # linkat(AT_SYMLINK_FOLLOW): os.link calls plain link() unless a dir fd is given, and link() on the
        # /proc magic link fails with EXDEV
        os.link(f"/proc/self/fd/{fd}", named, src_dir_fd=dir_fd, follow_symlinks=True)
        return named
    except OSError:
        return None
    finally:
        os.close(dir_fd)


def _written_name(real: Path, data: bytes, mode: int, owner: tuple[int, int] | None) -> Path:
    """A temporary name beside ``real`` holding ``data``, fsync'd; the bytes are written while it has no name
    where the system allows (a kill then leaves nothing)."""
    folder = real.parent
    fd = _open_unnamed(folder, mode)
    if fd is not None:
        try:
            _fill(fd, data, mode, owner, real)
            named = _name_unnamed(fd, folder, real)
        finally:
            os.close(fd)
        if named is not None:
            return named
    named = _temp_name(real)
    fd = os.open(named, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        _fill(fd, data, mode, owner, real)
    except BaseException:
        with contextlib.suppress(OSError):
            named.unlink()
        raise
    finally:
        os.close(fd)
    return named


def replace_file(real: Path, data: bytes, mode: int, owner: tuple[int, int] | None) -> None:
    """Put ``data`` at ``real`` whole or not at all, with ``mode`` and ``owner`` (uid, gid; None: this user's)."""
    sweep(real)
    named: Path | None = None
    try:
        named = _written_name(real, data, mode, owner)
        os.replace(named, real)
        named = None
    except OSError as exc:
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise AgentConfigError(f"{real} could not be written ({'the disk is full' if full else exc.strerror}): "
                               "it was left as it was.") from None
    finally:
        if named is not None:
            with contextlib.suppress(OSError):
                named.unlink()
    _fsync_dir(real.parent)


def write_private(path: Path, data: bytes) -> None:
    """One of BeeDeck's own copies: 0600 in a 0700 folder, durable before this returns."""
    private_dir(path.parent)
    replace_file(path, data, 0o600, None)


@contextlib.contextmanager
def locked(path: Path, timeout_s: float = LOCK_WAIT_S) -> Iterator[None]:
    """One writer of agent configs at a time (an flock on ``path``); gives up after ``timeout_s``."""
    import fcntl  # POSIX only, imported here so this module loads anywhere

    try:
        private_dir(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        raise AgentConfigError(f"BeeDeck cannot write in {path.parent} ({exc.strerror}), where it keeps what each "
                               "write replaced: nothing was changed. Free some space there or fix its "
                               "permissions, then try again.") from None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AgentConfigError("Another BeeDeck has been writing a coding agent's config for "
                                           f"{timeout_s:g} s (it holds {path}): try again in a moment.") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)  # closing releases the lock
