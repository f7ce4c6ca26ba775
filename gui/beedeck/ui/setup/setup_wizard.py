"""First-run setup: what was detected, which pair fits and why, then one button that does the rest.

Page 1 shows the GPU (or why none was found, with a path straight to the starter profile). Page 2
shows the recommended pair for the chosen goal, its download size, its memory plan and the
runner-up. Page 3 (``setup_run_page.py``) gets an engine, downloads the models, smoke-tests and
hands the result to the main window through :attr:`SetupWizard.setup_finished`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
    QWizard,
    QWizardPage,
)

from beedeck.core import paths
from beedeck.core.machine import hardware
from beedeck.core.machine.report import HardwareReport
from beedeck.core.models import catalog as catalog_mod
from beedeck.core.models.recommend import Choice, Recommendation, recommend
from beedeck.ui.launch.memory_bar import MemoryBar, WrapLabel
from beedeck.ui.window.background import Runner, run_in_background

if TYPE_CHECKING:
    from beedeck.ui.window.main_window import MainWindow

GiB = 1 << 30


@dataclass
class WizardServices:
    """The core calls the wizard makes; tests replace the ones that need hardware or the internet."""

    detect: Callable[[], HardwareReport] = field(default=lambda: hardware.detect(disk_path=paths.models_dir()))
    recommend: Callable[..., Recommendation] = recommend
    runner: Runner = run_in_background
    models_dir: Callable[[], Path] = paths.models_dir
    endpoint: str | None = None  # Hub endpoint; None: HF_ENDPOINT or huggingface.co
    extra: dict[str, Any] = field(default_factory=dict)  # overrides for the run page (see setup_run_page)


@dataclass
class SetupResult:
    """What the wizard produced: launch ``engine`` with ``settings`` (the main window's Profile)."""

    engine: str
    settings: Any  # LaunchSettings
    label: str = ""
    engine_id: str = ""


def download_size(choice: Choice) -> int | None:
    """Bytes to download for a choice (target + draft), from the catalog; None when unknown."""
    try:
        cat = catalog_mod.load()
        pair = cat.pair(choice.pair_id)
    except (KeyError, catalog_mod.CatalogError, OSError):
        return None
    total = 0
    tf = pair.target.file(choice.target_quant)
    if tf is None or tf.best_size is None:
        return None
    total += tf.best_size
    if choice.draft_quant:
        spec = next((d for d in pair.drafts if d.repo == choice.draft_repo), None)
        df = spec.file(choice.draft_quant) if spec else None
        if df is None or df.best_size is None:
            return None
        total += df.best_size
    return total


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


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
            "The starter profile runs Gemma 3 270M with mainline llama.cpp on the CPU. It is installed with "
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
        self.report = report
        while self.grid.count():
            item = self.grid.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        if not report.has_gpu:
            self.status.setText(f"<b>No NVIDIA GPU found.</b> {report.reason}")
            self.use_starter = True
            self.starter_box.show()
            self.starter_button.setText("Continue with the starter profile")
        else:
            self.status.setText(f"<b>Found {len(report.gpus)} NVIDIA GPU{'s' if len(report.gpus) > 1 else ''}.</b>")
            rows = [("Driver", report.driver_version or "unknown"),
                    ("CUDA (driver)", report.cuda_driver_version or "unknown")]
            for g in report.gpus:
                cc = ".".join(map(str, g.compute_capability)) if g.compute_capability else "?"
                rows.insert(len(rows) - 2, (f"GPU {g.index}", f"{g.name} — {_gib(g.memory_total)} VRAM, "
                                                               f"{_gib(g.memory_free)} free, compute {cc}"))
            for r, (k, v) in enumerate(rows):
                key = QLabel(k)
                key.setStyleSheet("color: palette(placeholder-text);")
                val = QLabel(v)
                val.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
                self.grid.addWidget(key, r, 0, Qt.AlignmentFlag.AlignRight)
                self.grid.addWidget(val, r, 1)
            self.grid.setColumnStretch(1, 1)
            self.starter_box.show()
            self.starter_box.setTitle("Or start small")
            self.starter_button.setText("Use the starter profile instead")
        self.completeChanged.emit()

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


class RecommendPage(QWizardPage):
    """Page 2: the recommended pair for a goal, why, its size, its memory plan, and the runner-up."""

    def __init__(self, services: WizardServices, detect_page: DetectPage) -> None:
        super().__init__()
        self.services, self.detect_page = services, detect_page
        self.rec: Recommendation | None = None
        self.choice: Choice | None = None
        self.setTitle("Recommended setup")
        self.setSubTitle("A target model and its DFlash draft, sized by BeeDeck's memory planner.")
        goals = QHBoxLayout()
        goals.addWidget(QLabel("Goal:"))
        self.goal_group = QButtonGroup(self)
        for i, (goal, tip) in enumerate((
                ("quality", "The largest model and quant that still leave 32k context."),
                ("speed", "The fewest weight bytes per token: fastest replies."),
                ("context", "The longest context with a 4-bit-or-better quant."))):
            b = QRadioButton(goal.capitalize())
            b.setToolTip(tip)
            b.setProperty("goal", goal)
            self.goal_group.addButton(b, i)
            goals.addWidget(b)
        goals.addStretch(1)
        self.goal_group.button(0).setChecked(True)
        self.goal_group.idClicked.connect(lambda _i: self.refresh())
        self.title_label = QLabel()
        self.title_label.setStyleSheet("font-size: 15px; font-weight: 600;")
        self.title_label.setWordWrap(True)
        self.size_label = QLabel()
        self.reasons_label = WrapLabel()
        self.reasons_label.setTextFormat(Qt.TextFormat.PlainText)
        self.memory_bar = MemoryBar()
        self.memory_bar.empty_text = "Runs on the CPU: no GPU memory needed."
        self.runner_label = WrapLabel()
        self.runner_button = QPushButton("Use the runner-up instead")
        self.runner_button.clicked.connect(self._on_runner_clicked)
        runner_row = QHBoxLayout()
        runner_row.addWidget(self.runner_label, 1)
        runner_row.addWidget(self.runner_button, 0, Qt.AlignmentFlag.AlignTop)
        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        layout.addLayout(goals)
        layout.addWidget(self.title_label)
        layout.addWidget(self.size_label)
        layout.addWidget(self.reasons_label)
        layout.addWidget(self.memory_bar)
        layout.addLayout(runner_row)
        layout.addStretch(1)

    def goal(self) -> str:
        b = self.goal_group.checkedButton()
        return str(b.property("goal")) if b else "quality"

    def initializePage(self) -> None:
        starter = self.detect_page.use_starter
        for b in self.goal_group.buttons():
            b.setEnabled(not starter)
        self.refresh()

    def refresh(self) -> None:
        vram, goal = self.detect_page.free_vram(), self.goal()
        self.title_label.setText("Working out what fits…")
        self.services.runner(lambda: self.services.recommend(vram, goal), self.show_recommendation,
                             lambda exc: self.title_label.setText(f"No recommendation: {exc}"))

    def show_recommendation(self, rec: Recommendation) -> None:
        self.rec = rec
        self._show_choice(rec.primary, rec.reasons)
        runner = rec.runner_up
        self.runner_label.setText(f"Runner-up: {runner.summary()}" if runner else "")
        self.runner_button.setVisible(runner is not None)
        self.runner_label.setVisible(runner is not None)
        self.completeChanged.emit()

    def _show_choice(self, choice: Choice, reasons: list[str]) -> None:
        self.choice = choice
        if choice.draft_file is None:
            self.title_label.setText(choice.title if choice.title.lower().startswith("starter")
                                     else f"Starter profile: {choice.title}")
            self.size_label.setText("Download: nothing (installed with BeeDeck).")
        else:
            self.title_label.setText(f"{choice.title}: {choice.target_quant} + {choice.draft_quant} draft, "
                                     f"{choice.settings.ctx_size:,} tokens of context")
            size = download_size(choice)
            self.size_label.setText(f"Download: {_gib(size)} ({choice.target_file} + {choice.draft_file})"
                                    if size else f"Download: {choice.target_file} + {choice.draft_file}")
        # Plain text: WrapLabel sizes itself from plain-text metrics (the runner-up has its own row).
        self.reasons_label.setText("\n".join(f"• {r}" for r in reasons if not r.startswith("Runner-up:")))
        self.memory_bar.set_plan(choice.plan)

    def _on_runner_clicked(self) -> None:
        if self.rec is None or self.rec.runner_up is None:
            return
        primary, runner = self.rec.primary, self.rec.runner_up
        self.rec = Recommendation(runner, primary, [f"You picked the runner-up: {runner.summary()}.",
                                                    f"The recommendation was: {primary.summary()}."])
        self.show_recommendation(self.rec)
        self.runner_button.setText("Back to the recommendation")

    def isComplete(self) -> bool:
        return self.choice is not None


class SetupWizard(QWizard):
    """The first-run wizard. Signals: ``setup_finished(object)`` (a :class:`SetupResult`) when the
    engine and models are ready and the smoke test passed; the main window starts the server."""

    setup_finished = Signal(object)

    def __init__(self, services: WizardServices | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from beedeck.ui.setup.setup_run_page import RunPage

        self.services = services or WizardServices()
        self.setWindowTitle("Set up BeeDeck")
        self.setWizardStyle(QWizard.WizardStyle.ModernStyle)
        self.setOption(QWizard.WizardOption.NoBackButtonOnLastPage, False)
        self.detect_page = DetectPage(self.services)
        self.recommend_page = RecommendPage(self.services, self.detect_page)
        self.run_page = RunPage(self.services, self.detect_page, self.recommend_page)
        self.run_page.finished_setup.connect(self._on_run_page_finished)
        for page in (self.detect_page, self.recommend_page, self.run_page):
            self.addPage(page)
        self.resize(780, 620)

    def _on_run_page_finished(self, result: SetupResult) -> None:
        self.setup_finished.emit(result)

    def reject(self) -> None:
        self.run_page.shutdown()
        super().reject()


def open_dialog(window: MainWindow) -> SetupWizard:
    """The main window's wizard slot: detection through the window's hook, the result into
    :meth:`MainWindow.apply_setup` (saves the profile and starts the server)."""
    wizard = SetupWizard(WizardServices(detect=window.detect_hardware), window)
    wizard.setup_finished.connect(window.apply_setup)
    return wizard
