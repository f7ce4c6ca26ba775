"""The recommend page's search box: size any Hub GGUF repo from its headers, in the background.

Type ``OWNER/NAME`` (or paste its Hub address), press Enter or "Size it": the services' ``size_repo``
call (:func:`beedeck.core.chat.repo_recommend.recommend_repo`) runs through the services' runner, off
the GUI thread, and the result lists every quant with every draft kind and the fast path. A newer
search makes an older answer stale: it is dropped when it arrives.

Signals: ``sized(object)`` with the RepoRecommendation, ``failed(str)`` with the message shown.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLineEdit, QPushButton, QVBoxLayout, QWidget

from beedeck.ui.background import Runner
from beedeck.ui.wrap_label import WrapLabel


class HubSearch(QWidget):
    """A repo name field, a button, and the sized result (plain text)."""

    sized = Signal(object)
    failed = Signal(str)

    def __init__(self, size_repo: Callable[[str], object], report: Callable[[object], list[str]],
                 runner: Runner) -> None:
        super().__init__()
        self._size_repo, self._report, self._runner = size_repo, report, runner
        self._serial = 0
        self.field = QLineEdit()
        self.field.setPlaceholderText("Any GGUF repo on the Hub, e.g. unsloth/Qwen3.8-27B-GGUF")
        self.field.setToolTip("BeeDeck reads only the GGUF headers (a few MB) to size every quant and draft: "
                              "nothing is downloaded.")
        self.field.returnPressed.connect(self.search)
        self.button = QPushButton("Size it")
        self.button.clicked.connect(self.search)
        self.result_label = WrapLabel()
        self.result_label.setTextFormat(Qt.TextFormat.PlainText)
        self.result_label.setVisible(False)
        row = QHBoxLayout()
        row.addWidget(self.field, 1)
        row.addWidget(self.button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.result_label)

    def search(self) -> None:
        repo = self.field.text().strip()
        if not repo:
            self._show("Type a Hub repo as OWNER/NAME, e.g. unsloth/Qwen3.8-27B-GGUF.")
            return
        self._serial += 1
        serial = self._serial
        self.button.setEnabled(False)
        self._show(f"Reading the GGUF headers of {repo}…")
        self._runner(lambda: self._size_repo(repo), lambda rec: self._on_sized(serial, rec),
                     lambda exc: self._on_failed(serial, exc))

    def _show(self, text: str) -> None:
        self.result_label.setText(text)
        self.result_label.setVisible(True)

    def _on_sized(self, serial: int, rec: object) -> None:
        if serial != self._serial:
            return  # a newer search is under way
        self.button.setEnabled(True)
        self._show("\n".join(self._report(rec)))
        self.sized.emit(rec)

    def _on_failed(self, serial: int, exc: BaseException) -> None:
        if serial != self._serial:
            return
        self.button.setEnabled(True)
        self._show(str(exc))
        self.failed.emit(str(exc))
