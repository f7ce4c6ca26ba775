"""A readable failure: what happened, why, what to change, and a Retry button."""

from __future__ import annotations

import html

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


class FailurePanel(QFrame):
    """Shows a ``ServerFailure`` (code, message, remedy, exit_code, log_tail) or any exception.

    Signals: ``retry_requested()``, ``log_requested()``, ``dismissed()``, ``local_requested()`` ("Use the
    local server", offered for a server BeeDeck did not start).
    """

    retry_requested = Signal()
    local_requested = Signal()
    log_requested = Signal()
    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("failure-panel")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet(
            "#failure-panel { border: 1px solid #d04040; border-radius: 6px; background: rgba(208,64,64,0.08); }"
        )
        self.title = QLabel()
        self.what = QLabel()
        self.remedy = QLabel()
        self.detail = QLabel()
        for lab in (self.what, self.remedy, self.detail):
            lab.setWordWrap(True)
        self.detail.setStyleSheet("color: palette(placeholder-text); font-family: monospace;")
        self.retry_button = QPushButton("Retry")
        self.retry_button.clicked.connect(self.retry_requested)
        self.log_button = QPushButton("Show log")
        self.log_button.clicked.connect(self.log_requested)
        self.close_button = QPushButton("Dismiss")
        self.close_button.clicked.connect(self._on_dismiss)
        self.local_button = QPushButton("Use the local server")
        self.local_button.setToolTip("Start BeeDeck's own server with the last local profile (or the starter)")
        self.local_button.clicked.connect(self.local_requested)
        self.local_button.hide()
        row = QHBoxLayout()
        row.addStretch(1)
        for b in (self.log_button, self.close_button, self.local_button, self.retry_button):
            row.addWidget(b)
        layout = QVBoxLayout(self)
        for w in (self.title, self.what, self.remedy, self.detail):
            layout.addWidget(w)
        layout.addLayout(row)
        self.hide()

    def show_failure(self, failure: object, title: str = "The server could not start", local: bool = False) -> None:
        """Fill from a ServerFailure-like object (``message``/``remedy``) or a plain exception; ``title``
        says what failed (a start, a server that was running, a save); ``local``: offer "Use the local server"."""
        code = getattr(failure, "code", "") or type(failure).__name__
        message = getattr(failure, "message", None) or str(failure) or "The server stopped unexpectedly."
        remedy = getattr(failure, "remedy", "") or ""
        reasons = getattr(failure, "reasons", None)  # LaunchRefused
        if reasons:
            message = "These settings cannot run on this engine."
            remedy = "\n".join(f"• {r}" for r in reasons)
        exit_code = getattr(failure, "exit_code", None)
        tail = list(getattr(failure, "log_tail", None) or [])[-3:]
        self.title.setText(f"<b>{html.escape(title)}</b> <span style='color:#888'>({html.escape(code)})</span>")
        self.what.setText(f"<b>What happened:</b> {message}")
        self.remedy.setText(f"<b>What to change:</b> {remedy}" if remedy else "<b>What to change:</b> see the log.")
        detail = []
        if exit_code is not None:
            detail.append(f"exit code {exit_code}")
        detail.extend(tail)
        self.detail.setText("\n".join(detail))
        self.detail.setVisible(bool(detail))
        self.remedy.show()
        self.retry_button.show()
        self.log_button.show()
        self.local_button.setVisible(local)
        self.show()

    def show_notice(self, title: str, message: str, remedy: str = "", local: bool = False) -> None:
        """A problem BeeDeck already handled (a damaged file kept aside and recovered): shown until
        dismissed, without Retry or the server log."""
        self.title.setText(f"<b>{html.escape(title)}</b>")
        self.what.setText(html.escape(message))
        self.remedy.setText(html.escape(remedy))
        self.remedy.setVisible(bool(remedy))
        self.detail.hide()
        self.retry_button.hide()
        self.log_button.hide()
        self.local_button.setVisible(local)
        self.show()

    def _on_dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()
