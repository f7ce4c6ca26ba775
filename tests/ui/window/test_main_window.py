"""Main window composition: docks, toolbar, shortcuts, status bar, chat over a ready server,
geometry remembered, placeholder slots for the launch form and the benchmark."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDialog, QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import as_failure
from beedeck.core.profile import Profile
from beedeck.ui.session import Session
from beedeck.ui.window.main_window import MainWindow, PlaceholderDialog
from tests.fakes.sse_server import FakeLlamaServer


def make(qtbot: QtBot, store: ChatStore) -> MainWindow:
    w = MainWindow(store)
    qtbot.addWidget(w)
    w.open_latest_chat()
    w.show()
    qtbot.waitExposed(w)
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=5000)  # shortcuts need an active window
    return w


def test_composition(qtbot: QtBot, store: ChatStore) -> None:
    w = make(qtbot, store)
    assert [a.text() for a in (w.start_action, w.stop_action, w.bench_action, w.settings_action)] == [
        "Start", "Stop", "Benchmark", "Settings"]
    assert w.chats_dock.widget() is w.conversations and w.speed_dock.widget() is w.speed
    assert w.log.widget() is w.log.view
    assert {s.key().toString() for s in w.shortcuts} >= {"Ctrl+Return", "Ctrl+Enter", "Esc", "Ctrl+N", "Ctrl+L"}
    assert w.state_label.text() == "server: stopped"
    assert not w.stop_action.isEnabled() and not w.chat.send_button.isEnabled()
    w.session.set_profile(Profile("/opt/llama-server", LaunchSettings(target="/m/gemma-3-270m.gguf"), "starter (CPU)"))
    assert w.pair_label.text() == "model: gemma-3-270m.gguf"
    assert w.engine_label.text() == "engine: starter (CPU)"
    assert not w.mode.isEnabled()  # no draft in the starter profile


def test_chat_through_a_ready_server_with_shortcuts(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer
) -> None:
    w = make(qtbot, store)
    w.session.controller.ready.emit(fake_server.base_url)
    assert w.endpoint.endpoint() == fake_server.base_url + "/v1"
    assert w.chat.send_button.isEnabled()
    w.chat.input.setPlainText("hello there")
    with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000):
        qtbot.keyClick(w.chat.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert w.speed.gauge.value > 0 and w.speed.tokens.text() == "4"
    assert "hello there" in w.conversations.list.item(0).text()
    # Esc stops a stalled reply.
    fake_server.script.stall_after = 1
    w.chat.input.setPlainText("again")
    qtbot.keyClick(w.chat.input, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: fake_server.stalled.is_set(), timeout=10_000)
    with qtbot.waitSignal(w.chat.reply_finished, timeout=5000) as blocker:
        qtbot.keyClick(w.chat.input, Qt.Key.Key_Escape)
    assert blocker.args[0].cancelled is True
    fake_server.release_stall()
    # Ctrl+N: a new, empty chat; Ctrl+L focuses the input.
    before = len(store.list_conversations())
    qtbot.keyClick(w.chat.input, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert len(store.list_conversations()) == before + 1
    w.speed.setFocus()
    qtbot.keyClick(w.speed, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.focusWidget() is w.chat.input


def test_geometry_is_remembered(qtbot: QtBot, store: ChatStore) -> None:
    w = make(qtbot, store)
    w.resize(701, 601)
    w.log.hide()
    w.close()
    w2 = make(qtbot, store)
    assert (w2.width(), w2.height()) == (701, 601)
    assert w2.log.isHidden()


def test_settings_and_benchmark_slots(qtbot: QtBot, store: ChatStore) -> None:
    w = make(qtbot, store)
    w.settings_action.trigger()
    dialog = w.findChild(PlaceholderDialog)
    assert dialog is not None and dialog.windowTitle() == "Settings"
    dialog.reject()
    opened: list[str] = []

    def bench_factory(session: Session, parent: QWidget) -> QDialog:
        opened.append("bench")
        assert session is w.session and parent is w
        return QDialog(parent)

    w.bench_factory = bench_factory
    w.bench_action.trigger()
    assert opened == ["bench"]


def test_failure_shows_the_panel(qtbot: QtBot, store: ChatStore) -> None:
    w = make(qtbot, store)
    w.session.controller.failed.emit(as_failure(RuntimeError("engine missing: install it")))
    assert w.failure.isVisible() and "engine missing" in w.failure.what.text()


def test_mode_switch_by_restart_is_wired_to_the_controller(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer
) -> None:
    from beedeck.core.engine.caps import EngineCaps, Generation
    from beedeck.core.engine.mode import Mode

    w = make(qtbot, store)
    profile = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)
    w.session.set_profile(Profile("/e/llama-server", profile))
    w.session.controller.caps_known.emit(EngineCaps(path="/e/llama-server", generation=Generation.MAINLINE,
                                            spec_types=("draft-dflash", "draft-mtp", "ngram-mod"),
                                            flags=frozenset({"--spec-type"})))
    assert w.mode.offered() == [Mode.BASELINE, Mode.DFLASH, Mode.MODEL_FREE]  # the target's header is not there to read
    restarts: list[LaunchSettings] = []

    def fake_restart(settings: LaunchSettings) -> None:  # the real restart needs a real engine + pair
        restarts.append(settings)
        w.session.controller.ready.emit(fake_server.base_url)

    w.session.server.restart = fake_restart  # type: ignore[method-assign]
    assert w.session.switch.mode == "dflash"
    with qtbot.waitSignal(w.session.switching.mode_changed):
        w.mode.baseline_button.click()
    assert restarts[0].draft is None and restarts[0].spec_mode == Mode.BASELINE
    w.chat.input.setPlainText("hi")
    with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000) as blocker:
        w.chat.send()
    assert blocker.args[0].mode == "baseline"
    assert "speculative.n_max" not in fake_server.requests[-1].body
    # The speculation guard's banner switches through the same path (ModeToggle.request_mode).
    with qtbot.waitSignal(w.session.switching.mode_changed) as changed:
        w.banner.switch_requested.emit(Mode.MODEL_FREE)
    assert changed.args == [Mode.MODEL_FREE] and restarts[-1].spec_mode == Mode.MODEL_FREE
    assert restarts[-1].spec_model_free_type == "ngram-mod" and restarts[-1].draft is None
    assert w.session.switching.launch_settings(profile).spec_mode == Mode.MODEL_FREE  # a later Start keeps it


def test_the_menus_follow_the_one_settings_copy_whoever_saved_it(qtbot: QtBot, store: ChatStore) -> None:
    """The session's settings_saved had no subscriber: a choice saved elsewhere (the wizard, another part of
    the window) left the menu's check marks saying the old one."""
    w = make(qtbot, store)
    follow, standby = w.menu_actions["follow"], w.menu_actions["standby"]
    assert not follow.isChecked() and standby.isChecked()
    toggled: list[bool] = []
    follow.toggled.connect(toggled.append)
    w.session.app_settings.follow_advice, w.session.app_settings.standby = True, False
    w.session.app_settings.theme = "dark"
    assert w.session.save_settings() is None
    assert follow.isChecked() and not standby.isChecked() and w.menu_actions["theme_dark"].isChecked()
    assert toggled == []  # shown, not chosen again
