#!/usr/bin/env python3
"""BeeLlama on a real NVIDIA GPU, the way a user gets it: built by BeeDeck's builder, then checked.

Run from a checkout on a GPU machine with no network (needs the CUDA toolkit, CMake, Ninja, and the
Python packages of BeeDeck's core plus gguf):

    python3 packaging/gpu-check/engines_gpu.py build TARBALL [--out DIR]   # then
    python3 packaging/gpu-check/engines_gpu.py measure [--out DIR]

``build`` unpacks a BeeLlama source tarball and builds llama-server for this GPU through
``build_engine`` (CUDA, its compute capability, f16 caches so no extra FA kernels), recording the
time-left estimate against the real time and the Ninja log (the CUDA step costs for the estimate).
``measure`` then, on the synthetic sticky pair in the engine's draft format: checks whether the
engine honours a per-request "no drafts"; runs the default benchmark (baseline = a server without
the draft, DFlash, and the in-server baseline where honoured: the per-request penalty on a GPU);
and meets the known-issue rows for CUDA (copyspec, turbo caches on small heads) before launch and,
bypassing the guard, after the engine crashes. Everything goes to stdout and DIR/engines-gpu.txt.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "gui"), str(REPO)]
WORK = Path(os.environ.get("BEEDECK_GPU_WORK", "/tmp/beedeck-gpu"))
LOG: list[str] = []


def say(text: str) -> None:
    print(text, flush=True)
    LOG.append(text)


def save(out: Path | None, name: str = "engines-gpu.txt") -> None:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / name, "a", encoding="utf-8") as fh:
            fh.write("\n".join(LOG) + "\n")
        LOG.clear()


def build(tarball: Path, out: Path | None) -> int:
    from beedeck.core.engine.building import build_engine
    from beedeck.core.engine.registry import EngineRegistry
    from beedeck.core.machine.hardware import detect

    report = detect()
    gpus = [f"{g.compute_capability[0]}.{g.compute_capability[1]}" for g in report.gpus if g.compute_capability]
    say(f"GPUs: {[g.name for g in report.gpus]} cc {gpus}; driver CUDA {report.cuda_driver_version}; "
        f"cores {os.cpu_count()}")
    src_root = WORK / "src"
    if src_root.exists():
        shutil.rmtree(src_root)
    src_root.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(src_root, filter="data")
    src = next(src_root.iterdir())
    samples: list[tuple[float, int, int, float | None]] = []
    t0 = time.monotonic()

    def progress(done: int, total: int, eta: float | None) -> None:
        samples.append((time.monotonic() - t0, done, total, eta))

    result = build_engine(str(src), gpus=gpus, cache_pairs=[("f16", "f16")], driver_cuda=report.cuda_driver_version,
                          registry=EngineRegistry(root=WORK / "engines"), on_progress=progress)
    total = time.monotonic() - t0
    say(f"built {result.binary} in {total:.0f} s; options {' '.join(result.options)}")
    say(f"smoke: {result.smoke}")
    build_s = samples[-1][0] if samples else total
    say("time-left estimate vs real (build steps only):")
    for frac in (0.1, 0.23, 0.4, 0.6, 0.8, 0.9):
        if not samples:
            break
        at = next((s for s in samples if s[1] >= frac * s[2]), samples[-1])
        eta = f"{at[3]:.0f} s" if at[3] is not None else "-"
        say(f"  {at[1]}/{at[2]} ({100 * at[1] / at[2]:.0f} %) at {at[0]:.0f} s: estimate {eta}, real {build_s - at[0]:.0f} s")
    (WORK / "binary.txt").write_text(str(result.binary))
    if out is not None:
        ninja_log = result.binary.parents[1] / ".ninja_log"
        if ninja_log.is_file():
            shutil.copy(ninja_log, out / f"{src.name}-cuda.ninja_log")
    save(out)
    return 0 if result.ok else 1


def _chat(url: str, **extra: object) -> dict:
    body = {"messages": [{"role": "user", "content": "Write python code."}], "max_tokens": 32, "temperature": 0,
            "cache_prompt": False, **extra}
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return dict(json.loads(resp.read()))


def measure(out: Path | None) -> int:
    from tests.fixtures import synth_gguf as sg

    from beedeck.clicmd.bench import format_table, synthetic_bench_pair, synthetic_settings
    from beedeck.core.bench.report import summarize
    from beedeck.core.bench.runner import run_bench
    from beedeck.core.bench.suites import BenchPrompt, BenchSuite
    from beedeck.core.engine.argv import build_argv
    from beedeck.core.engine.client import LlamaClient
    from beedeck.core.engine.mode import Mode, Variant
    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.server import ServerFailed, ServerProcess, free_port
    from beedeck.core.engine.speculation.switching import PerRequestMemory, check_per_request
    from beedeck.core.launcher import launch
    from beedeck.core.models.guard import check_launch

    binary = Path((WORK / "binary.txt").read_text().strip())
    caps = probe_engine(str(binary))
    say(f"engine {binary}: {caps.generation.value} release {caps.release or '?'} backend {caps.gpu_backend}; "
        f"devices {list(caps.devices)}")
    fmt = "bee" if caps.dflash_draft_arch == "dflash-draft" else "mainline"
    target, draft = synthetic_bench_pair(WORK / "synth", fmt)
    settings = dataclasses.replace(synthetic_settings(target, draft), n_gpu_layers="all", draft_n_gpu_layers="all",
                                   extra_args=[])
    memory = PerRequestMemory(WORK / "per-request.json")

    # 1. does it honour a per-request "no drafts"?
    proc = launch(binary, caps, dataclasses.replace(settings, spec_mode=Mode.DFLASH), pid_file=WORK / "s.pid")
    try:
        proc.wait_ready(300)
        verdict = check_per_request(LlamaClient(proc.base_url))
        memory.remember(caps, verdict)
        say(f"per-request check: {verdict.describe()}")
    finally:
        proc.stop()

    # 2. the default benchmark: baseline without the draft, DFlash, and the in-server baseline
    suite = BenchSuite("synthetic", (BenchPrompt("py", "Write python code for the deck."),), max_tokens=256,
                       temperature=0.0, seed=7)
    report = run_bench(binary, caps, settings, suite, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=5, warmup=1,
                       per_request_memory=memory, environment={})
    summary = summarize(report)
    say(format_table(report, summary))
    for flag in summary.flags:
        say(f"note: {flag}")
    for s in report.samples:
        say(f"  {s.mode:<22} {s.gen_tps:8.1f} tok/s  drafted {s.draft_n:4d} accepted {s.draft_n_accepted:4d}"
            + (f"  ERROR {s.error}" if s.error else ""))

    # 3. known issues on CUDA: refused before launch, explained after a crash when forced
    tiny = sg.cached_target(WORK / "synth", sticky=True)  # heads of 32
    cases = [("copyspec", dataclasses.replace(settings, spec_mode=Mode.MODEL_FREE, spec_model_free_type="copyspec",
                                              draft=None))]
    if caps.has_turbo:
        tiny_draft = sg.cached_draft(WORK / "synth", tiny, sticky=True, fmt=fmt)  # type: ignore[arg-type]
        cases.append(("turbo4 on heads of 32, with a draft",
                      dataclasses.replace(settings, target=str(tiny), draft=str(tiny_draft), spec_mode=Mode.DFLASH,
                                          cache_type_k="turbo4", cache_type_v="turbo4")))
    for name, s in cases:
        try:
            warnings = check_launch(caps, s)
            say(f"{name}: the guard lets it through (warnings: {[str(w) for w in warnings]})")
        except ServerFailed as exc:
            say(f"{name}: refused before launch [{exc.failure.issue}]: {exc.failure.message}")
        raw = ServerProcess(binary, build_argv(dataclasses.replace(s, port=free_port()), caps).argv,
                            pid_file=WORK / "raw.pid")
        raw.caps = caps
        try:
            raw.start()
            raw.wait_ready(300)
            try:
                reply = _chat(raw.base_url)
                say(f"{name}, forced: the server answered ({reply.get('timings')})")
            except OSError as exc:
                say(f"{name}, forced: the request failed ({exc})")
            raw.wait_exit(15)
            if raw.failure is not None:
                say(f"{name}, forced: exit {raw.exit_code}; BeeDeck says [{raw.failure.code}/{raw.failure.issue}]: "
                    f"{raw.failure.message}")
        except ServerFailed as exc:
            say(f"{name}, forced: exit {raw.exit_code}; BeeDeck says [{exc.failure.code}/{exc.failure.issue}]: "
                f"{exc.failure.message}")
        finally:
            raw.stop()
            say("  last lines: " + " | ".join(x for x in raw.log_lines()[-6:] if x.strip()))
    save(out)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("tarball", type=Path)
    b.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    args = ap.parse_args()
    os.environ.setdefault("BEEDECK_HOME", str(WORK / "home"))
    return build(args.tarball, args.out) if args.cmd == "build" else measure(args.out)


if __name__ == "__main__":
    sys.exit(main())
