"""The benchmark view: pick a suite and any subset of the speculation modes (baseline, DFlash,
EAGLE-3, DSpark, MTP, n-gram: each offered where the engine and the model files run it, else greyed
with the reason), run them, see the table and bar charts, export the reports (charts: bench_chart.py;
the main window's dialog: bench_dialog.py).

Signals: ``run_started()``, ``run_finished(object)`` (the :class:`BenchReport`, partial when cancelled),
``progress_changed(int, int, str)``. The run happens in a QThread worker; core callbacks arrive as
queued signals, so no widget is touched off the GUI thread.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PySide6.QtCore import Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.bench.baseline_cache import BaselineCache
from beedeck.core.bench.report import Summary, same_text_note, summarize, to_markdown, write_reports
from beedeck.core.bench.results import BenchReport
from beedeck.core.bench.runner import DEFAULT_REPS, run_bench
from beedeck.core.bench.suites import BUILTIN_SUITES, BenchError, BenchSuite, load_suite
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.speculation.comparison import MIN_RUNS
from beedeck.core.engine.speculation.modes import ModeOption
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.paircheck import modes_for, read_infos
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.bench.bench_chart import BarChart, render_report_charts, speed_bars, speedup_bars
from beedeck.ui.bench.run_view import CoreWorker, RunView, append_row, results_table


class _Worker(CoreWorker):
    """Runs one benchmark on its QThread."""

    what = "The benchmark"


class BenchView(RunView):
    """One-click benchmark of the speculation modes. Call :meth:`set_launch` (or :meth:`set_server_url`) first.
    ``runner`` reads the model files' headers for the mode choice (tests: inline).

    Signals: run_started(), run_finished(object), progress_changed(int, int, str).
    """

    COLUMNS = ("mode", "gen tok/s", "min-max", "prompt tok/s", "TTFT s", "acceptance", "speed-up (95% CI)", "same text")

    def __init__(self, parent: QWidget | None = None, *, runner: Runner | None = None) -> None:
        super().__init__(parent)
        self._runner: Runner = runner or (lambda fn, done, err: run_in_background(fn, done, err, owner=self))
        self.options: list[ModeOption] = []  # every mode for the launch set up, with why not
        self._launch: tuple[Path, EngineCaps, LaunchSettings] | None = None
        self._url: tuple[str, str | None] | None = None
        self._suite_override: BenchSuite | None = None
        self.report: BenchReport | None = None
        self.summary: Summary | None = None

        self.suite_box = QComboBox()
        self.suite_box.addItems(list(BUILTIN_SUITES))
        self.mode_boxes: dict[Mode, QCheckBox] = {m: QCheckBox(m.label) for m in Mode}
        for key, box in self.mode_boxes.items():
            box.setObjectName(f"bench-mode-{key}")
        self.mode_boxes[Mode.BASELINE].setChecked(True)
        self.reps = QSpinBox()
        self.reps.setRange(1, 50)
        self.reps.setValue(DEFAULT_REPS)
        self.reps.setToolTip(f"Runs of every prompt per mode. A speed-up needs {MIN_RUNS} or more (its 95 % "
                             "interval); fewer show the speeds without a ratio.")
        # The baseline measured with no draft loaded is kept per setup (core/bench/baseline_cache.py): a later run of
        # the same setup compares against it (the report says when it was measured) unless this is ticked.
        self.fresh_baseline = QCheckBox("Measure the baseline again")
        self.fresh_baseline.setToolTip("BeeDeck keeps the baseline (no draft loaded) it measured for this GPU, engine "
                                       "build, model file, context, KV types, settings and prompts, and compares "
                                       "later runs against it. Tick to measure it again now.")
        self.run_button = QPushButton("Run benchmark")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.status = QLabel("Pick a suite and the modes, then run.")
        self.status.setWordWrap(True)
        self.table = results_table(self.COLUMNS)
        same = self.table.horizontalHeaderItem(self.COLUMNS.index("same text"))
        assert same is not None  # results_table sets every heading
        same.setToolTip("Replies word for word the baseline's (same prompt, seed and repetition): expected only "
                        "at temperature 0; the note under the table says what this run's figure means.")
        self.same_text_note = QLabel()
        self.same_text_note.setWordWrap(True)
        self.same_text_note.hide()
        self.speed_chart = BarChart("Generation speed per prompt (median, min-max)", "tokens/s")
        self.speedup_chart = BarChart("Speed-up over the baseline (95 % CI)", "x baseline", 1.0)
        self.save_button = QPushButton("Save reports…")
        self.copy_button = QPushButton("Copy Markdown")
        for b in (self.save_button, self.copy_button):
            b.setEnabled(False)

        top = QHBoxLayout()
        top.addWidget(QLabel("Suite"))
        top.addWidget(self.suite_box)
        for box in self.mode_boxes.values():
            top.addWidget(box)
        top.addWidget(QLabel("Repetitions"))
        top.addWidget(self.reps)
        top.addWidget(self.fresh_baseline)
        top.addStretch(1)
        top.addWidget(self.run_button)
        top.addWidget(self.cancel_button)
        charts = QHBoxLayout()
        charts.addWidget(self.speed_chart)
        charts.addWidget(self.speedup_chart)
        bottom = QHBoxLayout()
        bottom.addStretch(1)
        bottom.addWidget(self.copy_button)
        bottom.addWidget(self.save_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addWidget(self.table)
        layout.addWidget(self.same_text_note)
        layout.addLayout(charts)
        layout.addLayout(bottom)

        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.copy_button.clicked.connect(self._on_copy_clicked)

    # ---- configuration ----

    def set_launch(self, engine: Path, caps: EngineCaps, settings: LaunchSettings) -> None:
        """Benchmark by starting ``engine`` (the view stops its servers when done). The modes offered
        are those this engine and the profile's files run; the files' headers are read off the GUI
        thread, until then only the profile's own mode counts as known."""
        self._launch, self._url = (Path(engine), caps, settings), None
        self._offer(modes_for(caps, settings, None, None))
        launch = self._launch

        def done(infos: tuple[ModelInfo | None, ModelInfo | None]) -> None:
            if self._launch is launch:
                self._offer(modes_for(caps, settings, *infos))

        self._runner(lambda: read_infos(settings), done, lambda _exc: None)

    def _offer(self, options: list[ModeOption]) -> None:
        """Enable the modes that run (checked: baseline and what the profile's files bring, a draft of its kind
        or MTP heads; N-gram needs no file, so it would be in every run: offered unchecked), grey the rest with
        why."""
        self.options = options
        for o in options:
            box = self.mode_boxes.get(o.key)
            if box is None:
                continue
            box.setText(o.key.label)  # the toggle's name; the engine's type is in the tooltip
            box.setEnabled(o.available)
            brought = o.key == Mode.BASELINE or bool(o.key.info.draft_kinds)
            box.setChecked(o.available and (brought or box.isChecked()))
            box.setToolTip(f"runs as --spec-type {o.spec_type}" if o.available and o.spec_type else
                           "no speculation: the reference every speed-up is measured against" if o.available else
                           f"Not available: {o.reason}")

    def set_server_url(self, url: str, api_key: str | None = None) -> None:
        """Benchmark a server that is already running (one mode: it cannot be restarted from here)."""
        self._url, self._launch = (url, api_key), None

    def set_suite(self, suite: BenchSuite) -> None:
        """Use this suite instead of the picked built-in one (a user's file, or a short test suite)."""
        self._suite_override = suite

    def selected_modes(self) -> list[Mode]:
        return [m for m, box in self.mode_boxes.items() if box.isChecked() and box.isEnabled()]

    # ---- running ----

    @Slot()
    def start(self) -> None:
        if self.running:
            return
        if self._launch is None and self._url is None:
            self.status.setText("No engine is set up: start or configure a server first, then run the benchmark.")
            return
        try:
            suite = self._suite_override or load_suite(self.suite_box.currentText())
        except BenchError as exc:
            self.status.setText(str(exc))
            return
        kwargs: dict[str, Any] = {"suite": suite, "variants": [Variant(m) for m in self.selected_modes()],
                                  "reps": self.reps.value()}
        if self._launch is not None:
            kwargs.update(engine=self._launch[0], caps=self._launch[1], base_settings=self._launch[2],
                          baselines=BaselineCache(), fresh_baseline=self.fresh_baseline.isChecked())
        else:
            assert self._url is not None
            kwargs.update(engine=None, caps=None, base_settings=None, url=self._url[0], api_key=self._url[1])
        self._cancel = threading.Event()
        thread = self._begin(_Worker(run_bench, kwargs, self._cancel))
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText("Running…")
        thread.start()
        self.run_started.emit()

    @Slot()
    def cancel(self) -> None:
        self._cancel.set()
        self.status.setText("Cancelling after the current reply…")

    def _after_run(self) -> None:
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)

    def _show(self, result: BenchReport) -> None:
        self.show_report(result)

    def show_report(self, report: BenchReport) -> None:
        """Fill the table and charts from a report (also for reports loaded from elsewhere)."""
        self.report, self.summary = report, summarize(report)
        s = self.summary
        self.table.setRowCount(0)
        for mode in report.variants:
            m = s.overall.get(mode)
            if m is None or m.gen_tps is None:
                continue
            cells = [mode.label, f"{m.gen_tps.median:.1f}", f"{m.gen_tps.min:.1f}-{m.gen_tps.max:.1f}",
                     f"{m.prompt_tps.median:.1f}" if m.prompt_tps else "-",
                     f"{m.ttft_s.median:.3f}" if m.ttft_s else "-",
                     f"{100 * m.acceptance:.1f} %" if m.acceptance is not None else "-",
                     m.speedup.text() if m.speedup else "-",
                     f"{m.identical}/{m.compared}" if m.compared else "-"]
            append_row(self.table, cells)
        note = same_text_note(report, s)
        self.same_text_note.setText(note)
        self.same_text_note.setVisible(bool(note))
        self.speed_chart.set_bars(speed_bars(report, s))
        reasons = [f"{m.label}: {x.speedup.why_not}" for m, x in s.overall.items()
                   if x.speedup is not None and not x.speedup.shown]
        self.speedup_chart.set_bars(speedup_bars(report, s), "No speed-up to show. " + "; ".join(reasons)
                                    if reasons else "no data yet")
        state = "cancelled" if report.cancelled else ("finished with errors" if report.errors else "finished")
        self.status.setText(f"Benchmark {state}: {len(report.samples)} replies." +
                            (f" {s.flags[0]}" if s.flags else ""))
        for b in (self.save_button, self.copy_button):
            b.setEnabled(True)

    def save_reports(self, out_dir: Path) -> list[Path]:
        """Write report.md/json, samples.csv and the PNG charts into ``out_dir``."""
        if self.report is None:
            return []
        return write_reports(self.report, out_dir, render_report_charts)

    @Slot()
    def _on_save_clicked(self) -> None:
        self._write_to_chosen_folder("Save benchmark reports", self.save_reports, "Saved")

    @Slot()
    def _on_copy_clicked(self) -> None:
        if self.report is not None:
            QGuiApplication.clipboard().setText(to_markdown(self.report, self.summary))
