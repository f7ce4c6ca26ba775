"""The recommend page's search box: size any Hub GGUF repo from its headers, in the background.

Type ``OWNER/NAME`` (or paste its Hub address), optionally the drafter repos to plan with it (as the
CLI's ``--draft-repo``; empty: the catalog's drafts for that target), press Enter (which stays on the page:
the answer shows here) or "Size it": the
services' ``size`` call (:func:`beedeck.core.models.recommend.from_repo.recommend_repo`) runs through the
services' runner, off the GUI thread, and the result lists every quant with every draft kind and the fast path. A newer
search makes an older answer stale: it is dropped when it arrives. The setups that fit are offered in
a list, the fast path first; "Use this setup" hands the picked one on as the wizard's choice, so the
next page downloads exactly that target and drafter.

Signals: ``sized(RepoRecommendation)``, ``failed(str)`` with the message shown, ``chosen(Choice)`` with
the picked row as a :class:`~beedeck.core.models.recommend.from_catalog.Choice`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLineEdit, QPushButton, QVBoxLayout, QWidget

from beedeck.core.models.recommend.from_catalog import Choice
from beedeck.core.models.recommend.from_repo import RepoRecommendation
from beedeck.core.models.recommend.live_plan import LiveRow
from beedeck.ui.background import Runner
from beedeck.ui.wrap_label import WrapLabel


class SearchField(QLineEdit):
    """A line edit whose Enter is its own: it emits ``returnPressed`` (the search) and ends there.

    A plain QLineEdit emits ``returnPressed`` and then ignores the key, so it travels on to the dialog, which
    clicks its default button: in the wizard, Enter sized the repo and also went to the next page, where the
    answer could not be seen."""

    def keyPressEvent(self, event: QKeyEvent) -> None:
        super().keyPressEvent(event)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            event.accept()


class HubSearch(QWidget):
    """A repo name field, a button, and the sized result (plain text)."""

    sized = Signal(RepoRecommendation)
    failed = Signal(str)
    chosen = Signal(Choice)

    def __init__(self, size_repo: Callable[[str, list[str]], RepoRecommendation],
                 report: Callable[[RepoRecommendation], list[str]], runner: Runner) -> None:
        super().__init__()
        self._size_repo, self._report, self._runner = size_repo, report, runner
        self._serial = 0
        self._rec: RepoRecommendation | None = None
        self.field = SearchField()
        self.field.setPlaceholderText("Any GGUF repo on the Hub, e.g. unsloth/Qwen3.8-27B-GGUF")
        self.field.setToolTip("BeeDeck reads only the GGUF headers (a few MB) to size every quant and draft: "
                              "nothing is downloaded.")
        self.field.returnPressed.connect(self.search)
        self.drafts_field = SearchField()  # optional, as the CLI's --draft-repo
        self.drafts_field.setPlaceholderText("Draft repos (optional): OWNER/NAME, comma-separated")
        self.drafts_field.setToolTip("The drafter repos to plan with this target (DFlash, DFlash2, DSpark, EAGLE-3, "
                                     "MTP head files). Empty: the catalog's drafts for it; the target's own MTP head "
                                     "is always planned.")
        self.drafts_field.returnPressed.connect(self.search)
        self.button = QPushButton("Size it")
        self.button.clicked.connect(self.search)
        self.result_label = WrapLabel()
        self.result_label.setTextFormat(Qt.TextFormat.PlainText)
        self.result_label.setVisible(False)
        self.rows = QComboBox()  # the setups that fit, the fast path first
        self.rows.setToolTip("The setups of this repo that fit this machine, the fast path first.")
        self.use_button = QPushButton("Use this setup")
        self.use_button.setToolTip("Make it the recommendation: the next page downloads this target and drafter.")
        self.use_button.clicked.connect(self.use_selected)
        row = QHBoxLayout()
        row.addWidget(self.field, 2)
        row.addWidget(self.drafts_field, 1)
        row.addWidget(self.button)
        pick = QHBoxLayout()
        pick.addWidget(self.rows, 1)
        pick.addWidget(self.use_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.result_label)
        layout.addLayout(pick)
        self._show_rows([])

    def search(self) -> None:
        repo = self.field.text().strip()
        if not repo:
            self._show("Type a Hub repo as OWNER/NAME, e.g. unsloth/Qwen3.8-27B-GGUF.")
            return
        self._serial += 1
        serial = self._serial
        self.button.setEnabled(False)
        self._show_rows([])
        drafts = self.draft_repos()
        self._show(f"Reading the GGUF headers of {repo}" + (f" and {', '.join(drafts)}" if drafts else "") + "…")
        self._runner(lambda: self._size_repo(repo, drafts), lambda rec: self._on_sized(serial, rec),
                     lambda exc: self._on_failed(serial, exc))

    def draft_repos(self) -> list[str]:
        """The typed draft repos (commas or spaces between them); the core checks each name."""
        return [x for x in re.split(r"[,\s]+", self.drafts_field.text().strip()) if x]

    def _show(self, text: str) -> None:
        self.result_label.setText(text)
        self.result_label.setVisible(True)

    def _on_sized(self, serial: int, rec: RepoRecommendation) -> None:
        if serial != self._serial:
            return  # a newer search is under way
        self.button.setEnabled(True)
        self._show("\n".join(self._report(rec)))
        self._rec = rec
        self._show_rows(rec.offered())
        self.sized.emit(rec)

    def _show_rows(self, rows: list[LiveRow]) -> None:
        self.rows.clear()
        for r in rows:
            self.rows.addItem(r.line(), r)
        self.rows.setVisible(bool(rows))
        self.use_button.setVisible(bool(rows))

    def use_selected(self) -> None:
        row = self.rows.currentData()
        if row is None or self._rec is None:
            return
        self.chosen.emit(self._rec.choice_of(row))

    def _on_failed(self, serial: int, exc: BaseException) -> None:
        if serial != self._serial:
            return
        self.button.setEnabled(True)
        self._show(str(exc))
        self.failed.emit(str(exc))
