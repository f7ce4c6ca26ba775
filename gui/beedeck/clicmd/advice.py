"""`beedeck advice`: what BeeDeck has learnt about which speculation mode is fastest, per setup and
prompt kind (code, prose, structured), from `beedeck tune` and benchmark runs (core.engine.speculation.advice).

:func:`learn_from_tune` and :func:`learn_from_bench` are the one place the CLI (and the lead's
wiring of `beedeck bench`) feeds results into the advice; each returns the line to print.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from beedeck.core.bench.advice_feed import AdviceSample, bench_advice_samples, tune_advice_samples
from beedeck.core.bench.results import BenchReport
from beedeck.core.bench.tune import TuneResult
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.advice import (
    KINDS,
    AdviceError,
    WorkloadAdvice,
    classify,
    load_advice,
    setup_key,
)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("advice", help="show which speculation mode tune and benchmark runs found fastest per prompt kind")
    p.add_argument("--setup", metavar="TEXT", help="only setups whose key contains TEXT (engine, target or draft name)")
    p.add_argument("--classify", metavar="PROMPT", help="print the kind BeeDeck gives this prompt and exit")
    p.add_argument("--forget", action="store_true", help="forget what was learnt (for --setup's setups, else all)")
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func=run_advice_command)


def _learn(advice: WorkloadAdvice, key: str, samples: list[AdviceSample], what: str) -> str:
    try:
        added = advice.learn(key, samples)
    except (AdviceError, OSError) as exc:
        return f"The speed advice did not learn from this {what}: {exc}"
    kinds = sorted({classify(text) for _m, text, _t in samples})
    best = {k: advice.best_mode(key, k) for k in kinds}
    found = "; ".join(f"{k}: {m.label if m else 'no verdict yet'}" for k, m in best.items())
    head = f"{advice.problem} " if advice.problem else ""
    return (f"{head}The speed advice learnt {added} figures from this {what} for {key} ({found}); "
            "`beedeck advice` shows them.")


def learn_from_tune(result: TuneResult, caps: EngineCaps, start: LaunchSettings,
                    advice: WorkloadAdvice | None = None) -> str:
    """Feed a finished search (baseline and best point) to the advice; returns the line to print."""
    advice = advice or load_advice()
    return _learn(advice, setup_key(caps, start), tune_advice_samples(result), "search")


def learn_from_bench(report: BenchReport, caps: EngineCaps, settings: LaunchSettings,
                     advice: WorkloadAdvice | None = None) -> str:
    """Feed a finished benchmark (every mode it measured) to the advice; returns the line to print.
    ``settings`` are the profile the benchmark started from (its draft names the setup)."""
    advice = advice or load_advice()
    return _learn(advice, setup_key(caps, settings), bench_advice_samples(report), "benchmark")


def describe(advice: WorkloadAdvice, setups: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"file": str(advice.path), "problem": advice.problem, "setups": []}
    for key in setups:
        kinds = []
        for kind in advice.kinds(key):
            v = advice.verdict(key, kind)
            kinds.append({"kind": kind, "best": v.best, "why": v.why,
                          "modes": [{"mode": f.mode, "median_tps": round(f.median, 2), "figures": f.n}
                                    for f in v.figures]})
        out["setups"].append({"setup": key, "kinds": kinds})
    return out


def format_text(data: dict[str, Any]) -> str:
    lines = [data["problem"]] if data["problem"] else []
    if not data["setups"]:
        lines.append("Nothing learnt yet: run `beedeck tune` or `beedeck bench` on your prompts, and BeeDeck "
                     f"records which mode is fastest for each kind ({', '.join(KINDS)}).")
        return "\n".join(lines)
    for s in data["setups"]:
        lines.append(s["setup"])
        for k in s["kinds"]:
            modes = ", ".join(f"{m['mode'].label} {m['median_tps']:.1f} tok/s ({m['figures']})" for m in k["modes"])
            lines.append(f"  {k['kind']:<10} best: {k['best'].label if k['best'] else '-'}   [{modes}]")
            lines.append(f"  {'':<10} {k['why']}")
    lines.append(f"(figures: median tok/s and how many measured replies; file: {data['file']})")
    return "\n".join(lines)


def run_advice_command(args: argparse.Namespace) -> int:
    if args.classify is not None:
        print(classify(args.classify))
        return 0
    advice = load_advice()
    setups = [k for k in advice.setups() if not args.setup or args.setup.lower() in k.lower()]
    if args.forget:
        if args.setup and not setups:
            print(f"error: no learnt setup matches {args.setup!r}: `beedeck advice` lists them.", file=sys.stderr)
            return 2
        if args.setup:
            for key in setups:
                advice.forget(key)
        else:
            advice.forget(None)
        print(f"Forgot the speed advice for {len(setups)} setup(s).")
        return 0
    data = describe(advice, setups)
    print(json.dumps(data, indent=2) if args.json else format_text(data))
    return 0
