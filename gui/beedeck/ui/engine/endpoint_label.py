"""The OpenAI-compatible endpoint of the running server, with a copy button."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QWidget


class EndpointLabel(QWidget):
    """Shows ``<base_url>/v1`` once the server is ready (its real port); the button copies it. A ``note``
    (e.g. the controller's ``port_note``: another program held the usual port) adds a ⚠ and a tooltip;
    :meth:`set_details` adds what a running server BeeDeck did not start is (model, context, engine)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # Room for a typical local URL up front, so the toolbar never truncates it after a start.
        self.label.setMinimumWidth(self.label.fontMetrics().horizontalAdvance("API: http://127.0.0.1:65535/v1") + 6)
        self.copy_button = QToolButton()
        self.copy_button.setText("Copy")
        self.copy_button.setToolTip("Copy the OpenAI-compatible endpoint (use it from editors and scripts)")
        self.copy_button.clicked.connect(self.copy)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.copy_button)
        self._details = ""
        self.set_base_url("")

    def endpoint(self) -> str:
        return self._endpoint

    def set_base_url(self, base_url: str, note: str = "") -> None:
        self._endpoint = base_url.rstrip("/") + "/v1" if base_url else ""
        note = note if self._endpoint else ""
        text = f"API: {self._endpoint}" if self._endpoint else "API: not running"
        self.label.setText(f"{text} ⚠" if note else text)
        self._note = note
        self._show_tooltip()
        self.copy_button.setEnabled(bool(self._endpoint))

    def set_details(self, details: str) -> None:
        """What the attached server is (``RemoteInfo.summary()``), shown in the tooltip; "" clears it."""
        self._details = details
        self._show_tooltip()

    def _show_tooltip(self) -> None:
        parts = [self._details if self._endpoint else "", self._note]
        self.label.setToolTip("\n".join(p for p in parts if p))

    def copy(self) -> None:
        if self._endpoint:
            QGuiApplication.clipboard().setText(self._endpoint)
