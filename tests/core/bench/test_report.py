"""The benchmark report's speed-ups and verdicts by BeeDeck's one rule (issue 37): no interval from one run,
a mode that drafted nothing says so, and a cancelled run says what it measured and what it did not. (The
report's files and statistics: tests/core/bench/test_runner.py.)"""

from __future__ import annotations

from beedeck.core.bench import report as br
from beedeck.core.bench.results import BenchReport, Sample
from beedeck.core.bench.suites import BenchPrompt, BenchSuite
from beedeck.core.engine.mode import Mode, Variant

SUITE = BenchSuite("seed", (BenchPrompt("task-store", "Write a task store."), BenchPrompt("kv-report", "Write a KV."),
                            BenchPrompt("linked-list", "Write a linked list.")), max_tokens=64, temperature=0.7)
# The tester's run: one repetition, N-gram 0.80x-1.28x of the baseline per prompt, about 0.99x overall.
BASE_TPS = {"task-store": 50.0, "kv-report": 40.0, "linked-list": 45.0}
NGRAM_TPS = {"task-store": 40.0, "kv-report": 51.2, "linked-list": 44.5}


def _report(reps: int, drafted: int = 12, cancel_after: int | None = None) -> BenchReport:
    r = BenchReport(SUITE, [Variant(Mode.BASELINE), Variant(Mode.MODEL_FREE)], reps=reps, warmup=0)
    for mode, tps in ((Variant(Mode.BASELINE), BASE_TPS), (Variant(Mode.MODEL_FREE), NGRAM_TPS)):
        for rep in range(reps):
            for pid, v in tps.items():
                k = (0.98, 1.0, 1.02)[rep % 3]
                r.samples.append(Sample(mode, pid, rep, rep, completion_tokens=64, gen_tps=v * k,
                                        draft_n=0 if mode == Variant(Mode.BASELINE) else drafted,
                                        draft_n_accepted=0 if mode == Variant(Mode.BASELINE) else drafted // 2))
    if cancel_after is not None:
        r.samples, r.cancelled = r.samples[:cancel_after], True
    return r


def test_one_repetition_gives_no_interval_anywhere() -> None:
    """The issue: one repetition printed "CI 0.99-0.99" while the chart's prompts ranged 0.80-1.28x."""
    report = _report(reps=1)
    s = br.summarize(report)
    sp = s.overall[Variant(Mode.MODEL_FREE)].speedup
    assert sp is not None and not sp.shown and sp.text() == "one run: no interval"
    assert all(p[Variant(Mode.MODEL_FREE)].speedup is not None and not p[Variant(Mode.MODEL_FREE)].speedup.shown for p in s.prompts.values())
    md = br.to_markdown(report, s)
    assert "0.99-0.99" not in md and "| one run: no interval |" in md
    assert any(f.startswith("One run: no interval: each prompt ran once per mode, so no speed-up is shown. Run 3")
               for f in s.flags)
    data = br.report_dict(report, s)["summary"]["overall"]["model-free"]["speedup"]
    assert data["ratio"] is None and data["why_not"] == "one run: no interval" and data["runs"] == 1


def test_three_repetitions_give_the_interval_and_the_runs() -> None:
    s = br.summarize(_report(reps=3))
    sp = s.overall[Variant(Mode.MODEL_FREE)].speedup
    assert sp is not None and sp.shown and sp.runs == 3 and sp.prompts == 3
    assert sp.text().endswith(", 3 runs of 3 prompts)")
    assert sp.ci_low is not None and sp.ci_high is not None and sp.ci_low < 1.0 < sp.ci_high  # 0.99x: noise, said so
    assert not any("is slower than the baseline" in f for f in s.flags)


def test_a_mode_that_drafted_nothing_gets_no_speed_up_and_a_flag() -> None:
    report = _report(reps=3, drafted=0)
    s = br.summarize(report)
    sp = s.overall[Variant(Mode.MODEL_FREE)].speedup
    assert sp is not None and not sp.shown and sp.text() == "drafted nothing"
    assert "| drafted nothing |" in br.to_markdown(report, s)
    assert any(f.startswith("N-gram drafted nothing on these prompts") for f in s.flags)


def test_a_cancelled_run_keeps_what_it_measured_and_names_what_it_did_not() -> None:
    # baseline: all 9 replies; N-gram: the first 4 (run 1 of every prompt, run 2 of task-store) before the cancel
    report = _report(reps=3, cancel_after=13)
    s = br.summarize(report)
    note = next(f for f in s.flags if f.startswith("The run was cancelled"))
    assert "Baseline measured all 9 replies" in note
    assert "N-gram 4 of 9 (not measured: task-store run 3, kv-report runs 2, 3, linked-list runs 2, 3)" in note
    sp = s.overall[Variant(Mode.MODEL_FREE)].speedup
    assert sp is not None and sp.text() == "one run: no interval"  # the fewest runs of a prompt decide


def test_the_files_keep_the_words_earlier_beedecks_wrote() -> None:
    """A benchmark measures variants now; report.json and samples.csv still name each by the word they had
    ("mode": "baseline", "baseline-draft-loaded"), in the same place, so scripts reading them keep working."""
    from beedeck.core.bench.results import ModeRun
    from beedeck.core.engine.mode import IN_SERVER_BASELINE

    r = _report(reps=3)
    r.variants.append(IN_SERVER_BASELINE)
    r.samples += [Sample(IN_SERVER_BASELINE, pid, rep, rep, completion_tokens=64, gen_tps=v)
                  for rep in range(3) for pid, v in BASE_TPS.items()]
    r.runs += [ModeRun(Variant(Mode.BASELINE), "restart"), ModeRun(IN_SERVER_BASELINE, "per-request")]
    data = br.report_dict(r)
    assert data["modes"] == ["baseline", "model-free", "baseline-draft-loaded"]
    assert [list(x)[0] for x in data["samples"] + data["runs"]] == ["mode"] * (len(r.samples) + 2)
    assert {x["mode"] for x in data["samples"]} == {"baseline", "model-free", "baseline-draft-loaded"}
    assert "variant" not in data["samples"][0] and [x["mode"] for x in data["runs"]] == ["baseline",
                                                                                         "baseline-draft-loaded"]
    overall = data["summary"]["overall"]
    assert list(overall) == ["baseline", "model-free", "baseline-draft-loaded"]
    assert overall["baseline-draft-loaded"]["mode"] == "baseline-draft-loaded" and "variant" not in overall["baseline"]
    assert set(data["summary"]["prompts"]["kv-report"]) == {"baseline", "model-free", "baseline-draft-loaded"}
    csv = br.to_csv(r).splitlines()
    assert csv[0].startswith("mode,prompt_id,rep,") and csv[-1].startswith("baseline-draft-loaded,linked-list,2,")
    md = br.to_markdown(r)
    assert "| Baseline (draft loaded) |" in md and "Variant(" not in md
