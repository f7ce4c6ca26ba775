"""The one rule for every speed-up BeeDeck shows: a ratio of two speeds only from like-for-like
evidence, with its interval and the number of runs behind it (issue 37).

A speed-up compares two sides measured alike: the same prompts, the same settings apart from what is
compared (the mode, or one tune knob), and at least :data:`MIN_RUNS` runs of every prompt on both sides.
Then it is the ratio of the pooled medians with a 95 % bootstrap interval (resampled within each prompt,
from a seeded generator: the same figures always give the same interval), shown as "1.30x (1.21-1.38,
3 runs of 3 prompts)". Otherwise there is no ratio at all, only the reason, in a user's words:

- the compared side drafted nothing: "drafted nothing" (its speed is not speculation's doing);
- settings that differ beyond what is compared: "not like for like: threads 1 vs 2";
- no prompt measured on both sides (two chat replies are two prompts): "different prompts: no ratio";
- too few runs: "one run: no interval", "2 runs: no interval (needs 3)".

Every figure that compares two speeds asks here: the speed dock (:mod:`beedeck.core.chat.speed`), the
benchmark report (:mod:`beedeck.core.bench.report`), tune (:mod:`beedeck.core.bench.tune`), the guard
(:mod:`.spec_guard`) and the learnt advice (:mod:`.advice`). A verdict ("faster", "slower", "a win") is a
question to :meth:`Comparison.above` / :meth:`Comparison.below`, which no comparison without an interval
can answer yes. Qt-free; imports nothing of BeeDeck, so every wing can use it.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_RUNS = 3  # runs of every prompt on each side before an interval means anything
BOOTSTRAP_ROUNDS = 2000
BOOTSTRAP_SEED = 20260530
DRAFTED_NOTHING = "drafted nothing"
DIFFERENT_PROMPTS = "different prompts: no ratio"


@dataclass(frozen=True)
class Evidence:
    """One side of a comparison: generation tokens/s per prompt (one value per run), the settings that
    must match the other side's (``setup``: name -> value, everything but what is compared), and, for a
    speculating side, the draft tokens it proposed (None: it does not speculate, or nobody counted)."""

    runs: Mapping[str, Sequence[float]]
    setup: Mapping[str, str] = field(default_factory=dict)
    drafted: int | None = None

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, float]], setup: Mapping[str, str] | None = None,
           drafted: int | None = None) -> Evidence:
        """Evidence from ``(prompt key, tokens/s)`` pairs (non-positive speeds are no runs)."""
        runs: dict[str, list[float]] = {}
        for key, tps in pairs:
            if tps > 0:
                runs.setdefault(key, []).append(float(tps))
        return cls(runs, dict(setup or {}), drafted)

    def merged(self, other: Evidence) -> Evidence:
        """Both sets of runs together (a point measured twice); the drafted counts add up."""
        runs = {k: list(v) for k, v in self.runs.items()}
        for k, v in other.runs.items():
            runs.setdefault(k, []).extend(v)
        drafted = None if self.drafted is None and other.drafted is None else (self.drafted or 0) + (other.drafted or 0)
        return Evidence(runs, dict(self.setup), drafted)


@dataclass(frozen=True)
class Comparison:
    """The rule's answer: a ratio with its interval (``shown``), or no ratio and ``why_not``.

    ``runs`` is the fewest runs of any compared prompt on either side, ``prompts`` how many prompts both
    sides measured, ``left_out`` the prompts only one side measured (a cancelled run), which are not compared.
    """

    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    runs: int = 0
    prompts: int = 0
    left_out: int = 0
    why_not: str = ""

    @property
    def shown(self) -> bool:
        return self.ratio is not None and self.ci_low is not None and self.ci_high is not None

    def evidence_text(self) -> str:
        """"3 runs" or "3 runs of 4 prompts" (plus what was left out)."""
        text = f"{self.runs} run{'' if self.runs == 1 else 's'}"
        if self.prompts > 1:
            text += f" of {self.prompts} prompts"
        if self.left_out:
            text += f"; {self.left_out} prompt{'' if self.left_out == 1 else 's'} measured on one side only, left out"
        return text

    def interval_text(self) -> str:
        """"1.21-1.38" (only for a shown comparison)."""
        return f"{self.ci_low:.2f}-{self.ci_high:.2f}" if self.shown else ""

    def text(self) -> str:
        """"1.30x (1.21-1.38, 3 runs of 3 prompts)", or the reason there is no ratio."""
        if not self.shown:
            return self.why_not
        return f"{self.ratio:.2f}x ({self.interval_text()}, {self.evidence_text()})"

    def above(self, threshold: float) -> bool:
        """Faster than ``threshold`` times the reference beyond the noise: the whole interval above it."""
        return self.shown and self.ci_low is not None and self.ci_low > threshold

    def below(self, threshold: float) -> bool:
        """Slower than ``threshold`` times the reference beyond the noise: the whole interval below it."""
        return self.shown and self.ci_high is not None and self.ci_high < threshold

    def as_dict(self) -> dict[str, Any]:
        return {"ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high, "runs": self.runs,
                "prompts": self.prompts, "left_out": self.left_out, "why_not": self.why_not}


def age_text(measured_at: float, now: float | None = None) -> str:
    """How old evidence kept from an earlier run is, in words: "measured just now", "measured 5 min ago",
    "measured 3 h ago", "measured 2 days ago" (a baseline kept per setup: core/bench/baseline_cache.py)."""
    import time

    age = max(0.0, (time.time() if now is None else now) - measured_at)
    for size, unit in ((86400, "day"), (3600, "h"), (60, "min")):
        if age >= max(size, 90):
            n = round(age / size)
            return f"measured {n} {unit}{'s' if unit == 'day' and n != 1 else ''} ago"
    return "measured just now"


def few_runs(runs: int, min_runs: int = MIN_RUNS) -> str:
    """Why there is no interval from ``runs`` runs: "one run: no interval", "2 runs: no interval (needs 3)"."""
    if runs <= 1:
        return "one run: no interval"
    return f"{runs} runs: no interval (needs {min_runs})"


def setup_difference(a: Mapping[str, str], b: Mapping[str, str]) -> str:
    """What differs between two setups, "" when nothing: "threads 1 vs 2; ctx 4096 vs 8192"."""
    keys = sorted(set(a) | set(b))
    return "; ".join(f"{k} {a.get(k, '-')} vs {b.get(k, '-')}" for k in keys if a.get(k) != b.get(k))


def compare(reference: Evidence, other: Evidence, *, min_runs: int = MIN_RUNS, rounds: int = BOOTSTRAP_ROUNDS,
            seed: int = BOOTSTRAP_SEED) -> Comparison:
    """``other``'s speed over ``reference``'s by the rule (see the module docstring)."""
    if min_runs < 2:
        raise ValueError("an interval needs at least 2 runs a side")
    ref = _positive(reference.runs)
    new = _positive(other.runs)
    common = [k for k in ref if k in new]
    left_out = len(set(ref) ^ set(new))
    if other.drafted == 0:
        return Comparison(runs=_fewest(ref, new, common), prompts=len(common), left_out=left_out,
                          why_not=DRAFTED_NOTHING)
    differs = setup_difference(reference.setup, other.setup)
    if differs:
        return Comparison(why_not=f"not like for like: {differs}")
    if not common:
        return Comparison(left_out=left_out, why_not=DIFFERENT_PROMPTS)
    runs = _fewest(ref, new, common)
    if runs < min_runs:
        return Comparison(runs=runs, prompts=len(common), left_out=left_out, why_not=few_runs(runs, min_runs))
    base_strata, other_strata = [ref[k] for k in common], [new[k] for k in common]
    point = statistics.median([v for s in base_strata for v in s])
    ratio = statistics.median([v for s in other_strata for v in s]) / point
    rng = random.Random(seed)
    draws: list[float] = []
    for _ in range(rounds):
        b = statistics.median([rng.choice(s) for s in base_strata for _ in s])
        o = statistics.median([rng.choice(s) for s in other_strata for _ in s])
        draws.append(o / b)
    draws.sort()
    lo = draws[int(0.025 * (len(draws) - 1))]
    hi = draws[int(round(0.975 * (len(draws) - 1)))]
    return Comparison(ratio, lo, hi, runs, len(common), left_out)


def _positive(runs: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """The runs that measured a speed (a failed reply's 0 is no run), by prompt; prompts without one dropped."""
    out = {k: [float(x) for x in v if x > 0] for k, v in runs.items()}
    return {k: v for k, v in out.items() if v}


def _fewest(ref: Mapping[str, list[float]], new: Mapping[str, list[float]], common: Sequence[str]) -> int:
    return min((min(len(ref[k]), len(new[k])) for k in common), default=0)


__all__ = ["BOOTSTRAP_ROUNDS", "BOOTSTRAP_SEED", "DIFFERENT_PROMPTS", "DRAFTED_NOTHING", "MIN_RUNS", "Comparison",
           "Evidence", "age_text", "compare", "few_runs", "setup_difference"]
