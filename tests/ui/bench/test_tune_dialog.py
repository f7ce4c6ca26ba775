"""The Tune dialog over a session (tests/ui/bench/hosts.py) and a parent widget: it stops the chat server before a
search and starts it again on close, hands "Save as profile" on as profile_chosen, teaches the
guard's advice, and offers the user's conversations as prompts."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from beedeck.core.bench.tune import tune
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import CODE, WorkloadAdvice, setup_key
from beedeck.core.profile import Profile
from beedeck.ui.bench.tune_dialog import TuneDialog
from beedeck.ui.bench.tune_view import TuneView
from tests.core.bench.tune.test_search import CPU_CAPS, START, SUITE, FakeBench, draft_max_knob
from tests.ui.bench.hosts import ENGINE, Host, make_host


def make(qtbot: QtBot, advice: WorkloadAdvice | None = None,
         fn: Callable[..., Any] | None = None) -> tuple[Host, TuneView]:
    host = make_host(qtbot, Profile(ENGINE, START, "mine"), advice)
    fake = FakeBench(lambda s: 60.0 + 10 * (s.draft_n_max or 0))
    view = TuneView(tune_fn=fn or functools.partial(tune, measure=fake, fits=lambda s: None,
                                                    knobs=[draft_max_knob(8)]))
    view.set_suite(SUITE)
    return host, view


def test_stops_the_chat_server_tunes_saves_and_restarts_it(qtbot: QtBot, store: ChatStore, tmp_path: Path) -> None:
    advice = WorkloadAdvice(tmp_path / "advice.json")
    host, view = make(qtbot, advice)
    host.server.start(ENGINE, START)  # the chat server is up
    dialog = TuneDialog(host, host.widget, store=store, view=view)
    assert dialog.stop_button.isVisibleTo(dialog) and not view.start_button.isEnabled()
    assert "stop it to tune" in dialog.note.text()
    dialog.stop_button.click()
    assert host.server.calls == ["start", "stop"]
    qtbot.waitUntil(lambda: view.start_button.isEnabled(), timeout=10_000)  # probed off the GUI thread
    assert host.probed == [ENGINE] and host.known_caps[ENGINE] is CPU_CAPS
    assert "tunes the current profile on llama-server" in dialog.note.text()
    with qtbot.waitSignal(view.run_finished, timeout=20_000):
        view.start_button.click()
    key = setup_key(CPU_CAPS, START)
    qtbot.waitUntil(lambda: advice.best_mode(key, CODE) == "dflash", timeout=10_000)  # learnt in the background
    with qtbot.waitSignal(dialog.profile_chosen) as chosen:
        view.save_profile_button.click()
    assert chosen.args[0].draft_n_max == 8
    dialog.reject()
    assert host.server.calls == ["start", "stop", "start"]  # the chat server is back


def test_with_the_server_stopped_it_is_ready_at_once_and_lists_the_chats(qtbot: QtBot, store: ChatStore) -> None:
    conv = store.create_conversation("Deck work")
    store.add_message(conv.id, "user", "Write a Python deck shuffler.")
    host, view = make(qtbot)
    host.known_caps[ENGINE] = CPU_CAPS
    dialog = TuneDialog(host, host.widget, view=view)  # its own store: the same data folder
    assert view.start_button.isEnabled() and not dialog.stop_button.isVisibleTo(dialog) and host.probed == []
    assert view.chat_box.count() == 1 and view.chat_box.itemData(0) == conv.id
    with qtbot.waitSignal(view.run_finished, timeout=20_000):
        view.start_button.click()
    dialog.reject()
    assert host.server.calls == []  # it was not running, so it is not started


def test_without_a_profile_it_says_what_to_do(qtbot: QtBot, store: ChatStore) -> None:
    host, view = make(qtbot)
    host.profile = None
    dialog = TuneDialog(host, host.widget, store=store, view=view)
    assert "open Settings or the setup wizard first" in dialog.note.text() and not view.start_button.isEnabled()
    dialog.reject()


def test_a_remote_profile_is_not_probed_and_says_what_tuning_needs(qtbot: QtBot, store: ChatStore) -> None:
    from beedeck.core.profile import remote_profile

    host, view = make(qtbot)
    host.profile = remote_profile("http://127.0.0.1:9")
    dialog = TuneDialog(host, host.widget, store=store, view=view)
    assert "server BeeDeck did not start" in dialog.note.text() and "Settings" in dialog.note.text()
    assert not view.start_button.isEnabled() and host.probed == []  # its URL is not an engine binary
    dialog.reject()


def test_a_finished_search_gives_the_speed_panel_its_best_figure_and_a_known_speed_sizes_the_budget(
    qtbot: QtBot, store: ChatStore,
) -> None:
    from beedeck.ui.gauge.speed_gauge import SpeedPanel

    host, view = make(qtbot)
    host.known_caps[ENGINE] = CPU_CAPS
    speed = SpeedPanel(figures=host.figures)  # the window's panel, on the session's figures
    host.figures_changed.connect(speed.show_figures)
    qtbot.addWidget(speed)
    speed.record_figure(Mode.DFLASH, 2.0)  # a slow chat figure for this mode
    dialog = TuneDialog(host, host.widget, store=store, view=view)
    assert view.min_budget_s() is not None and not view.start_button.isEnabled()  # 2 tok/s: 10 min is too short
    assert "too small for one candidate" in view.budget_note.text()
    speed.record_figure(Mode.DFLASH, 5000.0)
    dialog.configure()
    assert view.start_button.isEnabled()
    with qtbot.waitSignal(view.run_finished, timeout=20_000) as done:
        view.start_button.click()
    best = done.args[0].best
    assert f"DFlash {best.gen_tps.median:.1f} tok/s" in speed.compare.text()
    assert "(tune)" in speed.compare.text()
    dialog.reject()
