"""The strip above the chat that says the starter is a tiny CPU demo model, why there is no GPU, and
how to get a real model: the setup wizard, or a GGUF the user already has.

One line, so the transcript keeps the window's height (issue 22, 1366x768): the note, a few prompt
chips the demo model answers well, the two ways to a real model; the whole note and the reason there is
no GPU are its tooltip. The note and the two ways are never cut: where the line is too narrow for all of
it (the chat column of a 1280-px window), the last prompt chips give way first, then "Try:"."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy

from beedeck.core.starter import STARTER_NOTE, STARTER_PROMPTS
from beedeck.ui.wrap_label import wrapped_tip

# The line's forms, fullest first: (short note, short button words).
FORMS = ((False, False), (True, False), (True, True))
# The buttons' words on a line with room, and on a narrow one (their tooltips say the rest).
BUTTON_WORDS = (("Set up a real model…", "Real model…"), ("Use a GGUF I have…", "My GGUF…"), ("Dismiss", "✕"))


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
        # Fixed: the note is never squeezed (the chips give way instead, _fit_chips).
        self.text.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)
        self.wizard_button = QPushButton(BUTTON_WORDS[0][0])
        self.wizard_button.setToolTip("Detect the GPU, pick a DFlash pair that fits it, get the engine and the models")
        self.settings_button = QPushButton(BUTTON_WORDS[1][0])
        self.settings_button.setToolTip("Settings: pick an engine and a .gguf model already on this computer")
        self.dismiss_button = QPushButton(BUTTON_WORDS[2][0])
        self.dismiss_button.setToolTip("Hide this until BeeDeck starts again")
        self.dismiss_button.setFlat(True)
        layout = self.line = QHBoxLayout(self)
        layout.setContentsMargins(10, 2, 4, 2)
        layout.addWidget(self.text)
        layout.addStretch(1)
        self.try_label = QLabel("Try:")
        layout.addWidget(self.try_label)
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
        self._form = 0  # the FORMS entry shown
        self._form_widths: list[int] = []  # each form's note and buttons, measured by _measure_forms
        self.hide()

    def set_no_gpu_reason(self, reason: str) -> None:
        """Why the machine has no usable NVIDIA GPU ("" when it has one), said next to the note."""
        self._no_gpu = reason
        self._render()

    def show_for_starter(self, is_starter: bool) -> None:
        self.setVisible(is_starter and not self._dismissed)
        self._render()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_chips()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._fit_chips()

    def _fit_chips(self) -> None:
        """The line's forms, fullest first: the whole note with the buttons' own words, the short note, then
        short button words too. The fullest whose note and buttons fit with at least one prompt chip beside
        them (as many as fit, the first ones kept in order; "Try:" only with a chip after it). The forms are
        measured once per note (:meth:`_render`); a resize only does the sums."""
        layout = self.line
        margins = layout.contentsMargins()
        spacing = max(0, layout.spacing())
        width = self.width() - margins.left() - margins.right()
        if not self._form_widths:
            self._measure_forms(spacing)
        fits_at: list[tuple[int, int]] = []  # (form, chips) of the forms whose note and buttons fit
        for form, used in enumerate(self._form_widths):
            room = width - used - self.try_label.sizeHint().width() - spacing
            chips = 0
            for chip in self.chips:
                room -= chip.sizeHint().width() + spacing
                if room < 0:
                    break
                chips += 1
            if used <= width:
                fits_at.append((form, chips))
        # the fullest form with a chip beside it, else the fullest that fits, else the most compact
        form, chips = next((f for f in fits_at if f[1] > 0), fits_at[0] if fits_at else (len(FORMS) - 1, 0))
        if form != self._form:
            self._form = form
            self._set_form(*FORMS[form])
        for i, chip in enumerate(self.chips):
            chip.setVisible(i < chips)
        self.try_label.setVisible(chips > 0)

    def _measure_forms(self, spacing: int) -> None:
        """The width each form's note and buttons take (the label and buttons set to it, then back)."""
        for short_note, short_buttons in FORMS:
            self._set_form(short_note, short_buttons)
            self._form_widths.append(sum(w.sizeHint().width() + spacing for w in (self.text, *self._buttons())))
        self._set_form(*FORMS[self._form])

    def _buttons(self) -> tuple[QPushButton, ...]:
        return (self.wizard_button, self.settings_button, self.dismiss_button)

    def _set_form(self, short_note: bool, short_buttons: bool) -> None:
        self.text.setText(self._note(short_note))
        for button, (full, short) in zip(self._buttons(), BUTTON_WORDS, strict=True):
            button.setText(short if short_buttons else full)

    def _note(self, short: bool) -> str:
        if short:
            return "<b>Starter</b>: tiny CPU demo" + (" · no GPU" if self._no_gpu else "")
        return "<b>Starter</b>: tiny demo model on the CPU" + (" · no GPU in use" if self._no_gpu else "")

    def _render(self) -> None:
        self._form_widths = []  # the note may have changed: measure its forms again
        self._set_form(*FORMS[self._form])
        self._fit_chips()
        why = f"\n\nNo NVIDIA GPU in use: {self._no_gpu}" if self._no_gpu else ""
        self.setToolTip(wrapped_tip(f"{STARTER_NOTE}{why}"))

    def _dismiss(self) -> None:
        self._dismissed = True
        self.hide()
