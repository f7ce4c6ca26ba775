"""Does N-gram speculation draft on the starter? Acceptance and speed on the DFlash guide's three coding
prompts (not a test: prints numbers and ratios).

    .venv/bin/python benchmarks/starter_ngram.py [--config NAME ...] [--seeds 1 2 3] [--max-tokens 1024]

Each ``--config`` starts the starter engine with the starter profile in N-gram mode, its sampling and
N-gram flags replaced by the config's (server flags, as the app starts it), a fresh server for every
request, the configs in turn: each prompt of ``tests/fixtures/seed-bench-prompts.json`` as the chat asks
a new question (no sampling fields; ``cache_prompt`` off; one request per seed), so a machine whose load
drifts slows every config alike and no reply drafts from an earlier reply to the same prompt. A config named ``base-...`` runs without speculation (the reference for the
configs with the same sampling). Per config: the server's draft counters (tokens drafted, accepted, the
acceptance and the share of the reply that came from drafts), the replies that ended on their own (the
starter's penalties exist to stop a 135M model's loops) and the median tokens/s; then each N-gram config's
speed over the baseline with the same sampling, by BeeDeck's one rule for ratios
(core/engine/speculation/comparison.py: an interval only from 3 runs of every prompt).
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
from beedeck.core.engine.mode import Mode  # noqa: E402
from beedeck.core.engine.probe import probe_engine  # noqa: E402
from beedeck.core.engine.speculation.comparison import Evidence, compare  # noqa: E402
from beedeck.core.launcher import launch  # noqa: E402
from beedeck.core.starter import STARTER_EXTRA_ARGS, StarterProfile, starter_engine, starter_model  # noqa: E402

NO_PENALTIES: dict[str, Any] = {"repeat_penalty": None, "dry_multiplier": None, "extra_args": []}
NGRAM = {"spec_mode": Mode.MODEL_FREE}
OFF = {"spec_mode": Mode.BASELINE}
# Launch-setting overrides per config. "starter" is the profile as it shipped in issue 36 (ngram-mod with the
# engine's defaults: a 24-token lookup, drafts of 48-64 tokens), "no-penalties" the model card's sampling alone.
CONFIGS: dict[str, dict[str, Any]] = {
    "base-starter": {**OFF},
    "starter": {**NGRAM},
    "base-no-penalties": {**OFF, **NO_PENALTIES},
    "no-penalties": {**NGRAM, **NO_PENALTIES},
    # shorter lookups and drafts: a fresh module repeats identifiers and idioms, not 24-token spans
    "simple-4-8": {**NGRAM, "spec_model_free_type": "ngram-simple", "extra_args": [
        *STARTER_EXTRA_ARGS, "--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "8"]},
    "map-k-4-8": {**NGRAM, "spec_model_free_type": "ngram-map-k", "extra_args": [
        *STARTER_EXTRA_ARGS, "--spec-ngram-map-k-size-n", "4", "--spec-ngram-map-k-size-m", "8"]},
    "mod-8": {**NGRAM, "extra_args": [
        *STARTER_EXTRA_ARGS, "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "2", "--spec-ngram-mod-n-max",
        "16"]},
    "simple-4-8-no-penalties": {**NGRAM, **NO_PENALTIES, "spec_model_free_type": "ngram-simple", "extra_args": [
        "--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "8"]},
    "simple-4-8-dry-only": {**NGRAM, "repeat_penalty": None, "spec_model_free_type": "ngram-simple", "extra_args": [
        *STARTER_EXTRA_ARGS, "--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "8"]},
    "simple-4-8-rp-only": {**NGRAM, "dry_multiplier": None, "spec_model_free_type": "ngram-simple", "extra_args": [
        "--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "8"]},
    "mod-8-no-penalties": {**NGRAM, **NO_PENALTIES, "extra_args": [
        "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "2", "--spec-ngram-mod-n-max", "16"]},
}

SIMPLE_4_8 = ("--spec-ngram-simple-size-n", "4", "--spec-ngram-simple-size-m", "8")
for _allowed in (4, 8, 16):  # DRY lets repeats this long pass (its default is 2): code repeats its identifiers
    _dry = (*STARTER_EXTRA_ARGS, "--dry-allowed-length", str(_allowed))
    CONFIGS[f"base-dry-allow-{_allowed}"] = {**OFF, "extra_args": list(_dry)}
    CONFIGS[f"simple-4-8-dry-allow-{_allowed}"] = {**NGRAM, "spec_model_free_type": "ngram-simple",
                                                   "extra_args": [*_dry, *SIMPLE_4_8]}
    CONFIGS[f"mod-8-dry-allow-{_allowed}"] = {**NGRAM, "extra_args": [
        *_dry, "--spec-ngram-mod-n-match", "8", "--spec-ngram-mod-n-min", "2", "--spec-ngram-mod-n-max", "16"]}


def reference_of(name: str) -> str | None:
    """The baseline config with the same sampling as ``name`` (None for a baseline)."""
    if name.startswith("base-"):
        return None
    if "dry-allow-" in name:
        return "base-dry-allow-" + name.rsplit("-", 1)[1]
    return "base-no-penalties" if "no-penalties" in name else "base-starter"


def ask(client: LlamaClient, name: str, prompt: dict[str, Any], seed: int, max_tokens: int) -> dict[str, Any]:
    """One request as the chat sends it; the server's own counters and speed."""
    t0 = time.perf_counter()
    stream = client.stream_chat([{"role": "user", "content": prompt["text"]}], max_tokens=max_tokens, seed=seed,
                                extra={"cache_prompt": False})
    for _ in stream:
        pass
    r = stream.result
    t = r.timings
    n = t.predicted_n if t else 0
    row = {"prompt": prompt["id"], "seed": seed, "tokens": n, "tps": t.predicted_per_second if t else 0.0,
           "drafted": t.draft_n if t else 0, "accepted": t.draft_n_accepted if t else 0,
           "ended": r.finish_reason == "stop" and n < max_tokens}
    print(f"{name:<24} {prompt['id']:<12} {seed:>4} {n:>6} {'own' if row['ended'] else 'cap':>4} "
          f"{row['tps']:>7.1f} {row['drafted']:>7} {row['accepted']:>7}   ({time.perf_counter() - t0:.0f} s)", flush=True)
    return row


def run_all(names: list[str], engine: Path, caps: Any, profile: StarterProfile, prompts: list[dict[str, Any]],
            seeds: list[int], max_tokens: int) -> dict[str, list[dict[str, Any]]]:
    """Every request on a fresh server of its config, the configs in turn (prompt by prompt, seed by seed,
    config by config): a machine whose load drifts slows every config alike, and no reply drafts from an
    earlier one (ngram-mod keeps what the server generated across requests: asked again, a prompt drafts
    its last reply, which a user asking a new question never gets)."""
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for p in prompts:
        for seed in seeds:
            for name in names:
                proc = launch(engine, caps, profile.settings(**CONFIGS[name]))
                try:
                    proc.wait_ready(120)
                    rows[name].append(ask(LlamaClient(proc.base_url), name, p, seed, max_tokens))
                finally:
                    proc.stop()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--config", nargs="+", default=["base-starter", "starter"], choices=sorted(CONFIGS))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--json", type=Path, help="also write every reply's figures here")
    args = ap.parse_args()
    prompts = json.loads((ROOT / "tests/fixtures/seed-bench-prompts.json").read_text())["prompts"]
    engine = starter_engine()
    caps = probe_engine(str(engine))
    profile = StarterProfile(engine=engine, model=starter_model(download=False))
    print(f"{'config':<24} {'prompt':<12} {'seed':>4} {'tokens':>6} {'end':>4} {'tok/s':>7} {'drafted':>7} "
          f"{'accepted':>7}")
    results = {name: {"rows": rows} for name, rows in
               run_all(args.config, engine, caps, profile, prompts, args.seeds, args.max_tokens).items()}
    print(f"\n{'config':<24} {'drafted':>8} {'accepted':>8} {'acceptance':>10} {'from drafts':>11} {'ended':>6} "
          f"{'tok/s':>6}  speed over its baseline (same sampling)")
    for name, res in results.items():
        rows = res["rows"]
        drafted, accepted = sum(r["drafted"] for r in rows), sum(r["accepted"] for r in rows)
        tokens = sum(r["tokens"] for r in rows)
        acc = f"{100 * accepted / drafted:.1f} %" if drafted else "-"
        share = f"{100 * accepted / tokens:.1f} %" if tokens else "-"
        ref = reference_of(name)
        ratio = ""
        if ref in results:
            evidence = {n: Evidence.of((r["prompt"], r["tps"]) for r in results[n]["rows"]) for n in (ref, name)}
            ratio = compare(evidence[ref], Evidence(evidence[name].runs, drafted=drafted)).text()
        print(f"{name:<24} {drafted:>8} {accepted:>8} {acc:>10} {share:>11} "
              f"{sum(r['ended'] for r in rows):>3}/{len(rows):<2} {statistics.median(r['tps'] for r in rows):>6.1f}  "
              f"{ratio}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
