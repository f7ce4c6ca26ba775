"""Setup page 1: the GPU that was detected, or why none was, with a path straight to the starter; the RAM, CPU
cores and free disk as ``beedeck detect`` says them."""


from __future__ import annotations

import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWizardPage,
)

from beedeck.core.machine.report import HardwareReport, system_rows
from beedeck.core.starter import STARTER_MODEL_TITLE
from beedeck.ui.setup.services import WizardServices, gib_text
from beedeck.ui.wrap_label import WrapLabel


class DetectPage(QWizardPage):
    """Page 1: the hardware report, or why there is no GPU and the starter path."""

    def __init__(self, services: WizardServices) -> None:
        super().__init__()
        self.services = services
        self.report: HardwareReport | None = None
        self.use_starter = False
        self._starter_clicked = False
        self.setTitle("Your hardware")
        self.setSubTitle("BeeDeck looks for an NVIDIA GPU to pick a model pair that fits it.")
        self.status = WrapLabel("Looking for NVIDIA GPUs…")
        self.status.setObjectName("detect-status")
        self.grid = QGridLayout()
        self.grid.setHorizontalSpacing(16)
        self.grid.setVerticalSpacing(6)
        self.starter_box = QGroupBox("No GPU? Start small")
        sb = QVBoxLayout(self.starter_box)
        self.starter_text = WrapLabel(
            f"The starter profile runs {STARTER_MODEL_TITLE} with mainline llama.cpp on the CPU. It is installed with "
            "BeeDeck, needs no download and works on any machine: good for trying the app. DFlash pairs "
            "need an NVIDIA GPU with 8 GB or more.")
        self.starter_button = QPushButton("Use the starter profile")
        self.starter_button.clicked.connect(self._on_starter_clicked)
        sb.addWidget(self.starter_text)
        row = QHBoxLayout()
        row.addWidget(self.starter_button)
        row.addStretch(1)
        sb.addLayout(row)
        self.starter_box.hide()
        layout = QVBoxLayout(self)
        layout.setSpacing(12)
        layout.addWidget(self.status)
        layout.addLayout(self.grid)
        layout.addWidget(self.starter_box)
        layout.addStretch(1)

    def initializePage(self) -> None:
        if self.report is None:
            self.services.runner(self.services.detect, self.show_report, self._on_detect_failed)

    def _on_detect_failed(self, exc: BaseException) -> None:
        self.show_report(HardwareReport(reason=f"Detection failed: {exc}"))

    def show_report(self, report: HardwareReport) -> None:
        if not shiboken6.isValid(self) or not shiboken6.isValid(self.grid):
            return  # the wizard closed while the detection ran: nothing is left to fill
        self.report = report
        while self.grid.count():
            item = self.grid.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        rows: list[tuple[str, str]] = []
        if not report.has_gpu:
            self.status.setText(f"<b>No NVIDIA GPU found.</b> {report.reason}")
            self.use_starter = True
            self.starter_box.show()
            self.starter_button.setText("Continue with the starter profile")
        else:
            self.status.setText(f"<b>Found {len(report.gpus)} NVIDIA GPU{'s' if len(report.gpus) > 1 else ''}.</b>")
            for g in report.gpus:
                cc = ".".join(map(str, g.compute_capability)) if g.compute_capability else "?"
                rows.append((f"GPU {g.index}", f"{g.name} — {gib_text(g.memory_total)} VRAM, "
                                               f"{gib_text(g.memory_free)} free, compute {cc}"))
            rows += [("Driver", report.driver_version or "unknown"),
                     ("CUDA (driver)", report.cuda_driver_version or "unknown")]
            self.starter_box.show()
            self.starter_box.setTitle("Or start small")
            self.starter_button.setText("Use the starter profile instead")
        # What `beedeck detect` says of the rest of the machine, in its words: the RAM the CPU plans use, the
        # cores, and the disk the models go to.
        self._fill_grid(rows + system_rows(report.system))
        self.completeChanged.emit()

    def _fill_grid(self, rows: list[tuple[str, str]]) -> None:
        for r, (k, v) in enumerate(rows):
            key = QLabel(k)
            key.setStyleSheet("color: palette(placeholder-text);")
            val = QLabel(v)
            val.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.grid.addWidget(key, r, 0, Qt.AlignmentFlag.AlignRight)
            self.grid.addWidget(val, r, 1)
        self.grid.setColumnStretch(1, 1)

    def _on_starter_clicked(self) -> None:
        self._starter_clicked = True
        self.wizard().next()

    def isComplete(self) -> bool:
        return self.report is not None

    def validatePage(self) -> bool:
        # With a GPU, plain Next means the recommendation; the starter button means the starter.
        if self.report is not None and self.report.has_gpu:
            self.use_starter = self._starter_clicked
        self._starter_clicked = False
        return True

    def free_vram(self) -> list[int]:
        if self.use_starter or self.report is None:
            return []
        return [g.memory_free for g in self.report.gpus]
