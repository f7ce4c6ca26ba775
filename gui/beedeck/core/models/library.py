"""GGUF models already on disk: the Hub cache, BeeDeck's models folder, LM Studio's, user folders.

``scan()`` reads each header with the lean reader (architecture, quantisation, size), groups split
sets, marks DFlash drafters, and ``find_local()`` / ``match()`` tie files to catalog entries so
nothing is downloaded twice.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.models.gguf import GGUFError, read_header
from beedeck.core.models.hub import SPLIT_RE, hub_cache_dir

log = logging.getLogger(__name__)

DRAFT_ARCHITECTURES = frozenset({"dflash", "dflash-draft"})

# llama.h `enum llama_ftype` (mainline, checked in /work/src-cache/llama.cpp/include/llama.h).
FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S",
    12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K",
    19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL",
    26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
    36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}


@dataclass
class LocalModel:
    """A GGUF model on disk: one file, or a complete/incomplete split set (``files`` in shard order)."""

    path: Path  # the file to hand to llama-server (shard 1 of a split set)
    files: list[Path]
    size: int  # bytes over all files present
    source: str  # "hf-cache", "beedeck", "lmstudio" or "user"
    architecture: str = ""
    file_type: int | None = None
    name: str = ""  # general.name, else the file name
    repo: str | None = None  # "org/name" when the location tells it (Hub cache, LM Studio layout)
    filename: str = ""  # file name relative to the repo (Hub cache) or the base name
    is_draft: bool = False
    complete: bool = True  # False when shards of a split set are missing
    error: str | None = None  # header unreadable: the message from GGUFError
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def file_type_name(self) -> str:
        if self.file_type is None:
            return ""
        return FILE_TYPES.get(self.file_type, f"type {self.file_type}")

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "files": [str(f) for f in self.files], "size": self.size,
            "source": self.source, "architecture": self.architecture, "file_type": self.file_type_name,
            "name": self.name, "repo": self.repo, "filename": self.filename, "is_draft": self.is_draft,
            "complete": self.complete, "error": self.error,
        }


def lmstudio_dirs() -> list[Path]:
    home = Path.home()
    return [home / ".lmstudio" / "models", home / ".cache" / "lm-studio" / "models"]


def default_dirs() -> list[tuple[Path, str]]:
    """Where BeeDeck looks without being told: the Hub cache, its own folder, LM Studio's folders."""
    return [(hub_cache_dir(), "hf-cache"), (paths.models_dir(), "beedeck")] + [(d, "lmstudio") for d in lmstudio_dirs()]


def _walk_ggufs(root: Path) -> Iterable[Path]:
    # followlinks=False: the Hub cache's snapshot entries are symlinks to files, which os.walk lists
    # as files anyway; not following directory links avoids loops in user folders.
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "blobs"]
        for name in filenames:
            if name.lower().endswith(".gguf"):
                yield Path(dirpath) / name


def _origin(path: Path, root: Path, source: str) -> tuple[str | None, str]:
    """(repo, filename-in-repo) from where the file sits."""
    rel = path.relative_to(root)
    parts = rel.parts
    if source == "hf-cache" and len(parts) >= 4 and parts[0].startswith("models--") and parts[1] == "snapshots":
        return parts[0][len("models--"):].replace("--", "/", 1), "/".join(parts[3:])
    if source == "lmstudio" and len(parts) >= 3:
        return f"{parts[0]}/{parts[1]}", "/".join(parts[2:])
    return None, path.name


def _inspect(model: LocalModel) -> None:
    try:
        header = read_header(model.path)
    except GGUFError as exc:
        model.error = str(exc)
        return
    model.metadata = header.metadata
    model.architecture = header.architecture
    ft = header.metadata.get("general.file_type")
    model.file_type = int(ft) if isinstance(ft, int) else None
    model.name = str(header.metadata.get("general.name") or model.path.name)
    model.is_draft = model.architecture in DRAFT_ARCHITECTURES


def _group(found: list[tuple[Path, Path, str]]) -> list[LocalModel]:
    singles: list[LocalModel] = []
    sets: dict[tuple[Path, str, int], dict[int, tuple[Path, Path, str]]] = {}
    for path, root, source in found:
        m = SPLIT_RE.match(path.name)
        if m:
            sets.setdefault((path.parent, m.group("stem"), int(m.group("n"))), {})[int(m.group("idx"))] = (path, root, source)
            continue
        repo, filename = _origin(path, root, source)
        singles.append(LocalModel(path=path, files=[path], size=_size(path), source=source, repo=repo,
                                  filename=filename, name=path.name))
    for (_parent, _stem, n), shards in sets.items():
        ordered = [shards[i][0] for i in sorted(shards)]
        first, root, source = shards[min(shards)]
        repo, filename = _origin(first, root, source)
        singles.append(LocalModel(path=first, files=ordered, size=sum(_size(p) for p in ordered), source=source,
                                  repo=repo, filename=filename, name=first.name,
                                  complete=sorted(shards) == list(range(1, n + 1))))
    return singles


def _size(path: Path) -> int:
    try:
        return path.stat().st_size  # follows the Hub cache's symlink to the blob
    except OSError:
        return 0


def scan(dirs: Sequence[Path | str] | None = None) -> list[LocalModel]:
    """Find GGUF models. ``dirs=None`` scans default_dirs(); given folders are scanned as "user"
    (or with the source of the default folder they are). The same file seen twice (e.g. two Hub
    snapshots pointing at one blob) is listed once."""
    defaults = {d.resolve(): s for d, s in default_dirs()}
    roots = default_dirs() if dirs is None else [(Path(d).expanduser(), defaults.get(Path(d).expanduser().resolve(), "user")) for d in dirs]
    found: list[tuple[Path, Path, str]] = []
    seen: set[Path] = set()
    for root, source in roots:
        if not root.is_dir():
            continue
        if source == "user" and any(root.glob("models--*")):
            source = "hf-cache"  # a Hub cache picked by the user
        for path in sorted(_walk_ggufs(root)):
            real = path.resolve()
            if real in seen or not real.exists():
                continue
            seen.add(real)
            found.append((path, root, source))
    models = _group(found)
    for model in models:
        _inspect(model)
    models.sort(key=lambda m: (m.source, str(m.path)))
    return models


def _norm(name: str) -> str:
    return name.rsplit("/", 1)[-1].lower()


def match(local: LocalModel, entries: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The (repo, filename) among ``entries`` this local model is: same repo and file when the repo is
    known, else the same file name (file names of quantised GGUFs are specific enough)."""
    if local.repo:
        for repo, filename in entries:
            if repo.lower() == local.repo.lower() and _norm(filename) == _norm(local.filename):
                return repo, filename
    for repo, filename in entries:
        if _norm(filename) == _norm(local.path.name):
            return repo, filename
    return None


def find_local(repo: str, filename: str, models: Sequence[LocalModel] | None = None) -> LocalModel | None:
    """A complete, readable local copy of ``repo/filename`` (shard 1 names a split set), or None."""
    candidates = [m for m in (scan() if models is None else models) if m.complete and m.error is None]
    found = [m for m in candidates if match(m, [(repo, filename)]) is not None]
    # Prefer an exact repo match over a same-named file from elsewhere.
    found.sort(key=lambda m: 0 if (m.repo or "").lower() == repo.lower() else 1)
    return found[0] if found else None


def match_catalog(models: Sequence[LocalModel], entries: Sequence[tuple[str, str]]) -> dict[Path, tuple[str, str]]:
    """Map each local model's path to the catalog entry it is, for those that are one."""
    out: dict[Path, tuple[str, str]] = {}
    for m in models:
        hit = match(m, entries)
        if hit is not None:
            out[m.path] = hit
    return out


def catalog_entries(catalog: Any = None) -> list[tuple[str, str]]:
    """Every (repo, file) the shipped catalog (core/catalog.py) names, targets and drafts alike."""
    from beedeck.core.models import catalog as catalog_mod

    cat = catalog if catalog is not None else catalog_mod.load()
    out: list[tuple[str, str]] = []
    for pair in cat.pairs:
        for spec in (pair.target, *pair.drafts):
            out.extend((spec.repo, f.file) for f in spec.files)
    return out
