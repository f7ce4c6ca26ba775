"""The strip above the chat that says the starter is a tiny CPU demo model, why there is no GPU, and
how to get a real model: the setup wizard, or a GGUF the user already has.

One line, so the transcript keeps the window's height (issue 22, 1366x768): the note, a few prompt
chips the demo model answers well, the two ways to a real model; the whole note and the reason there is
no GPU are its tooltip."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy

from beedeck.core.starter import STARTER_NOTE, STARTER_PROMPTS


class StarterBanner(QFrame):
    """Shown while the starter profile is loaded. ``wizard_requested`` / ``settings_requested`` are
    the two ways to a real model; Dismiss hides it until the next start of the app. Prompt chips
    (``prompt_chosen(str)``) offer questions the demo model answers well (STARTER_PROMPTS, measured on
    the real model: each reply ends on its own)."""

    wizard_requested = Signal()
    settings_requested = Signal()
    prompt_chosen = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("starter-banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#starter-banner { border: 1px solid palette(mid); border-radius: 6px; "
                           "background: palette(alternate-base); }")
        self.text = QLabel()
        self.text.setWordWrap(False)
        # Ignored: a narrow window clips the line (the tooltip has it all) instead of growing the window.
        self.text.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.wizard_button = QPushButton("Set up a real model…")
        self.wizard_button.setToolTip("Detect the GPU, pick a DFlash pair that fits it, get the engine and the models")
        self.settings_button = QPushButton("Use a GGUF I have…")
        self.settings_button.setToolTip("Settings: pick an engine and a .gguf model already on this computer")
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.setFlat(True)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 2, 4, 2)
        layout.addWidget(self.text, 1)
        layout.addWidget(QLabel("Try:"))
        self.chips: list[QPushButton] = []
        for label, prompt in STARTER_PROMPTS:
            chip = QPushButton(label)
            chip.setToolTip(prompt)
            chip.setFlat(True)
            chip.setStyleSheet("QPushButton { border: 1px solid palette(mid); border-radius: 10px; padding: 1px 8px; }")
            chip.clicked.connect(lambda _checked=False, text=prompt: self.prompt_chosen.emit(text))
            layout.addWidget(chip)
            self.chips.append(chip)
        for b in (self.wizard_button, self.settings_button, self.dismiss_button):
            layout.addWidget(b)
        self.wizard_button.clicked.connect(self.wizard_requested)
        self.settings_button.clicked.connect(self.settings_requested)
        self.dismiss_button.clicked.connect(self._dismiss)
        self._dismissed = False
        self._no_gpu = ""
        self.hide()

    def set_no_gpu_reason(self, reason: str) -> None:
        """Why the machine has no usable NVIDIA GPU ("" when it has one), said next to the note."""
        self._no_gpu = reason
        self._render()

    def show_for_starter(self, is_starter: bool) -> None:
        self.setVisible(is_starter and not self._dismissed)
        self._render()

    def _render(self) -> None:
        gpu = " · no GPU in use" if self._no_gpu else ""
        self.text.setText(f"<b>Starter</b>: tiny demo model on the CPU{gpu}")
        why = f"\n\nNo NVIDIA GPU in use: {self._no_gpu}" if self._no_gpu else ""
        self.setToolTip(f"{STARTER_NOTE}{why}")

    def _dismiss(self) -> None:
        self._dismissed = True
        self.hide()
