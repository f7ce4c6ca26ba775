"""Page 3 of the setup wizard: one button gets an engine, downloads the pair, smoke-tests, and hands
over to the main window. Every step runs in a :class:`TaskRunner`; a failure shows the core's
message (what happened and what to do) with a Retry button that resumes from that step (downloads
continue from their ``.part`` files).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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

from beedeck.core import starter
from beedeck.core.engine import engine_offers
from beedeck.core.engine import registry as engines
from beedeck.core.engine.build import build_engine, minutes_text
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.engine_offers import BUILD, DOWNLOAD, EXISTING, EngineOffers, Offer
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.registry import EngineRecord, EngineRegistry
from beedeck.core.engine.releases import download_engine, resolve_release
from beedeck.core.launcher import preflight
from beedeck.core.models import hub, library
from beedeck.core.models.recommend import tune_for_files
from beedeck.core.settings import load_settings, try_save
from beedeck.ui.setup.build_preview import BuildPreview
from beedeck.ui.setup.engine_choice import EngineChoice
from beedeck.ui.setup.services import SetupResult, WizardServices
from beedeck.ui.setup.task_runner import TaskRunner
from beedeck.ui.wrap_label import WrapLabel

if TYPE_CHECKING:
    from beedeck.ui.setup.detect_page import DetectPage
    from beedeck.ui.setup.recommend_page import RecommendPage

StepFn = Callable[..., Any]  # fn(on_progress=, on_line=, cancel_event=) -> result


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
        x = services.extra
        self.registry: EngineRegistry = x.get("registry") or EngineRegistry()
        self.locate_starter: Callable[[], Path] = x.get("starter_engine") or starter.starter_engine
        self.starter_model: Callable[[], Path] = x.get("starter_model") or starter.starter_model
        if self.registry.smoke_model is None:  # a new engine generates from the starter model before it is ready
            self.registry.smoke_model = x.get("starter_model") or (lambda: starter.starter_model(download=False))
        self.download_model: Callable[..., list[Path]] = x.get("download_model") or hub.download_model
        self.build_engine: Callable[..., Any] = x.get("build_engine") or build_engine
        self.download_engine: Callable[..., Any] = x.get("download_engine") or download_engine
        self.resolve_release: Callable[..., Any] = x.get("resolve_release") or resolve_release
        self.missing_build_tools: Callable[..., list[str]] = (x.get("missing_build_tools")
                                                              or engine_offers.missing_build_tools)
        self.smoke_test: Callable[..., engines.SmokeResult] = x.get("smoke_test") or engines.smoke_test
        self.find_local: Callable[[str, str], Any] = x.get("find_local") or library.find_local
        self.runner = TaskRunner(self)
        self.runner.progress_changed.connect(self._on_runner_progress)
        self.runner.eta_changed.connect(self._on_runner_eta)
        self.runner.line_received.connect(self._on_runner_line)
        self.runner.finished.connect(self._on_runner_finished)
        self.runner.failed.connect(self._on_runner_failed)
        self.runner.cancelled.connect(self._on_runner_cancelled)
        self.engine: EngineRecord | None = None
        self.paths: dict[str, str] = {}
        self._tuned: LaunchSettings | None = None  # the choice re-planned for the engine (_retune)
        self.result: Any = None
        self._index = 0
        self._done = False
        self._chosen = ""
        self.offers: EngineOffers | None = None
        self._found_id = ""
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
        self.preview = BuildPreview(lambda **kw: self.build_engine(**kw))
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
        for key, title in (("engine", "Engine"), ("target", "Target model"), ("draft", "Draft model"),
                           ("smoke", "Smoke test")):
            self._add_step(key, title)
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
        starter_mode = self._starter_mode()
        no_draft = starter_mode or self._no_draft()
        self.choice.set_looking()
        self.start_button.setEnabled(False)  # until the engine list is in
        self.start_button.setToolTip("Looking for engines…")
        # Registering the starter probes its binary (three subprocess runs of up to 15 s each), the
        # download offer asks the releases API and the build's preflight runs tools: never on the GUI thread.
        self._list_generation += 1
        generation = self._list_generation
        self.services.runner(lambda: self._engines(starter_mode),
                             lambda found: self._show_engines(generation, starter_mode, found),
                             lambda exc: self._show_engines(generation, starter_mode, None, exc))
        for step in self.steps:
            shown = not (no_draft and step.key == "draft")
            for w in (step.label, step.bar, step.status):
                w.setVisible(shown)
        self.steps[1].label.setText("Starter model" if starter_mode else "Target model")

    def _show_engines(self, generation: int, starter_mode: bool,
                      found: tuple[list[EngineRecord], EngineOffers] | None,
                      error: BaseException | None = None) -> None:
        if not shiboken6.isValid(self) or generation != self._list_generation:
            return  # the wizard closed, or the page was entered again, while the list was loading
        if found is None:  # the listing itself failed: only a build is left to offer
            found = ([], EngineOffers({
                DOWNLOAD: Offer(DOWNLOAD, False, f"The engine list could not be read ({error}).",
                                "Download a prebuilt release"),
                BUILD: Offer(BUILD, not starter_mode, engine_offers.STARTER_WHY if starter_mode
                             else engine_offers.BUILD_WHY, "Build BeeLlama from source"),
                EXISTING: Offer(EXISTING, False, f"The engine list could not be read ({error}).")}, BUILD))
        records, self.offers = found
        self.choice.show_offers(self.offers, records)
        self.start_button.setEnabled(not self._done)
        self.start_button.setToolTip("")
        self._on_build_toggled(self.build_radio.isChecked())
        if error is not None:
            self.log.appendPlainText(f"The engine list could not be read: {error}. Build an engine, or "
                                     "check that BeeDeck's engines folder is readable.")

    def _generation(self) -> str:
        choice = self.recommend_page.choice
        return choice.generation.value if choice else ""

    def _engines(self, starter_mode: bool) -> tuple[list[EngineRecord], EngineOffers]:
        """(the ready engines, best first; the three offers): worker thread, no widget access."""
        try:
            self.registry.ensure_starter(self.locate_starter)
        except engines.EngineError:
            pass  # no starter installed: the list simply lacks it
        records = [r for r in self.registry.list() if r.ready]
        report = self.detect_page.report
        if starter_mode:
            records.sort(key=lambda r: r.origin != engines.Origin.STARTER)
        else:  # the best for the recommended pair on this machine first
            records = engine_offers.order_records(records, self._generation(), bool(report and report.has_gpu))
        offers = engine_offers.engine_offers(
            report, records, generation=self._generation(), starter_mode=starter_mode,
            resolve=self.resolve_release, missing_tools=lambda: self.missing_build_tools(report, self.registry.root))
        return records, offers

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
        report = self.detect_page.report
        gpus = [g.compute_capability for g in (report.gpus if report else []) if g.compute_capability]
        pick = self.recommend_page.choice
        # Build the FlashAttention kernels of the recommended K/V types and no more (an unknown pick:
        # the engine's default set, which has f16 and q8_0).
        pairs = [(pick.settings.cache_type_k, pick.settings.cache_type_v)] if pick is not None else None
        return {"gpus": gpus, "cpu_only": not gpus, "cache_pairs": pairs,
                "driver_cuda": report.cuda_driver_version if report else None, "registry": self.registry}

    def isComplete(self) -> bool:
        return self._done

    def shutdown(self) -> None:
        self.preview.shutdown()
        self.runner.shutdown()

    # -- running -----------------------------------------------------------------------------
    def _active_steps(self) -> list[_Step]:
        return [s for s in self.steps if not (s.key == "draft" and (self._starter_mode() or self._no_draft()))]

    def _starter_mode(self) -> bool:
        c = self.recommend_page.choice
        return self.detect_page.use_starter or c is None or c.pair_id == "starter"

    def _no_draft(self) -> bool:
        """A Hub search's pick without a draft file: the target's own MTP head, or no speculation."""
        c = self.recommend_page.choice
        return c is not None and c.draft_file is None

    def start(self) -> None:
        if self.choice.chosen() == BUILD and not self.preview.has_plan(self._build_args()):
            self.preview.show_plan_for(self._build_args())  # first what it compiles and for how long
            return
        self._index = 0
        for s in self.steps:
            self._set_status(s, "waiting", None)
            s.bar.setRange(0, 1)
            s.bar.setValue(0)
        self._run_current()

    def _retry(self, key: str) -> None:
        self._index = next(i for i, s in enumerate(self._active_steps()) if s.key == key)
        self._run_current()

    def _run_current(self) -> None:
        steps = self._active_steps()
        if self._index >= len(steps):
            self._complete()
            return
        step = steps[self._index]
        step.retry.hide()
        step.bar.setRange(0, 0)  # busy until the first progress report
        self.start_button.setEnabled(False)
        if step.key == "engine" and self.choice.chosen() == BUILD and self.preview.busy:
            self._set_status(step, "waiting for the dry run to finish configuring the build's folder…", None)
            self.choice.freeze()
            self.preview.when_idle(self._run_current)
            return
        self._set_status(step, "working…", None)
        self.cancel_button.setEnabled(True)
        # Read the widgets here, on the GUI thread: the step itself runs on a worker.
        self._chosen = self.choice.chosen()
        self._found_id = str(self.found_combo.currentData())
        self.choice.freeze()
        self.runner.start(self._task(step.key))

    def _task(self, key: str) -> StepFn:
        return {"engine": self._get_engine, "target": lambda **kw: self._get_model("target", **kw),
                "draft": lambda **kw: self._get_model("draft", **kw), "smoke": self._smoke}[key]

    def _current(self) -> _Step:
        return self._active_steps()[self._index]

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

    # -- the steps (worker thread: no widget access; values are read before start) ---------------
    def _get_engine(self, *, on_progress: Callable[..., None], on_line: Callable[[str], None],
                    cancel_event: threading.Event) -> str:
        if self._chosen == BUILD:
            # The builder reports (done, total, seconds left): the bar and the step's time left.
            res = self.build_engine(**self._build_args(), on_progress=on_progress, on_line=on_line,
                                    cancel_event=cancel_event)
            if not res.ok or res.record is None:
                raise engines.EngineError(res.smoke.message if res.smoke else "The build produced no engine.")
            self.engine = res.record
        elif self._chosen == DOWNLOAD:
            report = self.detect_page.report
            offer = self.offers[DOWNLOAD] if self.offers is not None else None
            if offer is None or offer.choice is None or self.offers is None:
                raise engines.EngineError(offer.why if offer else "No release was looked up: go Back and Next again.")
            # The release the page showed (its tag), not whatever is newest by now.
            self.engine = self.download_engine(
                repo=offer.choice.repo, tag=offer.choice.tag, backend=offer.backend,
                cuda_driver_version=report.cuda_driver_version if report else None, api_url=self.offers.api_url,
                on_progress=on_progress, on_line=on_line, cancel_event=cancel_event, registry=self.registry)
            if not self.engine.ready:  # registered, so the engine list shows it, but not what this needs
                why = self.engine.smoke.message if self.engine.smoke else "its smoke test failed"
                raise engines.EngineError(f"Downloaded {offer.choice.asset.name}, but it is not ready: {why}")
        else:
            self.engine = self.registry.get(self._found_id)
        return f"{self.engine.name or self.engine.id}: {self.engine.generation} {self.engine.version}".strip()

    def _get_model(self, which: str, *, on_progress: Callable[[int, int | None], None],
                   on_line: Callable[[str], None], cancel_event: threading.Event) -> str:
        if self._starter_mode():
            path = self.starter_model()
            self.paths["target"] = str(path)
            return f"{path.name} (installed with BeeDeck)"
        choice = self.recommend_page.choice
        assert choice is not None
        on_disk = choice.target_path if which == "target" else choice.draft_path
        if on_disk is not None:  # a target with its draft beside it: the recommender found both on disk
            if not on_disk.is_file():
                raise FileNotFoundError(f"{on_disk} is gone since the recommendation: go Back to get a new one.")
            self.paths[which] = str(on_disk)
            return f"on disk: {on_disk}" + (" (found next to the model)" if which == "draft" else "")
        repo = choice.target_repo if which == "target" else choice.draft_repo
        filename = choice.target_file if which == "target" else choice.draft_file
        assert repo and filename
        local = self.find_local(repo, filename)
        if local is not None:
            self.paths[which] = str(local.path)
            return f"found {local.path}"
        on_line(f"downloading {repo}/{filename}")
        got = self.download_model(repo, filename, dest_dir=self.services.models_dir(),
                                  endpoint=self.services.endpoint, on_progress=on_progress,
                                  cancel_event=cancel_event)
        self.paths[which] = str(got[0])
        return f"downloaded to {got[0]}"

    def launch_settings(self) -> LaunchSettings:
        choice = self.recommend_page.choice
        if self._starter_mode():
            return starter.StarterProfile(Path(self.engine.binary if self.engine else ""),
                                          Path(self.paths["target"])).settings()
        assert choice is not None
        s = LaunchSettings.from_dict((self._tuned or choice.settings).to_dict())
        s.target, s.draft = self.paths["target"], self.paths.get("draft")
        return s

    def _retune(self, caps: EngineCaps | None, on_line: Callable[[str], None]) -> None:
        """Re-plan -ubd and the drafter's KVarN cache for the engine now known, from the downloaded files' own
        headers (worker thread; the recommendation may have been made for another engine or none)."""
        choice = self.recommend_page.choice
        if self._starter_mode() or caps is None or choice is None:
            return
        self._tuned, line = tune_for_files(choice.settings, caps, self.recommend_page.card(), self.paths["target"],
                                           self.paths.get("draft"), self.detect_page.free_vram())
        if line:
            on_line(line)

    def _smoke(self, *, on_progress: Callable[[int, int | None], None], on_line: Callable[[str], None],
               cancel_event: threading.Event) -> str:
        assert self.engine is not None
        report = self.detect_page.report
        expect_gpu = bool(report and report.has_gpu) and not self._starter_mode()
        res = self.smoke_test(self.engine.binary, expect_gpu=expect_gpu)
        on_line(res.message)
        if not res.ok:
            raise engines.EngineError(res.message)
        caps = self.engine.engine_caps()
        self._tuned = None
        self._retune(caps, on_line)
        if caps is not None:  # the launch's own preflight (files, mode, guard, kernels, memory the wizard detected)
            checked = preflight(caps, self.launch_settings(),
                                devices=[g.memory_free for g in report.gpus] or None if report else None,
                                host_ram=report.system.ram_total if report else None)
            if not checked.ok or checked.argv is None:
                raise engines.EngineError("The chosen settings cannot run: " + " ".join(
                    str(r) for r in checked.refusals)) from None
            on_line("command: " + checked.argv.command_line(self.engine.binary))
        return res.message

    def _complete(self) -> None:
        assert self.engine is not None
        settings = self.launch_settings()
        app = self.services.settings if self.services.settings is not None else load_settings()
        app.first_run_done = True
        app.last_profile = settings.to_dict()
        app.last_engine = self.engine.binary
        app.default_engine_id = self.engine.id
        app.goal = self.recommend_page.goal()
        problem = self.services.save_settings() if self.services.save_settings is not None else try_save(app)
        if problem:  # the session's copy says so itself too
            self.log.appendPlainText(f"BeeDeck's settings could not be saved ({problem}): the setup applies to "
                                     "this session, and the wizard opens again next time.")
        self.result = SetupResult(self.engine.binary, settings, self.engine.name or self.engine.id, self.engine.id)
        self._done = True
        self._idle()
        self.start_button.setEnabled(False)
        self.start_button.setText("Ready")
        self.completeChanged.emit()
        self.finished_setup.emit(self.result)

