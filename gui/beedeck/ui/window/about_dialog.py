"""Help → About: BeeDeck's version and what it runs (engine, model, Qt, Python, GPU), copyable for a
bug report."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout, QWidget


class AboutDialog(QDialog):
    def __init__(self, facts: list[tuple[str, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About BeeDeck")
        self.facts = facts
        rows = "".join(f"<tr><td style='padding-right:12px'><b>{html.escape(k)}</b></td>"
                       f"<td>{html.escape(v)}</td></tr>" for k, v in facts)
        self.text = QLabel(
            "<h3>BeeDeck</h3><p>Fast, private, local coding models: BeeLlama.cpp or llama.cpp with a DFlash "
            f"draft, on your own GPU.</p><table>{rows}</table>"
        )
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy details")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)

    def as_text(self) -> str:
        return "\n".join(f"{k}: {v}" for k, v in self.facts)

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.as_text())
        self.copy_button.setText("Copied")
