"""Peak memory and time of reading each crafted GGUF header (not a test: prints numbers).

    .venv/bin/python benchmarks/hostile_headers.py [--code gui] [--cap-gb 4] [--limit-s 20]

Each file of tests/fixtures/hostile_gguf.py (plus the 4M-token sparse one) goes through
``inspect()`` in a child process whose address space is capped at ``--cap-gb`` and which is killed
after ``--limit-s``; the table gives the child's peak RSS, its wall time and how it ended. ``--code``
picks the BeeDeck source to measure (e.g. an older checkout's gui/ for a before/after comparison).
The goal: every file ends in a GGUFError (or a result) well under 1 s and 100 MB above Python's own.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures import hostile_gguf as hg  # noqa: E402

CHILD = """
import sys
from beedeck.core.models.gguf import GGUFError, inspect
try:
    inspect(sys.argv[1])
    print("result")
except GGUFError:
    print("GGUFError")
"""


def run(code: Path, path: Path, cap: int, limit: float) -> tuple[str, float, float]:
    """How the child ended, its wall time and its own peak RSS in MB (wait4's rusage for that child)."""
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=out, stderr=out,
                                preexec_fn=preexec, env={**os.environ, "PYTHONPATH": str(code)})
        timer = threading.Timer(limit, proc.kill)
        timer.start()
        _pid, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        took = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().decode("utf-8", "replace").strip().splitlines() or ["?"]
    ended = lines[-1][:60] if proc.returncode >= 0 else f"killed after {took:.0f} s (signal {-proc.returncode})"
    return ended, took, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, default=REPO / "gui")
    ap.add_argument("--cap-gb", type=float, default=4.0)
    ap.add_argument("--limit-s", type=float, default=20.0)
    args = ap.parse_args()
    cap = int(args.cap_gb * (1 << 30))
    with tempfile.TemporaryDirectory() as tmp:
        names = [*hg.CRAFTED, "sparse-tokens"]
        baseline = run(args.code, hg.write(Path(tmp) / "ok.gguf", "sparse-tokens"), cap, args.limit_s)[2]
        print(f"code: {args.code}   cap: {args.cap_gb:g} GB   limit: {args.limit_s:g} s")
        print(f"{'file':32} {'ended':46} {'wall s':>7} {'peak MB':>8}")
        worst = (0.0, 0.0, "")
        for name in names:
            path = hg.write(Path(tmp) / f"{name}.gguf", name)
            out, took, peak = run(args.code, path, cap, args.limit_s)
            print(f"{name:32} {out[:46]:46} {took:7.2f} {peak:8.0f}")
            worst = max(worst, (took, peak, name))
            path.unlink()
        print(f"slowest: {worst[2]} {worst[0]:.2f} s (goal < 1 s: {worst[0]:.2f}x)   "
              f"peak RSS of any child: {worst[1]:.0f} MB (the sparse-token walk alone: {baseline:.0f} MB)")


if __name__ == "__main__":
    main()
