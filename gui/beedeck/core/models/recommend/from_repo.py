"""One call for "what of this Hub repo runs here, and which mode is the fast path": the CLI's
``recommend --repo`` and the wizard's search box both use :func:`recommend_repo`.

It sizes the target repo and its draft repos from their headers (:mod:`beedeck.core.models.hub.sizing`;
without ``draft_repos`` the catalog's drafts for that target: which draft belongs to which target is
what headers cannot say), plans every quant with every compatible draft kind
(:mod:`live_plan`) and picks the fast path with its evidence (:mod:`mode_choice`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from beedeck.core.download import DownloadError
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models.hub.sizing import RepoSizing, size_repo, summary
from beedeck.core.models.planner import GiB
from beedeck.core.models.recommend import mode_choice
from beedeck.core.models.recommend.from_catalog import Choice
from beedeck.core.models.recommend.live_plan import LiveRow, plan_live


@dataclass
class RepoRecommendation:
    target: RepoSizing
    drafts: list[RepoSizing]
    rows: list[LiveRow]
    choice: mode_choice.ModeChoice
    card: str
    generation: Generation
    ubd: int | None
    notes: list[str] = field(default_factory=list)  # drafts left out, draft repos that could not be sized

    def fitting(self) -> list[LiveRow]:
        return [r for r in self.rows if r.fits]

    def best_row(self) -> LiveRow | None:
        """The fast path's row with the highest-precision target quant that fits."""
        rows = [r for r in self.fitting() if r.kind == self.choice.mode]
        return max(rows, key=lambda r: r.target.size) if rows else None

    def offered(self) -> list[LiveRow]:
        """The rows a user can pick, best first: the fast path's, then every other fitting row (largest
        target quant first within a kind)."""
        best = self.best_row()
        rest = sorted((r for r in self.fitting() if r is not best),
                      key=lambda r: (r.kind != self.choice.mode, -r.target.size, r.kind))
        return ([best] if best is not None else []) + rest

    def choice_of(self, row: LiveRow) -> Choice:
        """The row as the setup wizard's Choice: what to download (the target's first part names a split
        set; the draft from its own repo) and the row's settings, sized from the headers."""
        draft_repo = next((s.repo for s in (self.target, *self.drafts) if row.draft is not None
                           and any(m.filename == row.draft.filename for m in s.models)), None)
        t, d = row.target, row.draft
        title = f"{self.target.repo.split('/')[-1].removesuffix('-GGUF')} + {row.label}"
        return Choice(f"hub:{self.target.repo}", title, row.generation, self.target.repo, t.filename, t.quant,
                      draft_repo, d.filename if d else None, d.quant if d else None, replace(row.settings), row.plan,
                      sized_from=f"headers @ {self.target.revision[:12]}",
                      download_bytes=t.size + (d.size if d else 0), draft_kind=row.kind, mode=self.choice,
                      cost_tokens=row.cost_tokens)

    def report(self, vram: list[int]) -> list[str]:
        """The human-readable report: the CLI prints it, the wizard's search box shows it."""
        out = []
        for s in (self.target, *self.drafts):
            d = summary(s)
            how = {"hub": f"read {d['bytes_read'] / 1e6:.1f} MB of headers in {d['requests']} range requests "
                          f"({100 * d['fraction_read']:.3f}% of {d['file_bytes'] / 1e9:.1f} GB) in {d['seconds']:.2f} s",
                   "cache": "from this machine's cache of its headers",
                   "shipped": "from the headers BeeDeck ships"}.get(s.source, s.source)
            out.append(f"{s.repo} @ {s.revision[:12]}: {len(s.models)} GGUF model(s), {how}")
            out += [f"  - {line}" for line in s.notes + [f"skipped {x}" for x in s.skipped]]
        where = f"{len(vram)} GPU(s), {sum(vram) / GiB:.1f} GiB free" if vram else "no GPU"
        out.append(f"Planned for {where} ({mode_choice.CLASS_LABEL.get(self.card, self.card)}), "
                   f"{self.generation.value} engine" + (f", -ubd {self.ubd}" if self.ubd else "") + ":")
        out += [f"  {r.line()}" for r in self.rows]
        out += [f"  - {n}" for n in self.notes]
        out.append(f"Fast path: {self.choice.line()}")
        return out


def catalog_drafts(repo: str) -> list[str]:
    """The draft repos the catalog pairs with this target repo."""
    try:
        cat = catalog_mod.load()
    except catalog_mod.CatalogError:
        return []
    out: list[str] = []
    for p in cat.pairs:
        if p.target.repo.lower() == repo.lower():
            out += [d.repo for d in p.drafts if d.repo.lower() != repo.lower() and d.repo not in out]
    return out


def recommend_repo(repo: str, vram: list[int], card: str, *, draft_repos: Sequence[str] | None = None,
                   generation: Generation = Generation.BEE_B, caps: EngineCaps | None = None,
                   revision: str | None = None, offline: bool = False, endpoint: str | None = None,
                   cache_dir: Path | None = None, quants: Sequence[str] | None = None,
                   advice: WorkloadAdvice | None = None, cancel_event: threading.Event | None = None,
                   tune_caps: EngineCaps | None = None) -> RepoRecommendation:
    """Raises the hub errors (gated, missing, offline without a cache) and SizingError for the target repo;
    a catalog draft repo that cannot be sized becomes a note (one the caller named is an error).
    ``caps``: the probed engine (what it runs); ``tune_caps``: without one, the engine the drafter is tuned
    for (-ubd 64 on 24 GB cards where its probe found the flag; the registry's default engine)."""
    kw = {"offline": offline, "endpoint": endpoint, "cache_dir": cache_dir, "cancel_event": cancel_event}
    target = size_repo(repo, revision=revision, **kw)  # type: ignore[arg-type]
    notes: list[str] = []
    drafts: list[RepoSizing] = []
    for d in (draft_repos if draft_repos else catalog_drafts(repo)):
        try:
            drafts.append(size_repo(d, **kw))  # type: ignore[arg-type]
        except DownloadError as exc:
            if draft_repos:
                raise
            notes.append(f"The catalog's draft repo {d} was not sized: {exc}")
    evidence = mode_choice.load_evidence()
    gen = caps.generation if caps is not None and caps.generation != Generation.UNKNOWN else generation
    tune = caps or (tune_caps if tune_caps is not None and tune_caps.generation == gen else None)
    ubd = mode_choice.ubd_for(card, tune, evidence)
    rows, left_out = plan_live(target, drafts, vram, generation, caps, ubd=ubd, quants=quants, tune=tune)
    family = mode_choice.family_of(repo, evidence) or next(
        (f for t in target.targets() if (f := mode_choice.family_of(t.info.name, evidence))), None)
    runnable = sorted({r.kind for r in rows if r.fits})
    own = mode_choice.measured(advice, [t.filename for t in target.targets()])
    choice = mode_choice.choose(card, gen, mode_choice.engine_version(caps), family, runnable, evidence, own)
    greyed = [f"{r.target.quant} + {r.label}: {r.problem}" for r in rows if r.problem and r.kind == "dflash2"]
    return RepoRecommendation(target, drafts, rows, choice, card, gen, ubd, notes + left_out + greyed[:1])
