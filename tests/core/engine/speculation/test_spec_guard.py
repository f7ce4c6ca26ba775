"""The speculation guard: speaks once when DFlash is slower than the baseline, never nags."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.bench.suites import load_suite
from beedeck.core.engine.speculation.spec_guard import CODE, PROSE, STRUCTURED, SpecGuard, classify_prompt


def test_classify_prompt_on_the_shipped_suites() -> None:
    for name, kind in (("seed", CODE), ("code-edit", CODE), ("json", STRUCTURED), ("prose", PROSE)):
        for p in load_suite(name).prompts:
            assert classify_prompt(p.text) == kind, (name, p.id)
    assert classify_prompt("hello, how are you today?") == PROSE
    assert classify_prompt("fix this: `foo()` returns None") == CODE


def test_tells_once_with_the_numbers_after_enough_samples() -> None:
    g = SpecGuard(min_samples=3, confirm=2)
    for v in (50.0, 52.0, 48.0):
        assert g.observe("baseline", v, PROSE) is None
    assert g.observe("dflash", 40.0, PROSE) is None  # one DFlash reply is not enough
    assert g.observe("dflash", 41.0, PROSE) is None
    assert g.observe("dflash", 39.0, PROSE) is None  # armed, first confirmation
    advice = g.observe("dflash", 40.0, PROSE)
    assert advice is not None
    assert (advice.mode, advice.kind, advice.suggested_mode) == ("dflash", PROSE, "baseline")
    assert advice.baseline_tps == 50.0 and advice.mode_tps == 40.0 and advice.slowdown == pytest.approx(0.2)
    assert "costing you 20% on prose" in advice.message and "40.0 tok/s against 50.0" in advice.message
    for _ in range(10):  # never again in this conversation and kind
        assert g.observe("dflash", 20.0, PROSE) is None


def test_never_nags_when_dflash_is_faster_or_within_the_margin() -> None:
    g = SpecGuard()
    for v in (50.0, 50.0, 50.0):
        g.observe("baseline", v, CODE)
    for v in (49.0, 48.5, 49.5, 48.0, 120.0, 130.0):  # 1-4 % slower: inside the 5 % margin
        assert g.observe("dflash", v, CODE) is None


def test_hysteresis_disarms_only_on_real_recovery() -> None:
    g = SpecGuard(min_samples=1, window=1, confirm=3, enter_margin=0.10, exit_margin=0.02)
    g.observe("baseline", 100.0, CODE)
    assert g.observe("dflash", 85.0, CODE) is None  # armed (15 % slower), streak 1
    assert g.observe("dflash", 95.0, CODE) is None  # 5 %: between the margins, stays armed, streak 2
    assert g.observe("dflash", 94.0, CODE) is not None  # streak 3: told
    g.new_conversation("c2")
    g.observe("baseline", 100.0, CODE)
    assert g.observe("dflash", 85.0, CODE) is None  # armed
    assert g.observe("dflash", 99.0, CODE) is None  # 1 %: recovered, disarmed
    assert g.observe("dflash", 85.0, CODE) is None  # armed again, streak restarts at 1


def test_kinds_and_conversations_are_separate_and_references_stand_in() -> None:
    g = SpecGuard(min_samples=2, confirm=1)
    g.add_reference("baseline", PROSE, [60.0, 62.0])  # from a benchmark run
    assert g.observe("dflash", 40.0, CODE) is None  # no code baseline at all
    assert g.observe("dflash", 40.0, PROSE) is None
    advice = g.observe("dflash", 41.0, PROSE)
    assert advice is not None and advice.n_baseline == 2 and advice.baseline_tps == 61.0
    g.new_conversation("next")
    g.observe("dflash", 40.0, PROSE)
    assert g.observe("dflash", 40.0, PROSE) is not None  # a new conversation may be told once more
    with pytest.raises(ValueError, match="hysteresis"):
        SpecGuard(enter_margin=0.01, exit_margin=0.05)


def test_benchmark_figures_become_references_per_mode_and_kind() -> None:
    from beedeck.core.engine.speculation.spec_guard import SpecGuard, references_from_bench

    refs = references_from_bench([
        ("baseline", "Write a Python function that parses JSON", 40.0),
        ("baseline", "Write a Python function that parses JSON", 42.0),
        ("baseline", "Write a Python function that parses JSON", 41.0),
        ("dflash", "Write a Python function that parses JSON", 130.0),
        ("dflash", "Tell me a story about the sea at dusk", 0.0),  # failed reply: no figure
    ])
    assert refs[("baseline", "code")] == [40.0, 42.0, 41.0]
    assert refs[("dflash", "code")] == [130.0]
    assert not any(kind == "prose" for _, kind in refs)
    guard = SpecGuard(min_samples=3)
    guard.add_reference("baseline", "code", refs[("baseline", "code")])
    assert guard.figure("baseline", "code") == (41.0, 3)


def test_the_learnt_advice_names_a_faster_mode_instead_of_the_baseline(tmp_path: Path) -> None:
    from beedeck.core.engine.speculation.advice import WorkloadAdvice

    advice = WorkloadAdvice(tmp_path / "advice.json")
    for v in (90.0, 92.0, 88.0):  # tune/benchmark runs: on prose MTP beats the baseline and DFlash
        advice.record("setup", PROSE, "mtp", v)
        advice.record("setup", PROSE, "baseline", v / 2)
    g = SpecGuard(min_samples=1, confirm=1, advice=advice, setup="setup")
    g.observe("baseline", 50.0, PROSE)
    told = g.observe("dflash", 30.0, PROSE)
    assert told is not None and told.suggested_mode == "mtp"
    assert "found MTP fastest for prose (MTP 90.0 tok/s over Baseline 45.0" in told.message
    assert told.message.endswith("Switch to MTP for this kind of prompt?")
    # A learnt verdict for the slow mode itself (or none) leaves the baseline as the suggestion.
    g.use_advice(advice, "another setup")
    g.new_conversation("c2")
    g.observe("baseline", 50.0, PROSE)
    plain = g.observe("dflash", 30.0, PROSE)
    assert plain is not None and plain.suggested_mode == "baseline" and not plain.learned
