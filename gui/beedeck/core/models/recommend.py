"""The pair / quant / context recommender: the best DFlash setup that fits the GPU(s) with 1 GiB spare.

Every candidate is sized by the memory planner (core/models/planner), from the files' own GGUF
headers: read from the Hub by range requests and cached by repo revision (:mod:`catalog_sizing`,
:mod:`hub_sizing`), or, for models already on disk, read from the files. The catalog types no sizes
or architecture numbers, so a pair whose headers were never read is not considered (the reasons
name it and say how to read them). A recommendation never exceeds what the planner says fits; its
parameter counts and bits per weight are counted from the tensor tables. Pairs whose draft format
the chosen engine generation cannot load, or whose draft fails the pair check against the target's
header, are never considered. A target on disk with a usable DFlash draft next to
it (a sidecar, :mod:`beedeck.core.models.sidecars`) is preferred over anything to download; a
sidecar that is found but not used is named with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.speculation.modes import engine_label, engine_spec_type
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models import hub_sizing, library
from beedeck.core.models.draft_kinds import DFLASH, DFLASH_LEGACY, MTP
from beedeck.core.models.gguf import GGUFError, ModelInfo, inspect
from beedeck.core.models.hub_sizing import RemoteModel
from beedeck.core.models.paircheck import check_pair
from beedeck.core.models.planner import GiB, MemoryPlan, pad, plan
from beedeck.core.models.sidecars import Sidecar

GOALS = ("quality", "speed", "context")
MIN_CTX = 32768  # the guide's context; quality and speed goals want at least this
LOCAL_REPO = "local"  # the repo of a chosen file that is in no Hub / LM Studio repo: found by its name
SIDECAR_KINDS = (DFLASH, DFLASH_LEGACY)  # the sidecars a DFlash launch (SpecMode.DFLASH) runs
MAX_NOTES = 6
DRAFT_QUANTS = ("Q4_K_M", "Q5_K_M", "IQ4_XS")  # the DFlash draft quants the recommender plans
NOT_SIZED = ("Sizes not read yet: BeeDeck sizes its catalog's pairs from their GGUF headers (no sizes are typed "
             "into the catalog), and this machine has not read them. Connect once (or run `beedeck recommend "
             "--refresh`): only the headers are read, a few MB per file, nothing is downloaded. Until then the "
             "starter profile is what BeeDeck can vouch for.")
DFLASH2_BLOCK_MAX = 7  # DFlash2's fixed trained block of 8 (z-lab/dflash#170): at most 7 drafted tokens
UBD_24GB = 64  # the drafter's -ubd on 24 GB cards (draft_ubatch_for)
DRAFT_KVARN = "kvarn5"  # the drafter's own cache where the engine offers KVarN for it (draft_cache_for)
SIDECAR_NOTE_PREFIXES = ("Found ", "Draft found next to the model")  # the reasons about drafts beside targets
CACHES = {  # per generation, best precision first (docs/reference/engine-facts.md §1.3, §9)
    Generation.MAINLINE: [("q8_0", "q8_0"), ("q5_0", "q4_1"), ("q4_0", "q4_0")],
    Generation.BEE_B: [("q8_0", "q8_0"), ("q5_0", "q4_1"), ("kvarn4", "kvarn4")],
    Generation.BEE_A: [("turbo4", "turbo3_tcq"), ("turbo3_tcq", "turbo2_tcq")],
}


def quant_bits(quant: str) -> float:
    """Rough bits per weight of a quant name, for ordering and embedding-size estimates."""
    q = quant.upper().removeprefix("UD-")
    for prefix, bits in (("IQ4_XS", 4.25), ("Q3", 3.9), ("Q4_K_S", 4.5), ("Q4", 4.8), ("Q5_K_S", 5.5),
                         ("Q5", 5.7), ("Q6", 6.56), ("Q8", 8.5), ("BF16", 16), ("F16", 16)):
        if q.startswith(prefix):
            return bits
    return 4.5


@dataclass
class Choice:
    """One concrete configuration: files, engine generation, settings and its memory plan."""

    pair_id: str
    title: str
    generation: Generation
    target_repo: str
    target_file: str
    target_quant: str
    draft_repo: str | None
    draft_file: str | None
    draft_quant: str | None
    settings: LaunchSettings
    plan: MemoryPlan | None
    score: tuple[float, ...] = ()
    target_path: Path | None = None  # set when both files are on disk already (a sidecar pair)
    draft_path: Path | None = None
    draft_kind: str = ""  # sidecars: dflash or dflash-draft
    sized_from: str = ""  # "headers @ <revision>" when planned from headers read from the Hub (hub_sizing)
    download_bytes: int | None = None  # target + draft bytes, when the headers' file list gave them

    def summary(self) -> str:
        if self.pair_id == "starter":
            return f"{self.title} ({self.target_file}), {self.settings.ctx_size} context on the CPU"
        if self.draft_file is None:  # a Hub search's pick: the target's own MTP head, or no speculation
            return (f"{self.title}: {self.target_quant}, {self.settings.ctx_size:,} context, K/V cache "
                    f"{self.settings.cache_type_k}/{self.settings.cache_type_v} ({self.generation.value})")
        on_disk = " (both on disk)" if self.draft_path is not None else ""
        return (f"{self.title}: {self.target_quant} + {self.draft_quant} draft{on_disk}, "
                f"{self.settings.ctx_size:,} context, "
                f"K/V cache {self.settings.cache_type_k}/{self.settings.cache_type_v}, -ub {self.settings.ubatch_size} "
                f"({self.generation.value})")


@dataclass
class Recommendation:
    primary: Choice
    runner_up: Choice | None
    reasons: list[str] = field(default_factory=list)

    @property
    def plan(self) -> MemoryPlan | None:
        return self.primary.plan


def params_of(info: ModelInfo) -> tuple[float, float]:
    """(total, active) billions of parameters, counted from the header's tensor table: every tensor's
    elements; an MoE's expert tensors (``*_exps``) count for active at ``expert_used_count / expert_count``."""
    total = experts = 0
    for t in info.tensors:
        n = _elements(t.dims)
        total += n
        if "_exps" in t.name:
            experts += n
    md = info.metadata
    used, count = md.get(f"{info.architecture}.expert_used_count"), md.get(f"{info.architecture}.expert_count")
    share = (int(used) / int(count)) if isinstance(used, int) and isinstance(count, int) and count > 0 else 1.0
    active = total - experts + experts * share
    if total == 0:  # no tensor table (a hand-made ModelInfo): the name's size label, else the file size
        return _local_params(info)
    return total / 1e9, active / 1e9


def bits_of(info: ModelInfo) -> float:
    """Bits per weight of a file, from its header: its tensor bytes over its parameters."""
    elems = sum(_elements(t.dims) for t in info.tensors)
    return info.tensor_bytes * 8 / elems if elems else quant_bits(info.file_type or "Q4_K_M")


def _elements(dims: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def draft_ubatch_for(caps: EngineCaps | None, vram: list[int]) -> int | None:
    """-ubd 64 on a 24 GB card where the probe found the flag (BeeLlama >= 0.4.7): about 400 MiB less than 256
    at 96K context with DFlash2 on a 4090 (field-2026-12.md section 1, Escha's v0.4.7 notes); else None."""
    if caps is None or not (caps.has("--spec-draft-ubatch-size") or caps.has("-ubd")) or not vram:
        return None
    return UBD_24GB if 18 * GiB <= max(vram) <= 24.5 * GiB else None


def draft_cache_for(caps: EngineCaps | None) -> str | None:
    """kvarn5 for the drafter's own cache where the probe offers --spec-draft-type-k and KVarN (BeeLlama >= 0.4.4,
    field-2026-12.md section 1). Safe for output quality: a draft's cache only changes which tokens are
    proposed, the target verifies every one; it saves about 70% of the draft's f16 cache."""
    if caps is None or not caps.has("--spec-draft-type-k") or DRAFT_KVARN not in caps.draft_cache_types:
        return None
    return DRAFT_KVARN


Tune = tuple[int | None, str | None]  # the drafter's -ubd and KV type (draft_ubatch_for, draft_cache_for)


def _settings(target_file: str, draft_file: str, gen: Generation, ctk: str, ctv: str, ctx: int,
              tune: Tune = (None, None)) -> LaunchSettings:
    bee_a = gen == Generation.BEE_A
    return LaunchSettings(draft_ubatch_size=tune[0], draft_cache_type=tune[1],
        target=target_file, draft=draft_file, spec_mode=SpecMode.DFLASH, ctx_size=ctx, n_gpu_layers="all",
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


def _score(goal: str, total: float, active: float, bits: float, dbits: float, cache_rank: int, ctx: int,
           on_disk: float = 0.0) -> tuple[float, ...]:
    """``bits``/``dbits``: the target's and the draft's bits per weight (their headers' bytes over parameters)."""
    # A common rule of thumb (not a measurement): an MoE model is worth about sqrt(total x active)
    # dense parameters, so a 35B-A3B ranks below a dense 27B.
    params = (total * active) ** 0.5
    good_quant = 1.0 if bits >= 4.25 else 0.0
    enough = 1.0 if ctx >= MIN_CTX else 0.0
    first = on_disk  # a pair already on disk (a sidecar draft) beats any download (1: current engines, 0.5: Gen A)
    bits = round(bits, 2)
    if goal == "quality":
        return (first, enough, round(params, 1), bits, -cache_rank, round(dbits, 2), ctx)
    if goal == "speed":
        # Decoding is memory-bound: fewer bytes read per token is faster; then prefer the bigger model.
        return (first, enough, good_quant, -round(active * bits), params, -cache_rank, ctx)
    return (first, float(ctx >= 4 * MIN_CTX), good_quant, round(params, 1), ctx, bits)


def _header_candidates(pair: catalog_mod.Pair, vram: list[int], goal: str, gens: list[Generation],
                       tune: Tune = (None, None), cache_dir: Path | None = None,
                       caps: EngineCaps | None = None) -> list[Choice] | None:
    """Choices from the pair's GGUF headers read from the Hub (this machine's hub_sizing cache, or a shipped
    record set): the files' names, sizes and layouts, planned like files on disk. None when the target's
    headers have not been read yet."""
    tcache = hub_sizing.load_cached(pair.target.repo, cache_dir=cache_dir)
    if tcache is None or not tcache.targets():
        return None
    out: list[Choice] = []
    for t in tcache.targets():
        if t.size > sum(vram):
            continue
        total, active = params_of(t.info)
        tbits = bits_of(t.info)
        for gen in gens:
            for dspec in pair.drafts_for(gen, t.info.architecture):
                if dspec.fmt not in catalog_mod.DFLASH_FORMATS:
                    continue  # DSpark, EAGLE-3 and MTP drafts are not DFlash launches (recommend --repo plans them)
                dcache = hub_sizing.load_cached(dspec.repo, cache_dir=cache_dir)
                if dcache is None:
                    continue
                drafts = [m for m in dcache.drafts() if m.kind in catalog_mod.DFLASH_FORMATS
                          and m.quant.upper() in DRAFT_QUANTS and _pairs(t.info, m, gen, caps)]
                for d in drafts:
                    for rank, (ctk, ctv) in enumerate(CACHES[gen]):
                        s = _settings(t.filename, d.filename, gen, ctk, ctv, 4096, tune)
                        if d.kind == "dflash2":
                            s.draft_n_max = DFLASH2_BLOCK_MAX
                        ctx, p = _max_ctx(t.info, d.info, s, gen, vram)
                        if p is None or ctx < 8192:
                            continue
                        s.ctx_size = ctx
                        out.append(Choice(pair.id, pair.title, gen, pair.target.repo, t.filename, t.quant, dspec.repo,
                                          d.filename, d.quant, s, p,
                                          _score(goal, total, active, tbits, bits_of(d.info), rank, ctx),
                                          sized_from=f"{'shipped ' if tcache.source == 'shipped' else ''}headers @ "
                                                     f"{tcache.revision[:12]}", download_bytes=t.size + d.size))
    return out


def _pairs(target: ModelInfo, draft: RemoteModel, gen: Generation, caps: EngineCaps | None) -> bool:
    """The draft's own format (its header's, not the catalog's word) loads on this generation, and the pair
    check (hidden size, target layers, vocabulary) passes on the two headers."""
    if gen not in catalog_mod.DRAFT_FORMAT_GENERATIONS.get(draft.kind, ()):
        return False
    return check_pair(target, draft.info, caps).ok


def _candidates(cat: catalog_mod.Catalog, vram: list[int], goal: str, gens: list[Generation],
                tune: Tune = (None, None), cache_dir: Path | None = None,
                caps: EngineCaps | None = None) -> tuple[list[Choice], list[str]]:
    """Every sized pair's choices, and the ids of the pairs whose headers have not been read yet."""
    out: list[Choice] = []
    unsized: list[str] = []
    for pair in cat.pairs:
        if not any(pair.drafts_for(g) for g in gens):
            continue
        got = _header_candidates(pair, vram, goal, gens, tune, cache_dir, caps)
        if got is None:
            unsized.append(pair.id)
        else:
            out.extend(got)
    return out, unsized


def _local_params(info: ModelInfo) -> tuple[float, float]:
    """(total, active) billions of parameters: from general.size_label ("27B", "35B-A3B"), else the file size."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)B(?:-A(\d+(?:\.\d+)?)B)?", info.size_label.strip(), re.IGNORECASE)
    if m:
        return float(m[1]), float(m[2] or m[1])
    total = info.file_size * 8 / quant_bits(info.file_type or "Q4_K_M") / 1e9
    return total, total


def _sidecar_candidates(cat: catalog_mod.Catalog, local: Sequence[library.LocalModel], vram: list[int], goal: str,
                        gens: list[Generation], caps: EngineCaps | None = None) -> tuple[list[Choice], list[str]]:
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
                                       tune=(draft_ubatch_for(caps, vram), draft_cache_for(caps)))
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
                notes.append(f"Found {where}, a separate MTP head (mainline --spec-type draft-mtp); the recommended "
                             "setups launch DFlash drafts, and BeeDeck's MTP mode uses heads inside the target file.")
            else:
                notes.append(f"Found {where}, a {side.label} draft; the recommended setups launch DFlash drafts: "
                             f"pick it in Settings with the {side.label} mode to use it.")
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
        for rank, (ctk, ctv) in enumerate(CACHES[gen]):
            s = _settings(str(t.path), str(side.path), gen, ctk, ctv, 4096, tune)
            ctx, p = _max_ctx(target, draft, s, gen, vram)
            if p is None or ctx < 8192:
                continue
            s.ctx_size = ctx
            out.append(Choice(pid, title, gen, repo, t.filename, tquant, repo, side.filename, dquant, s, p,
                              _score(goal, total, active, tbits, dbits, rank, ctx, on_disk=weight),
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


def recommend(vram_bytes: list[int], goal: str = "quality", generation: Generation | None = None,
              cat: catalog_mod.Catalog | None = None,
              local: Sequence[library.LocalModel] | None = None, caps: EngineCaps | None = None,
              cache_dir: Path | None = None) -> Recommendation:
    """Recommend a pair, quants, context, cache types and batch sizes for GPUs with these free bytes.

    Each catalog pair is planned from its files' GGUF headers as read from the Hub earlier
    (:mod:`catalog_sizing` reads them; ``cache_dir``: hub_sizing's cache, None: this machine's); this
    call reads nothing over the network. A pair whose headers have not been read yet is named in the
    reasons (:data:`NOT_SIZED`), never sized from typed figures.
    ``local``: the models on disk (``library.scan()``); None scans the usual places, ``[]`` ignores
    the disk. A target there with a usable DFlash draft beside it wins over every download.
    ``caps``: the probed engine; only pairs it runs are offered (its generation, and DFlash at all).
    """
    if goal not in GOALS:
        raise ValueError(f"Unknown goal {goal!r}: use one of {', '.join(GOALS)}.")
    cat = cat or catalog_mod.load()
    vram = [v for v in vram_bytes if v > 0]
    if not vram:
        starter = _starter_choice(cat)  # core.starter sits above core.models: its name comes from the catalog
        return Recommendation(starter, None, [
            f"No GPU memory was given or detected: the starter profile runs anywhere ({starter.title}). "
            "DFlash pairs need a GPU with at least 8 GB."])
    if caps is not None:
        generation = caps.generation
        _spelling, no_dflash = engine_spec_type("dflash", caps)
        if no_dflash or generation == Generation.UNKNOWN:
            return Recommendation(_starter_choice(cat), None, [
                no_dflash or f"BeeDeck cannot tell which DFlash drafts {engine_label(caps)} loads: pick BeeLlama or "
                "mainline llama.cpp.", "Every recommended pair is a DFlash pair, so none is offered for this engine."])
    gens: list[Generation] = ([generation] if generation and generation != Generation.UNKNOWN
                              else [Generation.BEE_B, Generation.MAINLINE, Generation.BEE_A])
    on_disk, notes = _sidecar_candidates(cat, _scan() if local is None else local, vram, goal, gens, caps)
    tune = (draft_ubatch_for(caps, vram), draft_cache_for(caps))
    from_headers, unsized = _candidates(cat, vram, goal, gens, tune, cache_dir, caps)
    cands = sorted(from_headers + on_disk, key=lambda c: c.score, reverse=True)
    notes = notes[:MAX_NOTES]
    pending = _not_sized_note(cat, unsized)
    if not cands:
        if pending and len(unsized) == len([p for p in cat.pairs if any(p.drafts_for(g) for g in gens)]):
            return Recommendation(_starter_choice(cat), None, [NOT_SIZED, pending, *notes])
        return Recommendation(_starter_choice(cat), None, [
            f"No catalog pair fits {sum(vram) / GiB:.1f} GiB with 1 GiB to spare at 8k context or more: "
            "use the starter profile, or a smaller model you pick yourself.", *([pending] if pending else []),
            *notes])
    best = cands[0]
    runner = next((c for c in cands[1:] if (c.pair_id, c.target_quant) != (best.pair_id, best.target_quant)), None)
    assert best.plan is not None
    left = min((d.left or 0) for d in best.plan.gpus)
    reasons = [f"{best.summary()}: the planner puts it at {best.plan.gpu_total / GiB:.2f} GiB on the GPU, "
               f"{left / GiB:.2f} GiB left (at least 1 GiB is kept free)."]
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
        reasons.append(f"Sized from the GGUF headers {where} ({best.target_repo} and {best.draft_repo}, "
                       f"{best.sized_from}): the files' own layouts, nothing estimated.")
    if pending:
        reasons.append(pending)
    reasons.extend(notes)
    if runner is not None:
        reasons.append(f"Runner-up: {runner.summary()}.")
    return Recommendation(best, runner, reasons)


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
    return rec.get("target_quant") == c.target_quant and rec.get("draft_quant") == c.draft_quant
