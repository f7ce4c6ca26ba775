"""App entry: identity, theme, the saved profile (and a corrupt one kept aside), window build."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck import APP_ID
from beedeck.core import profile as profile_mod
from beedeck.core.chat.recovery import set_aside
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerState
from beedeck.ui.window import app as app_mod
from beedeck.ui.window.theme import apply_theme


def test_identity_and_dark_theme(qapp: QApplication) -> None:
    old_palette = qapp.palette()
    app_mod.set_identity(qapp)
    assert qapp.applicationName() == "beedeck" and qapp.desktopFileName() == APP_ID
    apply_theme(qapp, "dark")
    try:
        assert qapp.palette().color(QPalette.ColorRole.Base).lightness() < 60
    finally:
        qapp.setPalette(old_palette)


def test_saved_profile_roundtrip_and_window(qtbot: QtBot, beedeck_home: Path) -> None:
    settings = LaunchSettings(target="/m/q.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, ctx_size=16384)
    profile_mod.profile_path().write_text(
        json.dumps({"engine": "/opt/bee/llama-server", "settings": settings.to_dict(), "label": "BeeLlama 0.4"})
    )
    profile = profile_mod.load_saved_profile()
    assert profile is not None and profile.settings.ctx_size == 16384 and profile.settings.draft == "/m/d.gguf"
    window = app_mod.build_window(no_autostart=True)
    qtbot.addWidget(window)
    assert window.session.profile is not None and window.pair_label.text() == "model: q.gguf + d.gguf"
    assert window.mode.isEnabled()  # a draft is configured
    assert window.session.server.state == ServerState.STOPPED  # a saved (non-starter) profile is not started by itself


def test_a_corrupt_or_malformed_profile_is_kept_aside_under_a_new_name_each_time(beedeck_home: Path) -> None:
    path = profile_mod.profile_path()
    bad = ["{not json", '{"engine": "/x", "settings": ["x"]}', '{"engine": "/x", "settings": {"ctx_size": "big"}}',
           '{"engine": "/x", "settings": {"port": 99999}}', '[1, 2]']
    for text in bad:
        path.write_text(text)
        with pytest.raises(profile_mod.ProfileError, match="kept as profile.json.corrupt-"):
            profile_mod.load_saved_profile()
        assert not path.exists()
    kept = sorted(p.read_text() for p in path.parent.glob("profile.json.corrupt-*"))
    assert kept == sorted(bad)  # five copies: none overwrote another


def test_a_malformed_profile_is_announced_and_the_window_still_opens(qtbot: QtBot, beedeck_home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.fakes.fake_nvml import detect_no_gpu

    starter = profile_mod.Profile("/opt/starter/llama-server", LaunchSettings(target="/m/s.gguf"), "starter (CPU)")
    monkeypatch.setattr(app_mod, "load_starter_profile", lambda on_progress=None: starter)
    profile_mod.profile_path().write_text('{"engine": "/x", "settings": ["x"]}')  # crashed every start before
    window = app_mod.build_window(no_autostart=True, detect=detect_no_gpu)
    qtbot.addWidget(window)
    assert window.notices.isVisibleTo(window) and "saved launch profile could not be used" in window.notices.text()
    qtbot.waitUntil(lambda: window.session.profile is starter, timeout=10_000)  # the starter takes its place
    window.close()


def test_unusable_chat_db_is_kept_aside_without_overwriting_an_earlier_one(tmp_path: Path) -> None:
    db = tmp_path / "chats.sqlite3"
    kept: list[Path] = []
    for content in (b"first broken database", b"second broken database"):
        db.write_bytes(content)
        (tmp_path / "chats.sqlite3-wal").write_bytes(b"wal of " + content)
        kept.append(set_aside(db))
    assert not db.exists() and kept[0] != kept[1]
    assert kept[0].read_bytes() == b"first broken database"
    assert kept[1].read_bytes() == b"second broken database"
    assert Path(str(kept[1]) + "-wal").read_bytes() == b"wal of second broken database"


def test_unreadable_chat_db_is_announced_in_the_window(qtbot: QtBot, beedeck_home: Path) -> None:
    from beedeck.core import paths
    from tests.fakes.fake_nvml import detect_no_gpu as no_gpu_detect

    (paths.data_dir() / "chats.sqlite3").write_bytes(b"this is not a database" * 100)
    window = app_mod.build_window(no_autostart=True, detect=no_gpu_detect)
    qtbot.addWidget(window)
    message = window.notices.text()
    assert "chat history was damaged" in message and "kept the damaged file as" in message
    assert window.notices.isVisibleTo(window) and not window.failure.isVisibleTo(window)
    assert window.statusBar().currentMessage() == ""  # not drawn over the engine, model and VRAM labels
    window.close()


def test_server_api_key_lives_in_the_keyring_not_the_profile_file(beedeck_home: Path) -> None:
    import keyring
    import keyring.backends.fail

    from beedeck.core.profile import Profile

    secret = "lan-key-0f9e8d"
    s = LaunchSettings(target="/m/q.gguf", host="0.0.0.0", api_key=secret)
    path = profile_mod.save_profile(Profile("/opt/llama-server", s, "LAN"))
    assert secret not in path.read_text()
    loaded = profile_mod.load_saved_profile()
    assert loaded is not None and loaded.settings.api_key == secret and loaded.settings.host == "0.0.0.0"
    # No keyring on this system: the key is kept for the session only, never written anywhere.
    keyring.set_keyring(keyring.backends.fail.Keyring())
    profile_mod.save_profile(Profile("/opt/llama-server", s, "LAN"))
    assert secret not in path.read_text()
    reloaded = profile_mod.load_saved_profile()
    assert reloaded is not None and reloaded.settings.api_key is None


# What the first paint does not need stays off the start path (issue 22: the window in <= 0.5 s; the
# timing is benchmarks/app_start.py's). Each is imported where it is first used: the Markdown renderer
# and the lexers with the first reply (warmed up after the window shows), the HTTP client with the first
# request, GPU detection after the first paint, the dialogs when opened. (keyring is not in the list: the
# saved profile's API key is read from it while the window is built, ~0.1 s; core/profile's to change.)
OFF_THE_START_PATH = ("markdown_it", "pygments", "httpx2", "httpx", "huggingface_hub", "gguf", "numpy", "pynvml",
                      "psutil", "beedeck.ui.chat.live_reply", "beedeck.ui.chat.code_stream",
                      "beedeck.ui.window.agent_dialog", "beedeck.core.machine.hardware", "beedeck.core.machine.sampler")

START_PATH = """
import json, os, sys
from beedeck.ui.window.app import build_window, create_app
imported = set(sys.modules)
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import profile_path
from beedeck.core.settings import AppSettings, save_settings
save_settings(AppSettings(first_run_done=True))  # an ordinary start: set up before, a profile saved
profile_path().write_text(json.dumps({"engine": "/opt/bee/llama-server", "label": "BeeLlama",
                                      "settings": LaunchSettings(target="/m/q.gguf").to_dict()}))
setup = set(sys.modules) - imported  # what writing them took (not the start's)
app = create_app([sys.argv[0]])
window = build_window(no_autostart=True, background_after_ms=100)  # as app.main builds it
window.show()
app.processEvents()  # the first paint
print(json.dumps({"imported": sorted(imported), "shown": sorted(set(sys.modules) - setup)}))
"""


def test_the_heavy_modules_stay_off_the_start_path(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    gui = Path(app_mod.__file__).resolve().parents[3]
    env = {**os.environ, "BEEDECK_HOME": str(tmp_path), "QT_QPA_PLATFORM": "offscreen",
           "PYTHONPATH": os.pathsep.join([str(gui), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", START_PATH], env=env, capture_output=True, text=True, timeout=60,
                         check=True).stdout
    modules = json.loads(out.splitlines()[-1])
    assert "beedeck.ui.window.main_window" in modules["imported"]  # the child did import the window
    for when in ("imported", "shown"):
        loaded = {name.split(".")[0] if not name.startswith("beedeck") else name for name in modules[when]}
        assert not loaded & set(OFF_THE_START_PATH), (when, sorted(loaded & set(OFF_THE_START_PATH)))
