"""The one rule for every ratio BeeDeck shows (issue 37): a speed-up only from like-for-like evidence, with
its interval and the number of runs; otherwise no ratio, and why."""

from __future__ import annotations

import pytest

from beedeck.core.engine.speculation.comparison import (
    DIFFERENT_PROMPTS,
    DRAFTED_NOTHING,
    MIN_RUNS,
    Comparison,
    Evidence,
    compare,
    few_runs,
)

BASE = Evidence({"a": [40.0, 41.0, 39.0], "b": [30.0, 31.0, 29.0]})


def test_like_for_like_evidence_gives_a_ratio_with_its_interval_and_runs() -> None:
    fast = Evidence({"a": [52.0, 53.0, 51.0], "b": [39.0, 40.0, 38.0]}, drafted=120)
    c = compare(BASE, fast)
    assert c.shown and c.ratio == pytest.approx(45.5 / 35.0)
    assert c.ci_low is not None and c.ci_high is not None and c.ci_low <= c.ratio <= c.ci_high
    assert (c.runs, c.prompts, c.left_out) == (3, 2, 0)
    assert c.text() == f"{c.ratio:.2f}x ({c.ci_low:.2f}-{c.ci_high:.2f}, 3 runs of 2 prompts)"
    assert c.above(1.1) and not c.below(1.0)
    assert compare(BASE, fast) == c  # seeded: the same figures, the same interval


def test_one_run_gives_no_interval_and_no_ratio() -> None:
    """The benchmark's "CI 0.99-0.99" from one repetition: a degenerate interval is no interval."""
    c = compare(Evidence({"a": [40.0], "b": [30.0], "c": [20.0]}), Evidence({"a": [39.6], "b": [29.7], "c": [19.8]}))
    assert not c.shown and c.ratio is None and c.ci_low is None
    assert c.text() == "one run: no interval" and (c.runs, c.prompts) == (1, 3)
    assert not c.above(0.0) and not c.below(10.0)  # no verdict either way
    two = compare(Evidence({"a": [40.0, 41.0]}), Evidence({"a": [50.0, 52.0]}))
    assert two.text() == f"2 runs: no interval (needs {MIN_RUNS})"


def test_a_mode_that_drafted_nothing_says_so_instead_of_a_ratio() -> None:
    """The dock's "N-gram 45.6 tok/s · ×1.30" after a reply with 0 draft tokens."""
    c = compare(BASE, Evidence({"a": [52.0, 53.0, 51.0], "b": [39.0, 40.0, 38.0]}, drafted=0))
    assert not c.shown and c.text() == DRAFTED_NOTHING == "drafted nothing"


def test_replies_to_different_prompts_are_never_a_ratio() -> None:
    """A reply's own figure never becomes a ratio against another reply: two replies are two prompts."""
    base = Evidence({"reply-1": [35.1, 35.0, 35.2]})
    other = Evidence({"reply-2": [45.6, 45.0, 46.0]}, drafted=50)
    c = compare(base, other)
    assert not c.shown and c.why_not == DIFFERENT_PROMPTS and c.left_out == 2


def test_settings_that_differ_beyond_the_mode_are_not_like_for_like() -> None:
    base = Evidence(BASE.runs, setup={"threads": "1", "ctx": "8192"})
    other = Evidence(BASE.runs, setup={"threads": "2", "ctx": "8192"}, drafted=10)
    c = compare(base, other)
    assert not c.shown and c.text() == "not like for like: threads 1 vs 2"


def test_only_the_prompts_both_sides_measured_are_compared_and_the_rest_is_named() -> None:
    cut = Evidence({"a": [50.0, 51.0, 49.0]}, drafted=30)  # a cancelled run: prompt b never ran
    c = compare(BASE, cut)
    assert c.shown and c.prompts == 1 and c.left_out == 1 and c.ratio == pytest.approx(50.0 / 40.0)
    assert c.text().endswith("3 runs; 1 prompt measured on one side only, left out)")


def test_failed_replies_are_no_runs() -> None:
    assert Evidence.of([("a", 0.0), ("a", 40.0), ("a", -1.0)]).runs == {"a": [40.0]}
    c = compare(Evidence({"a": [40.0, 0.0, 41.0, 39.0]}), Evidence({"a": [44.0, 45.0, 0.0]}))
    assert c.runs == 2 and not c.shown


def test_noise_is_not_a_verdict_and_a_shift_is() -> None:
    noise = compare(BASE, Evidence({"a": [40.5, 39.0, 41.5], "b": [30.5, 29.0, 31.0]}))
    assert noise.shown and not noise.above(1.0) and not noise.below(1.0)
    slow = compare(BASE, Evidence({"a": [30.0, 31.0, 29.0], "b": [22.0, 23.0, 21.0]}))
    assert slow.below(0.9)


def test_merged_evidence_pools_runs_and_drafts() -> None:
    a = Evidence({"a": [1.0, 2.0]}, drafted=3)
    b = Evidence({"a": [3.0], "b": [4.0]}, drafted=None)
    m = a.merged(b)
    assert m.runs == {"a": [1.0, 2.0, 3.0], "b": [4.0]} and m.drafted == 3
    assert Evidence({"a": [1.0]}).merged(Evidence({})).drafted is None


def test_the_rule_needs_two_runs_at_least_for_an_interval_and_words_for_every_count() -> None:
    with pytest.raises(ValueError):
        compare(BASE, BASE, min_runs=1)
    assert few_runs(0) == few_runs(1) == "one run: no interval"
    assert Comparison(why_not="x").as_dict()["ratio"] is None
