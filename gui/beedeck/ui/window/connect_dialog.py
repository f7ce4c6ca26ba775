"""Connect to a running server…: the address and API key of a llama-server BeeDeck did not start.

"Check" reads what the server is off the GUI thread and shows it, or the specific reason it cannot
be used (unreachable, wrong key, not llama.cpp, still loading). "Connect" hands a remote profile to
``on_profile`` (the window's ``apply_profile(profile, start=True)``): the key goes to the keyring
with the profile, never to a file or the log.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.engine.remote import RemoteError, RemoteInfo, inspect_server, normalize_url
from beedeck.core.profile import Profile, remote_profile
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.wrap_label import WrapLabel

DIALOG_WIDTH = 520  # the note on two or three lines; the dialog stays well inside a 1366x768 screen


class ConnectDialog(QDialog):
    """Asks for a server URL, an optional API key and a label; checks the server on request.

    Signals: ``profile_chosen(Profile)`` (the remote profile) on Connect; ``checked(RemoteInfo)`` when a check
    found the server, ``check_failed(str)`` with what it said when not. ``inspect`` and ``runner`` are
    injectable for tests. ``current``: the window's profile (a remote one fills every field); else ``last``, the
    last server connected to (address, name: the key is typed again).
    """

    profile_chosen = Signal(Profile)
    checked = Signal(RemoteInfo)
    check_failed = Signal(str)

    def __init__(self, parent: QWidget | None = None, current: Profile | None = None, *,
                 inspect: Callable[..., RemoteInfo] = inspect_server, runner: Runner | None = None,
                 last: tuple[str, str] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to a running server")
        self._inspect = inspect
        self._runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self.url_edit = QLineEdit(placeholderText="http://192.168.1.20:8080")
        self.key_edit = QLineEdit(placeholderText="only if the server was started with --api-key")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.label_edit = QLineEdit(placeholderText="e.g. GPU pod")
        if current is not None and current.is_remote:
            self.url_edit.setText(current.engine)
            self.key_edit.setText(current.settings.api_key or "")
            self.label_edit.setText(current.label)
        elif last is not None:  # the last server connected to: its address and name, never its key
            self.url_edit.setText(last[0])
            self.label_edit.setText(last[1])
        form = QFormLayout()
        form.addRow("Server address:", self.url_edit)
        form.addRow("API key:", self.key_edit)
        form.addRow("Name:", self.label_edit)
        # WrapLabel: a plain word-wrapped QLabel in a dialog was squeezed below its text (clipped).
        self.result_label = WrapLabel()
        self.check_button = QPushButton("Check")
        self.check_button.clicked.connect(self.check)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.connect_button = buttons.addButton("Connect", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.check_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        self.note = WrapLabel("BeeDeck chats with a llama-server that already runs (a GPU pod, another machine). "
                              "Over the internet, reach it through an SSH tunnel or HTTPS, and start it with "
                              "--api-key.")
        layout.addWidget(self.note)
        layout.addLayout(form)
        layout.addWidget(self.result_label)
        layout.addWidget(buttons)
        self.url_edit.textChanged.connect(self._update)
        self._update()
        self.setMinimumWidth(DIALOG_WIDTH)
        self.resize(DIALOG_WIDTH, self.sizeHint().height())

    def _update(self) -> None:
        self.connect_button.setEnabled(bool(self.url_edit.text().strip()))

    def _key(self) -> str | None:
        return self.key_edit.text().strip() or None

    def profile(self) -> Profile:
        """The remote profile the fields describe (RemoteError for a bad address)."""
        return remote_profile(self.url_edit.text(), self._key(), self.label_edit.text().strip())

    def check(self) -> None:
        try:
            url = normalize_url(self.url_edit.text())
        except RemoteError as exc:
            self._show_failure(exc)
            return
        self.check_button.setEnabled(False)
        self.result_label.setText(f"Checking {html.escape(url)}…")
        key = self._key()
        self._runner(lambda: self._inspect(url, key), self._show_info, self._show_failure)

    def _show_info(self, info: RemoteInfo) -> None:
        self.check_button.setEnabled(True)
        self.result_label.setText("✔ " + html.escape(info.summary()))
        self.adjustSize()  # room for the result's lines
        self.checked.emit(info)

    def _show_failure(self, exc: BaseException) -> None:
        self.check_button.setEnabled(True)
        if isinstance(exc, RemoteError):
            said = f"{exc.message} {exc.remedy}"
            self.result_label.setText(f"<b>{html.escape(exc.message)}</b><br>{html.escape(exc.remedy)}")
        else:
            said = f"The check failed: {exc}"
            self.result_label.setText(html.escape(said))
        self.adjustSize()  # room for the result's lines
        self.check_failed.emit(said)

    def accept(self) -> None:
        try:
            profile = self.profile()
        except RemoteError as exc:
            self._show_failure(exc)
            return
        self.profile_chosen.emit(profile)
        super().accept()


def open_connect_dialog(parent: QWidget, on_profile: Callable[[Profile], None],
                        current: Profile | None = None, last: tuple[str, str] | None = None) -> ConnectDialog:
    """Open the dialog (non-modal); ``on_profile`` gets the remote profile on Connect. File → Connect:
    ``open_connect_dialog(window, lambda p: session.apply_profile(p, start=True), session.profile,
    session.last_remote())``."""
    from PySide6.QtCore import Qt

    dialog = ConnectDialog(parent, current, last=last)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.profile_chosen.connect(on_profile)
    dialog.open()
    return dialog
