"""Plan every quant of a Hub target with every compatible draft kind, from headers only (:mod:`hub.sizing`).

For each target file: no speculation, the target's own MTP heads (when its header has NextN layers),
and one file of each draft kind found in the draft repos (DFlash, DFlash2, DSpark, EAGLE-3, MTP head
files), each checked against the target by :func:`paircheck.check_pair` and the tokenizer digest.
Each row gets the largest context (a multiple of 256) the memory planner fits with its margin, with
the most precise KV cache that still reaches 32k and that the launch guard lets through (the known-issue
table, :mod:`guard`), and the context the drafter costs against no speculation at the same cache ("DFlash2
costs about 36k tokens of context here"). A kind the engine cannot run is a row with its reason (DFlash2 on
BeeLlama before v0.4.4, or of an unknown release, names the upgrade).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.known_issues import load_table
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed
from beedeck.core.models.catalog import DRAFT_FORMAT_GENERATIONS
from beedeck.core.models.draft_kinds import SPEC_TYPE_OF_KIND
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.guard import check_launch
from beedeck.core.models.hub.sizing import RemoteModel, RepoSizing
from beedeck.core.models.paircheck import check_pair
from beedeck.core.models.planner import DraftDefaults, GiB, MemoryPlan, draft_defaults, pad, plan

MIN_CTX = 32768  # the guide's context: a row "fits" a card when it reaches at least this
LEAST_CTX = 4096  # below this a row is reported as not fitting at all
LABEL = {"none": "no speculation", "mtp": "MTP (its own head)", "mtp-head": "MTP head file", "dflash": "DFlash",
         "dflash2": "DFlash2", "dflash-draft": "DFlash (fork format)", "dspark": "DSpark", "eagle3": "EAGLE-3"}
KIND_ORDER = ("none", "mtp", "mtp-head", "dflash2", "dflash", "dspark", "eagle3", "dflash-draft")
CACHES = {Generation.MAINLINE: [("q8_0", "q8_0"), ("q5_0", "q4_1"), ("q4_0", "q4_0")],
          Generation.BEE_B: [("q8_0", "q8_0"), ("q5_0", "q4_1"), ("kvarn4", "kvarn4")],
          Generation.BEE_A: [("turbo4", "turbo3_tcq"), ("turbo3_tcq", "turbo2_tcq")]}
DRAFT_QUANT_PREFERENCE = ("Q4_K_M", "Q5_K_M", "Q8_0", "IQ4_XS", "Q6_K")
DFLASH2_BLOCK_MAX = 7  # DFlash2's fixed trained block of 8 (z-lab/dflash#170): at most 7 drafted tokens
DRAFT_KVARN = "kvarn5"  # the drafter's own cache where the engine offers KVarN for it (engine_draft_cache)
DFLASH2_ROW = "dflash2-before-bee-0.4.4"  # the known-issue row (resources/known-issues.json)


@dataclass
class LiveRow:
    """One target file with one speculation kind, planned for the given GPUs."""

    target: RemoteModel
    draft: RemoteModel | None
    kind: str  # a key of LABEL
    generation: Generation
    settings: LaunchSettings
    plan: MemoryPlan | None  # the plan at ``ctx``; None when it fits at no useful context
    ctx: int
    cost_tokens: int | None = None  # context lost against no speculation at the same cache
    problem: str = ""

    @property
    def fits(self) -> bool:
        return self.plan is not None and self.ctx >= MIN_CTX

    @property
    def label(self) -> str:
        return LABEL.get(self.kind, self.kind)

    def line(self) -> str:
        t = self.target
        what = f"{t.quant} ({t.size / 1e9:.1f} GB)"
        if self.draft is not None:
            what += f" + {self.label} {self.draft.quant} ({self.draft.size / 1e9:.2f} GB)"
        elif self.kind != "none":
            what += f" + {self.label}"
        if self.problem:
            return f"{what}: {self.problem}"
        if self.plan is None:
            return f"{what}: does not fit at {LEAST_CTX:,} context or more"
        verdict = "fits" if self.fits else "fits only below 32k context"
        out = (f"{what}: {verdict}, {self.ctx:,} context, KV {self.settings.cache_type_k}/"
               f"{self.settings.cache_type_v}, {self.plan.gpu_total / GiB:.2f} GiB on the GPU")
        if self.cost_tokens is not None and self.kind != "none":
            out += (f"; {self.label} costs about {round(self.cost_tokens / 1000)}k tokens of context here"
                    if self.cost_tokens >= 500 else f"; {self.label} costs no context here (the model's own limit "
                                                     "is reached either way)")
        return out


def kind_problem(kind: str, generation: Generation, caps: EngineCaps | None = None) -> str:
    """Why this engine cannot run ``kind`` ("" when it can): with a probed engine, what its ``--help`` lists
    (its spec types; the DFlash format it loads) and its release (DFlash2 from BeeLlama v0.4.4); without one,
    what the generation runs (catalog.DRAFT_FORMAT_GENERATIONS)."""
    if kind == "none":
        return ""
    label = LABEL.get(kind, kind)
    if caps is not None:
        if Mode.of_plan_kind(kind) == Mode.DFLASH:
            fmt = "dflash-draft" if kind == "dflash-draft" else "dflash"
            if caps.dflash_draft_arch != fmt:
                return (f"{label} does not run on this engine: it loads no {fmt!r} drafts"
                        if caps.dflash_draft_arch else f"{label} does not run on this engine: it has no DFlash")
        else:
            spec = SPEC_TYPE_OF_KIND["mtp" if kind.startswith("mtp") else kind]
            if spec not in caps.spec_types:
                return f"{label} does not run on this engine: its --help lists no --spec-type {spec}"
    elif generation not in DRAFT_FORMAT_GENERATIONS.get({"mtp-head": "mtp"}.get(kind, kind), ()):
        return f"{label} does not run on {generation.value} engines"
    return dflash2_problem(caps) if kind == "dflash2" else ""


def dflash2_problem(caps: EngineCaps | None) -> str:
    """Why this BeeLlama cannot be trusted with a DFlash2 draft ("" when it can): the known-issue row
    dflash2-before-bee-0.4.4, applied as the launch guard applies it; an engine whose release is unknown
    (a bare build number, as BeeLlama up to v0.4.4 prints) is refused here too, since BeeDeck would
    recommend a download that may not load."""
    row = next((r for r in load_table() if r.id == DFLASH2_ROW), None)
    if caps is None or row is None:
        return ""
    applies = row.applies_to(caps)
    if applies is False:
        return ""
    _message, remedy = row.render({"draft": "This draft"})
    said = caps.release or caps.version or "nothing"
    why = (f"BeeLlama {said} cannot load DFlash2 GGUFs (tensor-count mismatch; issue #134)" if applies else
           f"this BeeLlama's release is unknown (--version says {said!r}) and DFlash2 loads only from v0.4.4")
    return f"DFlash2 is refused: {why}. {remedy}"


def kind_runs_on(kind: str, generation: Generation, caps: EngineCaps | None = None) -> bool:
    return not kind_problem(kind, generation, caps)


def guard_refusal(settings: LaunchSettings, target: ModelInfo, draft: ModelInfo | None, generation: Generation,
                  caps: EngineCaps | None = None) -> str:
    """The launch guard's refusal of these settings with these headers ("" when it passes): the known-issue
    table (core.models.guard) applied when choosing, so no row is offered that the launch would refuse
    (a KVarN target cache with MTP on Gemma 4, ...). Without a probed engine, the generation's rows that hold
    for every release; a row bound to versions only warns then, and warnings do not count here."""
    engine = caps if caps is not None else EngineCaps(path="", generation=generation)
    try:
        check_launch(engine, settings, target=target, draft=draft)
    except ServerFailed as exc:
        return str(exc.failure)
    return ""


def compatible(target: RemoteModel, draft: RemoteModel, caps: EngineCaps | None = None) -> str:
    """Why ``draft`` cannot speculate for ``target`` ("" when it can)."""
    if target.tokenizer_sha256 and draft.tokenizer_sha256 and target.tokenizer_sha256 != draft.tokenizer_sha256:
        return f"{draft.filename}'s token list differs from {target.filename}'s: it is a draft for another model"
    verdict = check_pair(target.info, draft.info, caps)
    return "" if verdict.ok else verdict.reasons[0]


def engine_draft_cache(caps: EngineCaps | None) -> str | None:
    """kvarn5 for the drafter's own cache where the probe offers --spec-draft-type-k and KVarN (BeeLlama >= 0.4.4,
    field-2026-12.md section 1). Safe for output quality: a draft's cache only changes which tokens are
    proposed, the target verifies every one; it saves about 70% of the draft's f16 cache."""
    if caps is None or not caps.has("--spec-draft-type-k") or DRAFT_KVARN not in caps.draft_cache_types:
        return None
    return DRAFT_KVARN


def draft_cache_for(kind: str, target: ModelInfo, caps: EngineCaps | None) -> str | None:
    """The drafter's own KV type where the probe offers KVarN for it (engine_draft_cache); never for
    Gemma 4's MTP, which shares the target's cache and rejects a draft KVarN type (field notes §1)."""
    if kind == "none" or (kind == "mtp" and target.architecture == "gemma4"):
        return None
    return engine_draft_cache(caps)


def _mode_of(kind: str) -> Mode:
    """The mode a plan kind runs as (its row's ``plan_kinds`` in core/engine/mode.py)."""
    mode = Mode.of_plan_kind(kind)
    if mode is None:
        raise KeyError(f"no speculation mode runs the plan kind {kind!r}")
    return mode


def settings_for(t: RemoteModel, d: RemoteModel | None, kind: str, gen: Generation, cache: tuple[str, str],
                 ubd: int | None, caps: EngineCaps | None = None) -> LaunchSettings:
    """The launch settings of one row: the kind's mode, the drafter's -ubd and own cache type, DFlash2's block."""
    bee_a = gen == Generation.BEE_A
    return LaunchSettings(
        target=t.filename, draft=d.filename if d else None, spec_mode=_mode_of(kind), ctx_size=4096,
        n_gpu_layers="all", draft_n_gpu_layers="all", batch_size=2048 if bee_a else 1024,
        ubatch_size=256 if bee_a else 512, cache_type_k=cache[0], cache_type_v=cache[1], flash_attn="on",
        parallel=1, kv_unified=True, dflash_cross_ctx=1024 if bee_a and d else None,
        draft_n_max=DFLASH2_BLOCK_MAX if kind == "dflash2" else None,
        draft_ubatch_size=ubd if kind != "none" else None, draft_cache_type=draft_cache_for(kind, t.info, caps))


def max_context(target: ModelInfo, draft: ModelInfo | None, s: LaunchSettings, gen: Generation,
                vram: list[int], defaults: DraftDefaults | None = None) -> tuple[int, MemoryPlan | None]:
    """The largest context (a multiple of 256, at least LEAST_CTX) whose plan keeps the margin on every GPU.
    ``defaults``: what the engine gives the drafter when the settings do not say (planner.draft_defaults)."""
    lo, hi, best = LEAST_CTX // 256 - 1, pad(target.context_length or 131072) // 256, None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        p = plan(target, draft, replace(s, ctx_size=mid * 256), gen, vram, draft_defaults=defaults)
        if p.fits:
            lo, best = mid, p
        else:
            hi = mid - 1
    return (lo * 256, best) if best is not None else (0, None)


def pick_draft(files: Sequence[RemoteModel]) -> RemoteModel:
    def rank(m: RemoteModel) -> tuple[int, int]:
        q = m.quant.upper().removeprefix("UD-")
        return (DRAFT_QUANT_PREFERENCE.index(q) if q in DRAFT_QUANT_PREFERENCE else 99, m.size)
    return min(files, key=rank)


def plan_live(target: RepoSizing, drafts: Sequence[RepoSizing], vram: list[int],
              generation: Generation = Generation.MAINLINE, caps: EngineCaps | None = None,
              ubd: int | None = None, quants: Sequence[str] | None = None,
              tune: EngineCaps | None = None) -> tuple[list[LiveRow], list[str]]:
    """Rows for every target quant x speculation kind, and notes on drafts that were left out (and why).
    ``caps``: the probed engine (what it runs); ``tune``: without one, the engine whose probe tunes the
    drafter (its KVarN draft caches, its -ubd default and draft window: the registry's default engine)."""
    gen = caps.generation if caps is not None and caps.generation != Generation.UNKNOWN else generation
    tuning = caps or (tune if tune is not None and tune.generation == gen else None)
    vram = [v for v in vram if v > 0]
    notes: list[str] = []
    pool = [m for s in (target, *drafts) for m in s.drafts()]
    rows: list[LiveRow] = []
    caches = CACHES.get(gen, CACHES[Generation.MAINLINE])
    defaults = draft_defaults(tuning)
    for t in sorted(target.targets(), key=lambda m: m.size):
        if quants and t.quant.upper() not in {q.upper() for q in quants}:
            continue
        base_ctx: dict[tuple[str, str], int] = {}
        for kind, draft in kinds_for(t, pool, caps, notes):
            problem = kind_problem(kind, gen, caps)
            if problem:
                s = settings_for(t, draft, kind, gen, caches[0], ubd, tuning)
                rows.append(LiveRow(t, draft, kind, gen, s, None, 0, problem=problem))
                continue
            rows.append(_best_row(t, draft, kind, gen, caches, vram, ubd, base_ctx, (caps, tuning), defaults))
    return rows, notes


def kinds_for(t: RemoteModel, pool: Sequence[RemoteModel], caps: EngineCaps | None,
              notes: list[str]) -> list[tuple[str, RemoteModel | None]]:
    """No speculation, the target's own MTP heads, and the preferred file of each compatible draft kind in
    ``pool``; a draft that does not pair with ``t`` becomes a line in ``notes``."""
    by_kind: dict[str, list[RemoteModel]] = {}
    for d in pool:
        why = compatible(t, d, caps)
        if why:
            note = f"{d.filename} left out: {why}"
            if note not in notes:
                notes.append(note)
            continue
        by_kind.setdefault(d.kind, []).append(d)
    kinds: list[tuple[str, RemoteModel | None]] = [("none", None)]
    if t.mtp_heads:
        kinds.append(("mtp", None))
    kinds.extend((k, pick_draft(by_kind[k])) for k in KIND_ORDER if k in by_kind)
    return kinds


def _best_row(t: RemoteModel, d: RemoteModel | None, kind: str, gen: Generation, caches: list[tuple[str, str]],
              vram: list[int], ubd: int | None, base_ctx: dict[tuple[str, str], int],
              engines: tuple[EngineCaps | None, EngineCaps | None] = (None, None),
              defaults: DraftDefaults | None = None) -> LiveRow:
    """The most precise cache that reaches MIN_CTX (else the one with the most context), among the caches the
    launch guard lets through. ``engines``: the probed engine, and the one the drafter is tuned for."""
    caps, tuning = engines
    best: LiveRow | None = None
    refused = ""
    for cache in caches:
        s = settings_for(t, d, kind, gen, cache, ubd, tuning)
        why = guard_refusal(s, t.info, d.info if d else None, gen, caps)
        if why:
            refused = refused or f"{cache[0]}/{cache[1]} cache refused: {why}"
            continue
        ctx, p = max_context(t.info, d.info if d else None, s, gen, vram, defaults)
        row = LiveRow(t, d, kind, gen, replace(s, ctx_size=ctx or s.ctx_size), p, ctx)
        if kind == "none":
            base_ctx[cache] = ctx
        else:
            if cache not in base_ctx:
                base_ctx[cache] = max_context(t.info, None, settings_for(t, None, "none", gen, cache, None), gen,
                                              vram)[0]
            row.cost_tokens = max(0, base_ctx[cache] - ctx) if p is not None else None
        if best is None or (best.plan is None and p is not None) or (
                p is not None and best.ctx < MIN_CTX and ctx > best.ctx):
            best = row
        if p is not None and ctx >= MIN_CTX:
            break
    if best is None:  # the guard refused every cache
        s = settings_for(t, d, kind, gen, caches[0], ubd, tuning)
        return LiveRow(t, d, kind, gen, s, None, 0, problem=refused)
    return best
