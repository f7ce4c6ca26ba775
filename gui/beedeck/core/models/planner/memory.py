"""Memory planner: what a llama-server launch will allocate, per device, before launching it.

Formulas: docs/reference/memory-model.md (section numbers below refer to it). Weights, KV cache,
recurrent state and padding are exact (read from the GGUF tensor table and hyper-parameters); the
compute buffer is an empirical model calibrated against the real engine's log lines; the CUDA
context and fork buffers are published estimates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.slots import chat_slots, slot_context
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.planner.drafts import (
    DraftDefaults,
    loads_other_draft,
    plan_draft,
    plan_mtp_heads,
    plan_other_draft,
)
from beedeck.core.models.planner.split import device_masks, split_compute, staging
from beedeck.core.models.planner.split import pipeline as split_pipeline
from beedeck.core.models.planner.units import (
    DeviceUse,
    GiB,
    MiB,
    PlanError,
    cache_geometry,
    layer_of,
    ngl_of,
    pad,
    row_bytes,
)

CUDA_CONTEXT = 350 * MiB  # §1.8: ~0.1-0.6 GiB, 350 MiB on a 3090/4090 under Linux
DEFAULT_MARGIN = GiB  # llama.cpp's own --fit-target default
INPUT_TENSORS = ("token_embd", "per_layer_token_embd")  # the input layer: always in host memory (dev_input = cpu)
_REPACKED = frozenset({2, 12, 20})  # Q4_0, Q4_K, IQ4_NL



@dataclass
class MemoryPlan:
    """A per-device breakdown; GPUs first, the host ("CPU") last."""

    devices: list[DeviceUse]
    n_ctx: int  # padded total context
    n_ctx_seq: int  # context each slot sees
    cells_swa: int
    cpu_tensors: list[str]  # target tensors that stay in host memory
    notes: list[str] = field(default_factory=list)
    margin: int = DEFAULT_MARGIN
    # The flash-attention f16 copy of the widest layer's quantized K/V at full context (counted in the compute
    # buffer's peak on mainline and BeeLlama >= 0.4, as its own buffer on BeeLlama <= 0.3; 0: none). What grows as
    # the context fills: the 24 GB harness measures it against NVML (packaging/gpu-check/desk24_gpu.py).
    fa_copy: int = 0

    @property
    def gpus(self) -> list[DeviceUse]:
        return [d for d in self.devices if d.free is not None]

    @property
    def host(self) -> DeviceUse:
        return self.devices[-1]

    @property
    def total(self) -> int:
        return sum(d.total for d in self.devices)

    @property
    def gpu_total(self) -> int:
        return sum(d.total for d in self.gpus)

    @property
    def fits(self) -> bool:
        return all((d.left or 0) >= self.margin for d in self.gpus)

    def component(self, key: str) -> int:
        return sum(d.items.get(key, 0) for d in self.devices)

    def explain(self) -> list[str]:
        lines = []
        for d in self.devices:
            parts = ", ".join(f"{k} {v / MiB:,.1f}" for k, v in d.items.items())
            head = f"{d.name}: {d.total / MiB:,.0f} MiB ({parts})"
            if d.free is not None:
                left = d.left or 0
                verdict = "fits" if left >= self.margin else (
                    "too tight: keep 1 GiB free" if left >= 0 else "does not fit")
                head += f"; {d.free / MiB:,.0f} MiB free before launch, {left / MiB:,.0f} MiB left: {verdict}"
            lines.append(head)
        lines.append(f"context: {self.n_ctx} cells ({self.n_ctx_seq} per slot)"
                     + (f", sliding-window cache {self.cells_swa} cells" if self.cells_swa else ""))
        kept = [t for t in self.cpu_tensors if not t.startswith(INPUT_TENSORS)]  # the input layer always stays
        if kept:
            layers = {t.split(".")[1] for t in kept if t.startswith("blk.")}
            lines.append(f"{len(kept)} target tensor{'' if len(kept) == 1 else 's'}"
                         + (f" of {len(layers)} layer{'' if len(layers) == 1 else 's'}" if layers else "")
                         + f" stay{'s' if len(kept) == 1 else ''} in host memory (GPU layers leave them here).")
        return lines + self.notes



def _place_weights(m: ModelInfo, ngl: int, gpus: list[DeviceUse], host: DeviceUse, key: str,
                   split: Sequence[float] | None = None) -> tuple[list[DeviceUse | None], list[str], DeviceUse | None]:
    """Put each tensor on a device with llama.cpp's rule (§1.2); return the per-layer device map, the
    target tensors left in host memory and the output layer's device.

    Layers go in order to the devices in proportion to ``split`` (``--tensor-split``), by default to
    their free memory, exactly as ``llama_model::load_tensors`` cuts them: layer ``il`` goes to the
    first device whose cumulative share exceeds ``(il - first GPU layer) / offloaded layers``."""
    n = m.n_layer
    first_gpu_layer = max(n + 1 - ngl, 0)
    act = min(ngl, n + 1)
    layer_dev: list[DeviceUse | None] = [None] * n
    out_dev: DeviceUse | None = None
    if gpus and ngl > 0:
        weights = list(split) if split and any(split) else [float(g.free or 0) for g in gpus]
        total = sum(weights) or 1.0
        bounds, acc = [], 0.0
        for w in weights:
            acc += w
            bounds.append(acc / total)

        def device(il: int) -> DeviceUse:
            frac = (il - first_gpu_layer) / act
            return gpus[next((j for j, b in enumerate(bounds) if frac < b), len(gpus) - 1)]

        for i in range(first_gpu_layer, n):
            layer_dev[i] = device(i)
        out_dev = device(n)
    cpu_names: list[str] = []
    for t in m.tensors:
        layer = layer_of(t.name)
        if layer is not None and layer >= n:
            continue  # MTP / NextN blocks are skipped unless MTP is on
        if layer is not None:
            dev = layer_dev[layer]
        elif t.name.startswith(INPUT_TENSORS):
            dev = None  # the input layer always stays in host memory (dev_input = cpu)
        else:
            dev = out_dev  # output norm / head and shared tensors (rope_freqs) go with the output layer
        (dev or host).add(key, t.nbytes)
        if dev is None and layer is not None and t.ggml_type in _REPACKED and len(t.dims) >= 2 and t.dims[1] % 8 == 0:
            # The CPU backend copies these matmul weights into an interleaved CPU_REPACK buffer
            # (ggml-cpu/repack.cpp on x86 AVX2); the mapped file stays mapped, so both count.
            host.add("cpu_repack", t.nbytes)
        if dev is None and gpus:
            cpu_names.append(t.name)
        if t.name == "token_embd.weight" and m.tied_embeddings and out_dev is not None:
            out_dev.add(key, t.nbytes)  # tied: loaded again as the output matrix (TENSOR_DUPLICATED)
    return layer_dev, cpu_names, out_dev


@dataclass(frozen=True)
class _Cells:
    """The context of a launch (§1.3, §1.5): slots, batch sizes, cells per sequence, cache streams."""

    np_: int
    n_seq: int
    ub: int
    b: int
    n_ctx: int
    n_ctx_seq: int
    streams: int
    cells_swa: int


def _cells(target: ModelInfo, settings: LaunchSettings, generation: Generation, use_draft: bool,
           notes: list[str]) -> _Cells:
    np_ = chat_slots(settings)  # one whenever a draft is loaded: the rule build_argv passes
    # One rule with build_argv (core/engine/slots.py): BeeLlama 0.1-0.3 doubles the sequences whenever
    # speculation is on, model-free too, and BeeDeck doubles -c to keep the slot's context.
    slot = slot_context(settings, generation, settings.spec_mode != Mode.BASELINE)
    n_seq = slot.n_seq
    unified = bool(settings.kv_unified)
    ub_default, b_default = (64, 256) if generation == Generation.BEE_A and use_draft else (512, 2048)
    b = settings.batch_size or b_default
    ub = min(settings.ubatch_size or ub_default, b)
    n_ctx = pad(slot.c_arg or target.context_length or 4096)
    if unified:
        n_ctx_seq, streams = n_ctx, 1
    else:
        n_ctx_seq, streams = pad(n_ctx // n_seq), n_seq
        n_ctx = n_ctx_seq * n_seq
    if slot.n_seq > np_ and not unified and settings.ctx_is_total:
        notes.append("BeeLlama 0.1-0.3 with speculation on and no --kv-unified gives each slot half of -c: "
                     "pass --kv-unified.")
    swa_seqs = n_seq if unified else 1
    cells_swa = pad(min(n_ctx_seq, target.sliding_window * swa_seqs + ub)) if any(target.is_swa) else 0
    return _Cells(np_, n_seq, ub, b, n_ctx, n_ctx_seq, streams, cells_swa)


def _place_kv(target: ModelInfo, settings: LaunchSettings, cx: _Cells, layer_dev: list[DeviceUse | None],
              host: DeviceUse) -> int:
    """The KV cache (§1.4) per layer; return the bytes of an f16 copy of its largest layer (CUDA FA's)."""
    fa = settings.flash_attn != "off"
    ctk, ctv = settings.cache_type_k, settings.cache_type_v
    if not fa and cache_geometry(ctv)[0] > 1:
        raise PlanError(f"A quantized V cache ({ctv}) needs flash attention: set flash attention on.")
    kv_layers = target.kv_layers()
    v_max = max((target.n_head_kv[i] * target.head_dim_v[i] for i in kv_layers), default=0)
    widest = (0, 0, 0)
    for i in kv_layers:
        cells = cx.cells_swa if target.is_swa[i] else cx.n_ctx_seq
        nk = target.n_head_kv[i] * target.head_dim_k[i]
        nv = v_max if not fa else target.n_head_kv[i] * target.head_dim_v[i]
        tk, tv = ctk, ctv
        if ctk.startswith("turbo") or ctv.startswith("turbo"):
            if target.head_dim_k[i] > 512:
                tk = tv = "f16"  # Bee <= 0.3 falls back to f16 above head dim 512
            else:
                nk = target.n_head_kv[i] * pad(target.head_dim_k[i], 128)
                nv = target.n_head_kv[i] * pad(target.head_dim_v[i], 128)
        dev = layer_dev[i] or host
        dev.add("kv", cells * cx.streams * (row_bytes(tk, nk) + row_bytes(tv, nv)))
        if cells * (nk + nv) > widest[0] * (widest[1] + widest[2]):
            widest = (cells * cx.streams, nk, nv)
    return widest[0] * (widest[1] + widest[2]) * 2


def _place_recurrent(target: ModelInfo, settings: LaunchSettings, generation: Generation, use_draft: bool,
                     n_seq: int, layer_dev: list[DeviceUse | None], host: DeviceUse) -> None:
    """The recurrent state (§1.6) of the layers that have one."""
    rec = [i for i in range(target.n_layer) if target.is_recurrent[i]]
    if rec:
        s = target.ssm
        n_r = (s["conv_kernel"] - 1) * (s["inner_size"] + 2 * s["group_count"] * s["state_size"])
        n_s = s["state_size"] * s["inner_size"]
        n_rs_seq = 0
        if use_draft and generation in (Generation.MAINLINE, Generation.BEE_B):
            n_rs_seq = settings.draft_n_max or (3 if generation == Generation.MAINLINE else 15)
        rows = n_seq * (1 + n_rs_seq)
        for i in rec:
            (layer_dev[i] or host).add("recurrent", (n_r + n_s) * 4 * rows)


def _place_compute(target: ModelInfo, settings: LaunchSettings, generation: Generation, use_draft: bool,
                   cx: _Cells, fa_copy: int, gpus: list[DeviceUse], host: DeviceUse,
                   layer_dev: list[DeviceUse | None], out_dev: DeviceUse | None, rpc: tuple[Sequence[bool], bool],
                   names: Sequence[str] | None, notes: list[str]) -> None:
    """The compute buffer (§1.7, calibrated; see tests/engine/test_planner_real.py) and the runtime outside
    llama.cpp's accounting (§1.8). ``rpc``: which devices are on this machine, and whether RPC runs async."""
    gen_a = generation == Generation.BEE_A
    kv_layers = target.kv_layers()
    ctk, ctv = settings.cache_type_k, settings.cache_type_v
    fa = settings.flash_attn != "off"
    n_draft = (settings.draft_n_max or (3 if generation == Generation.MAINLINE else 15)) if use_draft else 0
    n_out = cx.ub if gen_a else min(cx.b, cx.np_ * (1 + n_draft))
    n_tok = min(cx.n_ctx, cx.ub)
    # Calibrated on llama.cpp's reserved graphs (CPU plans equal the CUDA ones, docs/reference/memory-model.md §3):
    # f16 KQ masks for both caches, then the larger of the in-layer activation peak (FFN) and the
    # logits (+ tail activations); small logit buffers coexist with the in-layer peak.
    masks = 2 * n_tok * (cx.n_ctx_seq + cx.cells_swa)
    act_layer = 4 * n_tok * (4 * target.n_ff + target.n_embd)
    act_tail = 4 * n_tok * (2 * target.n_embd + target.n_ff)
    logits = 4 * n_out * target.vocab_size
    scores = 0 if fa else 4 * n_tok * cx.n_ctx_seq * max(target.n_head or [0])  # f32 KQ of the widest layer
    compute_dev = out_dev or host  # the output layer's device computes the logits
    gpu_kv = bool(gpus) and any(layer_dev[i] is not None for i in kv_layers)
    quant_kv = cache_geometry(ctk)[0] > 1 or cache_geometry(ctv)[0] > 1
    turbo = ctk.startswith("turbo") or ctv.startswith("turbo")
    in_graph = gpu_kv and quant_kv and fa and not gen_a and not turbo
    # Recent mainline (and Bee >= 0.4) reserves that copy inside the compute graph, next to the
    # attention activations (measured on an H200: Gemma 4 31B q5_0/q4_1 32k, 396.8 MiB).
    att = 3 * 4 * n_tok * max((target.n_head[i] * target.head_dim_k[i] for i in kv_layers), default=0)
    peak = max(act_layer, fa_copy + att) if in_graph else act_layer
    cb = masks + max(peak, max(logits, scores) + act_tail) + (logits if logits < peak else 0)
    layer_devs = [g for g in gpus if g is out_dev or any(d is g for d in layer_dev)]
    row = 4 * n_tok * target.n_embd  # one f32 row of activations per token
    if not gpus or (len(layer_devs) < 2 and all(d is not None for d in layer_dev)):
        compute_dev.add("compute", cb)
        if compute_dev is not host:
            host.add("compute", staging(masks, row))
    else:
        def masks_of(g: DeviceUse) -> int:
            return device_masks([target.is_swa[i] for i in kv_layers if layer_dev[i] is g], n_tok, cx.n_ctx_seq,
                                cx.cells_swa)

        here, rpc_async = rpc
        workers = [g for g, on_this_machine in zip(gpus, here, strict=True) if not on_this_machine]
        pipeline = split_pipeline(settings, layer_dev, out_dev, layer_devs, workers, rpc_async)
        split_compute(layer_devs, host, compute_dev, cb - masks, max(peak, scores + act_tail), masks, masks_of,
                      row, any(d is None for d in layer_dev), pipeline, notes)
    # --- runtime outside llama.cpp's accounting (§1.8)
    for g in gpus:
        if g.total and (names is None or g.name.startswith("CUDA")):  # an RPC worker's runtime is its own
            g.add("cuda_context", CUDA_CONTEXT)
    if gpu_kv and turbo:
        # BeeLlama <= 0.3 keeps f16 dequant buffers for the whole cache (raw cudaMalloc); they
        # double as the flash-attention f16 copy.
        gpus[-1].add("turbo_dequant", fa_copy)
    elif gpu_kv and quant_kv and gen_a:
        gpus[-1].add("fa_scratch", fa_copy)  # BeeLlama <= 0.3 takes it from the CUDA pool
    if gpu_kv and quant_kv:
        notes.append("The flash-attention f16 copy of the quantized cache grows as the context fills: "
                     "the launch can pass and still run out of memory later.")


def plan(target: ModelInfo, draft: ModelInfo | None, settings: LaunchSettings, generation: Generation,
         devices: list[int], margin: int = DEFAULT_MARGIN, *, names: Sequence[str] | None = None,
         split: Sequence[float] | None = None, local: Sequence[bool] | None = None,
         rpc_async: bool = True, draft_defaults: DraftDefaults | None = None) -> MemoryPlan:
    """Plan the memory of one launch. ``devices``: free bytes per GPU (empty: CPU only). ``draft_defaults``:
    what this engine gives the drafter when the settings do not say (:func:`planner.drafts.draft_defaults` of
    its caps; None: the target's -ub and a draft context as large as the target's, the larger of the two rules).

    Several machines (RPC workers, ``planner.devices.plan_across``): ``names`` are the engine's device
    names in its order (workers first), ``split`` the ``--tensor-split`` proportions (None: by free
    memory, the engine's default), ``local`` which devices are on this machine: the draft and the
    compute of the output stay on the last local one (the host when there is none); ``rpc_async``
    whether the engine's RPC devices can run in a pipeline (``planner.split.pipeline``).
    """
    if target.is_draft:
        raise PlanError(f"{target.path.name} is a DFlash draft, not a model to chat with: pick the target model.")
    gpus = [DeviceUse(names[i] if names else f"CUDA{i}", free) for i, free in enumerate(devices)]
    here = local or [True] * len(gpus)
    mine = [g for g, on_this_machine in zip(gpus, here, strict=True) if on_this_machine]  # the draft's GPUs
    host = DeviceUse("CPU", None)
    notes: list[str] = []
    # DFlash-format drafts (DFlash, DSpark: a DFlash file with a Markov head) get the measured DFlash formulas;
    # an EAGLE-3 draft or an MTP head file only what is known of them (planner.drafts).
    use_draft = draft is not None and settings.spec_mode.info.dflash_draft
    other_draft = draft if draft is not None and not use_draft and loads_other_draft(draft, settings) else None
    ngl = ngl_of(settings.n_gpu_layers, target.n_layer) if gpus else 0
    layer_dev, cpu_names, out_dev = _place_weights(target, ngl, gpus, host, "weights", split)
    if gpus and settings.n_gpu_layers == "auto":
        notes.append("-ngl auto: llama.cpp's --fit may move layers to the CPU if this does not fit.")
    cx = _cells(target, settings, generation, use_draft, notes)
    fa_copy = _place_kv(target, settings, cx, layer_dev, host)
    _place_recurrent(target, settings, generation, use_draft, cx.n_seq, layer_dev, host)
    _place_compute(target, settings, generation, use_draft, cx, fa_copy, gpus, host, layer_dev, out_dev,
                   (here, rpc_async), names, notes)
    # --- the draft (§1.9)
    # -ubd when set; else the engine's own default for the drafter (BeeLlama >= 0.4.5: 128), else the target's -ub
    ub = settings.draft_ubatch_size or (draft_defaults.ubatch if draft_defaults else None) or cx.ub
    if use_draft and draft is not None:
        plan_draft(target, draft, settings, generation, mine, host, cx.n_ctx_seq, ub, cx.np_, notes, draft_defaults)
    elif other_draft is not None:
        plan_other_draft(other_draft, settings, mine, host, cx.n_ctx_seq, notes)
    elif settings.spec_mode == Mode.MTP and draft is None and target.n_layer_all > target.n_layer:
        plan_mtp_heads(target, settings, out_dev or host, cx.n_ctx_seq, ub, notes)
    quant_kv = cache_geometry(settings.cache_type_k)[0] > 1 or cache_geometry(settings.cache_type_v)[0] > 1
    counted = fa_copy if quant_kv and settings.flash_attn != "off" and gpus else 0
    return MemoryPlan(gpus + [host], cx.n_ctx, cx.n_ctx_seq, cx.cells_swa, cpu_names, notes, margin, counted)


