"""core/engine/client/numbers.py: a server's numbers are taken only when they can be true."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.client import ImpossibleNumber, Timings, checked_usage, count, figure
from tests.fakes.sse_server import replay_chunks

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "engines"


@pytest.mark.parametrize("capture", sorted(FIXTURES.glob("*.sse")), ids=lambda p: p.name)
def test_every_real_engines_timings_are_taken(capture: Path) -> None:
    """The engines' own figures pass: mainline divides by n - 1, BeeLlama by n (within the rate slack)."""
    t = Timings.from_json(replay_chunks(capture)[-1]["timings"])
    assert t.predicted_n == 400 and 0 < t.predicted_per_second < 1000


@pytest.mark.parametrize(("value", "expected"), [(5, 5), (5.0, 5), (0, 0), (None, None), ((1 << 31) - 1, (1 << 31) - 1)])
def test_a_count_is_a_whole_number_in_range(value: Any, expected: int | None) -> None:
    assert count({"n": value}, "n") == expected


@pytest.mark.parametrize(("value", "words"), [
    (-1, "outside 0..2,147,483,647"), (1 << 31, "outside"), (2.5, "not a whole number"), (math.nan, "nan"),
    (math.inf, "inf"), (1e308, "1e+308"), (True, "True"), ("12", "'12'"), ([3], "[3]"),
])
def test_an_impossible_count_is_refused_naming_the_field_and_value(value: Any, words: str) -> None:
    with pytest.raises(ImpossibleNumber) as exc:
        count({"draft_n": value}, "draft_n")
    assert str(exc.value).startswith("draft_n is ") and words in str(exc.value)


@pytest.mark.parametrize("value", [-0.001, math.nan, -math.inf, math.inf, 1e308, "1.5", False])
def test_an_impossible_figure_is_refused(value: Any) -> None:
    with pytest.raises(ImpossibleNumber, match="^predicted_ms is "):
        figure({"predicted_ms": value}, "predicted_ms", 1e9)
    assert figure({"predicted_ms": 12.5}, "predicted_ms", 1e9) == 12.5
    assert figure({"predicted_ms": None}, "predicted_ms", 1e9) is None


@pytest.mark.parametrize(("timings", "words"), [
    ({"draft_n": 3, "draft_n_accepted": 7}, "draft_n_accepted 7 is more than draft_n 3"),
    ({"predicted_n": 400, "predicted_ms": 1000.0, "predicted_per_second": 4e6}, "400 tokens in 1000 ms is 400"),
    ({"prompt_n": 10, "prompt_ms": 10.0, "prompt_per_second": 1.0}, "prompt_per_second is 1"),
    ({"predicted_per_second": 2e7}, "outside 0..1e+07"),
    ([1, 2], "timings is list"),
])
def test_timings_that_cannot_be_true_are_refused(timings: Any, words: str) -> None:
    with pytest.raises(ImpossibleNumber) as exc:
        Timings.from_json(timings)
    assert words in str(exc.value)


def test_null_timings_are_not_said() -> None:
    """nlohmann's JSON writes a division by zero (one token, no time) as null: that is "not said", not a lie."""
    t = Timings.from_json({"predicted_n": 1, "predicted_ms": 0.0, "predicted_per_second": None, "draft_n": None})
    assert (t.predicted_n, t.predicted_per_second, t.draft_n) == (1, 0.0, 0)


def test_usage_keeps_only_counts_that_can_be_true() -> None:
    usage = {"completion_tokens": math.nan, "prompt_tokens": 5, "total_tokens": -3, "extra": "x",
             "prompt_tokens_details": {"cached_tokens": 2.0}}
    assert checked_usage(usage) == {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2}}
    assert checked_usage({"completion_tokens": 1e308}) is None and checked_usage("many") is None
