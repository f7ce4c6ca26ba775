"""Plan every quant of a Hub target with every compatible draft kind, from headers only (:mod:`hub_sizing`).

For each target file: no speculation, the target's own MTP heads (when its header has NextN layers),
and one file of each draft kind found in the draft repos (DFlash, DFlash2, DSpark, EAGLE-3, MTP head
files), each checked against the target by :func:`paircheck.check_pair` and the tokenizer digest.
Each row gets the largest context (a multiple of 256) the memory planner fits with its margin, with
the most precise KV cache that still reaches 32k, and the context the drafter costs against no
speculation at the same cache ("DFlash2 costs about 36k tokens of context here").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.models.catalog import DRAFT_FORMAT_GENERATIONS
from beedeck.core.models.draft_kinds import SPEC_TYPE_OF_KIND
from beedeck.core.models.gguf import ModelInfo
from beedeck.core.models.hub_sizing import RemoteModel, RepoSizing
from beedeck.core.models.paircheck import check_pair
from beedeck.core.models.planner import GiB, MemoryPlan, pad, plan
from beedeck.core.models.recommend import DFLASH2_BLOCK_MAX
from beedeck.core.models.recommend import draft_cache_for as recommend_draft_cache

MIN_CTX = 32768  # the guide's context: a row "fits" a card when it reaches at least this
LEAST_CTX = 4096  # below this a row is reported as not fitting at all
KIND_MODE = {"none": SpecMode.OFF, "mtp": SpecMode.MTP, "mtp-head": SpecMode.MTP, "dflash": SpecMode.DFLASH,
             "dflash2": SpecMode.DFLASH, "dflash-draft": SpecMode.DFLASH, "dspark": SpecMode.DSPARK,
             "eagle3": SpecMode.EAGLE3}
LABEL = {"none": "no speculation", "mtp": "MTP (its own head)", "mtp-head": "MTP head file", "dflash": "DFlash",
         "dflash2": "DFlash2", "dflash-draft": "DFlash (fork format)", "dspark": "DSpark", "eagle3": "EAGLE-3"}
KIND_ORDER = ("none", "mtp", "mtp-head", "dflash2", "dflash", "dspark", "eagle3", "dflash-draft")
CACHES = {Generation.MAINLINE: [("q8_0", "q8_0"), ("q5_0", "q4_1"), ("q4_0", "q4_0")],
          Generation.BEE_B: [("q8_0", "q8_0"), ("q5_0", "q4_1"), ("kvarn4", "kvarn4")],
          Generation.BEE_A: [("turbo4", "turbo3_tcq"), ("turbo3_tcq", "turbo2_tcq")]}
DRAFT_QUANT_PREFERENCE = ("Q4_K_M", "Q5_K_M", "Q8_0", "IQ4_XS", "Q6_K")


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


def kind_runs_on(kind: str, generation: Generation, caps: EngineCaps | None = None) -> bool:
    if kind == "none":
        return True
    if caps is not None:
        spec = SPEC_TYPE_OF_KIND.get("mtp" if kind.startswith("mtp") else "dflash" if kind == "dflash2" else kind)
        return (caps.dflash_spec_type is not None) if KIND_MODE[kind] == SpecMode.DFLASH else spec in caps.spec_types
    fmt = {"mtp-head": "mtp"}.get(kind, kind)
    gens = DRAFT_FORMAT_GENERATIONS.get(fmt, ())
    # BeeLlama >= 0.4.7 boots draft-mtp ("creating MTP draft context", field notes §1).
    return generation in gens or (kind == "mtp" and generation == Generation.BEE_B)


def compatible(target: RemoteModel, draft: RemoteModel, caps: EngineCaps | None = None) -> str:
    """Why ``draft`` cannot speculate for ``target`` ("" when it can)."""
    if target.tokenizer_sha256 and draft.tokenizer_sha256 and target.tokenizer_sha256 != draft.tokenizer_sha256:
        return f"{draft.filename}'s token list differs from {target.filename}'s: it is a draft for another model"
    verdict = check_pair(target.info, draft.info, caps)
    return "" if verdict.ok else verdict.reasons[0]


def draft_cache_for(kind: str, target: ModelInfo, caps: EngineCaps | None) -> str | None:
    """The drafter's own KV type where the probe offers KVarN for it (recommend.draft_cache_for); never for
    Gemma 4's MTP, which shares the target's cache and rejects a draft KVarN type (field notes §1)."""
    if kind == "none" or (kind == "mtp" and target.architecture == "gemma4"):
        return None
    return recommend_draft_cache(caps)


def _settings(t: RemoteModel, d: RemoteModel | None, kind: str, gen: Generation, cache: tuple[str, str],
              ubd: int | None, caps: EngineCaps | None = None) -> LaunchSettings:
    bee_a = gen == Generation.BEE_A
    return LaunchSettings(
        target=t.filename, draft=d.filename if d else None, spec_mode=KIND_MODE[kind], ctx_size=4096,
        n_gpu_layers="all", draft_n_gpu_layers="all", batch_size=2048 if bee_a else 1024,
        ubatch_size=256 if bee_a else 512, cache_type_k=cache[0], cache_type_v=cache[1], flash_attn="on",
        parallel=1, kv_unified=True, dflash_cross_ctx=1024 if bee_a and d else None,
        draft_n_max=DFLASH2_BLOCK_MAX if kind == "dflash2" else None,
        draft_ubatch_size=ubd if kind != "none" else None, draft_cache_type=draft_cache_for(kind, t.info, caps))


def max_context(target: ModelInfo, draft: ModelInfo | None, s: LaunchSettings, gen: Generation,
                vram: list[int]) -> tuple[int, MemoryPlan | None]:
    """The largest context (a multiple of 256, at least LEAST_CTX) whose plan keeps the margin on every GPU."""
    lo, hi, best = LEAST_CTX // 256 - 1, pad(target.context_length or 131072) // 256, None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        p = plan(target, draft, replace(s, ctx_size=mid * 256), gen, vram)
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
              ubd: int | None = None, quants: Sequence[str] | None = None) -> tuple[list[LiveRow], list[str]]:
    """Rows for every target quant x speculation kind, and notes on drafts that were left out (and why)."""
    gen = caps.generation if caps is not None and caps.generation != Generation.UNKNOWN else generation
    vram = [v for v in vram if v > 0]
    notes: list[str] = []
    pool = [m for s in (target, *drafts) for m in s.drafts()]
    rows: list[LiveRow] = []
    caches = CACHES.get(gen, CACHES[Generation.MAINLINE])
    for t in sorted(target.targets(), key=lambda m: m.size):
        if quants and t.quant.upper() not in {q.upper() for q in quants}:
            continue
        base_ctx: dict[tuple[str, str], int] = {}
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
        for kind, draft in kinds:
            if not kind_runs_on(kind, gen, caps):
                s = _settings(t, draft, kind, gen, caches[0], ubd, caps)
                rows.append(LiveRow(t, draft, kind, gen, s, None, 0,
                                    problem=f"{LABEL[kind]} does not run on {gen.value} engines"))
                continue
            rows.append(_best_row(t, draft, kind, gen, caches, vram, ubd, base_ctx, caps))
    return rows, notes


def _best_row(t: RemoteModel, d: RemoteModel | None, kind: str, gen: Generation, caches: list[tuple[str, str]],
              vram: list[int], ubd: int | None, base_ctx: dict[tuple[str, str], int],
              caps: EngineCaps | None = None) -> LiveRow:
    best: LiveRow | None = None
    for cache in caches:
        s = _settings(t, d, kind, gen, cache, ubd, caps)
        ctx, p = max_context(t.info, d.info if d else None, s, gen, vram)
        row = LiveRow(t, d, kind, gen, replace(s, ctx_size=ctx or s.ctx_size), p, ctx)
        if kind == "none":
            base_ctx[cache] = ctx
        else:
            if cache not in base_ctx:
                base_ctx[cache] = max_context(t.info, None, _settings(t, None, "none", gen, cache, None), gen, vram)[0]
            row.cost_tokens = max(0, base_ctx[cache] - ctx) if p is not None else None
        if best is None or (best.plan is None and p is not None) or (
                p is not None and best.ctx < MIN_CTX and ctx > best.ctx):
            best = row
        if p is not None and ctx >= MIN_CTX:
            break
    assert best is not None
    return best
