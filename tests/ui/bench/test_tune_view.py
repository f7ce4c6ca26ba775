"""The Tune view: the search on its worker thread with a fake measurement at the core seam (live
points, verdict, Save as profile, export, cancel, the chat prompt source and its consent), and one
real search on the mainline starter engine with the synthetic sticky pair."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage
from pytestqt.qtbot import QtBot

from beedeck.core.bench.suites import BenchError, BenchPrompt, BenchSuite
from beedeck.core.bench.tune import TuneResult, tune
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.ui.bench.tune_view import CHAT_SOURCE, TuneView
from tests.core.bench.tune.test_search import CPU_CAPS, START, SUITE, FakeBench, draft_max_knob


def fake_tune(fake: FakeBench, *values: int) -> Callable[..., TuneResult]:
    """The real search over a fake measurement (no server), wall clock and all."""
    return functools.partial(tune, measure=fake, fits=lambda s: None, knobs=[draft_max_knob(*values)])


def make_view(qtbot: QtBot, fn: Callable[..., TuneResult]) -> TuneView:
    view = TuneView(tune_fn=fn)
    qtbot.addWidget(view)
    view.set_launch(Path("/e/llama-server"), CPU_CAPS, START)
    view.set_suite(SUITE)
    return view


def test_a_search_runs_live_and_its_best_can_be_saved_and_exported(qtbot: QtBot, tmp_path: Path) -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    view = make_view(qtbot, fake_tune(fake, 8, 4))
    seen_rows: list[int] = []
    view.chart.update = lambda *a: seen_rows.append(len(view.chart.dots))  # type: ignore[method-assign]
    assert view.start_button.isEnabled() and "Budget 10 minutes" in view.budget_note.text()
    with qtbot.waitSignal(view.run_started), qtbot.waitSignal(view.run_finished, timeout=20_000) as done:
        view.start_button.click()
        assert view.running and view.cancel_button.isEnabled() and not view.start_button.isEnabled()
    result = done.args[0]
    assert isinstance(result, TuneResult) and result.improved
    assert not view.running and view.start_button.isEnabled() and not view.cancel_button.isEnabled()
    # live: the chart grew point by point (the baseline is a reference line, not a dot)
    assert seen_rows[:4] == [0, 0, 1, 2] and [d.kind for d in view.chart.dots] == ["kept", "best", "candidate", "again", "again"]
    assert view.table.rowCount() == 6 and view.table.item(2, 1).text() == "draft_n_max=8"
    assert view.table.item(5, 1).text() == "draft_n_max=8 (again)"  # the winner measured a second time
    assert "measured (best)" in view.table.item(2, 2).text()
    assert "Plan: try 2 values of 1 setting" in view.plan_label.text() and "About" in view.plan_label.text()
    assert "Best: draft_n_max=8" in view.verdict.text() and view.progress.value() == view.progress.maximum()
    assert view.save_profile_button.isEnabled() and view.export_button.isEnabled()
    with qtbot.waitSignal(view.save_requested) as saved:
        view.save_profile_button.click()
    best = saved.args[0]
    assert isinstance(best, LaunchSettings) and best.draft_n_max == 8 and best.draft == START.draft
    files = view.export(tmp_path)
    assert sorted(f.name for f in files) == ["tune.csv", "tune.json", "tune.md", "tune.png"]
    png = QImage(str(tmp_path / "tune.png"))
    assert png.width() == 900 and not png.isNull()
    view.chart.grab()  # paints without error


def test_nothing_better_keeps_save_off_and_says_so(qtbot: QtBot) -> None:
    fake = FakeBench(lambda s: 70.0)  # every draft max runs the same: no winner
    view = make_view(qtbot, fake_tune(fake, 8))
    with qtbot.waitSignal(view.run_finished, timeout=20_000):
        view.start_button.click()
    assert "No configuration beat the start measurably" in view.verdict.text()
    assert not view.save_profile_button.isEnabled() and "profile stays as it is" in view.save_profile_button.toolTip()
    assert view.export_button.isEnabled()


def test_an_unconfirmed_win_is_said_as_such_and_can_still_be_saved(qtbot: QtBot) -> None:
    """Issue 37: a cancelled threads=2 row at 1.73x stood beside "keep the start", and nothing could be saved."""
    from tests.core.bench.tune.test_search import _tune_threads

    view = make_view(qtbot, fake_tune(FakeBench(lambda s: 70.0), 8))
    view.show_result(_tune_threads(cut_after=None))
    assert "Unconfirmed win: threads=2" in view.verdict.text() and "run again to confirm" in view.verdict.text()
    assert view.save_profile_button.isEnabled() and "unconfirmed" in view.save_profile_button.toolTip()
    with qtbot.waitSignal(view.save_requested) as saved:
        view.save_profile_button.click()
    assert isinstance(saved.args[0], LaunchSettings) and saved.args[0].threads == 2


def test_cancel_stops_the_search_and_keeps_the_points_measured(qtbot: QtBot) -> None:
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    reached = threading.Event()
    view = make_view(qtbot, fake_tune(fake, 8, 4, 2))

    def on_call(n: int) -> None:
        if n == 3:  # the first candidate is being measured when the user clicks Cancel
            reached.set()
            deadline = time.monotonic() + 10
            while not view._cancel.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)

    fake.on_call = on_call
    with qtbot.waitSignal(view.run_finished, timeout=20_000) as done:
        view.start_button.click()
        qtbot.waitUntil(reached.is_set, timeout=10_000)
        view.cancel_button.click()
        assert "points measured so far are kept" in view.status.text() and not view.cancel_button.isEnabled()
    result = done.args[0]
    assert result.cancelled and len(fake.calls) == 3 and view.table.rowCount() == 3
    assert view.status.text().startswith("Search cancelled") and "cancelled" in view.verdict.text()
    # The issue: Cancel jumped the bar to 100 %. It stays at the points measured (3 of 7 planned).
    assert view.progress.maximum() == 7 and view.progress.value() == 3


def test_a_budget_too_small_for_one_candidate_is_refused_before_start(qtbot: QtBot) -> None:
    """The issue: 2 minutes on the starter was accepted and then "allows about 0 candidates". With a
    known speed the view works out a point's time and refuses a budget that leaves no candidate."""
    from beedeck.core.starter import STARTER_MODEL_NAME, STARTER_TOKENS_PER_S

    view = TuneView()
    qtbot.addWidget(view)
    starter = LaunchSettings(target=f"/m/{STARTER_MODEL_NAME}", threads=1)
    view.set_launch(Path("/e/llama-server"), CPU_CAPS, starter)  # the starter: its own measured speed
    view.budget_box.setCurrentIndex(0)  # 2 minutes
    minimum = view.min_budget_s()
    assert minimum is not None and minimum > 120
    assert not view.start_button.isEnabled()
    note = view.budget_note.text()
    assert "too small for one candidate" in note and f"{STARTER_TOKENS_PER_S:.0f} tokens/s" in note
    assert "needs at least" in note
    view.budget_box.setCurrentIndex(view.budget_box.count() - 1)  # 1 hour
    assert view.start_button.isEnabled() and "too small" not in view.budget_note.text()
    view.budget_box.setCurrentIndex(0)
    view.set_launch(Path("/e/llama-server"), CPU_CAPS, START, tokens_per_s=5000.0)  # a fast GPU figure
    assert view.start_button.isEnabled()
    view.set_launch(Path("/e/llama-server"), CPU_CAPS, START)  # no speed known: nothing to refuse on
    assert view.min_budget_s() is None and view.start_button.isEnabled()


def test_a_waiting_reason_replaces_no_engine_set_up(qtbot: QtBot) -> None:
    """The issue: Tune said "No engine and model are set up yet" while the starter ran."""
    view = TuneView()
    qtbot.addWidget(view)
    view.set_waiting("Stop the chat server first (the button above).")
    assert not view.start_button.isEnabled() and view.budget_note.text() == "Stop the chat server first (the button above)."
    assert "No engine" not in view.budget_note.text()


def test_a_search_that_cannot_start_says_why(qtbot: QtBot) -> None:
    def refuse(**kwargs: Any) -> TuneResult:
        raise BenchError("The time budget must be positive, not 0 s: use e.g. 10m.")

    view = make_view(qtbot, refuse)
    with qtbot.waitSignal(view.run_finished, timeout=10_000) as done:
        view.start_button.click()
    assert done.args[0] is None and "budget must be positive" in view.status.text()
    assert view.start_button.isEnabled()


def test_without_an_engine_start_is_off_with_the_reason(qtbot: QtBot) -> None:
    view = TuneView()
    qtbot.addWidget(view)
    assert not view.start_button.isEnabled() and "open Settings or the setup wizard" in view.budget_note.text()


def test_the_chat_source_needs_a_conversation_and_consent(qtbot: QtBot, store: ChatStore) -> None:
    view = TuneView()
    qtbot.addWidget(view)
    view.set_launch(Path("/e/llama-server"), CPU_CAPS, START)
    view.set_chat_source(lambda: [], store.messages)
    view.source_box.setCurrentIndex(view.source_box.findData(CHAT_SOURCE))
    assert not view.start_button.isEnabled() and "no conversation to take prompts from" in view.budget_note.text()
    conv = store.create_conversation("Deck work")
    for text in ("Write a Python deck shuffler.", "Now add type hints.", "And tests."):
        store.add_message(conv.id, "user", text)
        store.add_message(conv.id, "assistant", "ok")
    view.set_chat_source(lambda: [(c.id, c.title) for c in store.list_conversations()], store.messages)
    view.show()
    assert view.chat_box.isVisible() and view.chat_consent.isVisible()
    assert not view.start_button.isEnabled() and "Tick the box" in view.budget_note.text()
    with pytest.raises(BenchError, match="allow its prompts"):
        view.build_suite()
    view.chat_consent.setChecked(True)
    view.last_n.setValue(2)
    assert view.start_button.isEnabled()
    suite = view.build_suite()
    assert [p.text for p in suite.prompts] == ["Now add type hints.", "And tests."] and suite.temperature == 0
    assert suite.source == f"chat:{conv.id}"
    view.source_box.setCurrentIndex(0)  # back to a suite: no consent needed, the chat controls hide
    assert view.start_button.isEnabled() and not view.chat_box.isVisible()
    assert view.build_suite().source.startswith("builtin:")


@pytest.mark.engine
@pytest.mark.timeout(240)
def test_a_real_search_on_the_starter_engine_beats_a_poor_start(
    qtbot: QtBot, starter_engine_path: Path, tmp_path: Path,
) -> None:
    from beedeck.clicmd.bench import synthetic_bench_pair, synthetic_settings
    from beedeck.core.bench.tune.knobs import Knob
    from beedeck.core.engine.probe import probe_engine
    from tests.conftest import PERSISTENT

    target, draft = synthetic_bench_pair(PERSISTENT / "synth-bench")
    start = replace(synthetic_settings(target, draft), spec_mode=Mode.DFLASH, draft_n_max=1)
    caps = probe_engine(str(starter_engine_path))
    knob = Knob("draft_n_max", "Draft max", 1, (15,), _with_draft_max)  # one candidate: a lean real run
    view = TuneView(tune_fn=functools.partial(tune, knobs=[knob]))
    qtbot.addWidget(view)
    view.set_launch(starter_engine_path, caps, start)
    view.set_suite(BenchSuite("one", (BenchPrompt("py", "Write python code for the deck."),), max_tokens=64,
                              temperature=0.0, seed=7))
    view.reps.setValue(2)
    with qtbot.waitSignal(view.run_finished, timeout=200_000) as done:
        view.start_button.click()
    result = done.args[0]
    assert isinstance(result, TuneResult), view.status.text()
    print(result.verdict)
    assert [p.role for p in result.points] == ["baseline", "start", "candidate", "confirm", "confirm"]
    assert result.improved, result.verdict
    best = result.best
    assert best is not None and best.settings.draft_n_max == 15 and best.identical == best.compared > 0
    assert result.confirmed and view.save_profile_button.isEnabled() and view.table.rowCount() == 5
    assert len(view.export(tmp_path)) == 4


def _with_draft_max(s: LaunchSettings, value: Any) -> LaunchSettings:
    return replace(s, draft_n_max=int(value))


def _cancelled_threads_search(qtbot: QtBot) -> tuple[TuneView, TuneResult]:
    """Issue 37's Tune on the starter: threads=2 the only candidate, the user's Cancel while it is measured
    (two of its replies in)."""
    from beedeck.core.bench.tune.knobs import Knob
    from tests.core.bench.tune.test_search import _threads_measure

    view: TuneView
    cut = _threads_measure(cut_after=2)

    def measure(settings: LaunchSettings, mode: str, status: Callable[[str], None]) -> Any:
        if settings.threads == 2:
            deadline = time.monotonic() + 10
            while not view._cancel.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
        return cut(settings, mode, status)

    knob = Knob("threads", "Threads", 1, (2,), lambda s, v: replace(s, threads=v))
    view = TuneView(tune_fn=functools.partial(tune, measure=measure, fits=lambda s: None, knobs=[knob]))
    qtbot.addWidget(view)
    view.set_launch(Path("/e/llama-server"), CPU_CAPS, LaunchSettings(target="/m/starter.gguf", threads=1))
    view.set_suite(SUITE)
    with qtbot.waitSignal(view.run_finished, timeout=20_000) as done:
        view.start_button.click()
        qtbot.waitUntil(lambda: view.table.rowCount() == 1, timeout=10_000)  # the baseline measured
        view.cancel_button.click()
    result = done.args[0]
    assert isinstance(result, TuneResult) and result.cancelled and result.points[-1].status == "cancelled"
    return view, result


def test_the_plan_says_what_it_tries_in_words_with_its_counts_in_agreement(qtbot: QtBot) -> None:
    """Issue 37: "Plan: 1 candidate points over 1 knobs"."""
    view, _result = _cancelled_threads_search(qtbot)
    plan = view.plan_label.text()
    assert plan.startswith("Plan: try 1 value of 1 setting (Threads: now 1, try 2) against the baseline; if it wins")
    assert "points over" not in plan and "knobs" not in plan and "1 prompts" not in plan


def test_a_point_the_cancel_cut_short_is_drawn_as_cancelled_not_rejected(qtbot: QtBot) -> None:
    view, _result = _cancelled_threads_search(qtbot)
    assert [d.kind for d in view.chart.dots] == ["cancelled"] and view.chart.dots[0].value is not None
    view.chart.grab()  # its legend names it


def test_a_cancelled_search_s_bar_stays_where_it_stopped_and_says_cancelled(qtbot: QtBot) -> None:
    """Issue 37: the bar stayed at 25 % on Cancel, reading as a search still running."""
    view, _result = _cancelled_threads_search(qtbot)
    assert (view.progress.value(), view.progress.maximum()) == (1, 4)  # 1 of the 4 planned points measured
    assert view.progress.text() == "Cancelled: 1 of 4 points measured"
    view.set_suite(SUITE)  # a new search starts with a plain bar again
    with qtbot.waitSignal(view.run_started):
        view.start_button.click()
    assert view.progress.format() == "%p%" and view.progress.value() == 0
    view.cancel_button.click()
    qtbot.waitUntil(lambda: not view.running, timeout=20_000)


def test_the_time_column_is_named_for_what_it_holds(qtbot: QtBot) -> None:
    """Issue 37: the last column's header was a bare "s"."""
    from beedeck.core.bench.tune.report import COLUMNS

    view, _result = _cancelled_threads_search(qtbot)
    assert COLUMNS[-1] == "time (s)" and view.table.horizontalHeaderItem(len(COLUMNS) - 1).text() == "time (s)"
