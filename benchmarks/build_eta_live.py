"""The build's time-left estimate live (not a test: prints numbers): BeeDeck's builder builds a source
tree or tarball as the CLI and the wizard do (``build_engine``: the dry run's plan, the estimate fed by
``cmake --build``'s console), every estimate is recorded, and the error against the real end is printed
at 10/25/50/75/90 % of the steps. The build's ``.ninja_log`` and the samples go to ``--out``.

    BEEDECK_HOME=/tmp/bd PYTHONPATH=gui:. python3 benchmarks/build_eta_live.py --source beellama-v0.4.3-src.tar.gz \
        [--cuda 9.0] [--cache-type q8_0/q8_0 ...] [--out DIR]

Goal: within +-20 % from 10 % of the steps onward (issue 25).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tarfile
import tempfile
import time
from pathlib import Path

from beedeck.core.engine.building import build_engine
from beedeck.core.engine.registry import EngineRegistry

POINTS = (0.1, 0.25, 0.5, 0.75, 0.9)
GOAL = 0.20


def source_dir(source: Path, work: Path) -> Path:
    """A tree to build: the folder itself, or the tarball unpacked (its one top folder)."""
    if source.is_dir():
        return source
    with tarfile.open(source) as tar:
        tar.extractall(work, filter="data")
    return next(p for p in work.iterdir() if (p / "CMakeLists.txt").is_file())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", type=Path, required=True)
    ap.add_argument("--cuda", help="compute capability (e.g. 9.0); omitted: a CPU build")
    ap.add_argument("--cache-type", action="append", default=[], help="K/V, as the CLI takes it")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    samples: list[tuple[float, int, int, float | None]] = []
    t0 = time.monotonic()

    def progress(done: int, total: int, eta: float | None = None) -> None:
        samples.append((time.monotonic() - t0, done, total, eta))

    pairs = [tuple(p.split("/", 1)) if "/" in p else (p, p) for p in args.cache_type] or None
    with tempfile.TemporaryDirectory() as work:
        src = source_dir(args.source, Path(work))
        dry = build_engine(src, gpus=[args.cuda] if args.cuda else [], cpu_only=not args.cuda,
                           cache_pairs=pairs, dry_run=True, registry=EngineRegistry())  # type: ignore[arg-type]
        print(f"dry run: {dry.planned_steps} steps, estimated {dry.estimate_s or 0:.0f} s at -j{dry.jobs}; "
              f"options: {' '.join(dry.options)}", flush=True)
        t0 = time.monotonic()
        error = ""
        try:
            result = build_engine(src, gpus=[args.cuda] if args.cuda else [], cpu_only=not args.cuda,
                                  cache_pairs=pairs, on_progress=progress, registry=EngineRegistry())  # type: ignore[arg-type]
            log = result.log_path.parent / "build" / ".ninja_log"
        except Exception as exc:  # the samples up to the failure still tell something
            error, log = str(exc), dry.log_path.parent / "build" / ".ninja_log"
        if log.is_file():
            shutil.copy(log, args.out / "ninja_log")
    (args.out / "samples.json").write_text(json.dumps({"dry_run_estimate_s": dry.estimate_s, "jobs": dry.jobs,
                                                       "options": dry.options, "samples": samples, "error": error}))
    if error or not samples:
        print(f"build failed: {error}")
        return 1
    end, total = samples[-1][0], samples[-1][2]
    print(f"built {total} steps in {end:.0f} s (dry run said {dry.estimate_s or 0:.0f} s)")
    print("| at | elapsed | estimate left | real left | error |")
    print("| --- | --- | --- | --- | --- |")
    worst = 0.0
    for at in POINTS:
        t, done, _n, eta = next(s for s in samples if s[1] >= at * total)
        real = end - t
        err = (eta - real) / real if eta is not None and real > 0 else float("nan")
        worst = max(worst, abs(err))
        print(f"| {int(at * 100)} % ({done}/{total}) | {t:.0f} s | {eta or 0:.0f} s | {real:.0f} s | {err * 100:+.1f} % |")
    print(f"worst {worst * 100:.1f} % ({'within' if worst <= GOAL else 'outside'} the +-{GOAL * 100:.0f} % goal)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
