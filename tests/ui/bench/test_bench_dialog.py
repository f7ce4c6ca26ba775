"""The Benchmark dialog over a session (tests/ui/bench/hosts.py) and a parent widget: a finished run teaches the
learnt workload advice (off the GUI thread), and a server BeeDeck did not start is only benchmarked
as it runs (no "stop and compare", which would probe its URL as an engine binary)."""

from __future__ import annotations

from typing import Any

from pytestqt.qtbot import QtBot

from beedeck.core.bench.results import BenchReport, Sample
from beedeck.core.bench.suites import BenchPrompt, BenchSuite
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.advice import CODE, PROSE, WorkloadAdvice, setup_key
from beedeck.core.profile import Profile, remote_profile
from beedeck.ui.bench.bench_dialog import BenchDialog
from tests.core.bench.tune.test_search import CPU_CAPS, START
from tests.ui.bench.hosts import ENGINE, make_host

URL = "http://127.0.0.1:9"
SUITE = BenchSuite("mixed", (BenchPrompt("c", "Write a Python function that sorts."),
                             BenchPrompt("p", "Tell me a story about the sea at dusk.")), max_tokens=8)


def _report() -> BenchReport:
    report = BenchReport(SUITE, [Variant(Mode.BASELINE), Variant(Mode.DFLASH)], 3, 0)
    for rep in range(3):
        for mode, code_tps, prose_tps in ((Variant(Mode.BASELINE), 50.0, 50.0), (Variant(Mode.DFLASH), 120.0, 40.0)):
            drafted = 0 if mode == Variant(Mode.BASELINE) else 20
            report.samples.append(Sample(mode, "c", rep, 42, gen_tps=code_tps + rep, draft_n=drafted))
            report.samples.append(Sample(mode, "p", rep, 42, gen_tps=prose_tps + rep, draft_n=drafted))
    return report


def test_a_finished_run_teaches_the_learnt_advice(qtbot: QtBot, tmp_path: Any) -> None:
    advice = WorkloadAdvice(tmp_path / "advice.json")
    host = make_host(qtbot, Profile(ENGINE, START, "mine"), advice)
    dialog = BenchDialog(host, host.widget)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.view.run_button.isEnabled(), timeout=10_000)  # probed in the background
    assert host.probed == [ENGINE]
    dialog.view.run_finished.emit(_report())
    key = setup_key(CPU_CAPS, START)
    qtbot.waitUntil(lambda: advice.best_mode(key, CODE) == Mode.DFLASH, timeout=10_000)  # learnt in the background
    assert advice.best_mode(key, PROSE) == Mode.BASELINE
    assert host.guard.comparison(Mode.DFLASH, CODE) is not None  # the session's benchmark evidence too
    dialog.reject()


def test_a_failed_run_teaches_nothing_and_raises_nothing(qtbot: QtBot, tmp_path: Any) -> None:
    """The view reports a failed run as None (and shows why): the dialog read report.suite and raised."""
    advice = WorkloadAdvice(tmp_path / "advice.json")
    host = make_host(qtbot, Profile(ENGINE, START, "mine"), advice)
    dialog = BenchDialog(host, host.widget)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.view.run_button.isEnabled(), timeout=10_000)
    dialog.view.run_finished.emit(None)
    assert advice.setups() == [] and host.guard.comparison(Variant(Mode.DFLASH), CODE) is None
    dialog.reject()


def test_a_remote_server_is_benchmarked_as_it_runs_without_stop_and_compare(qtbot: QtBot) -> None:
    host = make_host(qtbot, remote_profile(URL))
    c = host.server
    c.engine, c.settings, c.base_url, c.state = URL, LaunchSettings(), URL, ServerState.READY
    dialog = BenchDialog(host, host.widget)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.compare_button.isHidden() and "did not start" in dialog.note.text()
    assert "cannot restart it in other modes" in dialog.note.text()
    assert dialog.view.run_button.isEnabled() and dialog.view.selected_modes() == [Mode.BASELINE]
    assert host.probed == [] and c.calls == []
    dialog.reject()


def test_a_remote_profile_not_connected_is_never_probed_as_an_engine(qtbot: QtBot) -> None:
    host = make_host(qtbot, remote_profile(URL))
    dialog = BenchDialog(host, host.widget)
    qtbot.addWidget(dialog)
    dialog.configure()  # what "stop and compare" would have led to
    assert host.probed == [] and not dialog.view.run_button.isEnabled()
    assert "connect to it" in dialog.note.text() and dialog.compare_button.isHidden()
    dialog.reject()


def test_a_finished_run_gives_the_speed_panel_each_modes_median(qtbot: QtBot) -> None:
    """The issue: the gauge's "Baseline — · DFlash —" never showed benchmark results."""
    from beedeck.ui.gauge.speed_gauge import SpeedPanel

    host = make_host(qtbot, Profile(ENGINE, START, "mine"))
    speed = SpeedPanel(figures=host.figures)  # the window's panel, on the session's figures
    host.figures_changed.connect(speed.show_figures)
    qtbot.addWidget(speed)
    dialog = BenchDialog(host, host.widget)
    qtbot.addWidget(dialog)
    dialog.view.run_finished.emit(_report())
    lines = speed.compare.text().splitlines()
    # medians over both prompts and 3 reps: baseline 50-52 -> 51, DFlash 40-42 and 120-122 -> 81
    assert lines[:2] == ["Baseline 51.0 tok/s (benchmark)", "DFlash 81.0 tok/s (benchmark)"]
    # its speed-up as the rule gave it: like for like (the same prompts), with the interval and the runs
    assert lines[2].startswith("  vs Baseline: ×1.59 (") and lines[2].endswith(", 3 runs of 2 prompts); benchmark")
    dialog.reject()
