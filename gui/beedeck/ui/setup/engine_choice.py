"""The run page's engine choice: download a prebuilt release, build from source, or use an engine you have.

Renders :class:`beedeck.core.engine.engine_offers.EngineOffers`: each radio shows the offer's label and,
under it, why it is offered or greyed (the same words in its tooltip).
"""

from __future__ import annotations

from PySide6.QtWidgets import QButtonGroup, QComboBox, QHBoxLayout, QRadioButton, QVBoxLayout, QWidget

from beedeck.core.engine.engine_offers import BUILD, DOWNLOAD, EXISTING, EngineOffers
from beedeck.core.engine.registry import EngineRecord
from beedeck.ui.wrap_label import WrapLabel


class EngineChoice(QWidget):
    """Three radios with their reasons. ``offers`` is None until :meth:`show_offers`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.offers: EngineOffers | None = None
        self.group = QButtonGroup(self)
        self.download_radio = QRadioButton("Download a prebuilt release")
        self.build_radio = QRadioButton("Build BeeLlama from source")
        self.use_found = QRadioButton("Use an engine you have:")
        self.found_combo = QComboBox()
        self.why: dict[str, WrapLabel] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        for row, (key, radio) in enumerate(((DOWNLOAD, self.download_radio), (BUILD, self.build_radio),
                                            (EXISTING, self.use_found))):
            self.group.addButton(radio, row)
            label = WrapLabel("")
            label.setStyleSheet("color: palette(placeholder-text); margin-left: 22px;")
            self.why[key] = label
            if key == EXISTING:
                line = QHBoxLayout()
                line.addWidget(radio)
                line.addWidget(self.found_combo, 1)
                layout.addLayout(line)
            else:
                layout.addWidget(radio)
            layout.addWidget(label)
            if key == BUILD:  # what the build would do (the run page's dry run), under its reason
                self.build_detail = QVBoxLayout()
                self.build_detail.setContentsMargins(22, 0, 0, 0)  # under the reason (a label's own margin
                # would be left out of the lines it reserves)
                layout.addLayout(self.build_detail)
            layout.addSpacing(4)
        self.radios = {DOWNLOAD: self.download_radio, BUILD: self.build_radio, EXISTING: self.use_found}
        self.set_looking()

    def set_looking(self) -> None:
        """While the engine list and the release lookup run: nothing to choose yet."""
        self.offers = None
        self.found_combo.clear()
        for key, radio in self.radios.items():
            radio.setEnabled(False)
            self.why[key].setText("Looking for engines and the newest release…" if key == DOWNLOAD else "")
        self.found_combo.setEnabled(False)

    def show_offers(self, offers: EngineOffers, records: list[EngineRecord]) -> None:
        self.offers = offers
        self.found_combo.clear()
        for r in records:
            gen = f"{r.generation} {r.version}".strip()
            self.found_combo.addItem(f"{r.name or r.id} ({gen})", r.id)
        for key, radio in self.radios.items():
            offer = offers[key]
            if key != EXISTING and offer.label:
                radio.setText(offer.label)
            radio.setToolTip(offer.why)
            self.why[key].setText(offer.why)
        self.restore()
        self.radios[offers.default].setChecked(True)

    def freeze(self) -> None:
        """A step is running: no change of mind until it ends."""
        for radio in self.radios.values():
            radio.setEnabled(False)
        self.found_combo.setEnabled(False)

    def restore(self) -> None:
        """Each radio enabled as its offer says (after a step failed or was cancelled)."""
        for key, radio in self.radios.items():
            radio.setEnabled(self.offers is not None and self.offers[key].enabled)
        self.found_combo.setEnabled(self.use_found.isEnabled() and self.found_combo.count() > 0)

    def chosen(self) -> str:
        return next((k for k, r in self.radios.items() if r.isChecked()), EXISTING)
