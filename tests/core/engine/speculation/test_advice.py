"""The workload advice: prompt kinds, the minimum-evidence rule, persistence (atomic, corrupt file
kept aside), feeding from tune and benchmark results, and `beedeck advice`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from beedeck.cli import main
from beedeck.clicmd.advice import learn_from_bench
from beedeck.core.bench.advice_feed import bench_advice_samples, tune_advice_samples
from beedeck.core.bench.results import BenchReport, Sample
from beedeck.core.bench.suites import BenchPrompt, BenchSuite, load_suite
from beedeck.core.bench.tune import tune
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.core.engine.speculation.advice import (
    CODE,
    PROSE,
    STRUCTURED,
    AdviceError,
    WorkloadAdvice,
    classify,
    setup_key,
)

CAPS = EngineCaps("/e/llama-server", Generation.MAINLINE, build=11434, spec_types=("draft-dflash", "draft-mtp"),
                  gpu_backend="cpu")
SETTINGS = LaunchSettings(target="/m/target-Q4_K_M.gguf", draft="/m/dflash-Q8_0.gguf", spec_mode=Mode.DFLASH)
KEY = setup_key(CAPS, SETTINGS)


def test_classify_the_shipped_suites_and_edge_cases() -> None:
    for name, kind in (("seed", CODE), ("code-edit", CODE), ("json", STRUCTURED), ("prose", PROSE)):
        assert [classify(p.text) for p in load_suite(name).prompts] == [kind] * 3, name
    assert classify('{"name": "deck", "bees": [1, 2]}') == STRUCTURED  # the text itself is data
    assert classify("List the planets as YAML with name and mass fields") == STRUCTURED
    assert classify("Write a Python function that parses JSON") == CODE  # about data, but code
    assert classify("Tell me a story about the sea at dusk") == PROSE


def test_setup_key_names_engine_target_draft_and_the_other_settings() -> None:
    assert KEY.startswith("mainline llama.cpp (build 11434) | target-Q4_K_M.gguf | dflash-Q8_0.gguf | settings ")
    assert setup_key(CAPS, replace(SETTINGS, draft=None)).split(" | ")[2] == "-"
    # the speculation may differ between the modes compared; any other setting makes another setup
    assert setup_key(CAPS, replace(SETTINGS, spec_mode=Mode.BASELINE, draft_n_max=8, port=9999)) == KEY
    assert setup_key(CAPS, replace(SETTINGS, threads=2)) != KEY
    assert setup_key(CAPS, replace(SETTINGS, ctx_size=8192)) != KEY


def test_best_mode_needs_like_for_like_evidence_and_a_clear_winner(tmp_path: Path) -> None:
    a = WorkloadAdvice(tmp_path / "advice.json")
    assert a.best_mode(KEY, CODE) is None
    for v in (100.0, 102.0, 98.0):
        a.record(KEY, CODE, Mode.DFLASH, v, "p1")
    assert a.best_mode(KEY, CODE) is None  # one mode alone compares nothing
    a.record(KEY, CODE, Mode.BASELINE, 50.0, "p1")
    a.record(KEY, CODE, Mode.BASELINE, 51.0, "p1")
    verdict = a.verdict(KEY, CODE)
    assert verdict.best is None and "too little like-for-like evidence" in verdict.why
    assert "2 runs: no interval (needs 3)" in verdict.why
    a.record(KEY, CODE, Mode.BASELINE, 49.0, "p1")
    assert a.best_mode(KEY, CODE) == Mode.DFLASH
    why = a.verdict(KEY, CODE).why
    assert why.startswith("DFlash 100.0 tok/s over Baseline 50.0 tok/s (2.00x (") and why.endswith(", 3 runs))")
    # per kind and per setup: prose knows nothing yet, another setup neither
    assert a.best_mode(KEY, PROSE) is None and a.best_mode("other", CODE) is None
    for v in (60.0, 61.0, 59.0):  # on prose MTP and baseline are within 3 %: a tie, no advice
        a.record(KEY, PROSE, Mode.MTP, v, "p2")
        a.record(KEY, PROSE, Mode.BASELINE, v * 0.99, "p2")
    tie = a.verdict(KEY, PROSE)
    assert tie.best is None and "within the noise or 3 % of each other" in tie.why


def test_figures_of_different_prompts_never_make_a_verdict(tmp_path: Path) -> None:
    """Like for like: DFlash measured on one prompt, the baseline on another, is no comparison."""
    a = WorkloadAdvice(tmp_path / "advice.json")
    for v in (100.0, 102.0, 98.0):
        a.record(KEY, CODE, Mode.DFLASH, v, "p1")
        a.record(KEY, CODE, Mode.BASELINE, v / 2, "p2")
    v = a.verdict(KEY, CODE)
    assert v.best is None and "different prompts: no ratio" in v.why
    assert [(f.mode, f.n) for f in v.figures] == [(Mode.DFLASH, 3), (Mode.BASELINE, 3)]  # still shown


def test_figures_persist_atomically_and_keep_only_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "advice.json"
    a = WorkloadAdvice(path, window=3)
    a.record_many(KEY, [(CODE, Mode.DFLASH, 10.0, "p"), (CODE, Mode.DFLASH, 20.0, "p"), (CODE, Mode.DFLASH, 30.0, "p"),
                        (CODE, Mode.DFLASH, 40.0, "p"), (CODE, Mode.BASELINE, 0.0, "p")])  # a failed reply (0 tok/s) is no figure
    data = json.loads(path.read_text())
    assert data["kind"] == "beedeck-advice" and data["schema"] == 2
    assert data["setups"][KEY][CODE] == {Mode.DFLASH: {"p": [20.0, 30.0, 40.0]}}
    assert not list(tmp_path.glob(".advice.json.tmp-*"))  # the temp file was renamed over, none left
    assert WorkloadAdvice(path).verdict(KEY, CODE).figures[0].n == 3  # a new process reads it back
    with pytest.raises(AdviceError, match="Unknown prompt kind 'poetry'"):
        a.best_mode(KEY, "poetry")
    a.forget(KEY)
    assert a.setups() == [] and json.loads(path.read_text())["setups"] == {}


def test_a_schema_1_file_is_read_its_figures_shown_never_compared(tmp_path: Path) -> None:
    """Schema 1 kept no prompt per figure: its figures stay (nothing is lost) but cannot be like for like."""
    path = tmp_path / "advice.json"
    path.write_text(json.dumps({"kind": "beedeck-advice", "schema": 1, "setups": {
        "old": {"code": {"dflash": [100.0, 101.0, 99.0], "baseline": [50.0, 51.0, 49.0]}}}}))
    a = WorkloadAdvice(path)
    assert not a.problem and not list(tmp_path.glob("advice.json.corrupt-*"))
    v = a.verdict("old", CODE)
    assert v.best is None and [f.n for f in v.figures] == [3, 3] and "different prompts" in v.why
    a.record("old", CODE, Mode.DFLASH, 98.0, "p")  # written back as schema 2, the old figures kept
    data = json.loads(path.read_text())
    assert data["schema"] == 2 and data["setups"]["old"]["code"]["dflash"] == {"": [100.0, 101.0, 99.0], "p": [98.0]}


@pytest.mark.parametrize("content", ["{not json", '{"kind": "beedeck-advice", "schema": 1, "setups": {"k": '
                                     '{"code": {"dflash": [-1]}}}}', '["a list"]'])
def test_a_corrupt_file_is_kept_aside_with_a_message(tmp_path: Path, content: str) -> None:
    path = tmp_path / "advice.json"
    path.write_text(content)
    a = WorkloadAdvice(path)
    aside = list(tmp_path.glob("advice.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == content  # never deleted
    assert f"it was kept as {aside[0].name}" in a.problem and "learning starts again" in a.problem
    a.record(KEY, CODE, Mode.DFLASH, 5.0)  # and learning goes on in a fresh file
    assert json.loads(path.read_text())["setups"][KEY][CODE][Mode.DFLASH] == {"": [5.0]}


def test_a_file_of_a_newer_beedeck_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "advice.json"
    content = json.dumps({"kind": "beedeck-advice", "schema": 99, "setups": {"future": {}}})
    path.write_text(content)
    a = WorkloadAdvice(path)
    assert "newer BeeDeck" in a.problem and "schema 99" in a.problem and a.setups() == []
    a.record(KEY, CODE, Mode.DFLASH, 5.0)  # learnt for this session only: the newer file is not overwritten
    assert path.read_text() == content and not list(tmp_path.glob("advice.json.corrupt-*"))


SUITE = BenchSuite("mixed", (BenchPrompt("c", "Write a Python function that sorts."),
                             BenchPrompt("p", "Tell me a story about the sea at dusk.")), max_tokens=8, temperature=0.0)


def _report() -> BenchReport:
    report = BenchReport(SUITE, [Variant(Mode.BASELINE), Variant(Mode.DFLASH), IN_SERVER_BASELINE], 3, 0)
    for rep in range(3):
        for mode, code_tps, prose_tps in ((Variant(Mode.BASELINE), 50.0, 50.0), (Variant(Mode.DFLASH), 120.0, 40.0), (IN_SERVER_BASELINE, 45.0, 45.0)):
            report.samples.append(Sample(mode, "c", rep, 42, gen_tps=code_tps + rep))
            report.samples.append(Sample(mode, "p", rep, 42, gen_tps=prose_tps + rep))
    report.samples.append(Sample(Variant(Mode.DFLASH), "p", 3, 42, gen_tps=500.0, error="server gone"))
    return report


def test_a_benchmark_teaches_per_kind_and_the_guard_follows(tmp_path: Path) -> None:
    report = _report()
    samples = bench_advice_samples(report)
    assert len(samples) == 12 and {m for m, _t, _v in samples} == {Mode.BASELINE, Mode.DFLASH}  # no in-server baseline
    a = WorkloadAdvice(tmp_path / "advice.json")
    line = learn_from_bench(report, CAPS, SETTINGS, a)
    assert "learnt 12 figures" in line and "code: DFlash" in line and "prose: Baseline" in line
    assert a.best_mode(KEY, CODE) == Mode.DFLASH and a.best_mode(KEY, PROSE) == Mode.BASELINE

    from beedeck.core.engine.speculation.spec_guard import SpecGuard

    guard = SpecGuard(advice=a, setup=KEY)
    assert guard.mode_for_prompt("Write a Rust function that parses a file.") == Mode.DFLASH
    assert guard.mode_for_prompt("Write a Rust function that parses a file.", available=[Mode.BASELINE, Mode.MTP]) is None
    assert guard.mode_for_prompt("Tell me about autumn in Kyoto.") == Mode.BASELINE
    assert SpecGuard().mode_for_prompt("Write code") is None  # without the advice: nothing to follow


def test_a_tune_teaches_its_baseline_and_best_when_only_the_speculation_changed(tmp_path: Path) -> None:
    from tests.core.bench.tune.test_search import CPU_CAPS, START, FakeBench, draft_max_knob
    from tests.core.bench.tune.test_search import SUITE as TUNE_SUITE

    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))  # start (draft max 1) 70, draft max 8 140
    result = tune(None, CPU_CAPS, START, TUNE_SUITE, budget_s=1000, measure=fake, knobs=[draft_max_knob(8)],
                  clock=fake.clock, fits=lambda s: None)
    assert result.improved
    samples = tune_advice_samples(result)
    # two prompts x three repetitions of the baseline (50 tok/s) and of the best point (140): the draft max is
    # the speculation's own setting, so the best runs with the baseline's settings apart from the mode
    assert sorted({(m, t) for m, t, _v in samples}) == [(Mode.BASELINE, "Write code."), (Mode.BASELINE, "Write more code."),
                                                         (Mode.DFLASH, "Write code."), (Mode.DFLASH, "Write more code.")]
    assert len(samples) == 12 and max(v for m, _t, v in samples if m == Mode.DFLASH) == pytest.approx(140 * 1.03)
    a = WorkloadAdvice(tmp_path / "advice.json")
    key = setup_key(CPU_CAPS, START)
    assert key == setup_key(CPU_CAPS, result.best_settings)  # type: ignore[arg-type]  # the same setup
    a.learn(key, samples)
    assert a.best_mode(key, CODE) == Mode.DFLASH and "2.80x (" in a.verdict(key, CODE).why


def test_a_tuned_best_that_changed_another_setting_teaches_the_start_instead(tmp_path: Path) -> None:
    """threads=2 is another setup than the baseline measured with threads=1: not a comparison of modes."""
    from beedeck.core.bench.tune.knobs import Knob
    from tests.core.bench.tune.test_search import CPU_CAPS, START, FakeBench
    from tests.core.bench.tune.test_search import SUITE as TUNE_SUITE

    threads = Knob("threads", "Threads", 1, (2,), lambda s, v: replace(s, threads=v))
    fake = FakeBench(lambda s: 70.0 * (s.threads or 1))
    result = tune(None, CPU_CAPS, replace(START, threads=1), TUNE_SUITE, budget_s=1000, measure=fake, knobs=[threads],
                  clock=fake.clock, fits=lambda s: None)
    assert result.improved and result.best is not None and result.best.changes == {"threads": 2}
    samples = tune_advice_samples(result)
    assert max(v for m, _t, v in samples if m == Mode.DFLASH) == pytest.approx(70 * 1.03)  # the start's, not the best's


def test_cli_advice_lists_classifies_and_forgets(beedeck_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["advice"]) == 0
    assert "Nothing learnt yet: run `beedeck tune`" in capsys.readouterr().out
    learn_from_bench(_report(), CAPS, SETTINGS)  # the data folder's advice file
    assert main(["advice"]) == 0
    out = capsys.readouterr().out
    assert KEY in out and "code       best: DFlash" in out and "DFlash 121.0 tok/s (3)" in out
    assert main(["advice", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["setups"][0]["kinds"][0] == {"kind": "code", "best": "dflash", "why": data["setups"][0]["kinds"][0]["why"],
                                             "modes": [{"mode": "dflash", "median_tps": 121.0, "figures": 3},
                                                       {"mode": "baseline", "median_tps": 51.0, "figures": 3}]}
    assert main(["advice", "--classify", "Return a CSV of the rows"]) == 0
    assert capsys.readouterr().out.strip() == STRUCTURED
    assert main(["advice", "--forget", "--setup", "nothing-like-it"]) == 2
    assert "no learnt setup matches" in capsys.readouterr().err
    assert main(["advice", "--forget", "--setup", "11434"]) == 0
    assert main(["advice"]) == 0 and "Nothing learnt yet" in capsys.readouterr().out
