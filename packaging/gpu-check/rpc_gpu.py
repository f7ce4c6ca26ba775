#!/usr/bin/env python3
"""A model split over llama.cpp RPC workers on a real GPU: the planner's per-device plan (weights, KV,
compute) next to the engine's own buffer lines, and tokens/s on one process vs split.

Run from a checkout on a machine with an NVIDIA GPU (no install, no network; BeeDeck's core packages
plus gguf and numpy; for the build the CUDA toolkit, CMake and Ninja). Two calls, since a CUDA build
and the run together pass the device's 600 s per command:

    python3 packaging/gpu-check/rpc_gpu.py --source TARBALL|DIR --build-only --out DIR
    python3 packaging/gpu-check/rpc_gpu.py --source TARBALL|DIR --no-build --out DIR

The engine is built by BeeDeck's ``build_engine`` with ``rpc=True`` (CUDA for the detected compute
capabilities) in ``$BEEDECK_GPU_WORK`` (split_gpus.py's build). The run writes a synthetic llama-arch
target of a realistic width (n_embd 2048, n_ff 5632, 16 layers, F16), then launches it three ways:
on this machine's GPU alone; over this GPU and one ``rpc-server`` worker on the same GPU
(``--device CUDA0``, on 127.0.0.1); and over this GPU and two such workers. Each launch gets its plan
from ``plan_across`` (the devices the engine lists for that worker list), and the report sets every
device's planned weights, KV and compute beside the engine's buffer lines. Written to ``--out``:
rpc-gpu.md, rpc-gpu.json, servers.log.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "gui"), str(REPO), str(Path(__file__).resolve().parent)]

import split_gpus  # noqa: E402  (the build, the source unpacking and the generation loop)

SHAPE = {"n_layer": 16, "n_embd": 2048, "n_head": 16, "n_ff": 5632, "n_vocab": 320}
SMALL = {"n_layer": 8, "n_embd": 512, "n_head": 8, "n_ff": 1408, "n_vocab": 320}  # --cpu-dry-run


def run(engine: Path, out: Path, say: Any, shape: dict[str, int], worker_device: str | None,
        n_workers_list: tuple[int, ...] = (0, 1, 2)) -> list[dict[str, Any]]:
    from tests.fixtures.synth_gguf import write_llama_target

    from beedeck.core.engine.launch_settings import LaunchSettings
    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.rpc import require_worker_binary, start_worker
    from beedeck.core.engine.rpc.probe import probe_workers
    from beedeck.core.engine.server import free_port
    from beedeck.core.launcher import launch
    from beedeck.core.models.gguf import reader as gguf
    from beedeck.core.models.planner import plan
    from beedeck.core.models.planner.devices import compare, plan_across

    caps = probe_engine(str(engine))
    target = split_gpus.WORK / f"rpc-target-sticky-{shape['n_embd']}.gguf"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        write_llama_target(target, sticky=True, **shape)  # random weights reply garbage Gen A cannot parse
    info = gguf.inspect(str(target))
    worker_bin = require_worker_binary(engine)
    records: list[dict[str, Any]] = []
    log: list[str] = []
    for n in n_workers_list:
        workers = [start_worker(worker_bin, "127.0.0.1", free_port(), devices=[worker_device] if worker_device else [])
                   for _ in range(n)]
        rec: dict[str, Any] = {"workers": n}
        try:
            for w in workers:
                w.wait_listening(60)
            devices = probe_workers(str(engine), [w.address for w in workers])
            rec["devices"] = [f"{d.name} {d.description} free {d.free_mib} MiB" for d in devices]
            extra = [] if caps.generation.value == "bee-a" else ["-lv", "4"]
            s = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="all", flash_attn="on",
                               rpc_workers=[str(w.address) for w in workers], extra_args=extra, port=free_port())
            if n:
                mem = plan_across(info, None, s, caps.generation, devices)
            else:
                local = [d for d in devices if d.local]
                mem = plan(info, None, s, caps.generation, [d.free_bytes for d in local], names=[d.name for d in local])
            t0 = time.monotonic()
            proc = launch(engine, caps, s)
            try:
                proc.wait_ready(300)
                rec["ready_s"] = round(time.monotonic() - t0, 1)
                rec["pipeline"] = any("pipeline parallelism enabled" in x for x in proc.log_lines())
                rec["compare"] = [{"device": c.device, "weights": [round(c.planned_weights_mib, 2), c.engine_model_mib],
                                   "kv": [round(c.planned_kv_mib, 2), c.engine_kv_mib],
                                   "compute": [round(c.planned_compute_mib, 2), c.engine_compute_mib],
                                   "compute_err_pct": round(100 * c.compute_error, 1)} for c in compare(mem, proc.memory)]
                rates = split_gpus.generate(proc.base_url, 3, 256)
                rec["tokens_per_s"] = statistics.median(r["tokens_per_s"] for r in rates)
            finally:
                proc.stop(10)
                log += [f"===== {n} worker(s)", *proc.log_lines()]
        except Exception as exc:  # one failed layout must not lose the others' numbers
            rec["error"] = f"{type(exc).__name__}: {exc}"
            log.append(traceback.format_exc())
        finally:
            for w in workers:
                w.stop()
        say(json.dumps(rec))
        records.append(rec)
    (out / "servers.log").write_text("\n".join(log) + "\n")
    return records


def write_report(out: Path, engine: Path, shape: dict[str, int], records: list[dict[str, Any]]) -> None:
    (out / "rpc-gpu.json").write_text(json.dumps({"engine": str(engine), "shape": shape, "records": records}, indent=1))
    lines = [f"# RPC split: {engine}", "", f"Target: synthetic llama, {shape}, F16, -c 8192, FA on.", ""]
    for r in records:
        lines += [f"## {r['workers']} worker(s) + this GPU", ""]
        if "error" in r:
            lines += [f"Failed: {r['error']}", ""]
            continue
        lines += [f"Devices: {'; '.join(r['devices'])}. Pipeline: {r['pipeline']}. Ready in {r['ready_s']} s. "
                  f"Median {r['tokens_per_s']:.1f} tok/s (256 tokens, greedy, 3 replies).", "",
                  "| device | weights plan / engine | KV plan / engine | compute plan / engine | compute error |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {c['device']} | {c['weights'][0]} / {c['weights'][1]} | {c['kv'][0]} / {c['kv'][1]} | "
                  f"{c['compute'][0]} / {c['compute'][1]} | {c['compute_err_pct']} % |" for c in r["compare"]]
        lines.append("")
    (out / "rpc-gpu.md").write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", type=Path, help="the engine's source tree or tarball (built with RPC)")
    ap.add_argument("--engine", type=Path, help="an engine built with RPC already (no build)")
    ap.add_argument("--cpu-dry-run", action="store_true", help="workers on the CPU, a small target")
    ap.add_argument("--out", type=Path, default=Path("rpc-gpu-out"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--build-only", action="store_true")
    mode.add_argument("--no-build", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(text, flush=True)

    if args.engine is None and args.source is None:
        ap.error("give --source (to build) or --engine")
    engine = args.engine or split_gpus.build(args.source, False, args.out, say, no_build=args.no_build, rpc=True)
    if args.build_only:
        return 0
    shape = SMALL if args.cpu_dry_run else SHAPE
    records = run(engine, args.out, say, shape, None if args.cpu_dry_run else "CUDA0")
    write_report(args.out, engine, shape, records)
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
