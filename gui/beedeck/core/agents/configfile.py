"""Writing a client's config: the plan (the unified diff, shown before anything is written), the write
(what was there kept first, then the file replaced whole) and undo (a history that goes back to the
user's own file, however many writes came after it).

Nothing is overwritten silently: :func:`write` takes the plan the user saw and refuses when the file
changed since. Each write leaves a numbered record and a byte-exact copy of what it replaced in BeeDeck's
data folder (0600 files in 0700 folders), written durably *before* the config is replaced: a record that
cannot be written means the config is not touched, and a write killed half-way leaves the old config (its
record is then dropped as one that never landed) or the new one with its record. One writer at a time
(a lock); file handling itself (links, modes, owners, bounds, line endings) is :mod:`.safefile`'s.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from beedeck.core import paths
from beedeck.core.agents import safefile
from beedeck.core.agents.clients import AgentClient, AgentConfigError
from beedeck.core.agents.endpoint import Endpoint

RECORD_MAX = 64 * 1024


class AlreadyWritten(AgentConfigError):
    """The file already holds what the plan would write (another BeeDeck wrote it meanwhile)."""


@dataclass(frozen=True)
class ConfigPlan:
    """What writing ``client``'s config would do. ``old`` is None where there is no file yet; ``old_raw`` and
    ``new_raw`` are the bytes (the file's own byte-order mark and line endings kept)."""

    client_id: str
    path: Path
    old: str | None
    new: str
    old_raw: bytes | None = None
    new_raw: bytes = b""
    link: str | None = None  # the config is a symbolic link to this: the file behind it is written
    real: Path | None = None

    @property
    def changes(self) -> bool:
        return self.old_raw != self.new_raw

    def diff(self) -> str:
        """The unified diff of the change (empty when the file already says this)."""
        text = "".join(difflib.unified_diff(
            (self.old or "").splitlines(keepends=True), self.new.splitlines(keepends=True),
            fromfile=str(self.path) if self.old is not None else "/dev/null", tofile=str(self.path)))
        if text and self.link is not None:
            text = f"# {self.path} is a link to {self.link}: BeeDeck writes {self.real} and keeps the link\n" + text
        return text


@dataclass(frozen=True)
class Record:
    """One write, as undo needs it: where (the link and its file), what was there (its copy's name, None when
    there was no file), the sha256 before and after, and the file's mode and owner."""

    n: int
    path: str
    real: str
    link: str | None
    backup: str | None
    before_sha: str
    written_sha: str
    mode: int
    uid: int
    gid: int
    time: float = 0.0


def _sha(raw: bytes | None) -> str:
    return hashlib.sha256(raw).hexdigest() if raw is not None else ""


def plan(client: AgentClient, ep: Endpoint) -> ConfigPlan:
    """The change writing ``client``'s config for ``ep`` would make (reads the file, writes nothing)."""
    if client.config is None or client.render is None:
        raise AgentConfigError(f"{client.label} has no config file of its own: use the environment shown by "
                               f"`beedeck agent show {client.id}`.")
    now = safefile.read(client.config())
    safefile.sweep(now.target.real)
    safefile.sweep(_history(client.id) / "x", every=True)  # a kill's leftover among BeeDeck's own copies
    old, enc = safefile.decode(now.raw, now.target.real) if now.raw is not None else (None, safefile.Encoding())
    new = client.render(ep, old)
    return ConfigPlan(client.id, now.target.path, old, new, now.raw, safefile.encode(new, enc), now.target.link,
                      now.target.real)


def backups_dir(client_id: str) -> Path:
    return paths.data_dir() / "agent-backups" / client_id


def _history(client_id: str) -> Path:
    return backups_dir(client_id) / "history"


def _private(client_id: str) -> Path:
    """The client's history folder, it and the folders above it up to agent-backups made 0700 (a BeeDeck
    before the history left them 0755, with a 0644 record)."""
    safefile.private_dir(backups_dir(client_id).parent)
    safefile.private_dir(backups_dir(client_id))
    for old in backups_dir(client_id).iterdir():
        if old.is_file() and not old.is_symlink() and old.stat().st_mode & 0o077:
            old.chmod(0o600)
    return safefile.private_dir(_history(client_id))


def _lock() -> Path:
    return paths.data_dir() / "agent-backups" / ".lock"


def _legacy(client_id: str) -> Record | None:
    """The single undo record of BeeDeck before the history (``last-write.json``), as the oldest record."""
    path = backups_dir(client_id) / "last-write.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(paths.read_regular_text(path, RECORD_MAX))
        backup = str(data["backup"]) if data.get("backup") else None
        before = _sha(Path(backup).read_bytes()) if backup else ""
        return Record(0, str(data["path"]), str(data["path"]), None, backup, before, str(data["written_sha256"]),
                      0o600, -1, -1)
    except (OSError, ValueError, KeyError, TypeError):
        raise AgentConfigError(f"The undo record {path} is damaged: restore by hand from {backups_dir(client_id)}.") \
            from None


def _records(client_id: str) -> list[Record]:
    """The client's write history, oldest first."""
    out = [r for r in (_legacy(client_id),) if r is not None]
    folder = _history(client_id)
    for path in sorted(folder.glob("[0-9]*.json")) if folder.is_dir() else ():
        try:
            out.append(Record(**json.loads(paths.read_regular_text(path, RECORD_MAX))))
        except (OSError, ValueError, TypeError):
            raise AgentConfigError(f"The undo record {path} is damaged: restore by hand from "
                                   f"{backups_dir(client_id)}.") from None
    return sorted(out, key=lambda r: r.n)


def _drop(client_id: str, rec: Record) -> None:
    if rec.n == 0:
        (backups_dir(client_id) / "last-write.json").unlink(missing_ok=True)
        return
    folder = _history(client_id)
    (folder / f"{rec.n:04d}.json").unlink(missing_ok=True)
    if rec.backup:
        (folder / rec.backup).unlink(missing_ok=True)


def _landed(records: list[Record], client_id: str) -> list[Record]:
    """The history without writes that never landed (killed after their record, before the replace): the file
    still holds what was there before them."""
    while records:
        top = records[-1]
        now = _sha(safefile.read(Path(top.path)).raw)
        if now == top.written_sha or now != top.before_sha:
            break
        _drop(client_id, top)
        records = records[:-1]
    return records


def write(p: ConfigPlan) -> Path | None:
    """Write the planned config. What the file held is kept in BeeDeck's data folder first (that copy's path
    is returned; None where there was no file). Refuses, changing nothing, when the file changed after the plan
    was made (plan again and look at the new diff); :class:`AlreadyWritten` when it already says this."""
    with safefile.locked(_lock()):
        now = safefile.read(p.path)
        if now.raw != p.old_raw:
            if now.raw == p.new_raw:
                raise AlreadyWritten(f"{p.path} already says this (written by another BeeDeck meanwhile).")
            raise AgentConfigError(f"{p.path} changed since the diff was shown: look at the new diff before writing.")
        if not p.changes:
            return None
        records = _landed(_records(p.client_id), p.client_id)
        n = max((r.n for r in records), default=0) + 1
        folder = _history(p.client_id)
        backup = folder / f"{n:04d}.bak" if now.raw is not None else None
        exists = now.raw is not None
        rec = Record(n, str(now.target.path), str(now.target.real), now.target.link,
                     backup.name if backup else None, _sha(now.raw), _sha(p.new_raw),
                     now.mode if exists else 0o600, now.uid, now.gid, time.time())
        try:
            _private(p.client_id)
            if backup is not None and now.raw is not None:
                safefile.write_private(backup, now.raw)
            safefile.write_private(folder / f"{n:04d}.json", (json.dumps(asdict(rec), indent=2) + "\n").encode())
        except (AgentConfigError, OSError) as exc:
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise AgentConfigError(f"The undo record could not be written to {folder} ({why}), so {p.path} was not "
                                   "touched: free some space there or fix its permissions, then write again.") from None
        if not exists:
            now.target.real.parent.mkdir(parents=True, exist_ok=True)
        safefile.replace_file(now.target.real, p.new_raw, rec.mode, (now.uid, now.gid) if exists else None)
        return backup


def _restore_link(path: Path, link: str) -> None:
    tmp = path.with_name(f".{path.name}{safefile.TMP_TAG}{os.getpid()}-link")
    tmp.unlink(missing_ok=True)
    os.symlink(link, tmp)
    os.replace(tmp, path)


def undo(client_id: str, force: bool = False) -> str:
    """Put back what BeeDeck's last write replaced; returns what was done, in words. Refuses when the
    file was edited after BeeDeck wrote it (``force`` restores anyway; the edited text is kept too)."""
    with safefile.locked(_lock()):
        records = _landed(_records(client_id), client_id)
        if not records:
            raise AgentConfigError(f"BeeDeck has not written {client_id}'s config, so there is nothing to undo.")
        rec = records[-1]
        path, real = Path(rec.path), Path(rec.real)
        now = safefile.read(path)
        link_kept = rec.link is None or now.target.link == rec.link
        if (_sha(now.raw) != rec.written_sha or not link_kept) and not force:
            raise AgentConfigError(f"{path} was edited after BeeDeck wrote it: undo would lose those edits. "
                                   "Run undo with --force to restore anyway (the edited file is kept too).")
        if now.raw is not None and _sha(now.raw) != rec.written_sha:
            safefile.write_private(backups_dir(client_id) / f"edited-{time.time_ns()}-{path.name}", now.raw)
        if not link_kept and now.target.link is None and now.raw is not None:
            path.unlink()  # a plain file where the link was: the link comes back below
        said = _put_back(client_id, rec, real)
        if rec.link is not None and not link_kept:
            _restore_link(path, rec.link)
            said += f" and the link {path} → {rec.link}"
        _drop(client_id, rec)
        left = len(records) - 1
        return said + (f" ({left} earlier write{'s' if left != 1 else ''} can be undone too)" if left else "")


def _put_back(client_id: str, rec: Record, real: Path) -> str:
    if rec.backup is None:
        real.unlink(missing_ok=True)
        return f"removed {rec.path} (there was none before BeeDeck wrote it)"
    copy = Path(rec.backup) if rec.n == 0 else _history(client_id) / rec.backup
    try:
        data = copy.read_bytes()
    except FileNotFoundError:
        raise AgentConfigError(f"The copy {copy} is gone: nothing was changed.") from None
    mode = rec.mode if rec.n else safefile.read(real).mode
    owner = (rec.uid, rec.gid) if rec.uid >= 0 else None
    safefile.replace_file(real, data, mode, owner)
    return f"restored {rec.path} from {copy}"


def has_undo(client_id: str) -> bool:
    """True when BeeDeck wrote this client's config and can put the old one back."""
    try:
        return bool(_records(client_id))
    except AgentConfigError:
        return True  # a damaged record: undo says what to do
