"""The speculation guard: speaks once when a mode does not pay, and only from evidence the one rule for
ratios accepts (issue 37): a like-for-like comparison (a benchmark's replies, the learnt advice), or the
replies' own draft counters. One reply's speed against another's is never a ratio."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.bench.suites import load_suite
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.comparison import Evidence
from beedeck.core.engine.speculation.spec_guard import (
    CODE,
    PROSE,
    STRUCTURED,
    SpecGuard,
    classify_prompt,
    references_from_bench,
)

BASE = Evidence({"c1": [50.0, 51.0, 49.0], "c2": [40.0, 41.0, 39.0]})
SLOW = Evidence({"c1": [40.0, 41.0, 39.0], "c2": [32.0, 33.0, 31.0]}, drafted=200)  # 0.80x, like for like
SAME = Evidence({"c1": [50.5, 49.0, 51.5], "c2": [40.5, 39.5, 41.0]}, drafted=200)


def test_classify_prompt_on_the_shipped_suites() -> None:
    for name, kind in (("seed", CODE), ("code-edit", CODE), ("json", STRUCTURED), ("prose", PROSE)):
        for p in load_suite(name).prompts:
            assert classify_prompt(p.text) == kind, (name, p.id)
    assert classify_prompt("hello, how are you today?") == PROSE
    assert classify_prompt("fix this: `foo()` returns None") == CODE


def test_slower_replies_alone_are_no_evidence_two_replies_are_two_prompts() -> None:
    """The old guard told "DFlash is costing you 20 %" from the medians of different replies."""
    g = SpecGuard(confirm=2)
    for v in (50.0, 51.0, 49.0):
        assert g.observe(Mode.BASELINE, v, PROSE) is None
    for v in (40.0, 41.0, 39.0, 40.0, 20.0):
        assert g.observe(Mode.DFLASH, v, PROSE, drafted=30) is None


def test_a_benchmark_that_found_the_mode_slower_is_told_once_with_its_interval() -> None:
    g = SpecGuard(confirm=2)
    g.add_reference(Mode.BASELINE, PROSE, BASE)
    g.add_reference(Mode.DFLASH, PROSE, SLOW)
    assert g.observe(Mode.DFLASH, 40.0, PROSE, drafted=30) is None  # one DFlash reply of this kind: not yet
    advice = g.observe(Mode.DFLASH, 40.0, PROSE, drafted=30)
    assert advice is not None and advice.mode == "dflash" and advice.kind == PROSE and advice.suggested_mode == "baseline"
    assert advice.comparison is not None and advice.comparison.below(0.9)
    c = advice.comparison
    assert (f"DFlash is slower than Baseline on prose prompts here: {c.ratio:.2f}x (95 % CI {c.interval_text()}, "
            "3 runs of 2 prompts; a benchmark on this server, the same prompts in both).") in advice.message
    assert g.observe(Mode.DFLASH, 20.0, PROSE, drafted=30) is None  # once per conversation and kind
    assert g.observe(Mode.DFLASH, 40.0, CODE, drafted=30) is None  # code has no evidence
    g.new_conversation("c2")
    g.observe(Mode.DFLASH, 40.0, PROSE, drafted=30)
    assert g.observe(Mode.DFLASH, 40.0, PROSE, drafted=30) is not None  # a new conversation may be told once more


def test_inside_the_noise_or_without_an_interval_it_never_nags() -> None:
    g = SpecGuard(confirm=1)
    g.add_reference(Mode.BASELINE, CODE, BASE)
    g.add_reference(Mode.DFLASH, CODE, SAME)
    g.add_reference(Mode.BASELINE, PROSE, Evidence({"p": [50.0]}))  # one run: no interval, no verdict
    g.add_reference(Mode.DFLASH, PROSE, Evidence({"p": [20.0]}, drafted=9))
    for _ in range(5):
        assert g.observe(Mode.DFLASH, 40.0, CODE, drafted=30) is None
        assert g.observe(Mode.DFLASH, 40.0, PROSE, drafted=30) is None
    with pytest.raises(ValueError):
        SpecGuard(confirm=0)


def test_a_mode_that_drafted_nothing_in_its_last_replies_says_so() -> None:
    """The starter's N-gram: "Drafts accepted: 0 drafted" reply after reply."""
    g = SpecGuard(confirm=3)
    assert g.observe(Mode.MODEL_FREE, 45.6, CODE, drafted=0) is None
    assert g.observe(Mode.MODEL_FREE, 46.7, CODE, drafted=12) is None
    assert g.observe(Mode.MODEL_FREE, 32.6, CODE, drafted=0) is None  # the last three: 0, 12, 0
    assert g.observe(Mode.MODEL_FREE, 30.5, CODE, drafted=0) is None
    advice = g.observe(Mode.MODEL_FREE, 26.0, CODE, drafted=0)
    assert advice is not None and advice.comparison is None and advice.replies == 5
    assert advice.message == ("N-gram drafted nothing in your last 5 code replies (the server counted 0 draft "
                              "tokens): it finds nothing to guess here, so it cannot speed them up. Switch to "
                              "Baseline for this kind of prompt?")
    assert "×" not in advice.message and "%" not in advice.message  # no ratio from replies


def test_benchmark_replies_become_evidence_per_mode_kind_and_prompt() -> None:
    code = "Write a Python function that parses JSON"
    refs = references_from_bench([
        (Mode.BASELINE, "a", code, 40.0), (Mode.BASELINE, "a", code, 42.0), (Mode.BASELINE, "a", code, 41.0),
        (Mode.DFLASH, "a", code, 130.0),
        (Mode.DFLASH, "b", "Tell me a story about the sea at dusk", 0.0),  # failed reply: no run
    ])
    assert refs[(Mode.BASELINE, "code")].runs == {"a": [40.0, 42.0, 41.0]}
    assert refs[(Mode.DFLASH, "code")].runs == {"a": [130.0]}
    assert refs[(Mode.DFLASH, "prose")].runs == {}
    guard = SpecGuard()
    guard.add_reference(Mode.BASELINE, "code", refs[(Mode.BASELINE, "code")])
    guard.add_reference(Mode.DFLASH, "code", refs[(Mode.DFLASH, "code")])
    assert guard.comparison(Mode.DFLASH, "code") is None  # one DFlash run: no interval
    guard.clear_references()
    assert guard.comparison(Mode.DFLASH, "code") is None


def test_the_learnt_advice_is_evidence_and_names_a_faster_mode_instead_of_the_baseline(tmp_path: Path) -> None:
    from beedeck.core.engine.speculation.advice import WorkloadAdvice

    advice = WorkloadAdvice(tmp_path / "advice.json")
    for prompt in ("p1", "p2"):  # tune/benchmark runs: on prose MTP beats the baseline, DFlash loses to it
        for v in (90.0, 92.0, 88.0):
            advice.record("setup", PROSE, Mode.MTP, v, prompt)
            advice.record("setup", PROSE, Mode.BASELINE, v / 2, prompt)
            advice.record("setup", PROSE, Mode.DFLASH, v / 3, prompt)
    g = SpecGuard(confirm=1, advice=advice, setup="setup")
    told = g.observe(Mode.DFLASH, 30.0, PROSE, drafted=40)
    assert told is not None and told.suggested_mode == "mtp" and told.source == "tune and benchmark runs on this setup"
    assert "found MTP fastest for prose (MTP 90.0 tok/s over Baseline 45.0 tok/s (2.00x (" in told.message
    assert told.message.endswith("Switch to MTP for this kind of prompt?")
    # Without a learnt verdict for this setup: no evidence, nothing said (the replies drafted).
    g.use_advice(advice, "another setup")
    g.new_conversation("c2")
    assert g.observe(Mode.DFLASH, 30.0, PROSE, drafted=40) is None
