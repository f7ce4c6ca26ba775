"""The shipped catalog of target + draft pairs (``resources/catalog.json``), loaded into dataclasses.

The catalog is a list of repos, not numbers: it holds only what GGUF headers cannot say: which draft
belongs to which target, the quants (file names) BeeDeck considers, the guide's flags and pick, and the
published speed figures with their source. Sizes, parameter counts and architecture numbers come from
the files' own headers, read by range requests (:mod:`hub.sizing`, :mod:`catalog_sizing`); a catalog
that types one (``size``, ``n_layer``, ``params_b``...) is refused. Each draft has a ``format`` (what
the GGUF is, :data:`DRAFT_FORMAT_GENERATIONS`), optionally the ``engines`` that run it (a subset of
its format's, when a source narrows it) and the ``source`` of the facts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.known_issues import dflash_target_archs

# Draft formats and the engine generations that load them (engine-facts.md §5.1, §7.1; anchors.md
# Refresh §5-6): upstream DFlash and DFlash2 (architecture "dflash", DFlash2 adds selector/conv
# tensors) on BeeLlama >= 0.4 and mainline (DFlash2 from BeeLlama v0.4.4: live_plan.dflash2_problem);
# BeeLlama 0.1-0.3's fork format; DSpark, EAGLE-3 and MTP heads (an ``mtp-`` sidecar, or heads inside
# the target) on mainline and on BeeLlama >= 0.4, whose own --help lists draft-eagle3, draft-mtp and
# draft-dspark (v0.4.3: tests/fixtures/engines/beellama-0.4.3-cpu.help.txt); Lucebox's Gemma 4 format on
# none of BeeDeck's engines. Where an engine is probed, its --help decides instead (live_plan.kind_problem).
DRAFT_FORMAT_GENERATIONS: dict[str, tuple[Generation, ...]] = {
    "dflash": (Generation.BEE_B, Generation.MAINLINE),
    "dflash2": (Generation.BEE_B, Generation.MAINLINE),
    "dflash-draft": (Generation.BEE_A,),
    "dspark": (Generation.BEE_B, Generation.MAINLINE),
    "eagle3": (Generation.BEE_B, Generation.MAINLINE),
    "mtp": (Generation.BEE_B, Generation.MAINLINE),
    "gemma4-dflash-draft": (),
}
DFLASH_FORMATS = frozenset({"dflash", "dflash2", "dflash-draft"})  # what Mode.DFLASH launches
# What the headers say, so what the catalog may not type (a typed figure goes stale with each re-upload
# and was never the file's own): sizes, parameter counts, architecture blocks.
HEADER_FACTS = frozenset({"size", "approx_size", "size_note", "arch", "params_b", "active_params_b", "n_layer",
                          "n_embd", "n_ff", "n_head", "n_head_kv", "head_dim", "vocab", "context_length",
                          "block_size", "target_layers"})


class CatalogError(ValueError):
    """catalog.json is malformed; the message names the entry and the field."""


@dataclass(frozen=True)
class CatalogFile:
    """A quant the catalog considers and its file name in the repo (its size is in its header)."""

    quant: str
    file: str


@dataclass(frozen=True)
class ModelSpec:
    """One side of a pair: the repository and the quants BeeDeck considers there (none listed: all)."""

    repo: str
    files: tuple[CatalogFile, ...]
    fmt: str = ""  # drafts: a key of DRAFT_FORMAT_GENERATIONS
    engines: tuple[Generation, ...] | None = None  # drafts: narrower than the format's, when a source says so
    source: str = ""  # where the facts come from (a section of the reference docs)
    note: str = ""

    def file(self, quant: str) -> CatalogFile | None:
        return next((f for f in self.files if f.quant == quant), None)

    @property
    def quants(self) -> list[str] | None:
        """The quants to size in this repo (None: every GGUF in it)."""
        return [f.quant for f in self.files] or None

    @property
    def generations(self) -> tuple[Generation, ...]:
        if self.engines is not None:
            return self.engines
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

    def drafts_for(self, generation: Generation, architecture: str = "") -> list[ModelSpec]:
        """The drafts this generation runs for this target (DFlash ones only where it reads the target's
        layers, when the target's ``architecture`` is known: its header's general.architecture)."""
        arch = architecture
        out = []
        for d in self.drafts:
            if generation not in d.generations:
                continue
            supported = dflash_target_archs(generation.value)
            if d.fmt in DFLASH_FORMATS and arch and supported is not None and arch not in supported:
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


def _no_header_facts(d: dict[str, Any], where: str) -> None:
    typed = sorted(HEADER_FACTS & set(d))
    if typed:
        raise CatalogError(f"catalog.json: {where} types {', '.join(typed)}: sizes and architecture numbers come "
                           "from the GGUF headers (beedeck recommend --refresh reads them), not from the catalog.")


def _file(d: dict[str, Any], where: str) -> CatalogFile:
    for k in ("quant", "file"):
        if not isinstance(d.get(k), str) or not d[k]:
            raise CatalogError(f"catalog.json: {where} has no '{k}'.")
    if not d["file"].endswith(".gguf"):
        raise CatalogError(f"catalog.json: {where} file {d['file']!r} is not a .gguf name.")
    _no_header_facts(d, f"{where} {d['file']}")
    return CatalogFile(d["quant"].upper(), d["file"])


def _spec(d: dict[str, Any], where: str, draft: bool) -> ModelSpec:
    repo = d.get("repo")
    if not isinstance(repo, str) or repo.count("/") != 1:
        raise CatalogError(f"catalog.json: {where} has no valid 'repo' (owner/name).")
    fmt = d.get("format", "")
    if draft and fmt not in DRAFT_FORMAT_GENERATIONS:
        raise CatalogError(f"catalog.json: {where} {repo} has an unknown draft format {fmt!r} "
                           f"(one of {', '.join(DRAFT_FORMAT_GENERATIONS)}).")
    if draft and not (isinstance(d.get("source"), str) and d["source"].strip()):
        raise CatalogError(f"catalog.json: {where} {repo} has no 'source' (the reference section its facts come from).")
    _no_header_facts(d, f"{where} {repo}")
    files = tuple(_file(f, f"{where} {repo}") for f in d.get("files", []))
    engines = None
    if draft and "engines" in d:
        try:
            engines = tuple(Generation(g) for g in d["engines"])
        except (TypeError, ValueError):
            raise CatalogError(f"catalog.json: {where} {repo} names an unknown engine in 'engines'.") from None
        extra = [g.value for g in engines if g not in DRAFT_FORMAT_GENERATIONS[fmt]]
        if extra:
            raise CatalogError(f"catalog.json: {where} {repo} claims {', '.join(extra)}, which cannot load "
                               f"the {fmt!r} format.")
    return ModelSpec(repo, files, fmt, engines, str(d.get("source", "")), str(d.get("note", "")))


GUIDE_MODES = ("dflash", "dflash2", "dspark", "eagle3", "mtp")  # a guide's "mode" (live_plan kinds)


def _check_recommended(pid: str, rec: dict[str, Any], target: ModelSpec, drafts: tuple[ModelSpec, ...]) -> None:
    """The guide's pick names quants the pair lists (a repo that lists none is sized whole, so any quant name
    is checked against its headers instead) and, optionally, its ``mode`` (the target's own MTP head needs
    no draft quant)."""
    mode = rec.get("mode", "dflash")
    if mode not in GUIDE_MODES:
        raise CatalogError(f"catalog.json: pair {pid} recommends an unknown mode {mode!r} (one of "
                           f"{', '.join(GUIDE_MODES)}).")

    def listed(spec: ModelSpec, quant: Any) -> bool:
        return isinstance(quant, str) and bool(quant) and (not spec.files or spec.file(quant.upper()) is not None)

    if not listed(target, rec.get("target_quant")) or (
            (mode != "mtp" or "draft_quant" in rec) and not listed(drafts[0], rec.get("draft_quant"))):
        raise CatalogError(f"catalog.json: pair {pid} recommends a quant it does not list.")


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
            _check_recommended(pid, rec, target, drafts)
        pairs.append(Pair(pid, p.get("title", pid), target, drafts, gens, rec, p.get("flags") or {}, p.get("notes", "")))
    return Catalog(tuple(pairs), data.get("starter") or {})


def load(path: Path | None = None) -> Catalog:
    src = path or paths.resource_path("catalog.json")
    try:
        data = json.loads(Path(src).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CatalogError(f"Cannot read the catalog {src} ({exc}): reinstall BeeDeck.") from None
    return parse(data)

