"""App entry: identity, theme, the saved profile (and a corrupt one kept aside), window build."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck import APP_ID
from beedeck.core.launch import LaunchSettings, SpecMode
from beedeck.ui import app as app_mod


def test_identity_and_dark_theme(qapp: QApplication) -> None:
    old_palette = qapp.palette()
    app_mod.set_identity(qapp)
    assert qapp.applicationName() == "beedeck" and qapp.desktopFileName() == APP_ID
    app_mod.apply_theme(qapp, "dark")
    try:
        assert qapp.palette().color(QPalette.ColorRole.Base).lightness() < 60
    finally:
        qapp.setPalette(old_palette)


def test_saved_profile_roundtrip_and_window(qtbot: QtBot, beedeck_home: Path) -> None:
    settings = LaunchSettings(target="/m/q.gguf", draft="/m/d.gguf", spec_mode=SpecMode.DFLASH, ctx_size=16384)
    app_mod.profile_path().write_text(
        json.dumps({"engine": "/opt/bee/llama-server", "settings": settings.to_dict(), "label": "BeeLlama 0.4"})
    )
    profile = app_mod.load_saved_profile()
    assert profile is not None and profile.settings.ctx_size == 16384 and profile.settings.draft == "/m/d.gguf"
    window = app_mod.build_window(no_autostart=True)
    qtbot.addWidget(window)
    assert window.profile is not None and window.pair_label.text() == "model: q.gguf + d.gguf"
    assert window.mode.isEnabled()  # a draft is configured
    assert window.controller.state == "stopped"  # a saved (non-starter) profile is not started by itself


def test_corrupt_profile_is_kept_aside(beedeck_home: Path) -> None:
    path = app_mod.profile_path()
    path.write_text("{not json")
    assert app_mod.load_saved_profile() is None
    assert path.with_name("profile.json.corrupt").read_text() == "{not json"
    assert not path.exists()
