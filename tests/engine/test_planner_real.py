"""The planner against the REAL engine: llama-server's own buffer log lines (CPU build, -ngl 0).

Also the metadata-only Qwen3.6-27B / Gemma 4 31B files against ``llama-fit-params`` when that
binary sits next to llama-server (it reads only headers and tensor tables, so no weights needed).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.planner import MiB, plan
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.fixtures import meta_gguf as mg
from tests.fixtures import synth_gguf as sg

pytestmark = pytest.mark.engine

BUF = re.compile(r"(\S+) (model|KV|RS|compute) buffer size =\s*([\d.]+) MiB")
READY = re.compile(r"listening on|model loaded|server is listening")
FAIL = re.compile(r"error loading model|failed to|exiting due to")


def engine_lines(engine: Path, argv: list[str], timeout: float = 120.0) -> list[str]:
    """Start llama-server at log level 4, read its log until it is ready, stop it."""
    cmd = [str(engine), *argv, "--host", "127.0.0.1", "--port", "0", "-lv", "4", "--log-colors", "off"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    lines: list[str] = []
    try:
        deadline = time.monotonic() + timeout
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if READY.search(line) or time.monotonic() > deadline:
                break
        return lines
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def engine_buffers(engine: Path, argv: list[str], timeout: float = 120.0) -> dict[str, float]:
    """The buffer lines of a start, MiB per kind (summed over devices and models)."""
    lines = engine_lines(engine, argv, timeout)
    out: dict[str, float] = {}
    for line in lines:
        m = BUF.search(line)
        if m:
            out[m.group(2)] = out.get(m.group(2), 0.0) + float(m.group(3))
    if not out:
        raise AssertionError("no buffer lines from llama-server:\n" + "".join(lines[-40:]))
    return out


def planned(model: Path, ctx: int, k: str, v: str, parallel: int = 1, ub: int | None = None,
            unified: bool | None = None) -> dict[str, float]:
    s = LaunchSettings(target=str(model), ctx_size=ctx, cache_type_k=k, cache_type_v=v, flash_attn="on",
                       n_gpu_layers="0", parallel=parallel, ubatch_size=ub, kv_unified=unified)
    p = plan(inspect(model), None, s, Generation.MAINLINE, [])
    weights = p.component("weights") + p.component("cpu_repack")
    return {"model": weights / MiB, "KV": p.component("kv") / MiB,
            "compute": p.component("compute") / MiB, "total": p.total / MiB}


CONFIGS = [(c, t) for c in (2048, 8192, 32768) for t in ("f16", "q8_0", "q4_0")]


@pytest.fixture(scope="module")
def results(starter_engine_path: Path, gemma_model_path: Path) -> Iterator[list[tuple[str, dict[str, float], dict[str, float]]]]:
    rows: list[tuple[str, dict[str, float], dict[str, float]]] = []
    yield rows
    print("\nconfig | kind | engine MiB | planned MiB | error %")
    for name, real, plan_ in rows:
        for kind in ("model", "KV", "compute", "total"):
            r, p = real.get(kind, 0.0), plan_[kind]
            print(f"{name} | {kind} | {r:.2f} | {p:.2f} | {100 * (p - r) / r if r else 0:+.2f}")


@pytest.mark.parametrize("ctx,cache", CONFIGS)
def test_planner_matches_engine_log(starter_engine_path: Path, gemma_model_path: Path, ctx: int, cache: str,
                                    results: list[tuple[str, dict[str, float], dict[str, float]]]) -> None:
    argv = ["-m", str(gemma_model_path), "-ngl", "0", "--no-jinja", "--chat-template", "gemma", "-c", str(ctx),
            "-ctk", cache, "-ctv", cache, "-fa", "on", "-np", "1"]
    real = engine_buffers(starter_engine_path, argv)
    real["total"] = real.get("model", 0) + real.get("KV", 0) + real.get("compute", 0)
    want = planned(gemma_model_path, ctx, cache, cache)
    results.append((f"{ctx}/{cache}", real, want))
    assert abs(want["KV"] - real["KV"]) < 0.01  # KV is exact
    assert abs(want["model"] - real["model"]) / real["model"] < 0.01
    assert abs(want["compute"] - real["compute"]) / real["compute"] < 0.10
    assert abs(want["total"] - real["total"]) / real["total"] < 0.03


def test_planner_matches_engine_log_for_the_starter(starter_engine_path: Path, starter_model_path: Path) -> None:
    """The starter (SmolLM2, llama architecture, no sliding window) as the app launches it."""
    argv = ["-m", str(starter_model_path), "-ngl", "0", "--jinja", "-c", "8192", "-fa", "on", "-np", "1"]
    real = engine_buffers(starter_engine_path, argv)
    want = planned(starter_model_path, 8192, "f16", "f16")
    assert abs(want["KV"] - real["KV"]) < 0.01
    assert abs(want["model"] - real["model"]) / real["model"] < 0.01
    assert abs(want["compute"] - real["compute"]) / real["compute"] < 0.10


def test_server_default_slots_and_small_ubatch(starter_engine_path: Path, gemma_model_path: Path) -> None:
    """4 unified slots (the server's auto mode) and -ub 128 change the sliding-window cells (§1.5)."""
    base = ["-m", str(gemma_model_path), "-ngl", "0", "--no-jinja", "--chat-template", "gemma", "-fa", "on"]
    real = engine_buffers(starter_engine_path, [*base, "-c", "4096", "-np", "4", "--kv-unified"])
    assert abs(planned(gemma_model_path, 4096, "f16", "f16", parallel=4, unified=True)["KV"] - real["KV"]) < 0.01
    real = engine_buffers(starter_engine_path, [*base, "-c", "16384", "-np", "1", "-ub", "128"])
    assert abs(planned(gemma_model_path, 16384, "f16", "f16", ub=128)["KV"] - real["KV"]) < 0.01


def _fit_params(engine: Path) -> Path | None:
    tool = engine.parent / "llama-fit-params"
    return tool if tool.is_file() else None


@pytest.mark.parametrize("which,ctx,k,v,ub,fa,kv_mib", [
    ("gemma4", 32768, "q5_0", "q4_1", 512, "on", 1233.75),
    ("gemma4", 16640, "q4_0", "q4_0", 512, "on", 703.12),
    ("gemma4", 32768, "f16", "f16", 512, "off", 5040.0),
    ("qwen36", 8192, "q4_0", "q4_0", 256, "on", 144.0 + 149.62),
    ("qwen36", 65792, "q4_0", "q4_0", 256, "on", 1156.5 + 149.62),
])
def test_metadata_only_big_models(tmp_path: Path, starter_engine_path: Path, which: str, ctx: int, k: str,
                                  v: str, ub: int, fa: str, kv_mib: float) -> None:
    """Real shapes, no weights: against llama-fit-params if present, else docs/reference/memory-model.md's numbers."""
    path = (mg.gemma4_31b if which == "gemma4" else mg.qwen36_27b)(tmp_path / f"{which}.gguf")
    s = LaunchSettings(target=str(path), ctx_size=ctx, cache_type_k=k, cache_type_v=v, flash_attn=fa,
                       n_gpu_layers="0", ubatch_size=ub)
    # llama-fit-params keeps n_outputs_max = n_batch (logits for every ubatch row), which is
    # BeeLlama Gen A's rule, not the mainline server's (docs/reference/memory-model.md §1.1).
    p = plan(inspect(path), None, s, Generation.BEE_A, [])
    context = (p.component("kv") + p.component("recurrent")) / MiB
    assert round(context, 2) == round(kv_mib, 2)  # docs/reference/memory-model.md §3, checked there against llama.cpp
    tool = _fit_params(starter_engine_path)
    if tool is None:
        return
    cmd = [str(tool), "--fit-print", "on", "-m", str(path), "-c", str(ctx), "-ctk", k, "-ctv", v, "-fa", fa,
           "-ub", str(ub)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    m = re.search(r"^Host (\d+) (\d+) (\d+)", res.stdout, re.M)
    assert m, (res.stdout + res.stderr)[-3000:]
    context_r, compute_r = float(m.group(2)), float(m.group(3))
    assert 0 <= context - context_r < 1.0  # fit prints whole MiB, truncated
    compute = p.component("compute") / MiB
    assert abs(compute - compute_r) / compute_r < (0.03 if fa == "on" else 0.06)


def test_inspect_real_gemma_model(gemma_model_path: Path) -> None:
    m = inspect(gemma_model_path)
    assert (m.architecture, m.n_layer, m.n_embd, m.vocab_size) == ("gemma3", 18, 640, 262144)
    assert sum(m.is_swa) == 15 and m.sliding_window == 512 and m.kv_layers() == list(range(18))
    assert m.file_type == "Q4_K_M" and not m.has_chat_template and m.tied_embeddings
    assert m.context_length == 32768 and len(m.tensors) == 236


def test_inspect_real_starter_model(starter_model_path: Path) -> None:
    """The starter brings its own chat template (the app launches it with --jinja and no override)."""
    m = inspect(starter_model_path)
    assert (m.architecture, m.n_layer, m.n_embd, m.vocab_size) == ("llama", 30, 576, 49152)
    assert m.file_type == "Q4_1" and m.has_chat_template and not any(m.is_swa)


@pytest.mark.parametrize("ctx,ub", [(1024, 512), (16384, 512), (16384, 128)])
def test_upstream_drafter_memory_matches_the_engines(upstream_engine: RealEngine, ctx: int, ub: int) -> None:
    """Mainline and BeeLlama >= 0.4 give the DFlash drafter its own context as large as the target's:
    its KV cache and compute buffer grow with -c (the cost Gen B users reported); Gen A has no such
    context (it uses -cd, 256 by default), so it is not this test's subject."""
    real_engine = upstream_engine
    target = sg.cached_target(PERSISTENT / "synth", sticky=True, size="wide")
    draft = sg.cached_draft(PERSISTENT / "synth", target, sticky=True)
    argv = ["-m", str(target), "--spec-draft-model", str(draft), "--spec-type", "draft-dflash", "-c", str(ctx),
            "-ub", str(ub), "-np", "1", "-t", "1"]
    lines = engine_lines(real_engine.path, argv)
    loading = next(i for i, x in enumerate(lines) if "loading draft model" in x)
    kv = [float(m.group(1)) for x in lines[loading:] if (m := re.search(r"KV buffer size =\s*([\d.]+) MiB", x))]
    compute = [float(m.group(1)) for x in lines[loading:] if (m := re.search(r"compute buffer size =\s*([\d.]+) MiB", x))]
    s = LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, ctx_size=ctx,
                       ubatch_size=ub, n_gpu_layers="0")
    p = plan(inspect(target), inspect(draft), s, real_engine.caps.generation, [])
    assert kv == [pytest.approx(p.component("draft_kv") / MiB, abs=0.01)]
    assert compute[0] == pytest.approx(p.component("draft_compute") / MiB, abs=0.02)
    # Mainline reserves a second drafter graph of the same size; BeeLlama 0.4 does not.
    assert len(compute) == (2 if real_engine.kind == "mainline" else 1), compute
    assert p.component("draft_runtime") / MiB == pytest.approx(sum(compute[1:]), abs=0.02)
