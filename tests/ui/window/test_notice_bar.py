"""Lasting notices: what BeeDeck says about its own files (a newer BeeDeck's settings or profile, a change kept
for this session only) and a port another process holds stays readable until dismissed: a menu hover, a
server becoming ready or a long line does not take it away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core import paths
from beedeck.core import profile as profile_mod
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.settings import SCHEMA_VERSION, settings_path
from beedeck.ui.window import app as app_mod
from beedeck.ui.window.notice_bar import NoticeBar
from tests.fakes.fake_nvml import detect_no_gpu
from tests.fakes.sse_server import FakeLlamaServer

STARTER = profile_mod.Profile("/opt/starter/llama-server", LaunchSettings(target="/m/s.gguf"), "starter (CPU)")


def test_a_notice_wraps_replaces_its_own_kind_and_goes_on_dismiss(qtbot: QtBot) -> None:
    bar = NoticeBar()
    qtbot.addWidget(bar)
    bar.show_notice("port", "Another port", "first <b>text</b>")  # shown as typed, never as markup
    bar.show_notice("files", "Files", "a newer BeeDeck")
    bar.show_notice("port", "Another port", "second")
    assert bar.notices() == {"port": "Another port second", "files": "Files a newer BeeDeck"}
    assert bar.isVisibleTo(bar.parentWidget() or bar)
    bar.dismiss("port")
    bar.dismiss("files")
    assert bar.notices() == {} and bar.isHidden()


def _window(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> app_mod.MainWindow:
    monkeypatch.setattr(app_mod, "load_starter_profile", lambda on_progress=None: STARTER)
    window = app_mod.build_window(no_autostart=True, detect=detect_no_gpu)
    qtbot.addWidget(window)
    window.show()
    return window


def test_newer_settings_stay_said_through_a_menu_hover_and_a_ready_server_and_a_theme_change_says_so(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, fake_server: FakeLlamaServer) -> None:
    path = settings_path()
    text = json.dumps({"schema_version": SCHEMA_VERSION + 1, "theme": "dark", "future": 1})
    path.write_text(text)
    window = _window(qtbot, monkeypatch)
    assert "written by a newer BeeDeck" in window.notices.text()
    assert window.statusBar().currentMessage() == ""  # not drawn over the engine, model and VRAM labels
    window.menu_actions["theme_dark"].showStatusText(window)  # a menu item hovered: the status bar's tip
    window.session.controller.ready.emit(fake_server.base_url)  # a server ready clears the failure panel
    assert window.notices.isVisible() and "written by a newer BeeDeck" in window.notices.text()
    window.set_theme("light")
    assert "The theme applies to this session only" in window.notices.text()
    assert "written by a newer BeeDeck" in window.notices.notices()["settings"]
    assert path.read_text() == text  # the newer BeeDeck's file, untouched
    window.close()


def test_a_newer_profile_is_said_the_starter_serves_and_save_leaves_the_file(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    path = profile_mod.profile_path()
    text = json.dumps({"engine": "/opt/bee/llama-server", "settings": {"target": "/m/q.gguf", "spec_mode": "eagle9"}})
    path.write_text(text)
    window = _window(qtbot, monkeypatch)
    notice = window.notices.text()
    assert "written by a newer BeeDeck" in notice and "'eagle9'" in notice and "Choose the engine" not in notice
    qtbot.waitUntil(lambda: window.session.profile is STARTER, timeout=10_000)
    window.session.save_profile(STARTER)  # Settings → Save
    assert "The profile applies to this session only" in window.notices.text()
    assert path.read_text() == text and list(Path(path.parent).glob("profile.json.*")) == []
    window.close()


def test_a_port_notice_is_whole_and_lasting_and_goes_once_the_port_is_the_one_asked_for(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, fake_server: FakeLlamaServer) -> None:
    window = _window(qtbot, monkeypatch)
    controller = window.session.controller
    line = ("Port 8477 is taken by BeeDeck's own llama-server (pid 4242) of `beedeck serve` (pid 4240), so the "
            "server listens on port 40001 this time: editors and scripts set to port 8477 will not reach it. Stop "
            "that one to have it back, or pick another port under Settings → Server.")
    controller.port_note = line
    controller.port_fallback_used.emit(8477, 40001, line)
    window.menu_actions["theme_dark"].showStatusText(window)
    assert window.notices.notices()["port"].endswith(line) and window.statusBar().currentMessage() == ""
    controller.port_note = ""
    controller.ready.emit(fake_server.base_url)  # a later start on the port asked for
    assert "port" not in window.notices.notices()
    window.close()


def test_the_notice_bar_sits_above_the_chat(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    (paths.data_dir() / "chats.sqlite3").write_bytes(b"not a database" * 100)
    window = _window(qtbot, monkeypatch)
    assert window.notices.isVisible() and window.notices.geometry().bottom() < window.chat.geometry().top()
    window.close()
