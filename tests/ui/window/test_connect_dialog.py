"""The "Connect to a running server…" dialog: Check shows what the server is or why not; Connect hands
over a remote profile with the key (the key field never echoes)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import QLineEdit
from pytestqt.qtbot import QtBot

from beedeck.core.engine.remote import REFUSED, RemoteError, RemoteInfo
from beedeck.core.profile import Profile, remote_profile
from beedeck.ui.window.connect_dialog import ConnectDialog
from tests.fakes.inline_runner import run_inline

INFO = RemoteInfo(url="", model="/m/Target.gguf", n_ctx=8192, n_ctx_train=None, total_slots=1, build_info="b1-x",
                  engine="llama.cpp", speculative=False, spec_types="none", metrics=True, slots=True, needs_key=True)


def test_check_shows_the_server_or_the_reason(qtbot: QtBot) -> None:
    calls: list[tuple[str, str | None]] = []

    def inspect(url: str, key: str | None) -> RemoteInfo:
        calls.append((url, key))
        if url.endswith(":1"):
            raise RemoteError(REFUSED, "Nothing listens at http://pod:1 (connection refused).", "Start it.")
        return replace(INFO, url=url)

    dialog = ConnectDialog(inspect=inspect, runner=run_inline)
    qtbot.addWidget(dialog)
    assert dialog.key_edit.echoMode() == QLineEdit.EchoMode.Password
    assert not dialog.connect_button.isEnabled()
    dialog.url_edit.setText("pod:8080/v1")
    dialog.key_edit.setText(" sk-1 ")
    with qtbot.waitSignal(dialog.checked) as checked:
        dialog.check_button.click()
    assert calls == [("http://pod:8080", "sk-1")] and isinstance(checked.args[0], RemoteInfo)
    assert "Target.gguf" in dialog.result_label.text() and "context 8192" in dialog.result_label.text()
    dialog.url_edit.setText("pod:1")
    with qtbot.waitSignal(dialog.check_failed) as failed:
        dialog.check_button.click()
    assert "Nothing listens" in dialog.result_label.text() and "Start it." in dialog.result_label.text()
    assert failed.args == ["Nothing listens at http://pod:1 (connection refused). Start it."]
    dialog.url_edit.setText("ftp://pod")
    dialog.check_button.click()
    assert "not an http(s) address" in dialog.result_label.text() and len(calls) == 2


def test_connect_hands_over_a_remote_profile(qtbot: QtBot) -> None:
    dialog = ConnectDialog(current=remote_profile("pod:8080", "sk-2", "GPU pod"), runner=run_inline)
    qtbot.addWidget(dialog)
    assert dialog.url_edit.text() == "http://pod:8080" and dialog.label_edit.text() == "GPU pod"
    with qtbot.waitSignal(dialog.profile_chosen) as chosen:
        dialog.connect_button.click()
    profile = chosen.args[0]
    assert isinstance(profile, Profile) and profile.is_remote and profile.settings.api_key == "sk-2"
    assert profile.engine == "http://pod:8080" and profile.label == "GPU pod"


def test_the_menu_entry_helper_hands_the_profile_to_the_window(qtbot: QtBot) -> None:
    from PySide6.QtWidgets import QWidget

    from beedeck.ui.window.connect_dialog import open_connect_dialog

    parent = QWidget()
    qtbot.addWidget(parent)
    got: list[Profile] = []
    dialog = open_connect_dialog(parent, got.append)
    dialog.url_edit.setText("127.0.0.1:8080")
    dialog.connect_button.click()
    assert len(got) == 1 and got[0].is_remote and got[0].engine == "http://127.0.0.1:8080"
    assert got[0].settings.api_key is None
