"""The planner across RPC workers and local GPUs: layers cut as llama.cpp cuts them (workers first, by
free memory or --tensor-split), KV with its layer, the draft kept on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import parse_memory
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.rpc import Worker
from beedeck.core.engine.rpc.probe import RpcDevice
from beedeck.core.models.gguf.reader import ModelInfo, inspect
from beedeck.core.models.planner import GiB, MiB
from beedeck.core.models.planner.devices import compare, plan_across, tensor_split
from tests.fixtures import meta_gguf as mg

W1, W2 = Worker("127.0.0.1", 50052), Worker("127.0.0.1", 50053)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModelInfo]:
    d = tmp_path_factory.mktemp("meta")
    g4 = mg.gemma4_31b(d / "g4.gguf", n_vocab=262144)
    gd = mg.dflash_draft(d / "g4d.gguf", "dflash", 5376, [1, 12, 23, 35, 46, 57], 1000, n_head=64, n_ff=10752)
    return {"g4": inspect(g4), "g4d": inspect(gd)}


def _devices(*free_gib: float) -> list[RpcDevice]:
    workers = [W1, W2]
    out = [RpcDevice(f"RPC{i}", "CPU", 64 * 1024, int(f * 1024), workers[i]) for i, f in enumerate(free_gib[:-1])]
    return [RpcDevice("CUDA0", "RTX 3090", 24 * 1024, int(free_gib[-1] * 1024)), *out]  # local listed first


def test_layers_split_by_free_memory_workers_first(models: dict[str, ModelInfo]) -> None:
    s = LaunchSettings(ctx_size=8192, flash_attn="on")
    mem = plan_across(models["g4"], None, s, Generation.MAINLINE, _devices(20, 20, 20))
    names = [g.name for g in mem.gpus]
    assert names == ["RPC0[127.0.0.1:50052]", "RPC0[127.0.0.1:50053]", "CUDA0"]  # the engine's buffer names
    weights = [g.items.get("weights", 0) for g in mem.gpus]
    assert all(w > 5 * GiB for w in weights) and max(weights) / min(weights) < 1.3  # three even thirds
    assert all(g.items.get("kv", 0) > 0 for g in mem.gpus)  # each layer's KV goes with it
    assert "cuda_context" in mem.gpus[2].items and "cuda_context" not in mem.gpus[0].items
    assert mem.gpus[2].items.get("compute", 0) > 0  # the output layer (last device) computes the logits
    assert len(tensor_split(mem)) == 3


def test_a_tensor_split_moves_the_layers(models: dict[str, ModelInfo]) -> None:
    s = LaunchSettings(ctx_size=8192, flash_attn="on")
    mem = plan_across(models["g4"], None, s, Generation.MAINLINE, _devices(20, 20, 20), split=[3, 1, 0])
    w = [g.items.get("weights", 0) for g in mem.gpus]
    assert w[0] > 2.5 * w[1] and w[2] == 0  # a 0 share gets no layer, not even the output one
    assert "compute" in mem.gpus[1].items and "compute" not in mem.gpus[2].items  # logits go with the output


def test_the_draft_stays_on_this_machine(models: dict[str, ModelInfo]) -> None:
    s = LaunchSettings(ctx_size=8192, flash_attn="on", draft="/d.gguf", spec_mode=Mode.DFLASH)
    mem = plan_across(models["g4"], models["g4d"], s, Generation.MAINLINE, _devices(20, 20, 20))
    assert "draft_weights" in mem.gpus[2].items and not any("draft_weights" in g.items for g in mem.gpus[:2])
    cpu_main = plan_across(models["g4"], models["g4d"], s, Generation.MAINLINE, _devices(20, 20, 20)[1:] and
                           [d for d in _devices(30, 30, 0) if not d.local])
    assert "draft_weights" in cpu_main.host.items  # no local GPU: the draft runs on this machine's CPU


def test_compare_pairs_the_plan_with_the_engines_buffer_lines(models: dict[str, ModelInfo], tmp_path: Path) -> None:
    s = LaunchSettings(ctx_size=8192, flash_attn="on")
    mem = plan_across(models["g4"], None, s, Generation.MAINLINE, [d for d in _devices(20, 20, 0) if not d.local])
    w0, k0 = mem.gpus[0].items["weights"] / MiB, mem.gpus[0].items["kv"] / MiB
    lines = [f"load_tensors: RPC0[127.0.0.1:50052] model buffer size = {w0:.2f} MiB",
             f"llama_kv_cache: RPC0[127.0.0.1:50052] KV buffer size = {k0 * 1.02:.2f} MiB"]
    checks = compare(mem, parse_memory(lines))
    assert checks[0].engine_model_mib == pytest.approx(w0, abs=0.01) and 0 < checks[0].error < 0.02
    assert checks[1].engine_model_mib == 0 and checks[1].error == 1.0  # no line for RPC1: flagged
    assert checks[-1].device == "CPU" and checks[-1].planned_compute_mib > 0  # the host's compute is compared too


@pytest.mark.parametrize(("ngl", "extra", "pipeline"), [
    ("all", [], True),
    ("all", ["-sm", "row"], False),
    ("all", ["--no-kv-offload"], False),
    ("all", ["-ot", "exps=CPU"], False),
    ("40", [], False),  # layers left on the CPU
])
def test_every_device_that_runs_layers_reserves_compute_more_in_a_pipeline(
    models: dict[str, ModelInfo], ngl: str, extra: list[str], pipeline: bool
) -> None:
    s = LaunchSettings(ctx_size=8192, flash_attn="on", n_gpu_layers=ngl, extra_args=extra)
    mem = plan_across(models["g4"], None, s, Generation.MAINLINE, _devices(20, 20, 20))
    compute = [g.items.get("compute", 0) for g in mem.gpus]
    assert all(c > 0 for c in compute), compute  # no device runs its layers without a graph of its own
    one = plan_across(models["g4"], None, s, Generation.MAINLINE, [_devices(20, 20, 60)[0]])
    notes = " ".join(mem.notes)
    assert ("run as a pipeline" in notes) == pipeline
    if pipeline:  # 4 copies of each split's inputs; the first device also copies the input embeddings
        assert compute[0] > compute[1] and min(compute) > one.gpus[0].items["compute"] * 0.9
        assert 2.5 < mem.host.items["compute"] / one.host.items["compute"] < 4  # 4 masks + 10 rows vs 1 + 4
    else:
        assert compute[0] < one.gpus[0].items["compute"]


# Measured on an H200 (docs/gpu-runs/2026-12-01-h200-rpc-split): BeeLlama v0.1.2 built for CUDA with RPC
# by BeeDeck's builder, a synthetic llama target (n_embd 2048, n_ff 5632, 16 layers), -c 8192, FA on,
# split over the local GPU and 1-2 rpc-server workers on the same GPU. Compute buffer lines, MiB:
H200_GEN_A = {1: {"RPC0[127.0.0.1:50052]": 61.01, "CUDA0": 53.01, "CPU": 24.01},
              2: {"RPC0[127.0.0.1:50052]": 61.01, "RPC0[127.0.0.1:50053]": 53.01, "CUDA0": 53.01, "CPU": 24.01}}


def _h200_target(path: Path) -> ModelInfo:
    e, f, n = 2048, 5632, 16
    tensors: list[mg.Tensor] = [("token_embd.weight", (e, 320), mg.Q.F16), ("output_norm.weight", (e,), mg.Q.F32)]
    for i in range(n):
        tensors += [(f"blk.{i}.attn_norm.weight", (e,), mg.Q.F32), (f"blk.{i}.ffn_norm.weight", (e,), mg.Q.F32)]
        tensors += [(f"blk.{i}.attn_{x}.weight", (e, e), mg.Q.F16) for x in ("q", "k", "v", "output")]
        tensors += [(f"blk.{i}.ffn_gate.weight", (e, f), mg.Q.F16), (f"blk.{i}.ffn_up.weight", (e, f), mg.Q.F16),
                    (f"blk.{i}.ffn_down.weight", (f, e), mg.Q.F16)]
    kv = {"block_count": n, "embedding_length": e, "feed_forward_length": f, "attention.head_count": 16,
          "attention.head_count_kv": 16, "context_length": 8192}
    return inspect(mg.write_meta_gguf(path, "llama", kv, tensors, mg.vocab(320)))


@pytest.mark.parametrize("n_workers", [1, 2])
def test_the_h200_split_without_a_pipeline_matches_the_engine(tmp_path: Path, n_workers: int) -> None:
    """BeeLlama's RPC devices have no async compute, so no pipeline: the first device computes as one GPU
    would, each later one 2 token rows less, the host stages as beside one GPU."""
    s = LaunchSettings(ctx_size=8192, flash_attn="on")
    free = 140_000
    devices = [RpcDevice("CUDA0", "NVIDIA H200", 143_155, free),
               *[RpcDevice(f"RPC{i}", "CUDA0", 143_155, free, w) for i, w in enumerate([W1, W2][:n_workers])]]
    target = _h200_target(tmp_path / "h200.gguf")
    mem = plan_across(target, None, s, Generation.BEE_A, devices)
    planned = {g.name: g.items.get("compute", 0) / MiB for g in [*mem.gpus, mem.host]}
    for name, engine in H200_GEN_A[n_workers].items():
        assert abs(planned[name] - engine) / engine < 0.10, (name, planned[name], engine)
    assert not any("pipeline" in n for n in mem.notes)
    mainline = plan_across(target, None, s, Generation.MAINLINE, devices)  # its RPC devices do pipeline
    assert any("run as a pipeline" in n for n in mainline.notes)



@pytest.mark.parametrize(("is_swa", "full", "swa"), [
    ([False, False], True, False),  # only full-attention layers: no sliding-window mask
    ([True, True, True], False, True),  # only sliding-window layers: no full-context mask (Gemma 3 worker)
    ([True, False, True], True, True),
    ([], False, False),  # no KV layer (recurrent only): no mask
])
def test_a_device_sees_only_the_masks_of_the_caches_its_layers_use(is_swa: list[bool], full: bool, swa: bool) -> None:
    from beedeck.core.models.planner.split import device_masks

    n_tok, n_ctx, cells_swa = 512, 8192, 1536
    assert device_masks(is_swa, n_tok, n_ctx, cells_swa) == 2 * n_tok * (n_ctx * full + cells_swa * swa)
