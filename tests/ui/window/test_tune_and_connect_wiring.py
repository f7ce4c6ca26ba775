"""The window's Tune and Connect entries open the real dialogs, and a tuned configuration becomes the
saved profile."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import Profile, load_saved_profile
from beedeck.ui.bench.tune_dialog import TuneDialog
from beedeck.ui.window.app import plug_views
from beedeck.ui.window.connect_dialog import ConnectDialog
from tests.ui.window.test_main_window import make


def _open_dialogs() -> list[object]:
    return [w for w in QApplication.topLevelWidgets() if isinstance(w, (TuneDialog, ConnectDialog)) and w.isVisible()]


def test_tune_opens_the_tuner_and_its_choice_is_saved_as_the_profile(qtbot: QtBot, store: ChatStore) -> None:
    w = make(qtbot, store)
    plug_views(w)
    w.session.set_profile(Profile("/e/llama-server", LaunchSettings(target="/m/t.gguf", threads=1), "mine"))
    assert w.tune_action in w.menuBar().actions()[1].menu().actions()  # Server → Tune
    w.tune_action.trigger()
    qtbot.waitUntil(lambda: any(isinstance(d, TuneDialog) for d in _open_dialogs()), timeout=5000)
    dialog = next(d for d in _open_dialogs() if isinstance(d, TuneDialog))
    tuned = LaunchSettings(target="/m/t.gguf", threads=1, ubatch_size=256)
    dialog.profile_chosen.emit(tuned)
    assert w.session.profile is not None and w.session.profile.settings == tuned and w.session.profile.label == "mine"
    saved = load_saved_profile()
    assert saved is not None and saved.settings.ubatch_size == 256  # the next start uses it
    dialog.reject()


def test_file_menu_connects_to_a_running_server(qtbot: QtBot, store: ChatStore) -> None:
    w = make(qtbot, store)
    action = w.menu_actions["connect"]
    assert action in w.menuBar().actions()[0].menu().actions()
    action.trigger()
    qtbot.waitUntil(lambda: any(isinstance(d, ConnectDialog) for d in _open_dialogs()), timeout=5000)
    next(d for d in _open_dialogs() if isinstance(d, ConnectDialog)).reject()


def test_connect_remembers_the_last_address_but_never_the_key(qtbot: QtBot, store: ChatStore) -> None:
    """Issue 37: File → Connect forgot the last address once the window was back on a local profile (and after a
    restart): it remembers it (settings.json), and never the key."""
    import socket

    from beedeck.core.settings import load_settings, settings_path

    with socket.socket() as sock:  # an address nothing listens on: the connection itself may fail
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def open_connect(w: object) -> ConnectDialog:
        w.menu_actions["connect"].trigger()  # type: ignore[attr-defined]
        qtbot.waitUntil(lambda: any(isinstance(d, ConnectDialog) for d in _open_dialogs()), timeout=5000)
        return next(d for d in _open_dialogs() if isinstance(d, ConnectDialog))  # type: ignore[return-value]

    w = make(qtbot, store)
    local = Profile("/e/llama-server", LaunchSettings(target="/m/t.gguf"), "mine")
    w.session.set_profile(local)
    dialog = open_connect(w)
    assert dialog.url_edit.text() == ""  # nothing connected to yet
    dialog.url_edit.setText(url)
    dialog.key_edit.setText("sk-not-to-keep")
    dialog.label_edit.setText("GPU pod")
    dialog.connect_button.click()
    assert w.session.profile is not None and w.session.profile.is_remote
    w.session.set_profile(local)  # back on this machine (Use the local server, or a profile applied)
    dialog = open_connect(w)
    assert (dialog.url_edit.text(), dialog.label_edit.text(), dialog.key_edit.text()) == (url, "GPU pod", "")
    dialog.reject()
    stored = settings_path().read_text(encoding="utf-8")
    assert url in stored and "sk-not-to-keep" not in stored
    assert load_settings().last_remote_url == url  # a restart remembers it too
