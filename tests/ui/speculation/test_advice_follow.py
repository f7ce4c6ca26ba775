"""The learnt advice in the session (ui/speculation/advice_follow.py, through the window): the guard consults
it for the running setup, and, only when the user opts in, a message goes out in the mode this setup measured
fastest for its kind of prompt (a restart holds the message until the server is ready, then sends it;
nothing is lost)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import WorkloadAdvice, load_advice, prompt_key, setup_key
from beedeck.core.engine.speculation.spec_guard import classify_prompt
from beedeck.core.profile import Profile
from beedeck.core.settings import load_settings
from tests.fakes.sse_server import FakeLlamaServer
from tests.ui.window.test_main_window import make

CAPS = EngineCaps(path="/e/llama-server", generation=Generation.MAINLINE,
                  spec_types=("draft-dflash", "draft-mtp", "ngram-mod"), flags=frozenset({"--spec-type"}))
PROFILE = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)
PROSE = "Write a short, friendly paragraph that welcomes a new colleague to the team."


def _teach(prose_baseline: float, prose_dflash: float) -> None:
    """What a benchmark on this setup found: for prose, baseline vs DFlash (3 figures each)."""
    assert classify_prompt(PROSE) == "prose"
    advice = load_advice()
    key = setup_key(CAPS, PROFILE)
    prompt = prompt_key(PROSE)  # the same prompt in both modes: like for like
    advice.record_many(key, [("prose", Mode.BASELINE, prose_baseline + d, prompt) for d in (0, 1, 2)]
                       + [("prose", Mode.DFLASH, prose_dflash + d, prompt) for d in (0, 1, 2)])


def _window(qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> tuple:  # type: ignore[type-arg]
    w = make(qtbot, store)
    qtbot.waitUntil(lambda: w.session.advice is not None, timeout=5000)  # read off the GUI thread
    w.session.set_profile(Profile("/e/llama-server", PROFILE))
    w.session.controller.caps_known.emit(CAPS)
    restarts: list[LaunchSettings] = []

    def fake_restart(settings: LaunchSettings) -> None:  # a real restart needs a real engine and pair
        restarts.append(settings)
        QTimer.singleShot(200, lambda: w.session.controller.ready.emit(fake_server.base_url))

    w.session.server.restart = fake_restart  # type: ignore[method-assign]
    w.session.controller.ready.emit(fake_server.base_url)
    return w, restarts


def test_following_is_off_by_default_and_the_toggle_stays_where_the_user_put_it(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> None:
    _teach(prose_baseline=100, prose_dflash=40)
    w, restarts = _window(qtbot, store, fake_server)
    assert not w.follow_advice_action.isChecked()
    assert w.menu_actions and w.follow_advice_action in w.menuBar().actions()[1].menu().actions()
    assert w.session.guard.learned_mode("prose") == "baseline"  # the guard consults the advice for this setup
    w.chat.input.setPlainText(PROSE)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000) as done:
        w.chat.send()
    assert done.args[0].mode == "dflash" and restarts == []


def test_opted_in_a_prose_prompt_goes_out_in_the_learnt_fastest_mode_after_the_restart(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> None:
    _teach(prose_baseline=100, prose_dflash=40)
    w, restarts = _window(qtbot, store, fake_server)
    w.follow_advice_action.setChecked(True)
    assert load_settings().follow_advice  # remembered
    w.chat.input.setPlainText(PROSE)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000) as done:
        w.chat.send()
        assert w.chat.input.toPlainText() == PROSE  # held, not lost, while the server restarts
        assert "Baseline for this prose prompt" in w.chat.notice.text()
    assert len(restarts) == 1 and restarts[0].spec_mode == Mode.BASELINE and restarts[0].draft is None
    assert done.args[0].mode == "baseline" and w.session.switch.mode == "baseline"
    assert w.chat.input.toPlainText() == "" and fake_server.requests[-1].body["messages"][-1]["content"] == PROSE
    # The next prose prompt is already in the right mode: no second restart.
    w.chat.input.setPlainText(PROSE + " Keep it brief.")
    with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000):
        w.chat.send()
    assert len(restarts) == 1


def test_without_a_verdict_nothing_switches_even_when_following(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> None:
    _teach(prose_baseline=100, prose_dflash=99)  # within the margin: no verdict
    w, restarts = _window(qtbot, store, fake_server)
    w.follow_advice_action.setChecked(True)
    w.chat.input.setPlainText(PROSE)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000) as done:
        w.chat.send()
    assert done.args[0].mode == "dflash" and restarts == []


def test_the_advice_is_read_off_the_gui_thread_and_applies_to_caps_probed_before_it(
        qtbot: QtBot, store: ChatStore, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from beedeck.ui.speculation import advice_follow

    _teach(prose_baseline=100, prose_dflash=40)
    gate, threads = threading.Event(), []

    def slow_load() -> WorkloadAdvice:
        threads.append(threading.current_thread())
        gate.wait(5)
        return load_advice()

    monkeypatch.setattr(advice_follow, "load_advice", slow_load)
    w = make(qtbot, store)
    w.session.set_profile(Profile("/e/llama-server", PROFILE))
    w.session.controller.caps_known.emit(CAPS)  # the probe answers before the file is read
    assert w.session.guard.learned_mode("prose") is None
    gate.set()
    qtbot.waitUntil(lambda: w.session.guard.learned_mode("prose") == "baseline", timeout=5000)
    assert threads and threads[0] is not threading.main_thread()


def test_a_failed_restart_keeps_the_message_in_the_box(
        qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer) -> None:
    from beedeck.core.engine.logparse import ServerFailure

    _teach(prose_baseline=100, prose_dflash=40)
    w, _restarts = _window(qtbot, store, fake_server)
    w.session.server.restart = lambda settings: QTimer.singleShot(  # type: ignore[method-assign]
        100, lambda: w.session.controller.failed.emit(ServerFailure("crash", "llama-server crashed.", "See its log.")))
    w.follow_advice_action.setChecked(True)
    w.chat.input.setPlainText(PROSE)
    w.chat.send()
    qtbot.waitUntil(lambda: w.failure.isVisible(), timeout=5000)
    assert w.chat.input.toPlainText() == PROSE and w.session.advice_follower.held is None
    assert not any(PROSE in str(r.body) for r in fake_server.requests)
