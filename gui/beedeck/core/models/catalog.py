"""The shipped catalog of DFlash pairs (``resources/catalog.json``), loaded into dataclasses.

Only facts from BeeDeck's sources are in the file; unknown sizes are null. :func:`refresh_sizes`
updates sizes from the Hub through a caller-supplied callable (no network here).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.known_issues import dflash_target_archs

DRAFT_FORMAT_GENERATIONS = {"dflash": (Generation.BEE_B, Generation.MAINLINE), "dflash-draft": (Generation.BEE_A,)}


class CatalogError(ValueError):
    """catalog.json is malformed; the message names the entry and the field."""


@dataclass(frozen=True)
class CatalogFile:
    quant: str
    file: str
    size: int | None  # exact bytes when known
    approx_size: int | None  # the source's rounded figure

    @property
    def best_size(self) -> int | None:
        return self.size or self.approx_size


@dataclass(frozen=True)
class ModelSpec:
    """One side of a pair: repository, files and (where the sources give them) architecture numbers."""

    repo: str
    files: tuple[CatalogFile, ...]
    arch: dict[str, Any] | None
    fmt: str = ""  # drafts: "dflash" or "dflash-draft"
    params_b: float | None = None  # billions of parameters (from the model's name)
    active_params_b: float | None = None  # MoE: parameters read per token

    def file(self, quant: str) -> CatalogFile | None:
        return next((f for f in self.files if f.quant == quant), None)

    @property
    def generations(self) -> tuple[Generation, ...]:
        return DRAFT_FORMAT_GENERATIONS.get(self.fmt, ())


@dataclass(frozen=True)
class Pair:
    """A target and its DFlash draft(s)."""

    id: str
    title: str
    target: ModelSpec
    drafts: tuple[ModelSpec, ...]
    generations: tuple[Generation, ...]
    recommended: dict[str, str] | None
    flags: dict[str, Any]
    notes: str = ""

    def drafts_for(self, generation: Generation) -> list[ModelSpec]:
        arch = (self.target.arch or {}).get("architecture", "")
        out = []
        for d in self.drafts:
            if generation not in d.generations:
                continue
            supported = dflash_target_archs(generation.value)
            if supported is not None and arch not in supported:
                continue
            out.append(d)
        return out


@dataclass(frozen=True)
class Catalog:
    pairs: tuple[Pair, ...]
    starter: dict[str, Any] = field(default_factory=dict)

    def pair(self, pair_id: str) -> Pair:
        for p in self.pairs:
            if p.id == pair_id:
                return p
        raise KeyError(pair_id)


def _file(d: dict[str, Any], where: str) -> CatalogFile:
    for k in ("quant", "file"):
        if not isinstance(d.get(k), str) or not d[k]:
            raise CatalogError(f"catalog.json: {where} has no '{k}'.")
    if not d["file"].endswith(".gguf"):
        raise CatalogError(f"catalog.json: {where} file {d['file']!r} is not a .gguf name.")
    for k in ("size", "approx_size"):
        v = d.get(k)
        if v is not None and (not isinstance(v, int) or v <= 0):
            raise CatalogError(f"catalog.json: {where} {d['file']} has a bad {k} {v!r} (bytes or null).")
    return CatalogFile(d["quant"], d["file"], d.get("size"), d.get("approx_size"))


def _spec(d: dict[str, Any], where: str, draft: bool) -> ModelSpec:
    repo = d.get("repo")
    if not isinstance(repo, str) or repo.count("/") != 1:
        raise CatalogError(f"catalog.json: {where} has no valid 'repo' (owner/name).")
    fmt = d.get("format", "")
    if draft and fmt not in DRAFT_FORMAT_GENERATIONS:
        raise CatalogError(f"catalog.json: {where} draft format {fmt!r} is neither 'dflash' nor 'dflash-draft'.")
    files = tuple(_file(f, f"{where} {repo}") for f in d.get("files", []))
    arch = d.get("arch")
    if arch is not None and not isinstance(arch, dict):
        raise CatalogError(f"catalog.json: {where} 'arch' must be an object or null.")
    return ModelSpec(repo, files, arch, fmt, d.get("params_b"), d.get("active_params_b"))


def parse(data: dict[str, Any]) -> Catalog:
    """Validate and convert catalog data; raises CatalogError naming the bad entry."""
    pairs = []
    seen: set[str] = set()
    for i, p in enumerate(data.get("pairs", [])):
        pid = p.get("id") or f"#{i}"
        if pid in seen:
            raise CatalogError(f"catalog.json: pair id {pid!r} appears twice.")
        seen.add(pid)
        target = _spec(p.get("target") or {}, f"pair {pid} target", False)
        drafts = tuple(_spec(d, f"pair {pid} draft", True) for d in [p.get("draft") or {}] + p.get("alt_drafts", []))
        try:
            gens = tuple(Generation(g) for g in p.get("generations", []))
        except ValueError as exc:
            raise CatalogError(f"catalog.json: pair {pid} names an unknown engine generation ({exc}).") from None
        for g in gens:
            if not any(g in d.generations for d in drafts):
                raise CatalogError(f"catalog.json: pair {pid} claims {g.value}, but none of its drafts' formats runs there.")
        rec = p.get("recommended")
        if rec:
            if target.file(rec.get("target_quant", "")) is None or drafts[0].file(rec.get("draft_quant", "")) is None:
                raise CatalogError(f"catalog.json: pair {pid} recommends a quant it does not list.")
        pairs.append(Pair(pid, p.get("title", pid), target, drafts, gens, rec, p.get("flags") or {}, p.get("notes", "")))
    return Catalog(tuple(pairs), data.get("starter") or {})


def load(path: Path | None = None) -> Catalog:
    src = path or paths.resource_path("catalog.json")
    try:
        data = json.loads(Path(src).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CatalogError(f"Cannot read the catalog {src} ({exc}): reinstall BeeDeck.") from None
    return parse(data)


def refresh_sizes(catalog: Catalog, sizes_of: Callable[[str], dict[str, int]]) -> Catalog:
    """Return a catalog whose file sizes come from ``sizes_of(repo) -> {file name: bytes}``.

    The callable is e.g. a wrapper over ``HfApi().model_info(repo, files_metadata=True)``; files it
    does not mention keep their catalog values. Errors from the callable propagate.
    """
    cache: dict[str, dict[str, int]] = {}

    def fix(spec: ModelSpec) -> ModelSpec:
        if spec.repo not in cache:
            cache[spec.repo] = sizes_of(spec.repo)
        known = cache[spec.repo]
        files = tuple(replace(f, size=known[f.file]) if known.get(f.file) else f for f in spec.files)
        return replace(spec, files=files)

    return replace(catalog, pairs=tuple(
        replace(p, target=fix(p.target), drafts=tuple(fix(d) for d in p.drafts)) for p in catalog.pairs))
