"""Auto-tune: a bounded search for the launch settings that run fastest on this engine and card, every
point measured by the benchmark core. ``search`` runs it (:func:`tune`); ``knobs`` says which settings
are tried and what fits (the planner); ``points`` holds a point, a plan and a result; ``report`` writes
the Markdown/JSON/CSV tables. Outside code imports from this package; the modules inside import each
other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.bench.tune.points import (
    BASELINE_ROLE,
    CANCELLED,
    CANDIDATE_ROLE,
    CONFIRM_ROLE,
    FAILED,
    INVALID,
    MEASURED,
    MIN_GAIN,
    NO_FIT,
    START_ROLE,
    TEXT_DIFFERS,
    TunePlan,
    TunePoint,
    TuneResult,
)
from beedeck.core.bench.tune.search import ChatMessageLike, bench_measure, suite_from_chat, tune

__all__ = ["BASELINE_ROLE", "CANCELLED", "CANDIDATE_ROLE", "CONFIRM_ROLE", "FAILED", "INVALID", "MEASURED", "MIN_GAIN",
           "NO_FIT", "START_ROLE", "TEXT_DIFFERS", "ChatMessageLike", "TunePlan", "TunePoint", "TuneResult", "bench_measure",
           "suite_from_chat", "tune"]
