"""Help → Keyboard shortcuts: every key the window answers, in one table."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget


def shortcut_rows(enter_sends: bool) -> list[tuple[str, str]]:
    send = ("Enter", "Send the message (Shift+Enter: a new line)") if enter_sends else \
        ("Ctrl+Enter", "Send the message (Enter: a new line)")
    return [
        send,
        ("Ctrl+Enter", "Send, whichever Enter setting is chosen"),
        ("Esc", "Stop the reply; in edit mode, cancel the edit"),
        ("Ctrl+N", "New chat"),
        ("Ctrl+E", "Export this chat as Markdown"),
        ("Ctrl+R", "Regenerate the last reply"),
        ("Ctrl+M", "Next speculation mode (Baseline, then each mode this setup can run)"),
        ("F5", "Start the server"),
        ("Shift+F5", "Stop the server"),
        ("Ctrl+L", "Put the cursor in the message box"),
        ("Ctrl+,", "Settings"),
        ("F1", "Keyboard shortcuts"),
        ("Ctrl+Q", "Quit (stops the server)"),
    ]


class ShortcutsDialog(QDialog):
    def __init__(self, enter_sends: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        self.rows = shortcut_rows(enter_sends)
        table = "".join(f"<tr><td style='padding-right:16px'><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
                        for k, v in self.rows)
        self.text = QLabel(f"<table>{table}</table>")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
