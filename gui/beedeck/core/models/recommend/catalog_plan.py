"""The catalog's pairs planned from their GGUF headers, like a Hub repo (:mod:`live_plan`): every target quant
with every draft kind the engine runs (DFlash, DFlash2, DSpark, EAGLE-3, the target's own MTP head: no
download; an MTP head file for a target without heads), at every KV cache the launch guard lets through
(:func:`live_plan.guard_refusal`); then, per pair and engine, only the fast mode that
:mod:`mode_choice` picks on its evidence (BeeDeck's own measured advice first, else the published
figures in ``resources/mode-evidence.json``, else its rule, naming which). Each choice carries the
context its drafter costs against no speculation at the same cache ("DFlash2 costs about 36k tokens of
context here"). The headers come from this machine's hub.sizing cache (:mod:`catalog_sizing` reads
them); nothing here touches the network.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models.hub import sizing as hub_sizing
from beedeck.core.models.hub.sizing import RemoteModel, RepoSizing
from beedeck.core.models.planner import DraftDefaults, draft_defaults
from beedeck.core.models.recommend import live_plan, mode_choice
from beedeck.core.models.recommend.choice import MIN_CTX, Choice, bits_of, params_of, score

DRAFT_QUANTS = ("Q4_K_M", "Q5_K_M", "IQ4_XS")  # the DFlash draft quants planned (other kinds: pick_draft's one)
DFLASH_KINDS = frozenset({"dflash", "dflash2", "dflash-draft"})
LEAST_CTX = 8192  # a configuration below this is not offered at all


@dataclass
class PlanContext:
    """What every pair is planned for: the GPUs, the goal, the card class, the engine (if probed), the
    engine the drafter is tuned for, BeeDeck's own advice, and the evidence file."""

    vram: list[int]
    goal: str
    card: str
    caps: EngineCaps | None = None  # the probed engine the recommendation is for (None: any engine)
    tune_caps: EngineCaps | None = None  # -ubd and the drafter's KVarN: ``caps``, else the registry's default
    advice: WorkloadAdvice | None = None
    cache_dir: Path | None = None
    evidence: dict[str, Any] = field(default_factory=mode_choice.load_evidence)
    greyed: list[str] = field(default_factory=list)  # draft kinds refused here, with the reason

    def tuning(self, gen: Generation) -> EngineCaps | None:
        """The engine whose probe tunes this generation's drafters (-ubd, KVarN draft caches)."""
        c = self.caps or self.tune_caps
        return c if c is not None and c.generation == gen else None


def pair_choices(pair: catalog_mod.Pair, gen: Generation, ctx: PlanContext) -> list[Choice] | None:
    """The pair's choices on this generation in its fast mode; None when its target's headers were never read."""
    tcache = hub_sizing.load_cached(pair.target.repo, cache_dir=ctx.cache_dir)
    if tcache is None or not tcache.targets():
        return None
    tune = ctx.tuning(gen)
    ubd = mode_choice.ubd_for(ctx.card, tune, ctx.evidence)
    defaults = draft_defaults(tune)
    pool = _draft_pool(pair, gen, tcache, ctx.cache_dir)
    out: list[Choice] = []
    for t in tcache.targets():
        if t.size <= sum(ctx.vram):
            out += _target_choices(pair, tcache, t, pool, gen, ctx, (ubd, tune, defaults))
    return _fast_path(pair, tcache, gen, out, ctx)


def _draft_pool(pair: catalog_mod.Pair, gen: Generation, tcache: RepoSizing,
                cache_dir: Path | None) -> list[tuple[RemoteModel, str]]:
    """(draft file, its repo) for every draft this generation may load: the catalog's draft repos (DFlash
    ones only where the engine reads the target's architecture) and drafts inside the target repo."""
    arch = tcache.targets()[0].info.architecture
    pool = [(m, pair.target.repo) for m in tcache.drafts()]
    for spec in pair.drafts_for(gen, arch):
        s = hub_sizing.load_cached(spec.repo, cache_dir=cache_dir)
        if s is not None:
            pool += [(m, spec.repo) for m in s.drafts()]
    return [(m, r) for m, r in pool if m.kind not in DFLASH_KINDS or m.quant.upper() in DRAFT_QUANTS]


Tuning = tuple[int | None, EngineCaps | None, DraftDefaults]  # -ubd, the engine tuned for, its drafter defaults


def _kinds(t: RemoteModel, pool: list[tuple[RemoteModel, str]], ctx: PlanContext,
           ) -> list[tuple[str, RemoteModel | None, str | None]]:
    """(kind, draft file, its repo) to plan: the target's own MTP head; each DFlash file; the preferred file of
    every other kind (an MTP head file only for a target without heads of its own)."""
    out: list[tuple[str, RemoteModel | None, str | None]] = [("mtp", None, None)] if t.mtp_heads else []
    by_kind: dict[str, list[tuple[RemoteModel, str]]] = {}
    for m, repo in pool:
        if not live_plan.compatible(t, m, ctx.caps) and not (m.kind == "mtp-head" and t.mtp_heads):
            by_kind.setdefault(m.kind, []).append((m, repo))
    for kind in live_plan.KIND_ORDER:
        files = by_kind.get(kind, [])
        if kind in DFLASH_KINDS:
            out += [(kind, m, r) for m, r in files]
        elif files:
            pick = live_plan.pick_draft([m for m, _ in files])
            out.append((kind, pick, next(r for m, r in files if m is pick)))
    return out


def _target_choices(pair: catalog_mod.Pair, tcache: RepoSizing, t: RemoteModel, pool: list[tuple[RemoteModel, str]],
                    gen: Generation, ctx: PlanContext, tuning: Tuning) -> list[Choice]:
    ubd, tune, defaults = tuning
    model = pair.title.split(" + ")[0]  # "Gemma 4 31B + DFlash" -> the model; each choice names its own kind
    total, active = params_of(t.info)
    base: dict[tuple[str, str], int] = {}
    out: list[Choice] = []
    for kind, d, repo in _kinds(t, pool, ctx):
        problem = live_plan.kind_problem(kind, gen, ctx.caps)
        if problem:  # named for a probed engine (without one, every generation is tried and this is noise)
            line = f"{model} on {gen.value}: {problem}"
            if ctx.caps is not None and line not in ctx.greyed:
                ctx.greyed.append(line)
            continue
        for rank, cache in enumerate(live_plan.CACHES[gen]):
            s = live_plan.settings_for(t, d, kind, gen, cache, ubd, tune)
            if live_plan.guard_refusal(s, t.info, d.info if d else None, gen, ctx.caps):
                continue
            c, p = live_plan.max_context(t.info, d.info if d else None, s, gen, ctx.vram, defaults)
            if p is None or c < LEAST_CTX:
                continue
            if cache not in base:
                none = live_plan.settings_for(t, None, "none", gen, cache, None)
                base[cache] = live_plan.max_context(t.info, None, none, gen, ctx.vram)[0]
            out.append(Choice(
                pair.id, f"{model} + {live_plan.LABEL[kind]}", gen, pair.target.repo, t.filename, t.quant, repo, d.filename if d else None,
                d.quant if d else None, replace(s, ctx_size=c), p,
                score(ctx.goal, total, active, bits_of(t.info), bits_of(d.info) if d else 0.0, rank, c),
                draft_kind=kind, download_bytes=t.size + (d.size if d else 0), cost_tokens=max(0, base[cache] - c),
                sized_from=f"{'shipped ' if tcache.source == 'shipped' else ''}headers @ {tcache.revision[:12]}"))
    return out


def _fast_path(pair: catalog_mod.Pair, tcache: RepoSizing, gen: Generation, choices: list[Choice],
               ctx: PlanContext) -> list[Choice]:
    """Only the choices of the mode :func:`mode_choice.choose` picks among the kinds that reach 32k context
    (else among those that fit at all), each carrying that ModeChoice."""
    if not choices:
        return []
    runnable = sorted({c.draft_kind for c in choices if c.settings.ctx_size >= MIN_CTX}) or sorted(
        {c.draft_kind for c in choices})
    ev = ctx.evidence
    family = (mode_choice.family_of(pair.target.repo, ev) or mode_choice.family_of(pair.title, ev)
              or next((f for t in tcache.targets() if (f := mode_choice.family_of(t.info.name, ev))), None))
    own = mode_choice.measured(ctx.advice, [t.filename for t in tcache.targets()])
    mode = mode_choice.choose(ctx.card, gen, mode_choice.engine_version(ctx.caps), family, runnable, ev, own)
    keep = [c for c in choices if c.draft_kind == mode.mode]
    for c in keep:
        c.mode = mode
    return keep
