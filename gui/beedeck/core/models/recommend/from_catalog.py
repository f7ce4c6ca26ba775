"""The pair / quant / context recommender: the best setup of the catalog that fits the GPU(s) with 1 GiB spare.

Every candidate is sized by the memory planner (core/models/planner), from the files' own GGUF
headers: read from the Hub by range requests and cached by repo revision (:mod:`catalog_sizing`,
:mod:`hub.sizing`), or, for models already on disk, read from the files. The catalog types no sizes
or architecture numbers, so a pair whose headers were never read is not considered (the reasons
name it and say how to read them). A recommendation never exceeds what the planner says fits; its
parameter counts and bits per weight are counted from the tensor tables.

Like ``recommend --repo`` (:mod:`from_repo`), each catalog pair is planned with
every draft kind the engine runs (:mod:`catalog_plan`: DFlash, DFlash2, DSpark, EAGLE-3, the target's own
MTP head) and offered in the fast mode :mod:`mode_choice` picks on its evidence, named in the reasons with
the context the drafter costs. A kind the engine cannot run is named with the reason (DFlash2 on BeeLlama
before v0.4.4: the upgrade). A target on disk with a usable DFlash draft next to it (a sidecar,
:mod:`beedeck.core.models.sidecars`) is preferred over anything to download; a sidecar that is found but
not used is named with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.engine.speculation.modes import engine_label, engine_spec_type
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models import library
from beedeck.core.models.draft_kinds import DFLASH, DFLASH_LEGACY, MTP
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect
from beedeck.core.models.planner import GiB, MemoryPlan, draft_defaults, pad, plan
from beedeck.core.models.recommend import live_plan, mode_choice
from beedeck.core.models.recommend.catalog_plan import PlanContext, pair_choices
from beedeck.core.models.recommend.choice import (
    GOALS,
    Choice,
    Recommendation,
    bits_of,
    params_of,
    quant_bits,
    score,
)
from beedeck.core.models.sidecars import Sidecar

LOCAL_REPO = "local"  # the repo of a chosen file that is in no Hub / LM Studio repo: found by its name
SIDECAR_KINDS = (DFLASH, DFLASH_LEGACY)  # the sidecars a DFlash launch (Mode.DFLASH) runs
MAX_NOTES = 6
NOT_SIZED = ("Sizes not read yet: BeeDeck sizes its catalog's pairs from their GGUF headers (no sizes are typed "
             "into the catalog), and this machine has not read them. Connect once (or run `beedeck recommend "
             "--refresh`): only the headers are read, a few MB per file, nothing is downloaded. Until then the "
             "starter profile is what BeeDeck can vouch for.")
SIDECAR_NOTE_PREFIXES = ("Found ", "Draft found next to the model")  # the reasons about drafts beside targets
Tune = tuple[int | None, str | None]  # the drafter's -ubd and KV type


def tune_for(card: str, caps: EngineCaps | None) -> Tune:
    """(-ubd, the drafter's KV type) for this card on this engine: 64 on 24 GB cards where the probe found -ubd
    (mode_choice.ubd_for, BeeLlama >= 0.4.7), kvarn5 where it offers KVarN for draft caches
    (live_plan.engine_draft_cache); None where it does not (the engine's own default)."""
    return mode_choice.ubd_for(card, caps), live_plan.engine_draft_cache(caps)


def default_engine_caps(registry: EngineRegistry | None = None) -> EngineCaps | None:
    """The probe of the registry's default engine: what the drafter is tuned for (-ubd, KVarN draft caches) when
    no engine is named (``recommend`` without --engine, the wizard before its run page). None without one."""
    try:
        record = (registry or EngineRegistry()).default()
    except (OSError, ValueError):
        return None
    return record.engine_caps() if record is not None else None


def tune_for_engine(s: LaunchSettings, caps: EngineCaps, card: str, target: ModelInfo, draft: ModelInfo | None,
                    vram: list[int]) -> tuple[LaunchSettings, str]:
    """The chosen settings re-planned for the engine the setup picked (the recommendation may have been made
    before it was known): -ubd 64 on 24 GB cards where its probe found the flag, else its own default; KVarN for
    the drafter's cache where it offers one (never for Gemma 4's MTP, which shares the target's cache); and,
    when that engine needs more memory than planned, the context lowered to what fits. Returns the settings
    and a line saying what changed ("" when nothing did)."""
    if s.spec_mode == Mode.BASELINE:
        return s, ""
    ubd, kv = tune_for(card, caps)
    if s.spec_mode == Mode.MTP and target.architecture == "gemma4":
        kv = None
    out = dataclasses.replace(s, draft_ubatch_size=ubd, draft_cache_type=kv)
    what = [f"-ubd {ubd}" if ubd else "", f"{kv} drafter cache" if kv else ""]
    said = ", ".join(w for w in what if w)
    defaults = draft_defaults(caps)
    if not vram or plan(target, draft, out, caps.generation, vram, draft_defaults=defaults).fits:
        return out, (f"Tuned for {engine_label(caps)}: {said}." if said else "")
    ctx, fit = live_plan.max_context(target, draft, out, caps.generation, vram, defaults)
    if fit is None:
        return out, f"On {engine_label(caps)} this setup does not fit at {live_plan.LEAST_CTX:,} context or more."
    out.ctx_size = min(s.ctx_size, ctx)
    return out, (f"Re-planned for {engine_label(caps)}" + (f" ({said})" if said else "") +
                 f": {out.ctx_size:,} tokens of context fit with 1 GiB to spare.")


def tune_for_files(s: LaunchSettings, caps: EngineCaps, card: str, target: str, draft: str | None,
                   vram: list[int]) -> tuple[LaunchSettings | None, str]:
    """:func:`tune_for_engine` on the files on disk (their headers are read here); (None, why) when a header
    cannot be read: the recommended settings stay, and the launch's own checks name the bad file."""
    try:
        t_info, d_info = inspect(target), (inspect(draft) if draft else None)
    except (GGUFError, OSError) as exc:
        return None, f"The settings were not re-planned for this engine: {exc}"
    return tune_for_engine(s, caps, card, t_info, d_info, vram)


def _settings(target_file: str, draft_file: str, gen: Generation, ctk: str, ctv: str, ctx: int,
              tune: Tune = (None, None)) -> LaunchSettings:
    bee_a = gen == Generation.BEE_A
    return LaunchSettings(draft_ubatch_size=tune[0], draft_cache_type=tune[1],
        target=target_file, draft=draft_file, spec_mode=Mode.DFLASH, ctx_size=ctx, n_gpu_layers="all",
        draft_n_gpu_layers="all", batch_size=2048 if bee_a else 1024, ubatch_size=256 if bee_a else 512,
        cache_type_k=ctk, cache_type_v=ctv, flash_attn="on", parallel=1, kv_unified=True,
        dflash_cross_ctx=1024 if bee_a else None,
    )


def _max_ctx(target: ModelInfo, draft: ModelInfo, s: LaunchSettings, gen: Generation,
             vram: list[int]) -> tuple[int, MemoryPlan | None]:
    """The largest context (multiple of 256) whose plan keeps the margin on every GPU."""
    lo, hi, best = 0, pad(target.context_length) // 256, None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        s.ctx_size = mid * 256
        p = plan(target, draft, s, gen, vram)
        if p.fits:
            lo, best = mid, p
        else:
            hi = mid - 1
    return lo * 256, best


def _sidecar_candidates(cat: catalog_mod.Catalog, local: Sequence[library.LocalModel], vram: list[int], goal: str,
                        gens: list[Generation], caps: EngineCaps | None = None,
                        tune: Tune = (None, None)) -> tuple[list[Choice], list[str]]:
    """Choices for targets on disk with a DFlash draft beside them (per engine generation the one
    :func:`sidecars.pick` offers), and a line for each found draft that is not used, with the reason."""
    out: list[Choice] = []
    notes: list[str] = []
    entries = [(p.target.repo, f.file) for p in cat.pairs for f in p.target.files]
    for t in local:
        if t.is_draft or t.error or not t.complete:
            continue
        offered = {g: t.best_sidecar(g.value, SIDECAR_KINDS) for g in gens}
        for side in t.sidecars:
            where = f"{side.path.name} next to {t.path.name}"
            ok = [g for g in gens if offered[g] is side]
            if caps is not None:
                why = side.reason_on(caps)
            else:
                usable_here = any(side.usable_for(g.value) for g in gens)
                why = "" if usable_here else (side.reason(gens[0].value) if len(gens) == 1 else side.reason())
                why = why or ("" if usable_here else "this engine cannot run it.")
            if ok and not why:
                got = _sidecar_choices(cat, entries, t, side, ok, vram, goal, only=len(gens) == 1,
                                       tune=tune)
                if not got:
                    notes.append(f"Found {where}, but that pair does not fit {sum(vram) / GiB:.1f} GiB with 1 GiB "
                                 "to spare at 8k context or more.")
                out.extend(got)
            elif why:
                notes.append(f"Found {where} but did not use it: {why}")
            elif side.kind in SIDECAR_KINDS:
                notes.append(f"Found {where} too ({side.quant or '?'}); the draft offered is the one whose quant is "
                             f"closest to the target's {t.file_type_name or '?'} (llama.cpp's own rule).")
            elif side.kind == MTP:
                notes.append(f"Found {where}, a separate MTP head (mainline --spec-type draft-mtp); the setups on "
                             "disk BeeDeck recommends are DFlash drafts beside their target: pick it in Settings with "
                             "the MTP mode to use it.")
            else:
                notes.append(f"Found {where}, a {side.label} draft; the setups on disk BeeDeck recommends are "
                             f"DFlash drafts beside their target: pick it in Settings with the {side.label} mode "
                             "to use it.")
    return out, notes


def _sidecar_choices(cat: catalog_mod.Catalog, entries: list[tuple[str, str]], t: library.LocalModel, side: Sidecar,
                     gens: list[Generation], vram: list[int], goal: str, only: bool = False,
                     tune: Tune = (None, None)) -> list[Choice]:
    try:
        target, draft = inspect(t.path), inspect(side.path)
    except GGUFError:
        return []
    hit = library.match(t, entries)
    pair = next((p for p in cat.pairs if hit is not None and p.target.repo == hit[0]), None)
    pid, title = (pair.id, pair.title) if pair else (f"local:{t.path}", f"{target.name or t.path.stem} + its draft")
    total, active = params_of(target)
    tbits, dbits = bits_of(target), bits_of(draft)
    tquant, dquant = t.file_type_name or target.file_type or "?", side.quant or "?"
    repo = t.repo or LOCAL_REPO
    out = []
    for gen in gens:
        # BeeLlama 0.1-0.3 is superseded: its fork-format sidecar ranks below one a current engine runs
        # (still above any download), unless it is the only engine asked about.
        weight = 0.5 if gen == Generation.BEE_A and not only else 1.0
        for rank, (ctk, ctv) in enumerate(live_plan.CACHES[gen]):
            s = _settings(str(t.path), str(side.path), gen, ctk, ctv, 4096, tune)
            ctx, p = _max_ctx(target, draft, s, gen, vram)
            if p is None or ctx < 8192:
                continue
            s.ctx_size = ctx
            out.append(Choice(pid, title, gen, repo, t.filename, tquant, repo, side.filename, dquant, s, p,
                              score(goal, total, active, tbits, dbits, rank, ctx, on_disk=weight),
                              t.path, side.path, side.kind))
    return out


def _starter_choice(cat: catalog_mod.Catalog) -> Choice:
    st = cat.starter
    s = LaunchSettings(target=st.get("model", {}).get("file", ""), ctx_size=8192, n_gpu_layers="0",
                       draft_n_gpu_layers=None, jinja=True)
    return Choice("starter", st.get("title", "Starter"), Generation.MAINLINE, st.get("model", {}).get("package", ""),
                  s.target, st.get("model", {}).get("quant", ""), None, None, None, s, None)


def _scan() -> list[library.LocalModel]:
    try:
        return library.scan()
    except OSError:
        return []  # an unreadable folder must not cost the user a recommendation


# Why there is no GPU memory to plan for (recommend's ``no_gpu``): the first reason of the starter's recommendation.
NO_GPU = "No GPU memory was given or detected, so the starter profile is recommended"
NO_GPU_FOUND = "No NVIDIA GPU was found on this machine (page 1), so the starter profile is recommended"
STARTER_CHOSEN = "You chose the starter profile on page 1"


def recommend(vram_bytes: list[int], goal: str = "quality", generation: Generation | None = None,
              cat: catalog_mod.Catalog | None = None,
              local: Sequence[library.LocalModel] | None = None, caps: EngineCaps | None = None,
              cache_dir: Path | None = None, *, card: str | None = None, advice: WorkloadAdvice | None = None,
              tune_caps: EngineCaps | None = None, no_gpu: str = NO_GPU) -> Recommendation:
    """Recommend a pair, quants, speculation mode, context, cache types and batch sizes for GPUs with these
    free bytes.

    Each catalog pair is planned from its files' GGUF headers as read from the Hub earlier
    (:mod:`catalog_sizing` reads them; ``cache_dir``: hub.sizing's cache, None: this machine's); this
    call reads nothing over the network. A pair whose headers have not been read yet is named in the
    reasons (:data:`NOT_SIZED`), never sized from typed figures.
    ``local``: the models on disk (``library.scan()``); None scans the usual places, ``[]`` ignores
    the disk. A target there with a usable DFlash draft beside it wins over every download.
    ``caps``: the probed engine; only what it runs is offered (its generation, its spec types, its release).
    ``card``: the card class of the mode evidence (mode_choice.card_class; None: guessed from the memory);
    ``advice``: BeeDeck's own measured advice, which wins over published figures; ``tune_caps``: without
    ``caps``, the engine -ubd and the drafter's KVarN cache are tuned for (the registry's default).
    ``no_gpu``: why there is no GPU memory to plan for, as the caller knows it (the wizard: no GPU was found, or
    the user chose the starter; the CLI: ``--vram 0``, or none detected), the first reason of the starter's.
    """
    if goal not in GOALS:
        raise ValueError(f"Unknown goal {goal!r}: use one of {', '.join(GOALS)}.")
    cat = cat or catalog_mod.load()
    vram = [v for v in vram_bytes if v > 0]
    if not vram:
        starter = _starter_choice(cat)  # core.starter sits above core.models: its name comes from the catalog
        return Recommendation(starter, None, [
            f"{no_gpu}. It runs on the CPU of any machine; speculative pairs need an NVIDIA GPU with at least 8 GB."])
    refused = _engine_refusal(caps)
    if refused:
        return Recommendation(_starter_choice(cat), None, refused)
    if caps is not None:
        generation = caps.generation
    gens: list[Generation] = ([generation] if generation and generation != Generation.UNKNOWN
                              else [Generation.BEE_B, Generation.MAINLINE, Generation.BEE_A])
    ctx = PlanContext(vram, goal, card or mode_choice.card_class(max(vram) + GiB, None), caps, tune_caps, advice,
                      cache_dir)
    disk_tune = tune_for(ctx.card, caps or tune_caps)
    on_disk, notes = _sidecar_candidates(cat, _scan() if local is None else local, vram, goal, gens, caps, disk_tune)
    from_headers, unsized = _candidates(cat, gens, ctx)
    cands = sorted(from_headers + on_disk, key=lambda c: c.score, reverse=True)
    notes = notes[:MAX_NOTES]
    pending = _not_sized_note(cat, unsized)
    if not cands:
        if pending and len(unsized) == len(cat.pairs):
            return Recommendation(_starter_choice(cat), None, [NOT_SIZED, pending, *notes])
        return Recommendation(_starter_choice(cat), None, [
            f"No catalog pair fits {sum(vram) / GiB:.1f} GiB with 1 GiB to spare at 8k context or more: "
            "use the starter profile, or a smaller model you pick yourself.", *([pending] if pending else []),
            *ctx.greyed[:MAX_NOTES], *notes])
    best = cands[0]
    runner = next((c for c in cands[1:] if (c.pair_id, c.target_quant) != (best.pair_id, best.target_quant)), None)
    reasons = _reasons(cat, best, cands, goal)
    reasons += ctx.greyed[:MAX_NOTES]
    if pending:
        reasons.append(pending)
    reasons.extend(notes)
    if runner is not None:
        reasons.append(f"Runner-up: {runner.summary()}.")
    return Recommendation(best, runner, reasons)


def _engine_refusal(caps: EngineCaps | None) -> list[str]:
    """Why no pair can be offered for this engine at all ([] when some can)."""
    if caps is None:
        return []
    if caps.generation == Generation.UNKNOWN:
        _spelling, no_dflash = engine_spec_type(Mode.DFLASH, caps)
        return [no_dflash or f"BeeDeck cannot tell which drafts {engine_label(caps)} loads: pick BeeLlama or "
                "mainline llama.cpp.",
                "Every recommended setup speculates with a draft or an MTP head, so none is offered for this engine."]
    if not caps.has("--spec-type"):
        return [f"{engine_label(caps)} has no --spec-type option, so it cannot run speculative decoding: use "
                "BeeLlama or a recent mainline llama.cpp.",
                "Every recommended setup speculates with a draft or an MTP head, so none is offered for this engine."]
    return []


def _candidates(cat: catalog_mod.Catalog, gens: list[Generation], ctx: PlanContext) -> tuple[list[Choice], list[str]]:
    """Every sized pair's choices (its fast mode, per generation), and the ids of the pairs whose headers have not
    been read yet."""
    out: list[Choice] = []
    unsized: list[str] = []
    for pair in cat.pairs:
        for gen in gens:
            got = pair_choices(pair, gen, ctx)
            if got is None:
                unsized.append(pair.id)
                break
            out.extend(got)
    return out, unsized


def _reasons(cat: catalog_mod.Catalog, best: Choice, cands: list[Choice], goal: str) -> list[str]:
    assert best.plan is not None
    left = min((d.left or 0) for d in best.plan.gpus)
    reasons = [f"{best.summary()}: the planner puts it at {best.plan.gpu_total / GiB:.2f} GiB on the GPU, "
               f"{left / GiB:.2f} GiB left (at least 1 GiB is kept free)."]
    reasons += _mode_lines(best)
    if best.draft_path is not None:
        reasons.append(f"Draft found next to the model: {best.draft_file} ({best.draft_kind}, {best.draft_quant}), "
                       f"beside {best.target_file}: nothing to download, and it is preferred over catalog downloads.")
    reasons.append({"quality": "Goal quality: the largest model and the highest quant that still give at least 32k "
                               "context, then the most precise KV cache.",
                    "speed": "Goal speed: decoding is memory-bound, so the fewest weight bytes read per token win "
                             "(MoE models read only their active experts).",
                    "context": "Goal context: the longest context with a 4-bit-or-better quant."}[goal])
    guide = next((c for c in cands if c.pair_id == best.pair_id and _is_guide(cat, c)), None)
    if guide is not None and guide is not best:
        if best.draft_path is not None and guide.draft_path is None:
            why = "its draft is already on disk next to the model"
        elif goal != "quality":
            why = f"it serves the {goal} goal better"
        elif quant_bits(best.target_quant) > quant_bits(guide.target_quant):
            why = f"a higher-precision target quant ({best.target_quant}) still fits with >= 32k context"
        elif best.settings.ctx_size > guide.settings.ctx_size:
            why = "it leaves room for more context"
        else:
            why = "a more precise cache or draft fits too"
        reasons.append(f"The guide's choice ({guide.summary()}) also fits; the pick ranks above it because {why}.")
    if best.sized_from:
        where = "BeeDeck ships" if best.sized_from.startswith("shipped") else "BeeDeck read from the Hub"
        repos = best.target_repo + (f" and {best.draft_repo}" if best.draft_repo else "")
        reasons.append(f"Sized from the GGUF headers {where} ({repos}, {best.sized_from}): the files' own "
                       "layouts, nothing estimated.")
    return reasons


def _mode_lines(c: Choice) -> list[str]:
    """The chosen speculation mode with its evidence, and what its drafter costs in context."""
    out = []
    label = live_plan.LABEL.get(c.draft_kind, c.draft_kind)
    m = c.mode
    if m is not None:
        where = f"{mode_choice.CLASS_LABEL.get(m.card_class, m.card_class)} with {m.engine}"
        out.append(f"Speculation: {label}, the fast path on {where} by "
                   f"{mode_choice.EVIDENCE_LABEL.get(m.evidence, m.evidence)}: {m.why}"
                   + (f" (source: {m.source})." if m.source else "."))
    if c.cost_tokens is not None:
        cost = (f"{label} costs about {round(c.cost_tokens / 1000)}k tokens of context here" if c.cost_tokens >= 500
                else f"{label} costs no context here (the model's own limit is reached either way)")
        if c.draft_kind == "mtp":
            out.append(f"{cost} (its context and compute, against no speculation at the same K/V cache); its heads "
                       "are inside the target file, so nothing more is downloaded.")
        else:
            out.append(f"{cost} (the drafter's weights, its context and its compute, against no speculation at "
                       "the same K/V cache).")
    return out


def _not_sized_note(cat: catalog_mod.Catalog, unsized: list[str]) -> str:
    if not unsized:
        return ""
    titles = [cat.pair(pid).title for pid in unsized]
    return (f"Not sized yet, so not considered: {', '.join(titles)} (their sizes come from their GGUF headers; "
            "run `beedeck recommend --refresh` or open the setup wizard while online to read them).")


def _is_guide(cat: catalog_mod.Catalog, c: Choice) -> bool:
    try:
        rec = cat.pair(c.pair_id).recommended or {}
    except KeyError:
        return False  # a pair on disk that is not in the catalog
    if rec.get("target_quant") != c.target_quant:
        return False
    return c.draft_file is None or rec.get("draft_quant") == c.draft_quant
