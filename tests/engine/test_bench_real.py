"""The benchmark on the real mainline CPU llama-server: the guide's seed suite on the starter model
(baseline), and baseline vs DFlash on the synthetic sticky pair (real drafts, 100 % accepted).

Kept short for the shared 2-core machine: small ``max_tokens``, few repetitions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from beedeck.clicmd.bench import synthetic_bench_pair, synthetic_settings
from beedeck.core.bench import report as br
from beedeck.core.bench.runner import run_bench
from beedeck.core.bench.suites import BenchPrompt, BenchSuite, load_suite
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.core.engine.speculation.advice import load_advice
from tests.conftest import PERSISTENT, REPO
from tests.engine.conftest import RealEngine

pytestmark = pytest.mark.engine

SYNTH = PERSISTENT / "synth-bench"


@pytest.fixture(scope="module")
def synth_pair() -> tuple[Path, Path]:
    return synthetic_bench_pair(SYNTH)


def _line(report_summary: br.Summary, mode: Variant) -> str:
    m = report_summary.overall[mode]
    assert m.gen_tps is not None
    g = m.gen_tps
    sp = f", speed-up {m.speedup.text()}" if m.speedup else ""
    return (f"{mode.key}: median {g.median:.1f} tok/s, min {g.min:.1f}, max {g.max:.1f}, IQR {g.iqr:.1f}, "
            f"spread {g.spread_pct:.0f} %{sp}")


@pytest.mark.timeout(600)  # Gemma 3 270M on two shared cores: about 1-4 s per short reply
def test_seed_suite_baseline_on_the_starter_engine(
    starter_engine_path: Path, starter_caps: EngineCaps, starter_settings: Callable[..., LaunchSettings],
    tmp_path: Path, record_property: Any,
) -> None:
    suite = load_suite("seed").with_overrides(max_tokens=16)
    progress: list[tuple[int, int]] = []
    report = run_bench(starter_engine_path, starter_caps, starter_settings(), suite, (Variant(Mode.BASELINE),), reps=3,
                       warmup=1, on_progress=lambda d, t, _s: progress.append((d, t)))
    assert report.ok, report.errors
    # Progress in tokens: a 16-token warm-up and 3 reps x 3 prompts x 16 tokens.
    assert len(report.samples) == 9 and progress[-1] == (160, 160)
    for s in report.samples:
        assert 0 < s.completion_tokens <= 16 and s.gen_tps > 0 and s.prompt_tps > 0
        assert s.cache_n == 0  # cache_prompt off: the repeated prompt is processed afresh
        assert s.ttft_s is not None and 0 < s.ttft_s < s.wall_s
        assert s.draft_n == 0 and s.acceptance is None
    run = report.runs[0]
    assert run.switching == "restart" and run.argv[0] == str(starter_engine_path) and run.ready_s
    env = report.environment
    assert env["engine"]["generation"] == "mainline" and env["models"]["target"]["quant"] == "Q4_1"
    summary = br.summarize(report)
    assert summary.reference is None
    files = br.write_reports(report, tmp_path / "seed")
    data = json.loads(files[1].read_text())
    assert len(data["samples"]) == 9 and data["runs"][0]["argv"] == run.argv
    line = _line(summary, Variant(Mode.BASELINE))
    print(line)
    record_property("seed_baseline_spread", line)


def test_synthetic_pair_dflash_beats_baseline_with_full_acceptance(
    starter_engine_path: Path, starter_caps: EngineCaps, synth_pair: tuple[Path, Path], record_property: Any,
) -> None:
    # Restart switching, as the product does on mainline: one server at a time.
    suite = BenchSuite("synthetic", (BenchPrompt("py", "Write python code for the deck."),), max_tokens=128,
                       temperature=0.0, seed=7)
    report = run_bench(starter_engine_path, starter_caps, synthetic_settings(*synth_pair), suite, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)),
                       reps=5, warmup=1, switching="restart", environment={})
    assert report.ok, report.errors
    dflash = report.samples_for(Variant(Mode.DFLASH))
    assert len(dflash) == 5 and all(s.draft_n > 0 and s.acceptance == 1.0 for s in dflash)
    summary = br.summarize(report)
    d = summary.overall[Variant(Mode.DFLASH)]
    assert d.acceptance == 1.0 and d.identical == d.compared == 5  # greedy + lossless: same text
    assert d.accepted_share is not None and d.accepted_share > 0.85
    assert d.speedup is not None
    line = f"{_line(summary, Variant(Mode.BASELINE))}; {_line(summary, Variant(Mode.DFLASH))}"
    print(line)
    record_property("synthetic_speedup", line)
    assert d.speedup.ratio > 1.0, line
    assert d.speedup.ci_low <= d.speedup.ratio <= d.speedup.ci_high


def test_restart_switching_keeps_argv_and_port_and_measures_the_cost(
    starter_engine_path: Path, starter_caps: EngineCaps, synth_pair: tuple[Path, Path], record_property: Any,
) -> None:
    suite = BenchSuite("short", (BenchPrompt("py", "Write python code."),), max_tokens=16, temperature=0.0)
    modes = (Variant(Mode.BASELINE), Variant(Mode.DFLASH), Variant(Mode.MODEL_FREE))
    report = run_bench(starter_engine_path, starter_caps, synthetic_settings(*synth_pair), suite, modes, reps=1,
                       warmup=0, switching="restart", environment={})
    assert report.ok, report.errors
    runs = {r.variant: r for r in report.runs}
    assert runs[Variant(Mode.MODEL_FREE)].spec_type == "ngram-mod" and runs[Variant(Mode.DFLASH)].spec_type == "draft-dflash"
    port = runs[Variant(Mode.BASELINE)].argv[runs[Variant(Mode.BASELINE)].argv.index("--port") + 1]
    for mode in (Variant(Mode.DFLASH), Variant(Mode.MODEL_FREE)):
        argv = runs[mode].argv
        assert argv[argv.index("--port") + 1] == port
        assert not [a for a in runs[Variant(Mode.BASELINE)].argv if a not in argv]  # speculation flags only were added
        assert runs[mode].stop_previous_s is not None and runs[mode].ready_s is not None
    cost = ", ".join(f"{m}: stop {r.stop_previous_s or 0:.2f} s + ready {r.ready_s:.2f} s" for m, r in runs.items())
    print(cost)
    record_property("restart_switch_cost", cost)
    texts = {s.variant: s.text for s in report.samples}
    assert texts[Variant(Mode.BASELINE)] == texts[Variant(Mode.DFLASH)] == texts[Variant(Mode.MODEL_FREE)]
    # One repetition, real drafts: a ratio is measured, but no interval from one run (it printed "CI 0.99-0.99")
    summary = br.summarize(report)
    d = summary.overall[Variant(Mode.DFLASH)]
    assert report.samples_for(Variant(Mode.DFLASH))[0].draft_n > 0 and d.speedup is not None
    assert not d.speedup.shown and d.speedup.text() == "one run: no interval"
    assert "| one run: no interval |" in br.to_markdown(report, summary)


def test_cli_bench_synthetic_writes_every_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO / "gui")}
    proc = subprocess.run(
        [sys.executable, "-m", "beedeck", "bench", "--synthetic", "--reps", "1", "--max-tokens", "16",
         "--switching", "side-by-side", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=280, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "dflash" in proc.stdout and "100.0%" in proc.stdout
    # The measured replies teach the workload advice, under this setup's key (engine | target | draft).
    assert "The speed advice learnt" in proc.stdout and "bench-dflash-sticky-512" in proc.stdout, proc.stdout
    assert load_advice().setups(), "advice.json holds no setup after the benchmark"
    names = sorted(p.name for p in out.iterdir())
    assert {"report.md", "report.json", "samples.csv"} <= set(names)
    assert [n for n in names if n.endswith(".png")], names  # PySide6 is installed: charts are drawn
    md = (out / "report.md").read_text()
    assert "![" in md and "| DFlash |" in md


def test_cli_bench_fails_clearly_on_a_bad_suite(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"prompts": []}')
    env = {**os.environ, "PYTHONPATH": str(REPO / "gui")}
    proc = subprocess.run([sys.executable, "-m", "beedeck", "bench", "--suite", str(bad)],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 2 and "prompts: is missing or empty" in proc.stderr


@pytest.mark.timeout(900)
def test_every_engine_measures_dflash_against_a_server_without_the_draft(
    real_engine: RealEngine, record_property: Any,
) -> None:
    """The default switching on each real engine: the baseline is a server without the draft (no
    sample of it drafted), DFlash drafts and is accepted 100 %, the text is identical, and where the
    engine honours a per-request "no drafts" (BeeLlama 0.1 only) the in-server baseline is measured too."""
    target, draft = synthetic_bench_pair(SYNTH, real_engine.draft_format)
    suite = BenchSuite("synthetic", (BenchPrompt("py", "Write python code for the deck."),), max_tokens=128,
                       temperature=0.0, seed=7)
    report = run_bench(real_engine.path, real_engine.caps, synthetic_settings(target, draft), suite,
                       (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=5, warmup=1, environment={})
    assert report.ok, report.errors
    honours = real_engine.kind == "bee-a"
    assert report.variants == ([Variant(Mode.BASELINE), Variant(Mode.DFLASH), IN_SERVER_BASELINE] if honours else [Variant(Mode.BASELINE), Variant(Mode.DFLASH)])
    assert "honours" in report.environment["per_request"] if honours else "ignores" in report.environment["per_request"]
    assert [r.switching for r in report.runs] == ["restart", "restart"] + (["per-request"] if honours else [])
    assert all(s.draft_n == 0 for s in report.samples if s.variant in (Variant(Mode.BASELINE), IN_SERVER_BASELINE))
    dflash = report.samples_for(Variant(Mode.DFLASH))
    assert len(dflash) == 5 and all(s.draft_n > 0 and s.acceptance == 1.0 for s in dflash)
    summary = br.summarize(report)
    d = summary.overall[Variant(Mode.DFLASH)]
    assert d.identical == d.compared == 5 and d.speedup is not None
    line = f"{real_engine.kind}: {_line(summary, Variant(Mode.BASELINE))}; {_line(summary, Variant(Mode.DFLASH))}"
    if honours:
        line += f"; {_line(summary, IN_SERVER_BASELINE)}"
        assert any(IN_SERVER_BASELINE.label in f and "a server without the draft" in f for f in summary.flags)
    print(line)
    record_property(f"engine_speedup_{real_engine.kind}", line)
    assert d.speedup.ratio > 1.0, line


def test_the_baseline_is_measured_once_kept_and_measured_again_when_the_setup_changes(
    starter_engine_path: Path, starter_caps: EngineCaps, synth_pair: tuple[Path, Path], tmp_path: Path,
) -> None:
    """Issue 36: DFlash is compared against a baseline with no draft loaded, measured once per setup and kept (on a
    24 GB card each measurement is a restart and a pass of the suite); the report says when it was measured."""
    from dataclasses import replace

    from beedeck.core.bench.baseline_cache import BaselineCache

    cache = BaselineCache(tmp_path / "baselines.json")
    suite = BenchSuite("short", (BenchPrompt("py", "Write python code."),), max_tokens=16, temperature=0.0)
    settings = synthetic_settings(*synth_pair)

    def run(s: LaunchSettings = settings, fresh: bool = False) -> Any:
        report = run_bench(starter_engine_path, starter_caps, s, suite, (Variant(Mode.BASELINE), Variant(Mode.DFLASH)), reps=1, warmup=0,
                           switching="restart", environment={}, baselines=cache, fresh_baseline=fresh)
        assert report.ok, report.errors
        return report, {r.variant.mode: r for r in report.runs}

    first, runs = run()
    assert runs[Mode.BASELINE].measured_at is None and runs[Mode.DFLASH].stop_previous_s is not None  # measured, then stopped
    second, kept = run()
    assert kept[Mode.BASELINE].measured_at is not None and kept[Mode.BASELINE].argv == runs[Mode.BASELINE].argv
    assert kept[Mode.DFLASH].measured_at is None and kept[Mode.DFLASH].stop_previous_s is None  # no baseline server started
    assert [(s.prompt_id, s.gen_tps, s.text) for s in second.samples_for(Variant(Mode.BASELINE))] == [
        (s.prompt_id, s.gen_tps, s.text) for s in first.samples_for(Variant(Mode.BASELINE))]
    summary = br.summarize(second)
    assert any(f.startswith("Baseline was kept from an earlier run of this setup (measured just now") for f in summary.flags)
    assert "restart (kept from an earlier run of this setup, measured just now)" in br.to_markdown(second, summary)
    assert run(fresh=True)[1][Mode.BASELINE].measured_at is None  # asked to measure it again
    assert run(replace(settings, ctx_size=settings.ctx_size * 2))[1][Mode.BASELINE].measured_at is None  # another setup


@pytest.mark.timeout(600)
def test_n_gram_repetitions_start_from_nothing_learnt(
    starter_engine_path: Path, starter_caps: EngineCaps, starter_model_path: Path, start_server: Any,
) -> None:
    """mainline's ngram-mod keeps every reply's n-grams in a table that outlives the request: the same prompt
    again was drafted from its own earlier reply (measured here, greedy: 0, then 64 and 64 of 64 tokens drafted,
    12.4 -> 20.3 -> 24.8 tok/s), a speed-up no new prompt gets. Each repetition now starts on a fresh server
    and warms up on an unmeasured prompt, so every repetition drafts exactly as the first. A server BeeDeck did
    not start cannot be started afresh: the report says so."""
    suite = BenchSuite("csv", (BenchPrompt("csv", "Write a python function that parses a CSV file and sums the "
                                                  "second column."),), max_tokens=64, temperature=0.0)
    settings = LaunchSettings(target=str(starter_model_path), threads=1, ctx_size=2048)
    progress: list[tuple[int, int]] = []
    report = run_bench(starter_engine_path, starter_caps, settings, suite, (Variant(Mode.MODEL_FREE),), reps=3,
                       warmup=1, switching="restart", environment={}, on_progress=lambda d, t, _: progress.append((d, t)))
    assert report.ok, report.errors
    # The progress counts the warm-up before each repetition (3 x 32 tokens) with the replies (3 x 64).
    assert progress[-1] == (288, 288), progress[-5:]
    reps = [(s.rep, s.draft_n, s.draft_n_accepted, s.text) for s in report.samples_for(Variant(Mode.MODEL_FREE))]
    assert len(reps) == 3 and len({r[1:] for r in reps}) == 1, reps  # each repetition as the first
    run = report.runs[0]
    assert run.spec_type == "ngram-mod" and run.fresh_starts == 2 and run.ready_s is not None
    assert "started afresh 2 times, before each repetition after the first" in br.to_markdown(report,
                                                                                                br.summarize(report))
    assert not report.notes

    # The same mode on a server the user runs: measured as it is, and said.
    proc = start_server(spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-mod")
    proc.wait_ready(120)
    external = run_bench(None, None, None, suite, (Variant(Mode.MODEL_FREE),), reps=2, warmup=0, url=proc.base_url,
                         environment={})
    assert external.ok, external.errors
    assert len(external.notes) == 1 and "could not start it afresh between repetitions" in external.notes[0]
    assert external.notes[0] in br.summarize(external).flags


@pytest.mark.timeout(600)
def test_a_fresh_start_that_fails_ends_that_mode_only(
    starter_engine_path: Path, starter_caps: EngineCaps, starter_model_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Side by side, N-gram's server does not start again for its second repetition: the baseline still gets
    every repetition, N-gram keeps its first, the report says which start failed, and the progress ends full."""
    from beedeck.core.bench import runner
    from beedeck.core.engine.logparse import ServerFailed, ServerFailure

    launches: list[str] = []
    real_launch = runner.launch

    def launch(engine: Any, caps: Any, settings: LaunchSettings, **kw: Any) -> Any:
        launches.append(settings.spec_mode.value if settings.spec_mode else "off")
        if len(launches) == 3:  # baseline, N-gram, then N-gram afresh
            raise ServerFailed(ServerFailure("exited", "llama-server stopped with status 1.", "Read the log."))
        return real_launch(engine, caps, settings, **kw)

    monkeypatch.setattr(runner, "launch", launch)
    suite = BenchSuite("short", (BenchPrompt("py", "Write python code."),), max_tokens=8, temperature=0.0)
    settings = LaunchSettings(target=str(starter_model_path), threads=1, ctx_size=2048)
    progress: list[tuple[int, int]] = []
    report = run_bench(starter_engine_path, starter_caps, settings, suite,
                       (Variant(Mode.BASELINE), Variant(Mode.MODEL_FREE)), reps=2, warmup=1,
                       switching="side-by-side", environment={}, on_progress=lambda d, t, _: progress.append((d, t)))
    assert len(launches) == 3
    assert [s.rep for s in report.samples_for(Variant(Mode.BASELINE))] == [0, 1]
    assert [s.rep for s in report.samples_for(Variant(Mode.MODEL_FREE))] == [0]
    assert report.errors == ["The N-gram server did not start again for a repetition: llama-server stopped with "
                             "status 1. (Read the log.)"], report.errors
    done, total = progress[-1]
    assert done == total, progress[-4:]
