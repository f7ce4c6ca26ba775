"""Time to first token on an agent's second turn, with and without prompt-cache reuse (not a test:
prints numbers). The starter (mainline CPU llama-server + SmolLM2 135M) serves the agent suite's
conversation (resources/suites/agent.json): turn 1 sends the long shared prefix, turn 2 sends it again
with the first exchange appended. Three servers/requests are compared:

- ``no cache``: every request ``cache_prompt: false`` (what `beedeck bench` does, for fair modes);
- ``slot cache``: ``cache_prompt: true``, the slot keeps the previous prompt's KV (the engine default);
- ``cache reuse``: as slot cache, plus ``--cache-reuse 256`` (chunks found again after a shift).

    PYTHONPATH=gui .venv/bin/python benchmarks/agent_cache_reuse.py [--reps 3] [--threads 2]

Goal: the second turn's TTFT with the slot cache at most 0.5x that without (prints the ratio).
"""

from __future__ import annotations

import argparse
import statistics
import sys

from beedeck.core.bench.suites import load_suite
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.probe import probe_engine
from beedeck.core.launcher import launch
from beedeck.core.starter import StarterProfile, starter_engine, starter_model

GOAL = 0.5


def turns() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    suite = load_suite("agent")
    by_id = {p.id: p for p in suite.prompts}
    return by_id["first-turn"].messages(), by_id["second-turn"].messages()


def measure(cache_reuse: int | None, cache_prompt: bool, reps: int, threads: int | None) -> dict[str, float]:
    engine = starter_engine()
    caps = probe_engine(str(engine))
    settings = StarterProfile(engine=engine, model=starter_model()).settings(cache_reuse=cache_reuse, threads=threads)
    proc = launch(engine, caps, settings)
    try:
        proc.wait_ready(300)
        client = LlamaClient(proc.base_url)
        first, second = turns()
        ttft, prefill, cached = [], [], []
        for rep in range(reps):
            client.chat(first, max_tokens=16, temperature=0.0, seed=rep, extra={"cache_prompt": cache_prompt})
            stream = client.stream_chat(second, max_tokens=16, temperature=0.0, seed=rep,
                                        extra={"cache_prompt": cache_prompt})
            for _delta in stream:
                pass
            res = stream.result
            assert res.ttft_s is not None and res.timings is not None
            ttft.append(res.ttft_s)
            prefill.append(res.timings.prompt_per_second)
            cached.append(res.timings.cache_n)
        return {"ttft_s": statistics.median(ttft), "prompt_tps": statistics.median(prefill),
                "cache_n": statistics.median(cached)}
    finally:
        proc.stop(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    rows = {
        "no cache": measure(None, False, args.reps, args.threads),
        "slot cache": measure(None, True, args.reps, args.threads),
        "cache reuse 256": measure(256, True, args.reps, args.threads),
    }
    base = rows["no cache"]["ttft_s"]
    print("| second turn | TTFT s | prefill tok/s | cached tokens | TTFT vs no cache |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['ttft_s']:.3f} | {r['prompt_tps']:.1f} | {r['cache_n']:.0f} | {r['ttft_s'] / base:.2f}x |")
    ratio = rows["slot cache"]["ttft_s"] / base
    print(f"goal: slot-cache TTFT <= {GOAL}x no-cache; measured {ratio:.2f}x ({'met' if ratio <= GOAL else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
