"""The points, plan and result of an auto-tune search (:mod:`beedeck.core.bench.tune`), as data:
what the search, its report files (:mod:`beedeck.core.bench.tune.report`), the CLI and the Tune view share.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beedeck.core.bench.report import Stats
from beedeck.core.bench.results import Sample
from beedeck.core.bench.suites import BenchSuite
from beedeck.core.bench.tune.knobs import Knob
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.comparison import Comparison

# A win must clear the noise (the interval) and be worth a profile change: 2 % above the best so far.
MIN_GAIN = 0.02

BASELINE_ROLE, START_ROLE, CANDIDATE_ROLE = "baseline", "start", "candidate"
# A second measurement of the start and of the winner, after the search: confirms a win across drift.
CONFIRM_ROLE = "confirm"
CONFIRM_POINTS = 2
MEASURED, TEXT_DIFFERS, NO_FIT, INVALID, FAILED, CANCELLED = (
    "measured", "text differs", "does not fit", "invalid", "failed", "cancelled")


@dataclass
class TunePoint:
    """One configuration of the search, as measured (or why it was not)."""

    index: int
    role: str
    settings: LaunchSettings
    knob: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)  # knob -> value, against the start
    status: str = MEASURED
    reason: str = ""
    accepted: bool = False  # became the best so far when it was measured
    seconds: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    gen_tps: Stats | None = None
    vs_baseline: Comparison | None = None
    vs_start: Comparison | None = None
    acceptance: float | None = None
    identical: int = 0
    compared: int = 0
    argv: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.role not in (CANDIDATE_ROLE, CONFIRM_ROLE):
            return self.role
        what = ", ".join(f"{k}={v}" for k, v in self.changes.items()) or "start"
        return f"{what} (again)" if self.role == CONFIRM_ROLE else what

    @property
    def measured(self) -> bool:
        return self.gen_tps is not None and self.status in (MEASURED, TEXT_DIFFERS)


@dataclass
class TunePlan:
    """What the search will try, reported up front; ``point_s`` is known after the first measurement."""

    mode: Mode
    knobs: list[Knob]
    candidates: int
    budget_s: float
    reps: int
    prompts: int
    point_s: float | None = None

    @property
    def measured_points(self) -> int:
        """Points that may start a server: the baseline, the start (unless it is the baseline), every
        candidate and, when one wins, the confirmation of the start and the winner."""
        return self.candidates + (1 if self.mode == Mode.BASELINE else 2) + (CONFIRM_POINTS if self.candidates else 0)

    @property
    def est_total_s(self) -> float | None:
        return None if self.point_s is None else self.point_s * self.measured_points

    @property
    def within_budget(self) -> int | None:
        """How many candidates the budget allows at the estimated time per point."""
        if self.point_s is None or self.point_s <= 0:
            return None
        fixed = self.measured_points - self.candidates
        return max(0, min(self.candidates, int(self.budget_s / self.point_s) - fixed))

    def describe(self) -> str:
        """The plan in words: what is tried, against what, how often, within which budget."""
        against = "the baseline" if self.mode == Mode.BASELINE else "the baseline and the start"
        n, k = self.candidates, len(self.knobs)
        if not n:
            what = (f"nothing to try here (no setting of this engine and profile to search): only {against} "
                    f"{'is' if self.mode == Mode.BASELINE else 'are'} measured")
        else:
            knobs = "; ".join(f"{kn.label}: {_fmt_values(kn)}" for kn in self.knobs)
            what = (f"try {_count(n, 'value')} of {_count(k, 'setting')} ({knobs}) against {against}; if "
                    f"{'it' if n == 1 else 'one'} wins, the start and the winner are measured again "
                    f"({CONFIRM_POINTS} more runs)")
        head = (f"Plan: {what}; {_count(self.prompts, 'prompt')} x {_count(self.reps, 'repetition')} each; "
                f"budget {_dur(self.budget_s)}.")
        if self.point_s is None:
            return head + " The time per point is estimated from the first measurement."
        return f"{head} {self.estimate()}"

    def estimate(self) -> str:
        """The time per point and what the budget allows ("" before the first measurement)."""
        if self.point_s is None:
            return ""
        total = self.est_total_s or 0.0
        return (f"About {_dur(self.point_s)} per point: all of them take about {_dur(total)}"
                + ("." if total <= self.budget_s else f"; the budget allows about {self.within_budget} candidate{'' if self.within_budget == 1 else 's'}."))


def fixed_points(mode: Mode) -> int:
    """The points a search measures whatever it finds: the baseline, the start (unless it is the
    baseline) and, should a candidate win, the start and the winner again."""
    return (1 if mode == Mode.BASELINE else 2) + CONFIRM_POINTS


def point_seconds(prompts: int, reps: int, max_tokens: int, tokens_per_s: float, warmup_tokens: int = 32,
                  start_s: float = 5.0) -> float:
    """A point's time before anything was measured: a server start plus every reply at its full budget
    at ``tokens_per_s`` (an upper bound: replies may end sooner)."""
    return start_s + (warmup_tokens + prompts * reps * max_tokens) / max(tokens_per_s, 1e-6)


def min_budget_s(mode: Mode, point_s: float) -> float:
    """The smallest budget that leaves room for one candidate point after the fixed ones."""
    return (fixed_points(mode) + 1) * point_s


def _fmt_values(k: Knob) -> str:
    shown = k.to_dict()
    return (f"now {shown['current'] if shown['current'] is not None else 'the default'}, "
            f"try {', '.join(map(str, shown['values']))}")


def _count(n: int, noun: str) -> str:
    """"1 value", "2 values": a count and its noun in agreement."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _dur(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


@dataclass
class TuneResult:
    """What the search found; ``best`` is ``start`` unless a point beat it outside the noise."""

    suite: BenchSuite
    mode: Mode
    plan: TunePlan
    points: list[TunePoint]
    baseline: TunePoint | None = None
    start: TunePoint | None = None
    best: TunePoint | None = None
    improved: bool = False
    best_vs_start: Comparison | None = None
    verdict: str = ""
    notes: list[str] = field(default_factory=list)
    cancelled: bool = False
    budget_s: float = 0.0
    elapsed_s: float = 0.0
    started: float = 0.0
    finished: float = 0.0
    identity_checked: bool = False
    confirmed: bool | None = None  # a win measured again (start and winner) held; None: not measured again
    unconfirmed: bool = False  # ``best`` beat the start once, not measured again (cancelled, no budget): savable
    min_gain: float = MIN_GAIN
    engine: str = ""
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def savable(self) -> bool:
        """A best other than the start that may become the profile: a confirmed win, or an unconfirmed
        one (said as such: "run again to confirm")."""
        return (self.improved or self.unconfirmed) and self.best is not None and self.best is not self.start

    @property
    def best_settings(self) -> LaunchSettings | None:
        return None if self.best is None else self.best.settings

    @property
    def tried(self) -> int:
        return sum(1 for p in self.points if p.role == CANDIDATE_ROLE and p.status not in (NO_FIT, INVALID))
