"""A readable failure: what happened, why, what to change, and a Retry button."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from beedeck.core.engine.logparse import as_failure

# The title's second half in a user's words, per ServerFailure code (core/engine/logparse.py, the guard,
# resources/known-issues.json) and RemoteError kind (core/engine/remote.py). The code itself stays in
# the log and the CLI's output, where a bug report copies it from.
CODE_WORDS = {
    "port_in_use": "the port is taken",
    "model_missing": "model file not found",
    "not_gguf": "not a GGUF model file",
    "wrong_draft_format": "the draft file does not fit this mode",
    "wrong_model_layout": "the model file does not fit this engine",
    "tool_calls_corrupted": "speculation breaks tool calls here",
    "unsupported_architecture": "this engine does not know the model",
    "dflash_target_unsupported": "DFlash does not support this model",
    "out_of_memory": "out of memory",
    "unknown_argument": "an option this engine does not have",
    "bad_value": "a setting this engine refuses",
    "crashed_signal": "the engine crashed",
    "exited": "the engine stopped",
    "timeout": "it took too long to start",
    "engine_bug": "a known engine bug",
    "no_mtp_heads": "the model has no MTP heads",
    "unsupported_cache_type": "a cache type this engine lacks",
    "security": "any web page can use this server",
    "tool_choice_ignored": "the engine does not force tool calls",
    "bad-url": "not a server address",
    "refused": "nothing answers at that address",
    "dns": "the host name is unknown",
    "unreachable": "the server cannot be reached",
    "key-missing": "the server needs an API key",
    "key-wrong": "the server refused the API key",
    "not-llama": "not a llama.cpp server",
    "loading": "the server is still loading",
    "http-error": "the server answered with an error",
}


def code_words(code: str) -> str:
    """A failure code in words ("model_missing" -> "model file not found"); "" for one BeeDeck does not
    know (an exception's class name says nothing to a user either)."""
    code = code.removeprefix("remote:")
    return CODE_WORDS.get(code, "")


def rich(text: str) -> str:
    """Plain ``text`` for a rich-text label: shown as written, a line break kept."""
    return html.escape(text, quote=False).replace("\n", "<br>")


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
        # Rich text always, the words in it escaped (rich()): a label left to guess took an escaped text
        # without tags for plain text and showed "BeeDeck&#x27;s"; the log lines are plain text.
        for lab in (self.title, self.what, self.remedy):
            lab.setTextFormat(Qt.TextFormat.RichText)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
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
        f = as_failure(failure)  # several refusals: one line each
        words = code_words(f.code)
        message = f.message or "The server stopped unexpectedly."
        tail = list(f.log_tail or [])[-3:]
        aside = f" <span style='color:#888'>({rich(words)})</span>" if words else ""
        self.title.setText(f"<b>{rich(title)}</b>{aside}")
        self.what.setText(f"<b>What happened:</b> {rich(message)}")
        self.remedy.setText(f"<b>What to change:</b> {rich(f.remedy) if f.remedy else 'see the log.'}")
        detail = []
        if f.exit_code is not None:
            detail.append(f"exit code {f.exit_code}")
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
        self.title.setText(f"<b>{rich(title)}</b>")
        self.what.setText(rich(message))
        self.remedy.setText(rich(remedy))
        self.remedy.setVisible(bool(remedy))
        self.detail.hide()
        self.retry_button.hide()
        self.log_button.hide()
        self.local_button.setVisible(local)
        self.show()

    def _on_dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()
