"""The popover behind the ``?`` beside the mode toggle: which modes this setup cannot run, in plain words,
and the one action that gets each (issue 22: it was a 1,320 px unwrapped tooltip with command-line
hints and GGUF key names).

:func:`plain_reason` turns a mode's technical reason (``core.engine.speculation.modes``, which the CLI and the
toggle's segment tooltips keep using) into a sentence a newcomer can act on, and names the action:
``"wizard"`` (the setup wizard gets an engine and a matching pair) or ``"settings"`` (pick files).
"""

from __future__ import annotations

import html

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import QFrame, QLabel, QPushButton, QVBoxLayout, QWidget

from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import ModeOption

POPOVER_WIDTH = 380
ACTION_LABELS = {"wizard": "Open the setup wizard", "settings": "Open Settings"}


def _engine_side(reason: str) -> bool:
    """The engine build is what is missing (no file would help)."""
    words = ("has no ", "newer build", "probed the engine", "BeeLlama 0.", "engine")
    return any(w in reason for w in words) and "draft model is configured" not in reason


def plain_reason(o: ModeOption) -> tuple[str, str]:
    """(one plain sentence, the action key) for a mode that cannot run here."""
    label = o.key.label
    if _engine_side(o.reason):
        if "probed the engine" in o.reason:
            return f"BeeDeck is still checking whether your engine can run {label}.", "settings"
        return (f"Your engine build cannot run {label}. The setup wizard can get one that does.", "wizard")
    needs = o.key.info.needs or "other model files"
    if o.key.uses_draft_file:
        return (f"{label} needs {needs}. Pick it in Settings, or let the setup wizard download a matching pair.",
                "settings")
    if o.key == Mode.MTP:
        return f"{label} needs {needs}. Pick such a model in Settings.", "settings"
    return f"{label} cannot run with these files. Pick other files in Settings.", "settings"


def plain_html(unavailable: list[ModeOption]) -> str:
    """The popover's text as rich text (also the ``?``'s tooltip, which Qt wraps because it is rich text:
    it shows even while the whole toggle is disabled, when the button cannot be clicked)."""
    rows = []
    for o in unavailable:
        text, action = plain_reason(o)
        rows.append(f"<p><b>{html.escape(o.key.label)}</b>: {html.escape(text)}</p>")
    return "<p><b>Why some modes are not available here</b></p>" + "".join(rows)


class ModePopover(QFrame):
    """A wrapped popup listing each unavailable mode with a button for its action.

    Signals: ``action_requested(str)`` "wizard" or "settings" (the window opens it; the popup closes).
    """

    action_requested = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Popup)
        self.setObjectName("mode-popover")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setFixedWidth(POPOVER_WIDTH)
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(12, 10, 12, 10)
        self.buttons: dict[str, QPushButton] = {}

    def set_options(self, unavailable: list[ModeOption]) -> None:
        while self._layout.count():
            item = self._layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.setParent(None)
                widget.deleteLater()
        self.buttons = {}
        label = QLabel(plain_html(unavailable))
        label.setWordWrap(True)
        label.setTextFormat(Qt.TextFormat.RichText)
        self._layout.addWidget(label)
        actions: list[str] = []
        for o in unavailable:
            action = plain_reason(o)[1]
            if action not in actions:
                actions.append(action)
        for action in actions:
            button = QPushButton(ACTION_LABELS[action])
            button.clicked.connect(lambda _c=False, a=action: self._act(a))
            self._layout.addWidget(button)
            self.buttons[action] = button
        self.adjustSize()

    def text(self) -> str:
        """Everything the popover says (rich text)."""
        return "\n".join(w.text() for w in self.findChildren(QLabel))

    def show_below(self, anchor: QWidget) -> None:
        self.adjustSize()
        self.move(anchor.mapToGlobal(QPoint(0, anchor.height())))
        self.show()

    def _act(self, action: str) -> None:
        self.hide()
        self.action_requested.emit(action)
