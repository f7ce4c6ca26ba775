"""GGUF models already on disk: the Hub cache, BeeDeck's models folder, LM Studio's, user folders.

``scan()`` reads each header with the lean reader (architecture, quantisation, size), groups split
sets, marks drafts (DFlash in either format, DSpark, EAGLE-3, ``mtp-`` heads), pairs each target with
the drafts beside it (same folder, or same Hub / LM Studio repo: the sidecar convention, see
:mod:`beedeck.core.models.sidecars`) and says for each whether it can serve that target and on which
engine. ``find_local()`` / ``match()`` tie files to catalog entries so nothing is downloaded twice.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.models import sidecars
from beedeck.core.models.draft_kinds import DFLASH, DFLASH_LEGACY, DSPARK, EAGLE3, MTP
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect, read_header
from beedeck.core.models.hub.client import SPLIT_RE, hub_cache_dir
from beedeck.core.models.sidecars import Sidecar
from beedeck.core.printable import printable

log = logging.getLogger(__name__)

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
    kind: str = ""  # drafts: dflash, dflash-draft, dspark, eagle3, mtp, or "draft" (an architecture no engine knows)
    mtp_heads: int = 0  # targets: MTP (NextN) heads inside the file itself
    complete: bool = True  # False when shards of a split set are missing
    error: str | None = None  # header unreadable: the message from GGUFError
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)
    sidecars: list[Sidecar] = field(default_factory=list)  # targets: the drafts next to it, usable ones first

    def best_sidecar(self, generation: str | None = None, kinds: Sequence[str] | None = None) -> Sidecar | None:
        """The draft beside this target to offer (see :func:`sidecars.pick`), or None."""
        return sidecars.pick(self.sidecars, self.file_type_name, generation, kinds)

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
            "kind": self.kind or None, "mtp_heads": self.mtp_heads, "complete": self.complete, "error": self.error,
            "drafts": [s.to_json() for s in self.sidecars],
            "offered_draft": str(best.path) if (best := self.best_sidecar()) else None,
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
        model.error = printable(exc, 1000)  # it may quote a tensor name: no escape codes, no forged lines
        return
    model.metadata = header.metadata
    model.architecture = header.architecture
    ft = header.metadata.get("general.file_type")
    model.file_type = int(ft) if isinstance(ft, int) else None
    model.name = printable(header.metadata.get("general.name") or model.path.name)
    arch = model.architecture
    if sidecars.is_draft_architecture(arch):
        model.is_draft = True
        model.kind = {"dflash": DFLASH, "dflash-draft": DFLASH_LEGACY, "eagle3": EAGLE3}.get(arch, "draft")
        if arch == "dflash":
            model.kind = DSPARK if _has_markov_head(model) else DFLASH
        return
    heads = header.metadata.get(f"{arch}.nextn_predict_layers")
    model.mtp_heads = int(heads) if isinstance(heads, int) else 0
    if model.mtp_heads and _without_trunk(model):
        model.is_draft, model.kind, model.mtp_heads = True, MTP, 0


def _has_markov_head(model: LocalModel) -> bool:
    # DSpark is a dflash file with the Markov head (mainline common/speculative.cpp, draft_kinds.py).
    if model.metadata.get("dflash.has_confidence_head"):
        return True
    try:
        names = {t.name for t in read_header(model.path, tensors=True).tensors}
    except GGUFError:
        return False
    return bool({"markov_w1", "markov_w1.weight"} & names)


def _without_trunk(model: LocalModel) -> bool:
    """MTP heads and no layer 0: an ``mtp-`` sidecar (convert_hf_to_gguf.py --mtp), not a model of its own."""
    try:
        header = read_header(model.path, tensors=True)
    except GGUFError:
        return False
    return not any(t.name.startswith("blk.0.") for t in header.tensors)


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
            try:
                real = path.resolve()
            except (OSError, RuntimeError):  # a link that loops: listed with the reader's reason, not fatal
                real = path
            else:
                if real in seen or not real.exists():
                    continue
            seen.add(real)
            found.append((path, root, source))
    models = _group(found)
    for model in models:
        _inspect(model)
    pair_sidecars(models)
    models.sort(key=lambda m: (m.source, str(m.path)))
    return models


def _folder(m: LocalModel) -> tuple[str, str]:
    # Hub and LM Studio files belong to a repo (a Hub repo's files may sit in several snapshot folders).
    if m.repo and m.source in ("hf-cache", "lmstudio"):
        return m.source, m.repo.lower()
    return "dir", str(m.path.parent)


def pair_sidecars(models: Sequence[LocalModel]) -> None:
    """Set each target's ``sidecars``: every draft in its folder / repo, checked against it.

    In a shared folder (BeeDeck's downloads) a draft that serves one target there belongs to that
    one: it is not listed as unusable under the other targets of the folder.
    """
    groups: dict[tuple[str, str], list[LocalModel]] = defaultdict(list)
    for m in models:
        if m.error is None and m.complete:
            groups[_folder(m)].append(m)
    for members in groups.values():
        drafts = [m for m in members if m.is_draft]
        targets = [m for m in members if not m.is_draft]
        if not drafts or not targets:
            continue
        infos: dict[Path, ModelInfo | str] = {}
        found: dict[Path, list[Sidecar]] = {}
        for t in targets:
            tinfo = _info(t, infos)
            if isinstance(tinfo, str):
                continue
            found[t.path] = []
            for d in drafts:
                dinfo = _info(d, infos)
                found[t.path].append(sidecars.unreadable(d.path, d.filename, d.kind, dinfo) if isinstance(dinfo, str)
                                     else sidecars.check_sidecar(tinfo, dinfo, d.filename))
        owned = {s.path for lst in found.values() for s in lst if s.usable}
        for t in targets:
            listed = [s for s in found.get(t.path, []) if s.usable or s.path not in owned]
            t.sidecars = sorted(listed, key=partial(_order, quant=t.file_type_name))


def _order(side: Sidecar, quant: str) -> tuple[int, int, int, int, str]:
    return sidecars.order_key(side, quant)


def sidecars_next_to(target: Path | str) -> list[Sidecar]:
    """The drafts in ``target``'s own folder, checked against it, the one to offer first (reads headers:
    call it off the GUI thread). For the launch form: what to pre-fill when a target is picked."""
    path = Path(target)
    models = _group([(f, path.parent, "user") for f in sorted(path.parent.glob("*")) if f.suffix.lower() == ".gguf"
                     and f.is_file()])
    for m in models:
        _inspect(m)
    pair_sidecars(models)
    return next((m.sidecars for m in models if m.path == path or path in m.files), [])


def _info(m: LocalModel, cache: dict[Path, ModelInfo | str]) -> ModelInfo | str:
    """The full header (tensor table, token list) of a model, or the error text; read once."""
    if m.path not in cache:
        try:
            cache[m.path] = inspect(m.path)
        except GGUFError as exc:
            cache[m.path] = printable(exc, 1000)
    return cache[m.path]


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
