"""The pair / quant / context recommender: the best DFlash setup that fits the GPU(s) with 1 GiB spare.

Every candidate is sized by the memory planner (core/planner.py) from the catalog's architecture
numbers and file sizes, so a recommendation never exceeds what the planner says fits. Pairs whose
draft format the chosen engine generation cannot load are never considered.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models.gguf import DFlashInfo, ModelInfo, TensorInfo
from beedeck.core.models.planner import GiB, MemoryPlan, pad, plan

GOALS = ("quality", "speed", "context")
MIN_CTX = 32768  # the guide's context; quality and speed goals want at least this
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

    def summary(self) -> str:
        if self.draft_file is None:
            return f"{self.title} ({self.target_file}), {self.settings.ctx_size} context on the CPU"
        return (f"{self.title}: {self.target_quant} + {self.draft_quant} draft, {self.settings.ctx_size:,} context, "
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


_NEED = ("architecture", "n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "vocab")


def _arch_ok(arch: dict | None) -> bool:
    return bool(arch) and all(arch.get(k) for k in _NEED)  # type: ignore[union-attr]


def _fill_arch(cat: catalog_mod.Catalog, spec: catalog_mod.ModelSpec) -> catalog_mod.ModelSpec | None:
    """Complete missing numbers from a bigger same-architecture sibling: a conservative (over-)estimate."""
    a = spec.arch or {}
    if _arch_ok(a):
        return spec
    if not a.get("architecture") or not a.get("n_layer"):
        return None
    for p in cat.pairs:
        sib = p.target.arch or {}
        if _arch_ok(sib) and sib["architecture"] == a["architecture"]:
            merged = {**sib, **{k: v for k, v in a.items() if v is not None}, "estimated_from": p.id}
            return replace(spec, arch=merged)
    return None


def synth_target(spec: catalog_mod.ModelSpec, f: catalog_mod.CatalogFile) -> ModelInfo:
    """A ModelInfo from catalog numbers: the file size split over layers, embeddings estimated."""
    a = spec.arch or {}
    n, embd, vocab = int(a["n_layer"]), int(a["n_embd"]), int(a["vocab"])
    size = f.best_size or 0
    tied = bool(a.get("tied_embeddings"))
    emb = int(embd * vocab * quant_bits(f.quant) / 8)
    per_layer = max(0, size - emb * (1 if tied else 2)) // n
    tensors = [TensorInfo("token_embd.weight", (embd, vocab), 0, 0, emb)]
    tensors += [TensorInfo(f"blk.{i}.weights", (per_layer,), 0, 0, per_layer) for i in range(n)]
    if not tied:
        tensors.append(TensorInfo("output.weight", (embd, vocab), 0, 0, emb))
    pattern = int(a.get("swa_pattern", 0) or 0)
    is_swa = [bool(pattern) and i % pattern < pattern - 1 for i in range(n)]
    interval = int(a.get("full_attention_interval", 0) or 0)
    is_rec = [bool(interval) and (i + 1) % interval != 0 for i in range(n)]
    kv = [int(a.get("n_head_kv_swa", a["n_head_kv"])) if s else int(a["n_head_kv"]) for s in is_swa]
    hd = [int(a.get("head_dim_swa", a["head_dim"])) if s else int(a["head_dim"]) for s in is_swa]
    return ModelInfo(
        path=Path(f.file), parts=[Path(f.file)], file_size=size, architecture=a["architecture"], name=spec.repo,
        basename="", size_label="", file_type=f.quant, n_layer=n, n_layer_all=n, n_embd=embd,
        n_ff=int(a.get("n_ff") or 4 * embd), n_head=[int(a["n_head"])] * n, n_head_kv=kv, head_dim_k=hd,
        head_dim_v=hd, is_swa=is_swa, is_recurrent=is_rec, sliding_window=int(a.get("sliding_window", 0) or 0),
        shared_kv_layers=0, ssm=dict(a.get("ssm") or {}), vocab_size=vocab, tokenizer_model="", bos_id=None,
        eos_id=None, context_length=int(a.get("context_length") or 131072), has_chat_template=True,
        tensors=tensors, dflash=None,
    )


def synth_draft(spec: catalog_mod.ModelSpec, f: catalog_mod.CatalogFile, target: ModelInfo) -> ModelInfo:
    """A draft ModelInfo; without catalog numbers it assumes the common 5-layer, 8x128, SWA-2048 shape."""
    a = spec.arch or {"n_layer": 5, "n_head": 32, "n_head_kv": 8, "head_dim": 128, "sliding_window": 2048,
                      "swa_pattern": 5, "target_layers": [], "block_size": 16}
    n = int(a["n_layer"])
    pattern = int(a.get("swa_pattern", 0) or 0)
    is_swa = [bool(pattern) and i % pattern < pattern - 1 for i in range(n)]
    return ModelInfo(
        path=Path(f.file), parts=[Path(f.file)], file_size=f.best_size or 0, architecture=spec.fmt, name=spec.repo,
        basename="", size_label="", file_type=f.quant, n_layer=n, n_layer_all=n, n_embd=target.n_embd,
        n_ff=int(a.get("n_ff") or 0), n_head=[int(a["n_head"])] * n, n_head_kv=[int(a["n_head_kv"])] * n,
        head_dim_k=[int(a["head_dim"])] * n, head_dim_v=[int(a["head_dim"])] * n, is_swa=is_swa,
        is_recurrent=[False] * n, sliding_window=int(a.get("sliding_window", 0) or 0), shared_kv_layers=0, ssm={},
        vocab_size=target.vocab_size, tokenizer_model="", bos_id=None, eos_id=None, context_length=0,
        has_chat_template=False, tensors=[TensorInfo("blk.0.weights", (1,), 0, 0, f.best_size or 0)],
        dflash=DFlashInfo(spec.fmt, int(a.get("block_size", 16)), None, tuple(a.get("target_layers") or ()), None),
    )


def _settings(target_file: str, draft_file: str, gen: Generation, ctk: str, ctv: str, ctx: int) -> LaunchSettings:
    bee_a = gen == Generation.BEE_A
    return LaunchSettings(
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


def _score(goal: str, spec: catalog_mod.ModelSpec, quant: str, dquant: str, cache_rank: int, ctx: int) -> tuple[float, ...]:
    total = float(spec.params_b or 0)
    active = float(spec.active_params_b or total)
    # A common rule of thumb (not a measurement): an MoE model is worth about sqrt(total x active)
    # dense parameters, so a 35B-A3B ranks below a dense 27B.
    params = (total * active) ** 0.5
    good_quant = 1.0 if quant_bits(quant) >= 4.25 else 0.0
    enough = 1.0 if ctx >= MIN_CTX else 0.0
    if goal == "quality":
        return (enough, params, quant_bits(quant), -cache_rank, quant_bits(dquant), ctx)
    if goal == "speed":
        # Decoding is memory-bound: fewer bytes read per token is faster; then prefer the bigger model.
        return (enough, good_quant, -round(active * quant_bits(quant)), params, -cache_rank, ctx)
    return (float(ctx >= 4 * MIN_CTX), good_quant, params, ctx, quant_bits(quant))


def _candidates(cat: catalog_mod.Catalog, vram: list[int], goal: str, gens: list[Generation]) -> list[Choice]:
    out: list[Choice] = []
    for pair in cat.pairs:
        tspec = _fill_arch(cat, pair.target)
        if tspec is None:
            continue
        for gen in gens:
            for dspec in pair.drafts_for(gen):
                dfiles = [f for f in dspec.files if f.best_size]
                dquants = sorted({f.quant for f in dfiles} & {"Q4_K_M", "Q5_K_M", "IQ4_XS"})
                for tf in (f for f in tspec.files if f.best_size):
                    if (tf.best_size or 0) > sum(vram):
                        continue
                    target = synth_target(tspec, tf)
                    for dq in dquants:
                        df = dspec.file(dq)
                        assert df is not None
                        draft = synth_draft(dspec, df, target)
                        for rank, (ctk, ctv) in enumerate(CACHES[gen]):
                            s = _settings(tf.file, df.file, gen, ctk, ctv, 4096)
                            ctx, p = _max_ctx(target, draft, s, gen, vram)
                            if p is None or ctx < 8192:
                                continue
                            s.ctx_size = ctx
                            out.append(Choice(pair.id, pair.title, gen, pair.target.repo, tf.file, tf.quant,
                                              dspec.repo, df.file, dq, s, p,
                                              _score(goal, tspec, tf.quant, dq, rank, ctx)))
    return out


def _starter_choice(cat: catalog_mod.Catalog) -> Choice:
    st = cat.starter
    s = LaunchSettings(target=st.get("model", {}).get("file", ""), ctx_size=8192, n_gpu_layers="0",
                       draft_n_gpu_layers=None, jinja=True)
    return Choice("starter", st.get("title", "Starter"), Generation.MAINLINE, st.get("model", {}).get("package", ""),
                  s.target, st.get("model", {}).get("quant", ""), None, None, None, s, None)


def recommend(vram_bytes: list[int], goal: str = "quality", generation: Generation | None = None,
              cat: catalog_mod.Catalog | None = None) -> Recommendation:
    """Recommend a pair, quants, context, cache types and batch sizes for GPUs with these free bytes."""
    if goal not in GOALS:
        raise ValueError(f"Unknown goal {goal!r}: use one of {', '.join(GOALS)}.")
    cat = cat or catalog_mod.load()
    vram = [v for v in vram_bytes if v > 0]
    if not vram:
        return Recommendation(_starter_choice(cat), None, [
            "No GPU memory was given or detected: the starter profile (Gemma 3 270M on the CPU) runs anywhere. "
            "DFlash pairs need a GPU with at least 8 GB."])
    gens: list[Generation] = ([generation] if generation and generation != Generation.UNKNOWN
                              else [Generation.BEE_B, Generation.MAINLINE, Generation.BEE_A])
    cands = sorted(_candidates(cat, vram, goal, gens), key=lambda c: c.score, reverse=True)
    if not cands:
        return Recommendation(_starter_choice(cat), None, [
            f"No catalog pair fits {sum(vram) / GiB:.1f} GiB with 1 GiB to spare at 8k context or more: "
            "use the starter profile, or a smaller model you pick yourself."])
    best = cands[0]
    runner = next((c for c in cands[1:] if (c.pair_id, c.target_quant) != (best.pair_id, best.target_quant)), None)
    assert best.plan is not None
    left = min((d.left or 0) for d in best.plan.gpus)
    reasons = [f"{best.summary()}: the planner puts it at {best.plan.gpu_total / GiB:.2f} GiB on the GPU, "
               f"{left / GiB:.2f} GiB left (at least 1 GiB is kept free)."]
    reasons.append({"quality": "Goal quality: the largest model and the highest quant that still give at least 32k "
                               "context, then the most precise KV cache.",
                    "speed": "Goal speed: decoding is memory-bound, so the fewest weight bytes read per token win "
                             "(MoE models read only their active experts).",
                    "context": "Goal context: the longest context with a 4-bit-or-better quant."}[goal])
    guide = next((c for c in cands if c.pair_id == best.pair_id and _is_guide(cat, c)), None)
    if guide is not None and guide is not best:
        if goal != "quality":
            why = f"it serves the {goal} goal better"
        elif quant_bits(best.target_quant) > quant_bits(guide.target_quant):
            why = f"a higher-precision target quant ({best.target_quant}) still fits with >= 32k context"
        elif best.settings.ctx_size > guide.settings.ctx_size:
            why = "it leaves room for more context"
        else:
            why = "a more precise cache or draft fits too"
        reasons.append(f"The guide's choice ({guide.summary()}) also fits; the pick ranks above it because {why}.")
    est = (cat.pair(best.pair_id).target.arch or {})
    if not _arch_ok(est):
        reasons.append("This model's attention numbers are not in BeeDeck's catalog: they were estimated "
                       "(conservatively) from a bigger model of the same family; inspect the downloaded GGUF "
                       "for an exact plan.")
    if runner is not None:
        reasons.append(f"Runner-up: {runner.summary()}.")
    return Recommendation(best, runner, reasons)


def _is_guide(cat: catalog_mod.Catalog, c: Choice) -> bool:
    rec = cat.pair(c.pair_id).recommended or {}
    return rec.get("target_quant") == c.target_quant and rec.get("draft_quant") == c.draft_quant
