"""Writing a client's config: the plan (the unified diff, shown before anything is written), the
write (what was there backed up first, then an atomic replace) and undo (the backup restored, or the
file removed where there was none). Nothing is ever overwritten silently: :func:`write` takes the
plan the user saw and refuses when the file changed since.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths
from beedeck.core.agents.clients import AgentClient, AgentConfigError
from beedeck.core.agents.endpoint import Endpoint


@dataclass(frozen=True)
class ConfigPlan:
    """What writing ``client``'s config would do. ``old`` is None where there is no file yet."""

    client_id: str
    path: Path
    old: str | None
    new: str

    @property
    def changes(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        """The unified diff of the change (empty when the file already says this)."""
        return "".join(difflib.unified_diff(
            (self.old or "").splitlines(keepends=True), self.new.splitlines(keepends=True),
            fromfile=str(self.path) if self.old is not None else "/dev/null", tofile=str(self.path)))


def _sha(text: str | None) -> str:
    return hashlib.sha256((text or "").encode()).hexdigest() if text is not None else ""


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise AgentConfigError(f"{path} is not UTF-8 text: move it aside, then write again.") from None
    except OSError as exc:
        raise AgentConfigError(f"{path} cannot be read ({exc.strerror}): check its permissions.") from None


def plan(client: AgentClient, ep: Endpoint) -> ConfigPlan:
    """The change writing ``client``'s config for ``ep`` would make (reads the file, writes nothing)."""
    if client.config is None or client.render is None:
        raise AgentConfigError(f"{client.label} has no config file of its own: use the environment shown by "
                               f"`beedeck agent show {client.id}`.")
    path = client.config()
    old = _read(path)
    return ConfigPlan(client.id, path, old, client.render(ep, old))


def backups_dir(client_id: str) -> Path:
    return paths.data_dir() / "agent-backups" / client_id


def _manifest(client_id: str) -> Path:
    return backups_dir(client_id) / "last-write.json"


def write(p: ConfigPlan) -> Path | None:
    """Write the planned config. The file's earlier text is kept in BeeDeck's data folder first (the
    backup's path is returned; None where there was no file). Refuses, changing nothing, when the file
    changed after the plan was made (plan again and look at the new diff)."""
    now = _read(p.path)
    if now != p.old:
        raise AgentConfigError(f"{p.path} changed since the diff was shown: look at the new diff before writing.")
    if not p.changes:
        return None
    folder = backups_dir(p.client_id)
    folder.mkdir(parents=True, exist_ok=True)
    backup = None
    if p.old is not None:
        backup = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**9:09d}-{p.path.name}"
        paths.atomic_write_text(backup, p.old)
    p.path.parent.mkdir(parents=True, exist_ok=True)
    paths.atomic_write_text(p.path, p.new)
    record = {"path": str(p.path), "backup": str(backup) if backup else None, "written_sha256": _sha(p.new)}
    paths.atomic_write_text(_manifest(p.client_id), json.dumps(record, indent=2) + "\n")
    return backup


def undo(client_id: str, force: bool = False) -> str:
    """Put back what BeeDeck's last write replaced; returns what was done, in words. Refuses when the
    file was edited after BeeDeck wrote it (``force`` restores anyway; the edited text is backed up)."""
    try:
        record = json.loads(_manifest(client_id).read_text(encoding="utf-8"))
        path = Path(record["path"])
        backup = Path(record["backup"]) if record.get("backup") else None
    except FileNotFoundError:
        raise AgentConfigError(f"BeeDeck has not written {client_id}'s config, so there is nothing to undo.") from None
    except (ValueError, KeyError, TypeError):
        raise AgentConfigError(f"The undo record {_manifest(client_id)} is damaged: restore by hand from "
                               f"{backups_dir(client_id)}.") from None
    current = _read(path)
    if current is not None and _sha(current) != record.get("written_sha256") and not force:
        raise AgentConfigError(f"{path} was edited after BeeDeck wrote it: undo would lose those edits. "
                               "Run undo with --force to restore anyway (the edited file is backed up too).")
    if current is not None and _sha(current) != record.get("written_sha256"):
        paths.atomic_write_text(backups_dir(client_id) / f"edited-{time.time_ns()}-{path.name}", current)
    if backup is not None:
        if not backup.is_file():
            raise AgentConfigError(f"The backup {backup} is gone: nothing was changed.")
        paths.atomic_write_text(path, backup.read_text(encoding="utf-8"))
        said = f"restored {path} from {backup}"
    else:
        path.unlink(missing_ok=True)
        said = f"removed {path} (there was none before BeeDeck wrote it)"
    _manifest(client_id).unlink()
    return said


def has_undo(client_id: str) -> bool:
    """True when BeeDeck wrote this client's config and can put the old one back."""
    return _manifest(client_id).is_file()
