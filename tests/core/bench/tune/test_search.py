"""The auto-tuner's search against a deterministic fake measurement (the real engine runs in
tests/engine/test_tune_real.py): wins only outside the noise, budget, cancel, memory fit, output
identity, the knob set per engine, and the exported table."""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.bench.results import BenchReport, ModeRun, Sample
from beedeck.core.bench.suites import BenchError, BenchPrompt, BenchSuite
from beedeck.core.bench.tune import (
    BASELINE_ROLE,
    CANDIDATE_ROLE,
    CONFIRM_ROLE,
    FAILED,
    MEASURED,
    NO_FIT,
    START_ROLE,
    TEXT_DIFFERS,
    TunePlan,
    TuneResult,
    suite_from_chat,
    tune,
)
from beedeck.core.bench.tune.knobs import Knob, draft_siblings, knobs_for, planner_fit, quant_of, threads_in
from beedeck.core.bench.tune.report import format_table, result_dict, write_tune_reports
from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.speculation.comparison import Evidence, compare
from tests.conftest import PERSISTENT
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout

SUITE = BenchSuite("t", (BenchPrompt("a", "Write code."), BenchPrompt("b", "Write more code.")), max_tokens=32,
                   temperature=0.0)
START = LaunchSettings(target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=Mode.DFLASH, draft_n_max=1)
CPU_CAPS = EngineCaps("/e/llama-server", Generation.MAINLINE, spec_types=("none", "draft-dflash", "ngram-mod"),
                      gpu_backend="cpu")
NOISE = (0.97, 1.0, 1.03)  # the same run-to-run spread on every point: +-3 %


def draft_max_knob(*values: int) -> Knob:
    return Knob("draft_n_max", "Draft max", 1, values, lambda s, v: replace(s, draft_n_max=v))


class FakeBench:
    """Speed = ``speed(settings)`` x a fixed +-3 % pattern per repetition; text = ``text(settings)``.
    Each measurement advances a fake clock by ``cost`` seconds."""

    def __init__(self, speed: Callable[[LaunchSettings], float], text: Callable[[LaunchSettings], str] | None = None,
                 cost: float = 10.0, noise: tuple[float, ...] = NOISE, accept: float = 1.0) -> None:
        self.speed, self.text, self.cost, self.noise = speed, text or (lambda s: "def f(): pass"), cost, noise
        self.accept = accept  # the share of drafted tokens the fake target accepts
        self.now = 0.0
        self.calls: list[tuple[LaunchSettings, str]] = []
        self.on_call: Callable[[int], None] | None = None

    def clock(self) -> float:
        return self.now

    def __call__(self, settings: LaunchSettings, mode: Mode, status: Callable[[str], None]) -> BenchReport:
        self.calls.append((settings, mode))
        if self.on_call is not None:
            self.on_call(len(self.calls))
        status("measuring")
        self.now += self.cost
        report = BenchReport(SUITE, [Variant(mode)], len(self.noise), 1)
        report.runs.append(ModeRun(Variant(mode), "restart", argv=["llama-server", f"--draft-max={settings.draft_n_max}"]))
        base = 50.0 if mode == Mode.BASELINE else self.speed(settings)
        for rep, k in enumerate(self.noise):
            for p in SUITE.prompts:
                drafted = 0 if mode == Mode.BASELINE else 10
                report.samples.append(Sample(Variant(mode), p.id, rep, 42 + rep, completion_tokens=32, gen_tps=base * k,
                                             draft_n=drafted, draft_n_accepted=round(drafted * self.accept),
                                             text="def f(): pass" if mode == Mode.BASELINE else self.text(settings)))
        return report


def run(fake: FakeBench, knobs: list[Knob], budget_s: float = 1000.0, **kw: Any) -> TuneResult:
    return tune(None, CPU_CAPS, START, SUITE, budget_s=budget_s, measure=fake, knobs=knobs, clock=fake.clock,
                fits=kw.pop("fits", lambda s: None), **kw)


def test_a_real_improvement_is_found_with_its_interval_and_the_baseline_once() -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))  # start 70, draft max 8: 140
    plans: list[TunePlan] = []
    progress: list[tuple[int, int]] = []
    result = run(fake, [draft_max_knob(8, 4, 2)], on_plan=lambda p: plans.append(replace(p)),
                 on_progress=lambda d, t, _l: progress.append((d, t)))
    # the baseline, the start, three candidates, then the start and the winner again (the confirmation)
    assert [m for _s, m in fake.calls] == [Mode.BASELINE] + [Mode.DFLASH] * 6
    assert [s.draft_n_max for s, _m in fake.calls[-2:]] == [1, 8]
    assert fake.calls[0][0].spec_mode == Mode.BASELINE  # the baseline is a server without speculation
    assert result.improved and result.best is not None and result.best.changes == {"draft_n_max": 8}
    assert result.best_settings is not None and result.best_settings.draft_n_max == 8
    assert result.best_vs_start is not None and result.best_vs_start.ci_low > 1.9
    assert result.best.vs_baseline is not None and result.best.vs_baseline.ratio == pytest.approx(140 / 50)
    assert "Best: draft_n_max=8" in result.verdict and "2.00x the start (95 % CI " in result.verdict
    assert "6 runs of 2 prompts), both measured twice;" in result.verdict
    assert [p.role for p in result.points] == [BASELINE_ROLE, START_ROLE] + [CANDIDATE_ROLE] * 3 + [CONFIRM_ROLE] * 2
    assert result.confirmed is True and result.points[-1].label == "draft_n_max=8 (again)"
    assert result.points[-2].label == "start (again)"
    assert result.tried == 3 and result.elapsed_s == 70.0
    # The plan is shown before anything runs, then again with the time per point from the first measurement.
    assert plans[0].point_s is None and plans[0].candidates == 3 and "estimated from the first" in plans[0].describe()
    assert plans[1].point_s == 10.0 and plans[1].est_total_s == 70.0 and "About 10 s per point" in plans[1].describe()
    assert "the start and the winner are measured again (2 more runs)" in plans[0].describe()
    assert progress[-1] == (7, 7)


def test_a_difference_inside_the_noise_is_not_a_win() -> None:
    # Every candidate is 1-2 % faster than the start, with the same +-3 % spread: not a win.
    fake = FakeBench(lambda s: 100.0 if s.draft_n_max == 1 else 100.0 + (s.draft_n_max or 0) / 4)
    result = run(fake, [draft_max_knob(2, 4, 8)])
    assert not result.improved and result.best is result.start
    assert result.best_vs_start is None and not any(p.accepted for p in result.points[2:])
    assert "No configuration beat the start measurably" in result.verdict
    assert "draft_n_max=8, ran at 1.02x the start" in result.verdict  # names the closest, with its interval
    top = result.points[-1].vs_start
    assert top is not None and top.ci_low < 1.02  # honest: the interval reaches into the noise


def test_a_steady_gain_below_the_minimum_is_not_a_win() -> None:
    # 1 % better on a perfectly quiet machine: the interval is 1.01-1.01, a real but too small gain
    fake = FakeBench(lambda s: 101.0 if s.draft_n_max == 8 else 100.0, noise=(1.0, 1.0, 1.0))
    assert not run(fake, [draft_max_knob(8)]).improved
    assert run(fake, [draft_max_knob(8)], min_gain=0.0).improved  # the threshold is what decided


def test_a_win_from_load_drift_is_not_confirmed_when_measured_again() -> None:
    # The machine runs 30 % faster while the one candidate is measured (fake time 20-30 s), not because
    # of its setting: measured again after the search, start and candidate run alike.
    holder: list[FakeBench] = []
    fake = FakeBench(lambda s: 70.0 * (1.3 if holder[0].now == 30.0 else 1.0))
    holder.append(fake)
    result = run(fake, [draft_max_knob(8)])
    candidate = result.points[2]
    assert candidate.accepted and candidate.vs_start is not None and candidate.vs_start.ci_low > 1.2
    assert [p.role for p in result.points[-2:]] == [CONFIRM_ROLE, CONFIRM_ROLE]
    assert result.confirmed is False and not result.improved and result.best is result.start
    assert "No configuration beat the start measurably" in result.verdict
    assert any("first ran at 1.30x the start" in n and "no longer clear the noise" in n for n in result.notes)


def test_the_budget_stops_the_search_and_says_what_was_left() -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    result = run(fake, [draft_max_knob(2, 4, 8, 12, 15)], budget_s=75.0)
    # 10 s per point; a candidate starts only with room for itself and the two confirmation points:
    # baseline + start + three candidates (ending at 50 s), the fourth would need 50 + 30 > 75
    # The fake accepts every draft, so the deep end goes first (tune_knobs.order_draft_max).
    assert [s.draft_n_max for s, _m in fake.calls] == [1, 1, 15, 12, 8, 1, 15] and result.elapsed_s == 70.0
    assert any("budget (75 s) ran out: 2 of the 5 values to try were not tried" in n for n in result.notes)
    assert result.improved and result.confirmed and result.best is not None and result.best.changes == {"draft_n_max": 15}


def test_a_win_without_room_to_confirm_it_is_an_unconfirmed_win_that_can_be_saved() -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    fake.on_call = lambda n: setattr(fake, "cost", 40.0) if n == 3 else None  # the candidate is slow to measure
    result = run(fake, [draft_max_knob(8)], budget_s=75.0)
    assert len(fake.calls) == 3 and result.elapsed_s == 60.0  # two more 20 s points would end at 100 s
    assert not result.improved and result.confirmed is None and result.unconfirmed and result.savable
    assert result.best is not None and result.best.changes == {"draft_n_max": 8}
    assert "Unconfirmed win: draft_n_max=8" in result.verdict and "run again to confirm" in result.verdict
    assert "no room to measure it a second time" in result.verdict


def test_cancel_stops_the_search_and_keeps_what_was_measured() -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    cancel = threading.Event()
    fake.on_call = lambda n: cancel.set() if n == 3 else None  # the first candidate is being measured
    result = run(fake, [draft_max_knob(8, 4, 2)], cancel_event=cancel)
    assert len(fake.calls) == 3 and result.cancelled
    assert any("cancelled" in n for n in result.notes)
    # the candidate that was measured while cancel was pressed still counts, unconfirmed; nothing after it ran
    assert result.best is not None and result.best.changes == {"draft_n_max": 8}
    assert result.unconfirmed and result.savable and not result.improved
    assert "cancelled before it was measured a second time: run again to confirm" in result.verdict


def test_points_that_do_not_fit_are_skipped_without_a_server() -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    result = run(fake, [draft_max_knob(15, 8, 4)],
                 fits=lambda s: "CUDA0 would have -300 MiB left" if (s.draft_n_max or 0) > 8 else None)
    assert [s.draft_n_max for s, _m in fake.calls] == [1, 1, 8, 4, 1, 8]
    skipped = result.points[2]
    assert skipped.status == NO_FIT and "-300 MiB" in skipped.reason and skipped.gen_tps is None
    assert result.best is not None and result.best.changes == {"draft_n_max": 8} and result.tried == 2


def test_a_point_whose_text_differs_at_temperature_zero_is_rejected() -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0),
                     text=lambda s: "def f(): return 1" if s.draft_n_max == 8 else "def f(): pass")
    result = run(fake, [draft_max_knob(8, 4)])
    rejected = result.points[2]
    assert rejected.status == TEXT_DIFFERS and rejected.identical == 0 and rejected.compared == 6
    assert "differs from the baseline's in 6 of 6" in rejected.reason
    assert result.best is not None and result.best.changes == {"draft_n_max": 4}  # the fastest identical one
    # At temperature > 0 the texts may differ: the check is off and the result says so.
    warm = tune(None, CPU_CAPS, START, SUITE.with_overrides(temperature=0.7), budget_s=1000, measure=fake,
                knobs=[draft_max_knob(8, 4)], clock=fake.clock, fits=lambda s: None)
    assert warm.best is not None and warm.best.changes == {"draft_n_max": 8}
    assert any("identity was not checked" in n for n in warm.notes)


def test_a_failed_baseline_stops_with_the_reason() -> None:
    def broken(settings: LaunchSettings, mode: Mode, status: Callable[[str], None]) -> BenchReport:
        report = BenchReport(SUITE, [Variant(mode)], 3, 1)
        report.errors.append("The baseline server did not start: out of memory")
        return report

    result = tune(None, CPU_CAPS, START, SUITE, budget_s=100, measure=broken, knobs=[draft_max_knob(8)],
                  fits=lambda s: None)
    assert result.points[0].status == FAILED and result.best is None and not result.improved
    assert "could not be measured (The baseline server did not start: out of memory)" in result.verdict


def test_bad_arguments_are_refused_before_anything_runs() -> None:
    fake = FakeBench(lambda s: 1.0)
    with pytest.raises(BenchError, match="budget must be positive"):
        run(fake, [], budget_s=0)
    with pytest.raises(BenchError, match="at least 3 repetitions"):
        run(fake, [], reps=2)  # two runs give no interval, so no win could ever be called
    assert not fake.calls


def test_exported_table_json_and_csv(tmp_path: Path) -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    result = run(fake, [draft_max_knob(8, 4)], fits=lambda s: "no room" if s.draft_n_max == 4 else None)
    files = write_tune_reports(result, tmp_path)
    assert [f.name for f in files] == ["tune.md", "tune.json", "tune.csv"]
    data = json.loads(files[1].read_text())
    assert data["kind"] == "beedeck-tune" and data["schema"] == 1 and data["improved"] is True
    assert data["best_settings"]["draft_n_max"] == 8 and data["best_index"] == 2
    assert [p["status"] for p in data["points"]] == [MEASURED, MEASURED, MEASURED, NO_FIT, MEASURED, MEASURED]
    assert data["confirmed"] is True
    assert len(data["points"][2]["samples"]) == 6 and data["points"][2]["vs_start"]["ci_low"] > 1
    rows = list(csv.DictReader(io.StringIO(files[2].read_text())))
    assert len(rows) == 6 and rows[2]["best"] == "1" and rows[2]["changes"] == "draft_n_max=8"
    assert rows[-1]["role"] == "confirm" and rows[-1]["best"] == "0"
    assert float(rows[2]["speedup_vs_baseline"]) == pytest.approx(2.8, abs=0.01)
    md = files[0].read_text()
    assert result.verdict in md and "| 3 | draft_n_max=8 | measured (best)" in md
    table = format_table(result)
    assert "draft_n_max=8" in table and "does not fit" in table
    assert result_dict(result)["plan"]["candidates"] == 2


def test_suite_from_chat_takes_the_last_user_prompts() -> None:
    class M:
        def __init__(self, role: str, content: str) -> None:
            self.role, self.content = role, content

    msgs = [M("user", "one"), M("assistant", "a"), M("user", "two"), M("user", "  "), M("user", "three")]
    suite = suite_from_chat(msgs, 2, "my chat")
    assert [p.text for p in suite.prompts] == ["two", "three"] and suite.temperature == 0.0
    assert suite.name == "chat: my chat" and suite.prompts[0].id == "chat-1"
    with pytest.raises(BenchError, match="no prompts of yours"):
        suite_from_chat([M("assistant", "a")], 3, "empty")


# ----------------------------------------------------------------------------- knobs


def test_knobs_on_a_cpu_engine_are_draft_max_and_threads() -> None:
    caps = caps_from_texts("/e/llama-server", "version: 11434 (abc)", help_stdout(MAINLINE))
    caps = replace(caps, gpu_backend="cpu")
    start = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, draft_n_max=15,
                           extra_args=["--threads", "1"])
    knobs = {k.name: k for k in knobs_for(caps, start, files=[], cpu_cores=4, draft_block=16)}
    assert list(knobs) == ["draft_n_max", "threads"]
    assert knobs["draft_n_max"].values == (7, 3, 11, 2, 1) and 15 not in knobs["draft_n_max"].values
    assert knobs["threads"].current == 1 and knobs["threads"].values == (4, 3, 2)
    two = knobs["threads"].apply(start, 2)
    assert threads_in(two) == 2 and two.extra_args == []  # the field replaces the extra flag, no duplicate
    argv = build_argv(two, caps).argv
    flags = [i for i, a in enumerate(argv) if a in ("-t", "--threads")]
    assert len(flags) == 1 and argv[flags[0] + 1] == "2"
    # Without speculation only the non-speculative knobs remain.
    assert [k.name for k in knobs_for(caps, replace(start, spec_mode=Mode.BASELINE), files=[], cpu_cores=4)] == ["threads"]


def test_knobs_on_beellama_gen_a_gpu_add_cross_ctx_ubatch_kv_and_the_controller() -> None:
    caps = caps_from_texts("/e/llama-server", "version: 1 (abc)", help_stdout(BEE_A))
    caps = replace(caps, gpu_backend="cuda")
    assert caps.generation == Generation.BEE_A
    start = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, draft_n_max=8,
                           dflash_cross_ctx=1024)
    knobs = {k.name: k for k in knobs_for(caps, start, files=[])}
    assert list(knobs) == ["draft_n_max", "adaptive", "dflash_cross_ctx", "ubatch_size", "kv"]
    assert knobs["dflash_cross_ctx"].values == (512, 2048)
    # unset is the engine's default (512, read from its --help): it is not measured again as "512"
    unset = {k.name: k for k in knobs_for(caps, replace(start, dflash_cross_ctx=None), files=[])}
    assert unset["dflash_cross_ctx"].current is None and unset["dflash_cross_ctx"].values == (1024, 2048)
    assert ("f16", "f16") not in knobs["kv"].values and ("q8_0", "q8_0") in knobs["kv"].values
    off = knobs["adaptive"].apply(start, "off")
    assert off.extra_args == ["--no-spec-dm-adaptive"] and "--no-spec-dm-adaptive" in build_argv(off, caps).argv
    assert knobs["adaptive"].apply(off, "default").extra_args == []
    bee_b = replace(caps_from_texts("/e/llama-server", "version: 1 (abc)", help_stdout(BEE_B)), gpu_backend="cpu")
    adaptive = next(k for k in knobs_for(bee_b, start, files=[], cpu_cores=2) if k.name == "adaptive")
    assert adaptive.apply(start, "off").extra_args == ["--spec-dm-controller", "off"]
    ub = knobs["ubatch_size"].apply(replace(start, batch_size=128), 256)
    assert (ub.batch_size, ub.ubatch_size) == (256, 256) and not ub.check()


def test_draft_siblings_are_the_other_quants_on_disk(tmp_path: Path) -> None:
    names = ["gemma-dflash-Q5_K_M.gguf", "gemma-dflash-Q4_K_M.gguf", "gemma-dflash-Q8_0.gguf",
             "other-dflash-Q4_K_M.gguf", "gemma-target-Q4_K_M.gguf"]
    for n in names:
        (tmp_path / n).write_bytes(b"not a gguf")
    found = draft_siblings(tmp_path / names[0])
    assert [p.name for p in found] == ["gemma-dflash-Q8_0.gguf", "gemma-dflash-Q4_K_M.gguf"]
    assert quant_of("x-IQ4_XS-00001-of-00002.gguf") == "IQ4_XS" and quant_of("plain.gguf") is None
    caps = replace(CPU_CAPS, flags=frozenset())
    knob = next(k for k in knobs_for(caps, replace(START, draft=str(tmp_path / names[0])), cpu_cores=1)
                if k.name == "draft")
    assert knob.memory and knob.to_dict()["values"] == ["gemma-dflash-Q8_0.gguf", "gemma-dflash-Q4_K_M.gguf"]


def test_planner_fit_uses_the_host_on_a_cpu_engine_and_vram_on_a_gpu() -> None:
    from tests.fixtures.synth_gguf import synthetic_pair

    target, draft = synthetic_pair(PERSISTENT / "synth")
    s = LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, ctx_size=4096)
    assert planner_fit(CPU_CAPS, None, 64 << 30)(s) is None
    tight = planner_fit(CPU_CAPS, None, 1 << 20)(s)
    assert tight is not None and "MiB of RAM" in tight
    gpu = replace(CPU_CAPS, gpu_backend="cuda")
    assert planner_fit(gpu, [24 << 30], None)(s) is None
    small = planner_fit(gpu, [512 << 20], None)(s)
    assert small is not None and "the planner keeps 1 GiB free" in small


def test_the_bootstrap_the_search_relies_on_separates_noise_from_a_shift() -> None:
    same = Evidence({"a": [100 * k for k in NOISE]})
    noise = compare(same, Evidence({"a": [101 * k for k in NOISE]}))
    assert noise.ci_low is not None and noise.ci_high is not None and noise.ci_low < 1.0 < noise.ci_high
    win = compare(same, Evidence({"a": [110 * k for k in NOISE]}))
    assert win.above(1.02)


@pytest.mark.parametrize(("accept", "order"), [(1.0, [15, 12, 8, 4, 2]), (0.0, [2, 4, 8, 12, 15]),
                                                (0.3, [8, 2, 15, 4, 12])])
def test_the_start_acceptance_says_which_end_of_the_draft_max_goes_first(accept: float, order: list[int]) -> None:
    """The GPU run's two ends (docs/gpu-runs/2026-12-02-h200-standby): all drafts accepted, a deeper draft max
    was faster all the way to 16; none accepted, every drafted token cost. In between: the knob's own order."""
    fake = FakeBench(lambda s: 60.0 + (s.draft_n_max or 0), accept=accept)
    plans: list[TunePlan] = []
    run(fake, [draft_max_knob(8, 2, 15, 4, 12)], on_plan=lambda p: plans.append(replace(p)))
    assert [s.draft_n_max for s, _m in fake.calls][2:7] == order
    assert list(plans[-1].knobs[0].values) == order  # the plan the view shows says the same order


def _threads_measure(cut_after: int | None) -> Callable[[LaunchSettings, str, Callable[[str], None]], BenchReport]:
    """The starter's case (issue 37): threads=2 at 93.1 against 53.9 tok/s, the search cancelled while that
    point was measured; ``cut_after``: how many replies it finished before the cancel (None: all)."""

    def measure(settings: LaunchSettings, mode: Mode, status: Callable[[str], None]) -> BenchReport:
        report = BenchReport(SUITE, [Variant(mode)], len(NOISE), 1)
        speed = 93.1 if settings.threads == 2 else 53.9
        replies = [(rep, k, p) for rep, k in enumerate(NOISE) for p in SUITE.prompts]
        if settings.threads == 2:
            report.cancelled = True
            replies = replies[:cut_after]
        for rep, k, p in replies:
            report.samples.append(Sample(Variant(mode), p.id, rep, 42 + rep, completion_tokens=32, gen_tps=speed * k,
                                         text="def f(): pass"))
        return report

    return measure


def _tune_threads(cut_after: int | None) -> TuneResult:
    start = LaunchSettings(target="/m/starter.gguf", threads=1)  # the starter: no speculation, start = baseline
    knob = Knob("threads", "Threads", 1, (2,), lambda s, v: replace(s, threads=v))
    return tune(None, CPU_CAPS, start, SUITE, budget_s=1000, measure=_threads_measure(cut_after), knobs=[knob],
                fits=lambda s: None)


def test_a_cancelled_candidate_far_ahead_is_an_unconfirmed_win_not_keep_the_start() -> None:
    """Issue 37: "No configuration beat the start measurably… keep the start" beside a cancelled row of
    threads=2 at 1.73x (1.71-1.75). The verdict now says what the row says, and the win can be saved."""
    result = _tune_threads(cut_after=None)
    row = result.points[-1]
    assert row.status == "cancelled" and row.vs_start is not None and row.vs_start.above(1.6)
    assert "keep the start" not in result.verdict
    assert "Unconfirmed win: threads=2, 93.1 tok/s" in result.verdict and "1.73x the start" in result.verdict
    assert "the cancel cut its measurement short" in result.verdict and "run again to confirm" in result.verdict
    assert result.savable and not result.improved and result.best is row and result.best_settings is not None
    assert result.best_settings.threads == 2
    assert any("threads=2 cut short" in n for n in result.notes)  # what the cancel left unmeasured


def test_a_candidate_cut_short_after_one_run_gets_no_ratio_and_the_verdict_says_so() -> None:
    result = _tune_threads(cut_after=2)  # one run of each prompt before the cancel
    row = result.points[-1]
    assert row.vs_start is not None and not row.vs_start.shown and row.vs_start.why_not == "one run: no interval"
    # the row says so in both ratio columns (the start is the baseline here): no interval from one run
    assert format_table(result).splitlines()[-1].count("one run: no interval") == 2
    assert "keep the start" in result.verdict and not result.savable
    assert "threads=2 was cut short by the cancel (2 of 6 replies measured; one run: no interval): run again to " \
           "measure it." in result.verdict


def test_a_start_that_drafted_nothing_has_no_speed_up_over_the_baseline() -> None:
    """The dock's case in tune's table: N-gram on the starter drafted no token, so its speed is no speed-up."""
    fake = FakeBench(lambda s: 52.0 if s.draft_n_max == 1 else 51.0)

    def measure(settings: LaunchSettings, mode: Mode, status: Callable[[str], None]) -> BenchReport:
        report = fake(settings, mode, status)
        for s in report.samples:
            s.draft_n = s.draft_n_accepted = 0
        return report

    result = tune(None, CPU_CAPS, START, SUITE, budget_s=1000, measure=measure, knobs=[draft_max_knob(8)],
                  clock=fake.clock, fits=lambda s: None)
    assert result.start is not None and result.start.vs_baseline is not None
    assert result.start.vs_baseline.text() == "drafted nothing" and "no ratio to the baseline (drafted nothing)" in \
        result.verdict
    assert result.start.vs_start is None and result.points[2].vs_start is not None  # knob vs start: a comparison
