"""The first hour as a user (issue 12): the saved profile serves again at start, the starter says it
is a tiny demo model and why there is no GPU, a small window keeps the chat readable, the theme menu,
the Help menu, one name for the engine, and `beedeck` alone opens the app."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck import __version__
from beedeck.core import profile as profile_mod
from beedeck.core import settings
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.registry import STARTER_NAME
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.starter import STARTER_MODEL_NAME, STARTER_PROMPTS, StarterProfile
from beedeck.ui.window import app as app_mod
from beedeck.ui.window import menus
from beedeck.ui.window.about_dialog import AboutDialog, session_facts
from beedeck.ui.window.main_window import CHAT_MIN_WIDTH, MainWindow
from beedeck.ui.window.shortcuts_dialog import ShortcutsDialog
from tests.conftest import REPO
from tests.fakes.fake_nvml import detect_no_gpu
from tests.fakes.sse_server import FakeLlamaServer
from tests.ui.window.test_integration import RecordingController, ml_caps

NO_GPU = HardwareReport(reason="the NVIDIA driver is not installed: install it, then restart BeeDeck.")


def starter_profile() -> Profile:
    return Profile("/opt/starter/llama-server",
                   StarterProfile(Path("/opt/starter/llama-server"), Path("/m") / STARTER_MODEL_NAME).settings(),
                   STARTER_NAME)


def save(profile: Profile) -> None:
    profile_mod.profile_path().write_text(json.dumps(
        {"engine": profile.engine, "settings": profile.settings.to_dict(), "label": profile.label}))


@pytest.mark.parametrize("autostart", [True, False])
def test_the_saved_profile_serves_again_when_the_app_opens(qtbot: QtBot, beedeck_home: Path,
                                                           autostart: bool) -> None:
    save(Profile("/opt/bee/llama-server", LaunchSettings(target="/m/q.gguf"), "BeeLlama 0.4"))
    settings.save_settings(settings.AppSettings(first_run_done=True, autostart=autostart))
    controller = RecordingController()
    window = app_mod.build_window(detect=detect_no_gpu, controller=controller)
    qtbot.addWidget(window)
    started = [c for c in controller.serving.calls if c[0] == "start"]
    assert len(started) == (1 if autostart else 0)
    if autostart:
        assert started[0][1] == "/opt/bee/llama-server" and started[0][2].target == "/m/q.gguf"
    window.close()


def test_the_starter_says_it_is_a_demo_model_and_why_there_is_no_gpu(qtbot: QtBot, beedeck_home: Path) -> None:
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    window.show()
    opened: list[str] = []
    window.wizard_factory = lambda session, parent: (opened.append("wizard"), _Dialog())[1]  # type: ignore[assignment]
    window.settings_factory = lambda session, parent: (opened.append("settings"), _Dialog())[1]  # type: ignore[assignment]
    window.session.set_profile(starter_profile())
    window.session.set_hardware(NO_GPU)
    banner = window.starter_banner
    assert banner.isVisible()
    window.resize(1600, 900)  # a line with room: the whole note
    assert "tiny demo model on the CPU" in banner.text.text() and "no GPU in use" in banner.text.text()
    assert "<br>" not in banner.text.text() and not banner.text.wordWrap()  # one line: the chat keeps the height
    assert "No NVIDIA GPU in use: the NVIDIA driver is not installed" in banner.toolTip()
    assert "SmolLM2 135M" in banner.toolTip()  # the whole note
    banner.wizard_button.click()
    banner.settings_button.click()
    assert opened == ["wizard", "settings"]
    window.session.set_profile(Profile("/opt/bee/llama-server", LaunchSettings(target="/m/q.gguf"), "BeeLlama 0.4"))
    assert not banner.isVisible()  # a real model: nothing to apologise for
    window.session.set_profile(starter_profile())
    banner.dismiss_button.click()
    window.session.set_profile(starter_profile())
    assert not banner.isVisible()  # dismissed stays dismissed for the session
    window.close()


def test_the_starters_prompt_chips_ask_their_question(qtbot: QtBot, beedeck_home: Path, fake_server: FakeLlamaServer,
                                                     client: LlamaClient) -> None:
    """Chips offer questions the demo model answers well (tests/engine/test_starter_real.py asks each of
    them of the real model); a click sends one as the user's message."""
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    window.show()
    window.resize(2000, 900)  # room for every chip beside the note (a narrow line drops the last ones)
    window.session.set_profile(starter_profile())
    window.chat.set_client(client)
    banner = window.starter_banner
    assert [c.text() for c in banner.chips] == [label for label, _prompt in STARTER_PROMPTS]
    assert all(c.isVisible() for c in banner.chips)
    with qtbot.waitSignal(window.chat.reply_finished, timeout=15_000):
        banner.chips[0].click()
    cid = window.chat.conversation_id
    assert cid is not None
    assert [m.content for m in window.chat.store.messages(cid)][0] == STARTER_PROMPTS[0][1]
    assert fake_server.requests[-1].body["messages"][-1]["content"] == STARTER_PROMPTS[0][1]
    window.close()


class _Dialog:
    def setAttribute(self, *a: object) -> None: ...

    def open(self) -> None: ...


def test_a_small_window_squeezes_the_side_panels_not_the_chat(qtbot: QtBot, beedeck_home: Path) -> None:
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    window.show()
    window.resize(900, 600)
    qtbot.waitUntil(lambda: window.width() <= 900)
    assert window.centralWidget().width() >= CHAT_MIN_WIDTH
    assert window.chats_dock.isVisible() and window.speed_dock.isVisible()
    assert window.minimumWidth() >= CHAT_MIN_WIDTH
    window.close()


def test_the_theme_menu_applies_at_once_and_is_remembered(qtbot: QtBot, beedeck_home: Path, qapp: QApplication) -> None:
    old = QPalette(qapp.palette())
    try:
        window = MainWindow(ChatStore(), RecordingController())
        qtbot.addWidget(window)
        window.menu_actions["theme_dark"].trigger()
        assert qapp.palette().color(QPalette.ColorRole.Window) == QColor("#202124")
        assert settings.load_settings().theme == "dark"
        window.menu_actions["theme_light"].trigger()
        assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 200
        assert settings.load_settings().theme == "light"
        again = MainWindow(ChatStore(), RecordingController())
        qtbot.addWidget(again)
        assert again.menu_actions["theme_light"].isChecked() and not again.menu_actions["theme_dark"].isChecked()
        window.close()
        again.close()
    finally:
        qapp.setPalette(old)


def test_keep_the_other_mode_loaded_is_on_by_default_and_its_menu_entry_is_remembered(
        qtbot: QtBot, beedeck_home: Path) -> None:
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    action = window.menu_actions["standby"]
    assert action.isCheckable() and action.isChecked() and window.session.server.standby
    action.trigger()
    assert not settings.load_settings().standby and window.session.server.standby is False  # saved, and in effect
    again = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(again)
    assert not again.menu_actions["standby"].isChecked() and again.session.server.standby is False
    window.close()
    again.close()


def test_the_help_menu_has_docs_shortcuts_and_about_with_versions(qtbot: QtBot, beedeck_home: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    profile = Profile("/opt/ml/llama-server", LaunchSettings(target="/m/q.gguf"), "mainline b11434")
    window.session.known_caps[profile.engine] = ml_caps()
    window.session.set_profile(profile)
    window.session.set_hardware(NO_GPU)
    opened: list[QUrl] = []
    monkeypatch.setattr(menus.QDesktopServices, "openUrl", lambda url: opened.append(url) or True)
    window.menu_actions["docs"].trigger()
    assert opened and opened[0].toLocalFile() == str(REPO / "README.md")
    window.menu_actions["shortcuts"].trigger()
    (shortcuts,) = window.findChildren(ShortcutsDialog)
    assert ("Enter", "Send the message (Shift+Enter: a new line)") in shortcuts.rows
    window.menu_actions["about"].trigger()
    (about,) = window.findChildren(AboutDialog)
    facts = dict(about.facts)
    assert facts["BeeDeck"] == __version__ and facts["Qt"].startswith("PySide6 ")
    assert facts["Engine"].startswith("mainline b11434 · mainline 11434") and facts["Model"] == "q.gguf"
    assert facts["GPU"].startswith("none (the NVIDIA driver is not installed")
    about.copy()
    assert QApplication.clipboard().text().startswith(f"BeeDeck: {__version__}")
    window.close()


def test_the_engine_has_one_name_in_the_status_bar_and_about(qtbot: QtBot, beedeck_home: Path) -> None:
    window = MainWindow(ChatStore(), RecordingController())
    qtbot.addWidget(window)
    profile = Profile("/opt/ml/llama-server", LaunchSettings(target="/m/q.gguf"), "mainline b11434")
    window.session.set_profile(profile)
    assert window.engine_label.text() == "engine: mainline b11434"
    window.session.server.caps = ml_caps()
    window.session.controller.caps_known.emit(ml_caps())
    named = window.engine_label.text().removeprefix("engine: ")
    assert named == "mainline b11434 · mainline 11434"
    assert dict(session_facts(window.session))["Engine"].startswith(named)
    window.close()


def test_beedeck_alone_opens_the_app_and_a_command_runs_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    import beedeck.__main__ as entry

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["beedeck"] == "beedeck.__main__:main"
    opened: list[str] = []
    monkeypatch.setattr(app_mod, "main", lambda argv=None: opened.append("app") or 0)
    monkeypatch.setattr(sys, "argv", ["beedeck"])
    assert entry.main() == 0 and opened == ["app"]
    monkeypatch.setattr(sys, "argv", ["beedeck", "--version"])
    with pytest.raises(SystemExit) as done:
        entry.main()
    assert done.value.code == 0 and opened == ["app"]


def test_settings_save_keeps_the_running_server_and_says_when_it_applies(qtbot: QtBot, beedeck_home: Path) -> None:
    controller = RecordingController()
    window = MainWindow(ChatStore(), controller)
    qtbot.addWidget(window)
    window.session.set_profile(Profile("/opt/ml/llama-server", LaunchSettings(target="/m/q.gguf"), "mainline b11434"))
    window.session.start_server()
    changed = Profile("/opt/ml/llama-server", LaunchSettings(target="/m/q.gguf", ctx_size=16384), "mainline b11434")
    calls = len(controller.serving.calls)
    window.session.save_profile(changed)
    assert controller.serving.calls[calls:] == []  # no stop, no restart
    assert profile_mod.load_saved_profile().settings.ctx_size == 16384  # type: ignore[union-attr]
    assert "apply when the server next starts" in window.statusBar().currentMessage()
    window.session.apply_profile(changed)
    assert [c[0] for c in controller.serving.calls[calls:]] == ["replace"]  # Launch restarts (after its preflight)
    window.close()
