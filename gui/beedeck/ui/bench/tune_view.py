"""The auto-tune view: pick a time budget and the prompts (a suite, or with permission the last
prompts of a conversation), start or cancel the search, watch it live (progress, the plan, the chart
of every point), read the verdict and table, save the best as the profile, export the files.

The search is :func:`beedeck.core.bench.tune.tune` on a QThread worker; its callbacks arrive as
queued signals, so no widget is touched off the GUI thread. ``tune_fn`` is the core seam (tests pass
``tune`` with a fake measurement).

Signals: ``run_started()``, ``run_finished(object)`` (the :class:`TuneResult`, partial when cancelled;
None when the search could not start), ``save_requested(LaunchSettings)`` (the best settings).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.bench.progress import format_duration
from beedeck.core.bench.runner import DEFAULT_REPS
from beedeck.core.bench.suites import BUILTIN_SUITES, BenchError, BenchSuite, load_suite
from beedeck.core.bench.tune import (
    ChatMessageLike,
    TunePlan,
    TunePoint,
    TuneResult,
    suite_from_chat,
    tune,
)
from beedeck.core.bench.tune.points import min_budget_s, point_seconds
from beedeck.core.bench.tune.report import COLUMNS, point_cells, write_tune_reports
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.comparison import MIN_RUNS
from beedeck.core.starter import STARTER_TOKENS_PER_S, is_starter
from beedeck.ui.bench.run_view import CoreWorker, RunView, append_row, results_table
from beedeck.ui.bench.tune_chart import SearchChart, render_tune_chart

BUDGETS = (("2 minutes", 120.0), ("5 minutes", 300.0), ("10 minutes", 600.0), ("30 minutes", 1800.0),
           ("1 hour", 3600.0))
DEFAULT_BUDGET_INDEX = 2
MAX_TOKENS = 128  # the same short replies at every point: enough to time generation
CHAT_SOURCE = "chat"
# (conversation id) -> its messages; conversations() -> [(id, title)], newest first
MessagesFn = Callable[[int], list[ChatMessageLike]]
ConversationsFn = Callable[[], list[tuple[int, str]]]


class _Worker(CoreWorker):
    """Runs one search on its QThread; the plan and each point measured become signals too."""

    planned = Signal(TunePlan)
    point_done = Signal(TunePoint)
    what = "The search"

    def callbacks(self) -> dict[str, Callable[..., Any]]:
        return {**super().callbacks(), "on_plan": self.planned.emit, "on_point": self.point_done.emit}


class TuneView(RunView):
    """Auto-tune of one engine and profile. Call :meth:`set_launch` first; see the module docstring."""

    save_requested = Signal(LaunchSettings)

    def __init__(self, parent: QWidget | None = None, tune_fn: Callable[..., TuneResult] = tune) -> None:
        super().__init__(parent)
        self.tune_fn = tune_fn
        self._launch: tuple[Path, EngineCaps, LaunchSettings] | None = None
        self._tokens_per_s: float | None = None
        self._waiting = ""
        self._suite_override: BenchSuite | None = None
        self._conversations: ConversationsFn | None = None
        self._messages: MessagesFn | None = None
        self._points: list[TunePoint] = []
        self.result: TuneResult | None = None
        self._make_widgets()
        self._arrange()
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.save_profile_button.clicked.connect(self._on_save_profile_clicked)
        self.export_button.clicked.connect(self._on_export_clicked)
        self.budget_box.currentIndexChanged.connect(self._update_controls)
        self.reps.valueChanged.connect(self._update_controls)
        self.source_box.currentIndexChanged.connect(self._update_controls)
        self.chat_consent.toggled.connect(self._update_controls)
        self.chat_box.currentIndexChanged.connect(self._update_controls)
        self._update_controls()

    def _make_widgets(self) -> None:
        self.budget_box = QComboBox()
        for label, seconds in BUDGETS:
            self.budget_box.addItem(label, seconds)
        self.budget_box.setCurrentIndex(DEFAULT_BUDGET_INDEX)
        self.source_box = QComboBox()
        for name in BUILTIN_SUITES:
            self.source_box.addItem(f"Suite: {name}", name)
        self.source_box.addItem("My last prompts of a conversation", CHAT_SOURCE)
        self.chat_box = QComboBox()
        self.last_n = QSpinBox()
        self.last_n.setRange(1, 50)
        self.last_n.setValue(5)
        self.chat_consent = QCheckBox("Use these prompts of mine (sent only to the local server BeeDeck starts)")
        self.reps = QSpinBox()
        self.reps.setRange(MIN_RUNS, 20)  # an interval needs 3 runs a side (the rule)
        self.reps.setValue(DEFAULT_REPS)
        self.start_button = QPushButton("Start")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.budget_note = QLabel()
        self.budget_note.setWordWrap(True)
        self.plan_label = QLabel()
        self.plan_label.setWordWrap(True)
        self.status = QLabel("Pick a budget and the prompts, then start.")
        self.status.setWordWrap(True)
        self.chart = SearchChart()
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.verdict.setObjectName("tune-verdict")
        self.table = results_table(COLUMNS)
        self.save_profile_button = QPushButton("Save as profile")
        self.save_profile_button.setToolTip("Use the best configuration as the launch profile.")
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Write tune.md, tune.json, tune.csv and tune.png to a folder.")
        for b in (self.save_profile_button, self.export_button):
            b.setEnabled(False)
        self.last_label = QLabel("last")

    def _arrange(self) -> None:
        form = QGridLayout()
        form.addWidget(QLabel("Time budget"), 0, 0)
        form.addWidget(self.budget_box, 0, 1)
        form.addWidget(QLabel("Repetitions"), 0, 2)
        form.addWidget(self.reps, 0, 3)
        form.addWidget(QLabel("Prompts"), 1, 0)
        form.addWidget(self.source_box, 1, 1)
        form.addWidget(self.chat_box, 1, 2)
        last = QHBoxLayout()
        last.addWidget(self.last_label)
        last.addWidget(self.last_n)
        form.addLayout(last, 1, 3)
        form.addWidget(self.chat_consent, 2, 1, 1, 3)
        buttons = QHBoxLayout()
        buttons.addWidget(self.budget_note, 1)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        bottom = QHBoxLayout()
        bottom.addWidget(self.verdict, 1)
        bottom.addWidget(self.save_profile_button)
        bottom.addWidget(self.export_button)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.plan_label)
        layout.addWidget(self.status)
        layout.addWidget(self.chart, 2)
        layout.addLayout(bottom)
        layout.addWidget(self.table, 1)

    # ---- configuration ----

    def set_launch(self, engine: Path, caps: EngineCaps, settings: LaunchSettings,
                   tokens_per_s: float | None = None) -> None:
        """Tune ``settings`` (the hand-written start) on ``engine``. ``tokens_per_s``: its last measured
        speed (the speed panel's), for the minimum budget; the starter has its own measured figure."""
        self._launch = (Path(engine), caps, settings)
        self._tokens_per_s = tokens_per_s or (STARTER_TOKENS_PER_S if is_starter(settings) else None)
        self._update_controls()

    def set_waiting(self, reason: str) -> None:
        """Why there is nothing to tune yet (the chat server holds the model; the engine is being probed)."""
        self._waiting = reason
        self._update_controls()

    def point_s(self) -> float | None:
        """A point's expected time from the expected speed (None: no speed known)."""
        if self._launch is None or not self._tokens_per_s:
            return None
        try:
            prompts = self.last_n.value() if self._chat_picked() else len(self.build_suite().prompts)
        except BenchError:
            return None
        return point_seconds(prompts, self.reps.value(), MAX_TOKENS, self._tokens_per_s)

    def min_budget_s(self) -> float | None:
        """The smallest budget that fits one candidate point (None: no speed known)."""
        point = self.point_s()
        return None if point is None or self._launch is None else min_budget_s(self._launch[2].spec_mode, point)

    def set_suite(self, suite: BenchSuite) -> None:
        """Use this suite instead of the picked built-in one (a user's file, or a short test suite)."""
        self._suite_override = suite
        self._update_controls()

    def set_chat_source(self, conversations: ConversationsFn, messages: MessagesFn) -> None:
        """Offer the user's own conversations as prompts (listed now; read when the search starts)."""
        self._conversations, self._messages = conversations, messages
        self.chat_box.clear()
        try:
            listed = conversations()
        except Exception as exc:  # a damaged chat store: say so where the list would be
            self.chat_box.addItem(f"(the chats could not be read: {exc})", None)
            listed = []
        for cid, title in listed:
            self.chat_box.addItem(f"{title} ({cid})", cid)
        self._update_controls()

    @property
    def budget_s(self) -> float:
        return float(self.budget_box.currentData())

    def _chat_picked(self) -> bool:
        return self.source_box.currentData() == CHAT_SOURCE and self._suite_override is None

    @Slot()
    def _update_controls(self) -> None:
        chat = self._chat_picked()
        for w in (self.chat_box, self.last_label, self.last_n, self.chat_consent):
            w.setVisible(chat)
        why = ""
        minimum = self.min_budget_s()
        if self._launch is None:
            why = self._waiting or "No engine and model are set up yet: open Settings or the setup wizard first."
        elif chat and self.chat_box.currentData() is None:
            why = "There is no conversation to take prompts from: chat first, or pick a suite."
        elif chat and not self.chat_consent.isChecked():
            why = "Tick the box to let BeeDeck use your prompts of this conversation, or pick a suite."
        elif minimum is not None and self.budget_s < minimum:
            why = (f"A {self.budget_box.currentText()} budget is too small for one candidate: at about "
                   f"{self._tokens_per_s:.0f} tokens/s a point takes about {format_duration(self.point_s() or 0)}, "
                   f"so the search needs at least {format_duration(minimum)}. Pick a longer budget (or fewer "
                   "repetitions).")
        self.start_button.setEnabled(not why and not self.running)
        self.budget_note.setText(why or (
            f"Budget {self.budget_box.currentText()}: the baseline and the start are measured first, then "
            "candidates while the time lasts; a point that would end past the budget is not started."))

    def build_suite(self) -> BenchSuite:
        """The prompts of the search, at temperature 0; BenchError naming the fix."""
        if self._suite_override is not None:
            return self._suite_override
        if not self._chat_picked():
            return load_suite(str(self.source_box.currentData())).with_overrides(MAX_TOKENS, 0.0)
        cid = self.chat_box.currentData()
        if cid is None or self._messages is None or not self.chat_consent.isChecked():
            raise BenchError("Pick a conversation and allow its prompts to be used, or pick a suite.")
        title = self.chat_box.currentText()
        return suite_from_chat(self._messages(int(cid)), self.last_n.value(), title, MAX_TOKENS,
                               source=f"chat:{cid}")

    # ---- running ----

    @Slot()
    def start(self) -> None:
        if self.running or self._launch is None:
            return
        try:
            suite = self.build_suite()
        except BenchError as exc:
            self.status.setText(str(exc))
            return
        engine, caps, settings = self._launch
        kwargs: dict[str, Any] = {"engine": engine, "caps": caps, "start_settings": settings, "suite": suite,
                                  "budget_s": self.budget_s, "reps": self.reps.value()}
        self._cancel = threading.Event()
        self._points = []
        self.result = None
        self.chart.set_points([])
        self.progress.setFormat("%p%")  # a bar that said "Cancelled" last time
        self.progress.setValue(0)
        self.table.setRowCount(0)
        self.verdict.setText("")
        for b in (self.save_profile_button, self.export_button):
            b.setEnabled(False)
        worker = _Worker(self.tune_fn, kwargs, self._cancel)
        thread = self._begin(worker)
        worker.planned.connect(self._on_planned)
        worker.point_done.connect(self._on_point)
        self.cancel_button.setEnabled(True)
        self.status.setText("Starting…")
        thread.start()
        self._update_controls()
        self.run_started.emit()

    @Slot()
    def cancel(self) -> None:
        if self.running:
            self._cancel.set()
            self.cancel_button.setEnabled(False)
            self.progress.setFormat("Cancelling… %p%")
            self.status.setText("Cancelling: the running server is stopped, the points measured so far are kept…")

    def _after_run(self) -> None:
        self.cancel_button.setEnabled(False)
        self._update_controls()

    @Slot(object)
    def _on_planned(self, plan: TunePlan) -> None:
        self.plan_label.setText(plan.describe())

    @Slot(object)
    def _on_point(self, point: TunePoint) -> None:
        self._points.append(point)
        best = next((p for p in reversed(self._points) if p.accepted), None)
        self.chart.set_points(self._points, best)
        self._add_row(point, best)

    def _add_row(self, point: TunePoint, best: TunePoint | None) -> None:
        append_row(self.table, point_cells(point, best))

    def _show(self, result: TuneResult) -> None:
        self.show_result(result)

    def show_result(self, result: TuneResult) -> None:
        """The verdict, the final table and chart; Save only when the best beat the start."""
        self.result = result
        self.chart.set_points(result.points, result.best)
        self.table.setRowCount(0)
        for p in result.points:
            self._add_row(p, result.best)
        notes = "".join(f"\n• {n}" for n in result.notes)
        self.verdict.setText(result.verdict + notes)
        self.status.setText(("Search cancelled" if result.cancelled else "Search finished")
                            + f" after {result.elapsed_s:.0f} s.")
        # A cancelled search's bar stays where it stopped (the points measured of those planned), and says it
        # stopped: at 25 % with nothing on it, it read as a search still running.
        self.progress.setFormat("Cancelled: %v of %m points measured" if result.cancelled else "%p%")
        self.save_profile_button.setEnabled(result.savable)
        self.save_profile_button.setToolTip(
            "Use the best configuration as the launch profile." if result.improved else
            "Use this unconfirmed win as the launch profile (run again to confirm it)." if result.savable else
            "Nothing beat the start measurably: the profile stays as it is.")
        self.export_button.setEnabled(bool(result.points))

    # ---- results ----

    def export(self, out_dir: Path) -> list[Path]:
        """Write tune.md, tune.json, tune.csv and tune.png into ``out_dir``."""
        if self.result is None:
            return []
        return write_tune_reports(self.result, out_dir, render_tune_chart)

    @Slot()
    def _on_export_clicked(self) -> None:
        self._write_to_chosen_folder("Export the tune results", self.export, "Exported")

    @Slot()
    def _on_save_profile_clicked(self) -> None:
        if self.result is not None and self.result.savable and self.result.best_settings is not None:
            self.save_requested.emit(self.result.best_settings)
            self.status.setText("The best configuration was handed over to become the launch profile.")
