"""How many threads should the starter's llama-server take on N cores? (not a test: prints ratios)

    .venv/bin/python benchmarks/starter_threads.py --cores 2 [--threads 1 2] [--poll 50 0] [--load 0 0.1 0.5 1]
                                                   [--runs 5] [--max-tokens 128]

The server is the starter profile's (its engine, model, sampling and command line, built by build_argv),
pinned with ``taskset -c 0-<N-1>`` to ``--cores`` cores, so one machine answers for 2, 4 and 8 cores.
Each configuration is a thread count (``-t``) and a polling level (``--poll``: llama.cpp's threads spin
that long waiting at each step's barrier; 50 is the engine's default, 0 sleeps at once). ``--load`` puts
a competing process on the last of those cores, busy that share of the time in 10 ms slices (0: none;
0.1: about what BeeDeck's window takes while a reply streams, measured offscreen at 54 tokens/s; 0.5: half
a core; 1: a whole core), standing in for the window and the rest of the desktop.

Per load, the runs are interleaved (every configuration once per round, a fresh server each time), the
starter's three prompt chips are asked once each per round (seeded, ``cache_prompt`` off) and the server's
own ``timings.predicted_per_second`` is kept. The table gives each configuration's median tokens/s and its
speed over the starter's previous rule (one core left free: ``-t N-1``, default polling) by BeeDeck's one
rule for ratios (core/engine/speculation/comparison.py): with a 95 % interval from at least 3 runs, else
none. The last line names the fastest configuration per load that beat the others beyond the noise.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "gui"))

from beedeck.core.engine.argv import build_argv  # noqa: E402
from beedeck.core.engine.client import LlamaClient  # noqa: E402
from beedeck.core.engine.probe import probe_engine  # noqa: E402
from beedeck.core.engine.server import free_port  # noqa: E402
from beedeck.core.engine.speculation.comparison import Evidence, compare  # noqa: E402
from beedeck.core.starter import STARTER_PROMPTS, StarterProfile, starter_engine, starter_model  # noqa: E402

DEFAULT_POLL = 50  # llama.cpp's own default (--poll)
LOAD_SCRIPT = """
import sys, time
share = float(sys.argv[1])
slice_s = 0.010
while True:
    end = time.perf_counter() + share * slice_s
    while time.perf_counter() < end:
        pass
    if share < 1:
        time.sleep((1 - share) * slice_s)
"""


@dataclass(frozen=True)
class Config:
    threads: int
    poll: int

    @property
    def name(self) -> str:
        return f"-t {self.threads}" + ("" if self.poll == DEFAULT_POLL else f" --poll {self.poll}")


@contextlib.contextmanager
def competing_load(share: float, core: int) -> Iterator[None]:
    """A process on ``core`` busy ``share`` of the time (none for 0)."""
    if share <= 0:
        yield
        return
    proc = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", LOAD_SCRIPT, str(share)])
    try:
        time.sleep(0.3)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


def _ready(client: LlamaClient) -> bool:
    try:
        return client.health(timeout=1.0) == 200
    except Exception:  # nothing listens yet
        return False


def measure(engine: Path, caps: object, profile: StarterProfile, config: Config, cores: int, seed: int,
            max_tokens: int) -> dict[str, float]:
    """One fresh pinned server: a warm-up, then each prompt chip once; tokens/s per prompt."""
    port = free_port()
    settings = profile.settings(port=port, threads=config.threads)
    settings.extra_args = [*settings.extra_args, "--poll", str(config.poll)]
    argv = build_argv(settings, caps).argv  # type: ignore[arg-type]
    pin = ["taskset", "-c", f"0-{cores - 1}"]
    proc = subprocess.Popen([*pin, str(engine), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = LlamaClient(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 120
        while not _ready(client):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server ({config.name}) did not become ready")
            time.sleep(0.1)
        out: dict[str, float] = {}
        for i, (label, prompt) in enumerate((("warm-up", "Say hello."), *STARTER_PROMPTS)):
            stream = client.stream_chat([{"role": "user", "content": prompt}], max_tokens=16 if i == 0 else max_tokens,
                                        seed=seed, extra={"cache_prompt": False})
            for _ in stream:
                pass
            t = stream.result.timings
            if i and t is not None:
                out[label] = t.predicted_per_second
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)), help="pin the server to cores 0..N-1")
    ap.add_argument("--threads", type=int, nargs="+", default=None, help="thread counts (default: 1, N-1, N)")
    ap.add_argument("--poll", type=int, nargs="+", default=[DEFAULT_POLL, 0], help="polling levels (default: 50 0)")
    ap.add_argument("--load", type=float, nargs="+", default=[0.0, 0.1, 0.5, 1.0],
                    help="share of the last core a competing process takes (default: 0 0.1 0.5 1)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    have = len(os.sched_getaffinity(0))
    if not 1 <= args.cores <= have:
        raise SystemExit(f"--cores must be 1..{have} here")
    threads = args.threads or sorted({1, max(1, args.cores - 1), args.cores})
    configs = [Config(t, p) for t in threads for p in args.poll]
    old = Config(max(1, args.cores - 1), DEFAULT_POLL)  # the starter's rule before issue 37
    if old not in configs:
        configs.insert(0, old)
    engine = starter_engine()
    caps = probe_engine(str(engine))
    profile = StarterProfile(engine=engine, model=starter_model(download=False))
    print(f"{args.cores} cores (of {have} here), {args.runs} runs x {len(STARTER_PROMPTS)} prompts, "
          f"max_tokens {args.max_tokens}; ratios against {old.name} (the previous rule)")
    for share in args.load:
        runs: dict[Config, list[tuple[str, float]]] = {c: [] for c in configs}
        with competing_load(share, args.cores - 1):
            for r in range(args.runs):
                for c in configs:
                    got = measure(engine, caps, profile, c, args.cores, seed=r + 1, max_tokens=args.max_tokens)
                    runs[c] += list(got.items())
                    print(f"  load {share:g}, run {r + 1}: {c.name}: "
                          + ", ".join(f"{v:.1f}" for v in got.values()), flush=True)
        evidence = {c: Evidence.of(v) for c, v in runs.items()}
        print(f"\nload {share:g} core on core {args.cores - 1}:")
        print(f"  {'config':<16} {'median tok/s':>12}  vs {old.name}")
        for c in configs:
            med = statistics.median(v for _, v in runs[c]) if runs[c] else 0.0
            sp = compare(evidence[old], evidence[c]) if c != old else None
            print(f"  {c.name:<16} {med:>12.1f}  {sp.text() if sp else '(reference)'}")
        best = max(configs, key=lambda c: statistics.median(v for _, v in runs[c]) if runs[c] else 0.0)
        beats = [c for c in configs if c != best and compare(evidence[c], evidence[best]).above(1.0)]
        verdict = ("beats every other beyond the noise" if len(beats) == len(configs) - 1 else
                   f"beats {len(beats)} of the {len(configs) - 1} others beyond the noise")
        print(f"  fastest: {best.name}, which {verdict}\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
