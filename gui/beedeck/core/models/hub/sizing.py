"""Size any GGUF repo on the Hub before downloading it: the file list from huggingface_hub, each
model's header by HTTP range requests (:mod:`hub.range_reader`), read by the same GGUF reader as a local file.

A split model (``-00001-of-N``) is sized from all its parts' listed sizes; part 1's header gives the
metadata, each further part's own (small) header its share of the tensor table, so the planner sees
exactly the tensors a download would hold. ``mmproj`` files (vision projectors) are not models to
plan and are listed as skipped.

What was read is cached per repo revision under ``<cache dir>/hub-sizing/<owner>--<name>/<commit>.json``
(:mod:`gguf.as_json`), with ``refs/<revision>`` naming the commit, so a repo sized once is sized again
offline. ``quants`` sizes only some quants (the catalog's, :mod:`catalog_sizing`): such a record says which
it holds, and a later call that wants more reads only the missing files and merges them in. A folder
``resources/hub-headers`` of the same records would be read as headers BeeDeck ships; none is shipped
(docs/architecture.md, "Where the catalog's sizes come from": no source here holds the real headers).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from beedeck.core import paths
from beedeck.core.download import OfflineError
from beedeck.core.models.draft_kinds import DFLASH, draft_kind, is_dflash2, is_mtp_only, mtp_layers
from beedeck.core.models.gguf import as_json as gguf_json
from beedeck.core.models.gguf.reader import (
    ArrayInfo,
    Budget,
    GGUFError,
    GGUFHeader,
    ModelInfo,
    check_split_set,
    model_info,
    read_header_from,
)
from beedeck.core.models.hub import client as hub
from beedeck.core.models.hub.range_reader import FIRST_RANGE, RangeReader, http_ranges

log = logging.getLogger(__name__)

CACHE_FORMAT = 1
PART_RANGE = 64 * 1024  # a further part's header is only its split keys and its tensor table
REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_QUANT_RE = re.compile(r"(?:^|[-._])((?:UD-)?(?:I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32|MXFP4(?:_MOE)?|TQ\d_\d))$",
                       re.IGNORECASE)


class SizingError(hub.HubError):
    """The repo could not be sized; the message says why and what to do."""


@dataclass
class RemoteModel:
    """One GGUF model of a repo (all parts of a split one), sized from its header(s)."""

    filename: str  # the first part
    parts: list[str]
    size: int
    quant: str
    kind: str  # "target", "dflash", "dflash2", "dspark", "eagle3", "dflash-draft", "mtp-head"
    info: ModelInfo
    bytes_read: int = 0  # over the network, this time (0 from a cache)
    tokenizer_sha256: str = ""

    @property
    def mtp_heads(self) -> int:
        return mtp_layers(self.info) if self.kind == "target" else 0


@dataclass
class RepoSizing:
    repo: str
    revision: str  # the commit the records belong to
    models: list[RemoteModel]
    skipped: list[str] = field(default_factory=list)
    source: str = "hub"  # "hub", "cache" (this machine's) or "shipped" (BeeDeck's resources)
    quants: list[str] | None = None  # the quants this record holds when it holds only some (None: every GGUF)
    bytes_read: int = 0
    requests: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def targets(self) -> list[RemoteModel]:
        return [m for m in self.models if m.kind == "target"]

    def drafts(self) -> list[RemoteModel]:
        return [m for m in self.models if m.kind != "target"]

    def covers(self, quants: set[str] | None) -> bool:
        """Whether this record holds every quant asked for (None: every GGUF of the repo)."""
        if self.quants is None:
            return True
        return quants is not None and quants <= set(self.quants)


def check_repo_name(repo: str) -> str:
    repo = repo.strip().strip("/")
    if repo.startswith(("https://huggingface.co/", "http://huggingface.co/")):
        repo = "/".join(urlsplit(repo).path.strip("/").split("/")[:2])
    if not REPO_RE.match(repo) or ".." in repo:
        raise SizingError(f"{repo!r} is not a Hub repo name: write it as OWNER/NAME, e.g. unsloth/Qwen3.8-27B-GGUF.")
    return repo


def quant_of(filename: str, info: ModelInfo | None = None) -> str:
    stem = Path(filename).name.removesuffix(".gguf")
    split = hub.split_parts(Path(filename).name)
    if split:
        stem = split[0]
    m = _QUANT_RE.search(stem)
    if m:
        return m.group(1).upper()
    return (info.file_type if info is not None else "") or "?"


def kind_of(info: ModelInfo) -> str:
    k = draft_kind(info)
    if k is None:
        return "mtp-head" if is_mtp_only(info) else "target"
    return "dflash2" if k == DFLASH and is_dflash2(info) else k


def _wanted(quants: set[str] | None, filename: str) -> bool:
    return quants is None or quant_of(filename) in quants


def _groups(files: list[hub.HubFile]) -> tuple[list[list[hub.HubFile]], list[str]]:
    by_name = {f.filename: f for f in files}
    groups: list[list[hub.HubFile]] = []
    skipped: list[str] = []
    for f in sorted(files, key=lambda f: f.filename):
        if not f.filename.lower().endswith(".gguf"):
            continue
        if f.basename.lower().startswith("mmproj"):
            skipped.append(f"{f.filename}: a vision projector (mmproj), not a model to plan")
            continue
        split = hub.split_parts(f.basename)
        if split is None:
            groups.append([f])
            continue
        stem, n = split
        if not f.basename.endswith(f"-00001-of-{n:05d}.gguf"):
            continue
        folder = f.filename[: -len(f.basename)]
        names = [f"{folder}{stem}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]
        missing = [x for x in names if x not in by_name]
        if missing:
            skipped.append(f"{f.filename}: part 1 of {n}, but {', '.join(missing)} is not in the repo")
            continue
        groups.append([by_name[x] for x in names])
    return groups, skipped


def _storage(cache_dir: Path, repo: str) -> Path:
    return cache_dir / repo.replace("/", "--")


def _cache_roots(cache_dir: Path | None) -> list[tuple[Path, str]]:
    roots = [(cache_dir or paths.cache_dir() / "hub-sizing", "cache")]
    roots.append((paths.resource_path("hub-headers"), "shipped"))
    return roots


def load_cached(repo: str, revision: str | None = None, cache_dir: Path | None = None) -> RepoSizing | None:
    """The cached sizing of ``repo`` at ``revision`` (a commit, or a branch whose ref is cached; None: main)."""
    for root, source in _cache_roots(cache_dir):
        folder = _storage(root, repo)
        commit = revision or "main"
        ref = folder / "refs" / commit
        if ref.is_file():
            with contextlib.suppress(OSError):
                commit = ref.read_text(encoding="utf-8").strip()
        record = folder / f"{commit}.json"
        if not re.fullmatch(r"[0-9a-f]{7,64}", commit) or not record.is_file():
            continue
        try:
            d = json.loads(record.read_text(encoding="utf-8"))
            if d.get("format") != CACHE_FORMAT or d.get("repo") != repo:
                raise ValueError("not a sizing record of this repo")
            models = [RemoteModel(m["filename"], m["parts"], int(m["size"]), m["quant"], m["kind"],
                                  gguf_json.decode(m["info"]), 0, m.get("tokenizer_sha256", ""))
                      for m in d["models"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the unreadable sizing record %s: %s", record, exc)
            continue
        quants = d.get("quants")
        return RepoSizing(repo, commit, models, list(d.get("skipped", [])), source,
                          None if quants is None else [str(q) for q in quants])
    return None


def _save(sizing: RepoSizing, revision: str | None, cache_dir: Path | None) -> None:
    folder = _storage(cache_dir or paths.cache_dir() / "hub-sizing", sizing.repo)
    record = {"format": CACHE_FORMAT, "repo": sizing.repo, "revision": sizing.revision, "skipped": sizing.skipped,
              "quants": sizing.quants,
              "models": [{"filename": m.filename, "parts": m.parts, "size": m.size, "quant": m.quant, "kind": m.kind,
                          "tokenizer_sha256": m.tokenizer_sha256, "info": gguf_json.encode(m.info)}
                         for m in sizing.models]}
    try:
        paths.atomic_write_text(folder / f"{sizing.revision}.json", json.dumps(record, separators=(",", ":")))
        for ref in {revision or "main", sizing.revision}:
            if ref != sizing.revision and re.fullmatch(r"[\w.-]+", ref):
                paths.atomic_write_text(folder / "refs" / ref, sizing.revision)
    except OSError as exc:
        log.warning("could not cache the sizing of %s: %s", sizing.repo, exc)


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


def _with_access_note(exc: hub.HubError) -> hub.HubError:
    if isinstance(exc, (hub.TokenRequiredError, hub.GatedRepoError, hub.AccessDeniedError)):
        return type(exc)(f"{exc} (Sizing reads only the GGUF headers, but the Hub asks for the same access as "
                         "a download.)")
    return exc


def size_repo(repo: str, *, revision: str | None = None, token: str | None = None, endpoint: str | None = None,
              cache_dir: Path | None = None, client: httpx2.Client | None = None, offline: bool = False,
              first_range: int = FIRST_RANGE, cancel_event: threading.Event | None = None,
              on_file: Callable[[str, int, int], None] | None = None,
              quants: Collection[str] | None = None) -> RepoSizing:
    """Size every GGUF model in ``repo`` (``quants``: only those, by the file names' quant); raises the hub
    errors (gated, missing, offline) or SizingError."""
    repo = check_repo_name(repo)
    want = None if quants is None else {q.upper() for q in quants}
    t0 = time.monotonic()
    if offline:
        cached = load_cached(repo, revision, cache_dir)
        if cached is None:
            raise OfflineError(f"{repo} has not been sized on this machine yet and BeeDeck is offline: connect "
                               "once to read its headers (a few MB), then it works offline.")
        if not cached.covers(want):  # some quants were read earlier (the catalog's): those answer, said so
            cached.notes.append(f"Offline: only the quants read earlier ({', '.join(cached.quants or [])}) are "
                                "sized; connect to read the others.")
        return cached
    tok = hub.resolve_token(token)
    try:
        info = hub.repo_info(repo, revision=revision, token=tok, endpoint=endpoint)
    except OfflineError:
        cached = load_cached(repo, revision, cache_dir)
        if cached is None:  # (one holding fewer quants than asked for still answers, for what it holds)
            raise
        cached.notes.append("The Hub cannot be reached: these sizes come from the copy of the headers read "
                            f"earlier (revision {cached.revision[:12]}).")
        return cached
    commit = info.commit or revision or "main"
    cached = load_cached(repo, commit, cache_dir)
    if cached is not None and cached.covers(want):
        return cached
    groups, skipped = _groups(info.files)
    if not groups:
        raise SizingError(f"{repo} holds no GGUF model files: BeeDeck runs GGUF models; look for a '-GGUF' repo "
                          "of this model.")
    have = {m.filename: m for m in cached.models} if cached is not None else {}
    if cached is not None:  # a record of some quants of this revision: read only what it lacks
        skipped = list(dict.fromkeys(cached.skipped + skipped))
    groups = [g for g in groups if _wanted(want, g[0].filename) and g[0].filename not in have]
    ep = (endpoint or os.environ.get("HF_ENDPOINT") or hub.DEFAULT_ENDPOINT).rstrip("/")
    own = client is None
    http = client or httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(10.0, read=20.0))
    models: list[RemoteModel] = []
    requests = 0
    sibling: _Sibling | None = None
    try:
        for index, group in enumerate(groups):
            if on_file is not None:
                on_file(group[0].filename, index, len(groups))
            try:
                model, n, sibling = _size_group(repo, commit, group, tok, ep, http, first_range, cancel_event,
                                                sibling)
            except (GGUFError, SizingError) as exc:  # this file cannot be sized; the others still can
                skipped.append(f"{group[0].filename}: {exc}")
                continue
            except hub.HubError as exc:
                raise _with_access_note(exc) from None
            models.append(model)
            requests += n
    finally:
        if own:
            http.close()
    # A cached record that got here holds only some quants (a whole one covers every ask and returned above)
    held = None if want is None else sorted(want | set(cached.quants or [] if cached is not None else []))
    sizing = RepoSizing(repo, commit, [*have.values(), *models], skipped, "hub", held,
                        sum(m.bytes_read for m in models), requests, time.monotonic() - t0)
    if re.fullmatch(r"[0-9a-f]{7,64}", commit):
        _save(sizing, revision, cache_dir)
    return sizing


def _reader(repo: str, commit: str, f: hub.HubFile, tok: str | None, ep: str, http: httpx2.Client, first: int,
            cancel_event: threading.Event | None) -> RangeReader:
    from huggingface_hub.utils import build_hf_headers

    meta = hub.file_metadata(repo, f.filename, revision=commit, token=tok, endpoint=ep)
    size = f.size if f.size is not None else meta.size
    if not size:
        raise SizingError(f"The Hub lists no size for {repo}/{f.filename}: it cannot be sized before download.")
    headers = dict(build_hf_headers(token=tok or False, library_name="beedeck"))
    if not _same_origin(meta.location, ep):
        headers.pop("authorization", None)  # never send the token to the CDN
    return RangeReader(http_ranges(http, meta.location, headers, f.filename, cancel_event=cancel_event), size, first)


@dataclass
class _Sibling:
    """What the first model read in a repo showed of its big string arrays (token list, merges): later quants
    with the same array (same count, same byte length) are read with those bytes jumped over, unfetched."""

    arrays: dict[str, tuple[int, int]]  # key -> (count, byte length)
    tokens_sha256: str


def _sibling_of(head: GGUFHeader, digest: str) -> _Sibling:
    arrays = {k: (v.length, v.end - v.offset) for k, v in head.metadata.items()
              if isinstance(v, ArrayInfo) and v.elem_type == 8 and v.offset is not None and v.end is not None}
    return _Sibling(arrays, digest)


def _exact(head: GGUFHeader, size: int) -> bool:
    """The tensor table accounts for the file to the byte (up to the trailing alignment padding)."""
    align = int(head.metadata.get("general.alignment", 32)) or 32
    need = head.data_offset + max((t.offset + t.nbytes for t in head.tensors), default=0)
    return 0 <= size - need < align


def _size_group(repo: str, commit: str, group: list[hub.HubFile], tok: str | None, ep: str, http: httpx2.Client,
                first: int, cancel_event: threading.Event | None,
                sibling: _Sibling | None) -> tuple[RemoteModel, int, _Sibling]:
    reader = _reader(repo, commit, group[0], tok, ep, http, first, cancel_event)
    name = Path(group[0].basename)
    head = None
    spent = (0, 0, 0)  # (bytes read, requests, file size) of the further parts' readers, let go once read
    if sibling is not None and sibling.arrays:
        try:
            head = read_header_from(reader, name, reader.size, tensors=True, known=sibling.arrays)
        except GGUFError:
            head = None
        if head is not None and not _exact(head, reader.size):  # (a split's part 1 holds its own tensors)
            head = None
        if head is None:  # the arrays differ after all: read this header in full
            reader = _reader(repo, commit, group[0], tok, ep, http, first, cancel_event)
    jumped = head is not None
    budget = Budget()  # the parts of one model share one header budget, as a local split model's do
    if head is None:
        head = read_header_from(reader, name, reader.size, tensors=True, budget=budget)
    rest = []
    for f in group[1:]:
        r = _reader(repo, commit, f, tok, ep, http, PART_RANGE, cancel_event)
        rest.append(read_header_from(r, Path(f.basename), r.size, tensors=True, budget=budget))
        spent = (spent[0] + r.bytes_read, spent[1] + r.requests, spent[2] + r.size)
    names = [Path(f.basename) for f in group]
    if rest:
        check_split_set(head, rest, names)
    info = model_info(head, rest, names, reader.size + spent[2])
    if not info.architecture:
        raise GGUFError(f"{group[0].basename} has no general.architecture key: it is not a llama.cpp model.")
    digest = ""
    tokens = head.metadata.get("tokenizer.ggml.tokens")
    if jumped and sibling is not None and "tokenizer.ggml.tokens" in sibling.arrays:
        digest = sibling.tokens_sha256  # the same token list (count and bytes) as the sibling's: not fetched
    elif isinstance(tokens, ArrayInfo) and tokens.offset is not None and tokens.end is not None:
        sha = hashlib.sha256()
        for start in range(tokens.offset, tokens.end, 1 << 20):  # in chunks: no second copy of the list
            sha.update(reader.slice(start, min(start + (1 << 20), tokens.end)))
        digest = sha.hexdigest()
    found = sibling if jumped and sibling is not None else _sibling_of(head, digest)
    # Through the cache's own form: a live sizing is exactly what a later offline one reads (and holds no
    # file offsets into a file that is not on this disk).
    info = gguf_json.decode(gguf_json.encode(info))
    model = RemoteModel(group[0].filename, [f.filename for f in group], info.file_size, quant_of(group[0].filename, info),
                        kind_of(info), info, reader.bytes_read + spent[0], digest)
    return model, reader.requests + spent[1], found


def summary(s: RepoSizing) -> dict[str, Any]:
    """Bytes read and time, per repo: what the issue asks to measure."""
    total = sum(m.size for m in s.models)
    return {"repo": s.repo, "revision": s.revision, "source": s.source, "models": len(s.models),
            "bytes_read": s.bytes_read, "requests": s.requests, "seconds": round(s.seconds, 3),
            "file_bytes": total, "fraction_read": (s.bytes_read / total) if total else 0.0}
