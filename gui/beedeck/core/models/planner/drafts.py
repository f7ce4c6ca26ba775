"""The drafter's part of a plan (docs/reference/memory-model.md §1.9): DFlash-format drafts (DFlash, DFlash2,
DSpark), EAGLE-3 drafts and MTP head files, the target's own MTP heads; and what an engine does with the
drafter when the launch does not say (:class:`DraftDefaults`, from the probe: :func:`draft_defaults`).
"""

from __future__ import annotations

from dataclasses import dataclass

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.known_issues import parse_version
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.draft_kinds import is_mtp_only
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.planner.units import DeviceUse, MiB, layer_of, ngl_of, pad, row_bytes

DRAFT_COMPUTE = 150 * MiB  # §1.9: BeeLlama <= 0.3 draft compute, not measured; estimate
# BeeLlama v0.4.5+ (shared/docs/field-2026-12.md section 1): the drafter's physical ubatch is its own,
# --spec-draft-ubatch-size / -ubd, default 128 (Escha's v0.4.7 notes), no longer the target's -ub; and
# its window is capped at 2048 tokens. Anbeeld/beellama.cpp#172 measured the change on Qwen3.8 27B with
# DFlash2 at 32K context: "draft window 65,536 requested -> 2,048, draft batch/ubatch 4,096/1,024
# inherited -> 4,096/128", 1.7-1.8 GiB less VRAM at the same speed.
BEE_DRAFT_UBATCH = 128
BEE_DRAFT_WINDOW = 2048
BEE_DRAFT_SINCE = (0, 4, 5)


@dataclass(frozen=True)
class DraftDefaults:
    """What the engine gives the drafter when the launch does not say (None: the old rule: the target's
    -ub, and a draft context as large as the target's)."""

    ubatch: int | None = None  # the drafter's ubatch when -ubd is not passed
    window: int | None = None  # the DFlash-format drafter's context, in tokens
    why: str = ""

    def draft_ctx(self, n_ctx_seq: int) -> int:
        return min(n_ctx_seq, self.window) if self.window else n_ctx_seq


def draft_defaults(caps: EngineCaps | None) -> DraftDefaults:
    """BeeLlama v0.4.5 and later (its release, or --version, says so; or the probe found -ubd, which came in
    v0.4.7): -ubd defaults to the "(default: N)" its --help prints, else 128, and the drafter's window is 2048
    tokens. Every other engine (and an unknown BeeLlama release without -ubd): the old rule."""
    if caps is None or caps.generation != Generation.BEE_B:
        return DraftDefaults()
    release = parse_version(caps.release) or parse_version(caps.version)
    has_ubd = caps.has("--spec-draft-ubatch-size") or caps.has("-ubd")
    if not has_ubd and (release is None or release < BEE_DRAFT_SINCE):
        return DraftDefaults()
    said = caps.defaults.get("--spec-draft-ubatch-size", "").strip()
    ub = int(said) if said.isdigit() and int(said) > 0 else BEE_DRAFT_UBATCH
    return DraftDefaults(ub, BEE_DRAFT_WINDOW, "BeeLlama >= 0.4.5: the drafter's own ubatch (-ubd, default "
                         f"{ub}) and a {BEE_DRAFT_WINDOW}-token draft window (Anbeeld/beellama.cpp#172)")


def plan_mtp_heads(target: ModelInfo, settings: LaunchSettings, dev: DeviceUse, n_ctx_seq: int, ub: int,
                   notes: list[str]) -> None:
    """The target's own MTP (NextN) heads under --spec-type draft-mtp: their weights (skipped otherwise),
    an f16 KV cache per head layer over the slot's context and a logits-sized compute buffer (the MTP
    context is a second context on the target: common/speculative.cpp). Mainline logs its estimate
    ("estimated memory usage of MTP context is 648.06 MiB"); this formula is not calibrated against it."""
    for t in target.tensors:
        layer = layer_of(t.name)
        if layer is not None and layer >= target.n_layer:
            dev.add("mtp_weights", t.nbytes)
    dt = settings.draft_cache_type or "f16"
    for i in range(target.n_layer, target.n_layer_all):
        nk, nv = target.n_head_kv[i] * target.head_dim_k[i], target.n_head_kv[i] * target.head_dim_v[i]
        dev.add("mtp_kv", n_ctx_seq * (row_bytes(dt, nk) + row_bytes(dt, nv)))
    dev.add("mtp_compute", 4 * ub * (target.vocab_size + target.n_embd))
    notes.append("The MTP heads' context (f16 KV and a logits-sized compute buffer) is estimated, not measured: "
                 "mainline prints its own figure at start ('estimated memory usage of MTP context').")


def loads_other_draft(draft: ModelInfo, settings: LaunchSettings) -> bool:
    """An EAGLE-3 draft in EAGLE-3 mode, or an MTP head file (no trunk layers) in MTP mode."""
    if settings.spec_mode == Mode.EAGLE3:
        return draft.architecture == "eagle3"
    return settings.spec_mode == Mode.MTP and is_mtp_only(draft)


def plan_other_draft(draft: ModelInfo, settings: LaunchSettings, gpus: list[DeviceUse], host: DeviceUse,
                     n_ctx_seq: int, notes: list[str]) -> None:
    """EAGLE-3 drafts and MTP head files: docs/reference/memory-model.md has no formula for their contexts,
    so only their weights (all of them, where -ngld puts the draft) and, for EAGLE-3, an f16 KV cache as
    large as the target's per-slot context over the layers its header declares, are counted."""
    on_gpu = bool(gpus) and ngl_of(settings.draft_n_gpu_layers, draft.n_layer) > 0
    dev = gpus[-1] if on_gpu else host
    dev.add("draft_weights", draft.tensor_bytes)
    what = "MTP head file" if settings.spec_mode == Mode.MTP else "EAGLE-3 draft"
    kv = 0
    if settings.spec_mode == Mode.EAGLE3:
        for i in draft.kv_layers():
            if i < len(draft.n_head_kv) and i < len(draft.head_dim_k) and i < len(draft.head_dim_v):
                nk, nv = draft.n_head_kv[i] * draft.head_dim_k[i], draft.n_head_kv[i] * draft.head_dim_v[i]
                kv += n_ctx_seq * (row_bytes(settings.draft_cache_type or "f16", nk)
                                   + row_bytes(settings.draft_cache_type or "f16", nv))
        if kv:
            dev.add("draft_kv", kv)
    counted = "its weights and f16 KV cache" if kv else "its weights"
    notes.append(f"The {what}'s memory is {counted} only: its compute buffer (and, for an MTP head, its cache) "
                 "has no measured formula yet, so leave some room beyond this plan.")


def plan_draft(target: ModelInfo, draft: ModelInfo, settings: LaunchSettings, generation: Generation,
               gpus: list[DeviceUse], host: DeviceUse, n_ctx_seq: int, ub: int, np_: int,
               notes: list[str], defaults: DraftDefaults | None = None) -> None:
    """A DFlash-format draft: its weights, compute and (Gen B, mainline) its own KV cache over its context:
    the target's slot context, or the engine's draft window (``defaults``)."""
    capped = defaults is not None and defaults.window is not None and generation != Generation.BEE_A
    if capped and defaults is not None:
        n_ctx_seq = defaults.draft_ctx(n_ctx_seq)
    on_gpu = bool(gpus) and ngl_of(settings.draft_n_gpu_layers, draft.n_layer) > 0
    dev = gpus[-1] if on_gpu else host
    dev.add("draft_weights", draft.tensor_bytes)
    if generation == Generation.BEE_A:
        dev.add("draft_compute", DRAFT_COMPUTE)
    else:
        # The draft's own context reserves the larger of two peaks per ubatch row:
        # - logits, 4 x ub x (n_vocab + n_embd): 522.50 MiB to the byte for the Gemma 4 31B draft at
        #   -ub 512 on an H200 (mainline);
        # - its f16 attention mask over its whole (target-sized) context plus the encoder
        #   activations, ub x (2 x n_ctx + 4 x (n_target_layers + 2) x n_embd): exact on the CPU builds
        #   of mainline and BeeLlama v0.4.3 with the synthetic pair at -c 1024..16384, -ub 128..512
        #   (tests/engine/test_planner_real.py), where the vocabulary is tiny.
        n_tl = len(draft.dflash.target_layer_ids) if draft.dflash else 0
        logits = 4 * ub * (target.vocab_size + target.n_embd)
        attention = ub * (2 * n_ctx_seq + 4 * (n_tl + 2) * target.n_embd)
        draft_compute = max(logits, attention)
        dev.add("draft_compute", draft_compute)
        if generation == Generation.MAINLINE:
            # Mainline reserves a second graph for the drafter (a third compute buffer line): the same size
            # on the CPU builds, and on CUDA with a full vocabulary 4 x ub x (2 n_vocab + n_embd + ub):
            # 1,035.50 MiB to the byte for the Gemma 4 31B pair at -ub 512 on an H200.
            runtime = 4 * ub * (2 * target.vocab_size + target.n_embd + ub)
            dev.add("draft_runtime", max(draft_compute, runtime) if on_gpu else draft_compute)
    n_tl = len(draft.dflash.target_layer_ids) if draft.dflash else 0
    if generation == Generation.BEE_A:
        cross = settings.dflash_cross_ctx or 512
        if on_gpu and len(gpus) == 1:
            dev.add("dflash_ring", cross * n_tl * target.n_embd * 4 * 2)
            d_kv = max(draft.n_head_kv or [0]) * max(draft.head_dim_k or [0])
            dev.add("dflash_kv_proj", draft.n_layer * 2 * d_kv * cross * 4)
            rec = [i for i in range(target.n_layer) if target.is_recurrent[i]]
            if rec:
                s = target.ssm
                hk, hv, st = s["group_count"], s["time_step_rank"], s["state_size"]
                conv_ch = 2 * hk * st + hv * st
                dev.add("dflash_tape", np_ * 25 * len(rec) * (st * hk + st * hv + 2 * hv + conv_ch) * 4)
            dev.add("dflash_capture", n_tl * target.n_embd * 25 * 4)
        host.add("dflash_cpu_ring", n_tl * 4096 * target.n_embd * 4)
        notes.append("Draft compute (150 MiB) is an estimate: not measured on a GPU.")
        return
    # Gen B / mainline: the draft is an ordinary context with its own (f16 by default) KV cache.
    cells_swa = pad(min(n_ctx_seq, draft.sliding_window + ub)) if any(draft.is_swa) else 0
    for i in draft.kv_layers():
        cells = cells_swa if draft.is_swa[i] else n_ctx_seq
        nk = draft.n_head_kv[i] * draft.head_dim_k[i]
        nv = draft.n_head_kv[i] * draft.head_dim_v[i]
        dt = settings.draft_cache_type or "f16"  # --spec-draft-type-k/v (BeeLlama >= 0.4.4), else f16
        dev.add("draft_kv", cells * (row_bytes(dt, nk) + row_bytes(dt, nv)))
    if capped and defaults is not None:
        notes.append(f"The drafter's context is {n_ctx_seq:,} tokens and its ubatch {ub}: {defaults.why}.")
    elif on_gpu and generation == Generation.BEE_B:
        notes.append("BeeLlama >= 0.4's drafter gets a context as large as the target's (it has no -cd): its "
                     "KV and compute grow with the context (measured on an H200 at full size: the plan within 0.1 % "
                     "of the engine's buffers, docs/gpu-runs/2026-12-01-h200-fullsize).")
