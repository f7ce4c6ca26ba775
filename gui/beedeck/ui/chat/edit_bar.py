"""The strip above the message box while an earlier message is being edited: what Send will do,
and a way out (Cancel, or Esc in the message box)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

EDIT_TEXT = (
    "Editing an earlier message: Send replaces it and the replies after it. The current version is "
    "kept (◀ ▶ on the message brings it back)."
)


class EditBar(QFrame):
    """Shown only in edit mode. Signals: ``cancel_requested()`` (the Cancel button)."""

    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("edit-bar")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#edit-bar { border: 1px solid palette(highlight); border-radius: 4px; }")
        self.label = QLabel(EDIT_TEXT)
        self.label.setWordWrap(True)
        self.cancel_button = QPushButton("Cancel edit")
        self.cancel_button.setToolTip("Leave edit mode and get back what you were typing (Esc)")
        self.cancel_button.clicked.connect(self.cancel_requested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(self.cancel_button)
        self.hide()
