"""Help → About: BeeDeck's version and what it runs (engine, model, Qt, Python, GPU), copyable for a
bug report."""

from __future__ import annotations

import html
import platform

import PySide6
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout, QWidget

from beedeck import __version__
from beedeck.core import paths
from beedeck.core.profile import engine_display_name, pair_name
from beedeck.ui.session import Session


def session_facts(session: Session) -> list[tuple[str, str]]:
    """What the dialog lists: versions, the session's engine and model, the GPU, the data folder."""
    profile, caps, hardware = session.profile, session.server.caps, session.hardware
    facts = [("BeeDeck", __version__), ("Python", platform.python_version()),
             ("Qt", f"PySide6 {PySide6.__version__}")]
    if profile is not None:
        facts.append(("Engine", f"{engine_display_name(profile, caps or session.known_caps.get(profile.engine))} "
                                f"({profile.engine})"))
        facts.append(("Model", pair_name(profile.settings)))
    if hardware is not None:
        facts.append(("GPU", ", ".join(g.name for g in hardware.gpus) if hardware.has_gpu
                      else f"none ({hardware.reason})" if hardware.reason else "none"))
    facts.append(("Data folder", str(paths.data_dir())))
    return facts


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
