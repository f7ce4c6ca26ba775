"""Page 3 of the setup wizard: one button gets an engine, downloads the pair, smoke-tests, saves, and hands
over to the main window. The steps are core's (:mod:`beedeck.core.setup`: the same list ``beedeck setup`` runs);
this page shows a row per step and runs each in a :class:`TaskRunner`. A failure shows the step's message and
remedy with a Retry button that resumes from that step (downloads continue from their ``.part`` files).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWizardPage,
)

from beedeck.core.engine.building import minutes_text
from beedeck.core.engine.engine_offers import BUILD, EngineOffers
from beedeck.core.engine.registry import EngineRecord
from beedeck.core.setup import (
    STEPS,
    Setup,
    SetupChoices,
    SetupResult,
    SetupServices,
    build_args,
    find_engines,
    unlisted_offers,
)
from beedeck.ui.setup.build_preview import BuildPreview
from beedeck.ui.setup.engine_choice import EngineChoice
from beedeck.ui.setup.services import WizardServices
from beedeck.ui.setup.task_runner import TaskRunner
from beedeck.ui.wrap_label import WrapLabel

if TYPE_CHECKING:
    from beedeck.ui.setup.detect_page import DetectPage
    from beedeck.ui.setup.recommend_page import RecommendPage

# WizardServices.extra's keys (tests replace these core calls) -> SetupServices' fields
_EXTRA = {"registry": "registry", "starter_engine": "locate_starter", "starter_model": "starter_model",
          "download_model": "download_model", "build_engine": "build_engine", "download_engine": "download_engine",
          "resolve_release": "resolve_release", "missing_build_tools": "missing_build_tools",
          "smoke_test": "smoke_test", "find_local": "find_local"}


@dataclass
class _Step:
    key: str
    title: str
    label: QLabel
    bar: QProgressBar
    status: WrapLabel
    retry: QPushButton


class RunPage(QWizardPage):
    """Page 3. Signals: ``finished_setup(SetupResult)``."""

    finished_setup = Signal(SetupResult)

    def __init__(self, services: WizardServices, detect_page: DetectPage, recommend_page: RecommendPage) -> None:
        super().__init__()
        self.services, self.detect_page, self.recommend_page = services, detect_page, recommend_page
        self.tools = SetupServices(**{name: services.extra[key] for key, name in _EXTRA.items()
                                      if services.extra.get(key) is not None})
        self.runner = TaskRunner(self)
        self.runner.progress_changed.connect(self._on_runner_progress)
        self.runner.eta_changed.connect(self._on_runner_eta)
        self.runner.line_received.connect(self._on_runner_line)
        self.runner.finished.connect(self._on_runner_finished)
        self.runner.failed.connect(self._on_runner_failed)
        self.runner.cancelled.connect(self._on_runner_cancelled)
        self.setup: Setup | None = None  # the run under way: what its steps got so far (made by start)
        self.result: SetupResult | None = None
        self._index = 0
        self._done = False
        self.offers: EngineOffers | None = None
        self._list_generation = 0  # initializePage's engine listing that may still fill the combo
        self.setTitle("Get everything ready")
        self.setSubTitle("One click: engine, models, a smoke test, then BeeDeck starts the server.")
        self._build()

    # -- building ----------------------------------------------------------------------------
    def _build(self) -> None:
        self.choice = EngineChoice()
        c = self.choice
        self.engine_group, self.use_found, self.found_combo = c.group, c.use_found, c.found_combo
        self.download_radio, self.build_radio = c.download_radio, c.build_radio
        self.preview = BuildPreview(lambda **kw: self.tools.build_engine(**kw))
        c.build_detail.addWidget(self.preview)
        self.preview.runner.line_received.connect(self._on_runner_line)
        self.preview.changed.connect(self._sync_start_button)
        self.build_radio.toggled.connect(self._on_build_toggled)
        self.build_radio.clicked.connect(lambda _checked=False: self.preview.show_plan_for(self._build_args()))
        self.grid = QGridLayout()
        self.grid.setHorizontalSpacing(10)
        self.grid.setVerticalSpacing(4)
        self.grid.setColumnStretch(1, 1)
        self.steps: list[_Step] = []
        for step in STEPS:  # a row per step of the one list `beedeck setup` runs too
            self._add_step(step.key, step.title)
        self.start_button = QPushButton("Set up and launch")
        self.start_button.setDefault(True)
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(lambda: self.runner.cancel())
        self.log_toggle = QToolButton()
        self.log_toggle.setText("Show log")
        self.log_toggle.setCheckable(True)
        self.log_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.log_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(5000)
        self.log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log.setMinimumHeight(140)
        self.log.hide()
        self.log_toggle.toggled.connect(self._on_log_toggled)
        buttons = QHBoxLayout()
        buttons.addWidget(self.log_toggle)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.start_button)
        layout = QVBoxLayout(self)
        layout.setSpacing(8)
        layout.addWidget(self.choice)
        layout.addSpacing(6)
        layout.addLayout(self.grid)
        layout.addLayout(buttons)
        layout.addWidget(self.log, 1)
        layout.addStretch(0)

    def _add_step(self, key: str, title: str) -> None:
        row = len(self.steps) * 2
        label = QLabel(title)
        bar = QProgressBar()
        bar.setRange(0, 1)
        bar.setValue(0)
        bar.setTextVisible(False)
        bar.setFixedHeight(12)
        status = WrapLabel("waiting")
        status.setStyleSheet("color: palette(placeholder-text);")
        retry = QPushButton("Retry")
        retry.hide()
        retry.clicked.connect(lambda: self._retry(key))
        self.grid.addWidget(label, row, 0)
        self.grid.addWidget(bar, row, 1)
        self.grid.addWidget(retry, row, 2)
        self.grid.addWidget(status, row + 1, 1, 1, 2)
        self.steps.append(_Step(key, title, label, bar, status, retry))

    def _on_log_toggled(self, shown: bool) -> None:
        self.log.setVisible(shown)
        self.log_toggle.setText("Hide log" if shown else "Show log")
        self.log_toggle.setArrowType(Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow)

    # -- page life ---------------------------------------------------------------------------
    def initializePage(self) -> None:
        choices = self.choices()
        self.setup = None
        self.choice.set_looking()
        self.start_button.setEnabled(False)  # until the engine list is in
        self.start_button.setToolTip("Looking for engines…")
        # Registering the starter probes its binary (three subprocess runs of up to 15 s each), the
        # download offer asks the releases API and the build's preflight runs tools: never on the GUI thread.
        self._list_generation += 1
        generation = self._list_generation
        self.services.runner(lambda: find_engines(choices, self.tools),
                             lambda found: self._show_engines(generation, choices.starter, found),
                             lambda exc: self._show_engines(generation, choices.starter, None, exc))
        shown = Setup(choices, self.tools).steps()
        for row, step in zip(self.steps, STEPS, strict=True):
            for w in (row.label, row.bar, row.status):
                w.setVisible(step in shown)
            row.title = step.title_for(choices)
            row.label.setText(row.title)

    def _show_engines(self, generation: int, starter_mode: bool,
                      found: tuple[list[EngineRecord], EngineOffers] | None,
                      error: BaseException | None = None) -> None:
        if not shiboken6.isValid(self) or generation != self._list_generation:
            return  # the wizard closed, or the page was entered again, while the list was loading
        records, self.offers = found if found is not None else ([], unlisted_offers(starter_mode, error))
        self.choice.show_offers(self.offers, records)
        self.start_button.setEnabled(not self._done)
        self.start_button.setToolTip("")
        self._on_build_toggled(self.build_radio.isChecked())
        if error is not None:
            self.log.appendPlainText(f"The engine list could not be read: {error}. Build an engine, or "
                                     "check that BeeDeck's engines folder is readable.")

    def choices(self) -> SetupChoices:
        """What the pages show now (read here, on the GUI thread: the steps run on a worker)."""
        rec = self.recommend_page
        return SetupChoices(self.detect_page.report, rec.choice, engine=self.choice.chosen(),
                            engine_id=str(self.found_combo.currentData()), offers=self.offers,
                            use_starter=self.detect_page.use_starter, card=rec.card(), goal=rec.goal())

    def make_setup(self) -> Setup:
        """A setup run of what the pages show now, with the wizard's core calls."""
        self.tools.endpoint, self.tools.models_dir = self.services.endpoint, self.services.models_dir
        self.tools.settings = self.services.settings
        save = self.services.save_settings  # the session's: it saves its one copy (services.settings)
        self.tools.save_settings = (lambda _app: save()) if save is not None else None
        return Setup(self.choices(), self.tools)

    def _on_build_toggled(self, checked: bool) -> None:
        """The build's plan shows while the build is the choice (the user's pick of it starts the dry run;
        a build checked by default waits for the start button: no clone the user did not ask for)."""
        self.preview.setVisible(checked and (self.preview.busy or bool(self.preview.text())))
        self._sync_start_button()

    def _sync_start_button(self) -> None:
        """While the build's dry run runs, no start; once its plan is shown, the button says the minutes."""
        if self.runner.is_running() or self._done or self.choice.offers is None:
            return
        build = self.choice.chosen() == BUILD
        self.start_button.setEnabled(not (build and self.preview.busy))
        minutes = self.preview.minutes() if build and self.preview.has_plan(self._build_args()) else ""
        self.start_button.setText(f"Build (about {minutes}) and launch" if minutes else "Set up and launch")

    def _build_args(self) -> dict[str, Any]:
        """The build's arguments for this machine and the recommended pick (the dry run's and the build's)."""
        return build_args(self.choices(), self.tools.registry)

    def isComplete(self) -> bool:
        return self._done

    def shutdown(self) -> None:
        self.preview.shutdown()
        self.runner.shutdown()

    # -- running -----------------------------------------------------------------------------
    def start(self) -> None:
        if self.choice.chosen() == BUILD and not self.preview.has_plan(self._build_args()):
            self.preview.show_plan_for(self._build_args())  # first what it compiles and for how long
            return
        self.setup = self.make_setup()
        self._index = 0
        for s in self.steps:
            self._set_status(s, "waiting", None)
            s.bar.setRange(0, 1)
            s.bar.setValue(0)
        self._run_current()

    def _retry(self, key: str) -> None:
        if self.setup is None:
            return
        self._index = next(i for i, s in enumerate(self.setup.steps()) if s.key == key)
        self._run_current()

    def _run_current(self) -> None:
        assert self.setup is not None
        steps = self.setup.steps()
        if self._index >= len(steps):
            self._complete()
            return
        step, row = steps[self._index], self._current()
        row.retry.hide()
        row.bar.setRange(0, 0)  # busy until the first progress report
        self.start_button.setEnabled(False)
        if step.key == "engine" and self.choice.chosen() == BUILD and self.preview.busy:
            self._set_status(row, "waiting for the dry run to finish configuring the build's folder…", None)
            self.choice.freeze()
            self.preview.when_idle(self._run_current)
            return
        self._set_status(row, "working…", None)
        self.cancel_button.setEnabled(True)
        self.setup.choices = self.choices()  # the engine choice as it is now (a Retry may follow a new pick)
        self.choice.freeze()
        self.runner.start(partial(step.run, self.setup), here=step.here)

    def _current(self) -> _Step:
        assert self.setup is not None
        key = self.setup.steps()[self._index].key
        return next(s for s in self.steps if s.key == key)

    def _set_status(self, step: _Step, text: str, color: str | None) -> None:
        step.status.setStyleSheet(f"color: {color};" if color else "color: palette(placeholder-text);")
        step.status.setText(text)

    def _on_runner_progress(self, done: int, total: int) -> None:
        bar = self._current().bar
        if total > 0:
            bar.setRange(0, 1000)
            bar.setValue(int(1000 * min(done, total) / total))
            bar.setTextVisible(False)

    def _on_runner_eta(self, seconds: float) -> None:
        self._set_status(self._current(), f"building: about {minutes_text(seconds)} left", None)

    def _on_runner_line(self, line: str) -> None:
        self.log.appendPlainText(line)

    def _on_runner_finished(self, result: object) -> None:
        step = self._current()
        step.bar.setRange(0, 1)
        step.bar.setValue(1)
        self._set_status(step, str(result), "#2e7d32")
        self._index += 1
        self._run_current()

    def _on_runner_failed(self, message: str) -> None:
        step = self._current()
        step.bar.setRange(0, 1)
        step.bar.setValue(0)
        self._set_status(step, message, "#d62728")
        step.retry.show()
        self.log.appendPlainText(f"[{step.title}] {message}")
        self._idle()

    def _on_runner_cancelled(self) -> None:
        step = self._current()
        step.bar.setRange(0, 1)
        self._set_status(step, "Cancelled. Press Retry to continue where it stopped.", "#c98a00")
        step.retry.show()
        self._idle()

    def _idle(self) -> None:
        self.start_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.choice.restore()

    def _complete(self) -> None:
        assert self.setup is not None
        self.result = self.setup.result()
        self._done = True
        self._idle()
        self.start_button.setEnabled(False)
        self.start_button.setText("Ready")
        self.completeChanged.emit()
        self.finished_setup.emit(self.result)
