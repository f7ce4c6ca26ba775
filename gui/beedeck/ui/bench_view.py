"""The benchmark view: pick a suite and modes, run baseline vs DFlash, see the table and bar charts,
export the reports. Also the PNG chart renderer the CLI uses (QPainter on a QImage, works offscreen).

Signals: ``run_started()``, ``run_finished(object)`` (the :class:`BenchReport`, partial when cancelled),
``progress_changed(int, int, str)``. The run happens in a QThread worker; core callbacks arrive as
queued signals, so no widget is touched off the GUI thread.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QRectF, Qt, QThread, Signal, Slot
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.bench import (
    BASELINE,
    BUILTIN_SUITES,
    DEFAULT_REPS,
    DFLASH,
    MODEL_FREE,
    BenchError,
    BenchReport,
    BenchSuite,
    load_suite,
    run_bench,
)
from beedeck.core.bench_report import Summary, summarize, to_markdown, write_reports
from beedeck.core.launch import LaunchSettings
from beedeck.core.probe import EngineCaps
from beedeck.ui.background import run_in_background
from beedeck.ui.mode_toggle import has_draft

if TYPE_CHECKING:
    from beedeck.ui.main_window import MainWindow

MODE_COLORS = {BASELINE: QColor("#7f8c9a"), DFLASH: QColor("#f2a900"), MODEL_FREE: QColor("#3d8bd9")}


@dataclass(frozen=True)
class Bar:
    """One bar: a group (prompt), a mode, a value and its whisker (min-max or a CI)."""

    group: str
    mode: str
    value: float
    low: float
    high: float


def speed_bars(report: BenchReport, summary: Summary) -> list[Bar]:
    """Median generation tok/s per prompt and mode, whiskers min-max."""
    out = []
    for p in report.suite.prompts:
        for mode in report.modes:
            m = summary.prompts.get(p.id, {}).get(mode)
            if m is not None and m.gen_tps is not None:
                out.append(Bar(p.id, mode, m.gen_tps.median, m.gen_tps.min, m.gen_tps.max))
    return out


def speedup_bars(report: BenchReport, summary: Summary) -> list[Bar]:
    """Speed-up over the baseline per prompt and overall, whiskers the 95 % bootstrap interval."""
    out = []
    groups = [(p.id, summary.prompts.get(p.id, {})) for p in report.suite.prompts] + [("overall", summary.overall)]
    for gid, modes in groups:
        for mode, m in modes.items():
            if m.speedup is not None:
                out.append(Bar(gid, mode, m.speedup.ratio, m.speedup.ci_low, m.speedup.ci_high))
    return out


def paint_bars(painter: QPainter, rect: QRectF, bars: list[Bar], title: str, unit: str,
               reference: float | None = None) -> None:
    """Grouped vertical bars with whiskers; ``reference`` draws a dashed line (1.0 for speed-ups)."""
    painter.save()
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.fillRect(rect, QColor("white"))
    font = QFont(painter.font())
    font.setPixelSize(13)
    painter.setFont(font)
    painter.setPen(QColor("#222"))
    painter.drawText(rect.adjusted(8, 4, -8, 0), int(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft), title)
    plot = rect.adjusted(56, 30, -12, -44)
    if not bars or plot.width() < 20 or plot.height() < 20:
        painter.drawText(plot, int(Qt.AlignmentFlag.AlignCenter), "no data yet")
        painter.restore()
        return
    top = max(max(b.high for b in bars), reference or 0.0) * 1.1 or 1.0

    def y(v: float) -> float:
        return plot.bottom() - plot.height() * max(v, 0.0) / top

    painter.setPen(QPen(QColor("#ccc"), 1))
    for i in range(5):
        v = top * i / 4
        painter.drawLine(int(plot.left()), int(y(v)), int(plot.right()), int(y(v)))
        painter.drawText(QRectF(rect.left(), y(v) - 8, 50, 16),
                         int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{v:.3g}")
    groups = list(dict.fromkeys(b.group for b in bars))
    modes = list(dict.fromkeys(b.mode for b in bars))
    gw = plot.width() / len(groups)
    bw = gw * 0.8 / len(modes)
    for gi, g in enumerate(groups):
        painter.setPen(QColor("#222"))
        painter.drawText(QRectF(plot.left() + gi * gw, plot.bottom() + 4, gw, 16),
                         int(Qt.AlignmentFlag.AlignHCenter), g[:18])
        for b in (b for b in bars if b.group == g):
            x = plot.left() + gi * gw + gw * 0.1 + modes.index(b.mode) * bw
            color = MODE_COLORS.get(b.mode, QColor("#5a5"))
            painter.fillRect(QRectF(x, y(b.value), bw * 0.9, plot.bottom() - y(b.value)), color)
            painter.setPen(QPen(QColor("#333"), 1.5))
            cx = x + bw * 0.45
            painter.drawLine(int(cx), int(y(b.low)), int(cx), int(y(b.high)))
            painter.drawLine(int(cx - 4), int(y(b.low)), int(cx + 4), int(y(b.low)))
            painter.drawLine(int(cx - 4), int(y(b.high)), int(cx + 4), int(y(b.high)))
    if reference is not None:
        pen = QPen(QColor("#c0392b"), 1.5, Qt.PenStyle.DashLine)
        painter.setPen(pen)
        painter.drawLine(int(plot.left()), int(y(reference)), int(plot.right()), int(y(reference)))
    lx = plot.left()
    for mode in modes:  # legend
        painter.fillRect(QRectF(lx, rect.bottom() - 18, 12, 12), MODE_COLORS.get(mode, QColor("#5a5")))
        painter.setPen(QColor("#222"))
        painter.drawText(QRectF(lx + 16, rect.bottom() - 20, 120, 16), int(Qt.AlignmentFlag.AlignLeft), mode)
        lx += 110
    painter.setPen(QColor("#555"))
    painter.drawText(QRectF(rect.right() - 160, rect.bottom() - 20, 150, 16), int(Qt.AlignmentFlag.AlignRight), unit)
    painter.restore()


_app: QGuiApplication | None = None


def _ensure_gui_app() -> None:
    """QImage text drawing needs a QGuiApplication; the CLI has none, so make an offscreen one."""
    global _app
    if QGuiApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _app = QGuiApplication([])


def render_report_charts(report: BenchReport, summary: Summary, out_dir: Path) -> list[Path]:
    """Draw tokens_per_s.png and (with a baseline) speedup.png into ``out_dir``; returns their paths."""
    _ensure_gui_app()
    charts: list[tuple[str, list[Bar], str, str, float | None]] = [("tokens_per_s.png", speed_bars(report, summary), "Generation speed per prompt (median, min-max)",
               "tokens/s", None)]
    sp = speedup_bars(report, summary)
    if sp:
        charts.append(("speedup.png", sp, "Speed-up over the baseline (95 % bootstrap CI)", "x baseline", 1.0))
    out = []
    for name, bars, title, unit, ref in charts:
        img = QImage(900, 420, QImage.Format.Format_ARGB32)
        img.fill(QColor("white"))
        painter = QPainter(img)
        try:
            paint_bars(painter, QRectF(0, 0, 900, 420), bars, title, unit, ref)
        finally:
            painter.end()
        path = Path(out_dir) / name
        if not img.save(str(path)):  # the format follows the .png suffix
            raise OSError(f"could not write {path}: check that the folder is writable")
        out.append(path)
    return out


class BarChart(QWidget):
    """Draws :func:`paint_bars` for the latest report; ``set_bars()`` stores and repaints."""

    def __init__(self, title: str, unit: str, reference: float | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title, self.unit, self.reference = title, unit, reference
        self.bars: list[Bar] = []
        self.setMinimumHeight(220)

    def set_bars(self, bars: list[Bar]) -> None:
        self.bars = bars
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        try:
            paint_bars(painter, QRectF(self.rect()), self.bars, self.title, self.unit, self.reference)
        finally:
            painter.end()


class _Worker(QObject):
    """Runs one benchmark on its QThread; core callbacks become queued signals."""

    progressed = Signal(int, int, str)
    finished = Signal(object)
    failed = Signal(str)

    def __init__(self, kwargs: dict[str, Any], cancel: threading.Event) -> None:
        super().__init__()
        self.kwargs, self.cancel = kwargs, cancel

    @Slot()
    def run(self) -> None:
        try:
            report = run_bench(**self.kwargs, on_progress=self.progressed.emit, cancel_event=self.cancel)
        except BenchError as exc:
            self.failed.emit(str(exc))
            return
        except Exception as exc:  # every failure must reach the view, never vanish in a thread
            self.failed.emit(f"The benchmark stopped unexpectedly: {type(exc).__name__}: {exc}")
            return
        self.finished.emit(report)


class BenchView(QWidget):
    """One-click baseline-vs-DFlash benchmark. Call :meth:`set_launch` (or :meth:`set_server_url`) first.

    Signals: run_started(), run_finished(object), progress_changed(int, int, str).
    """

    run_started = Signal()
    run_finished = Signal(object)
    progress_changed = Signal(int, int, str)

    COLUMNS = ("mode", "gen tok/s", "min-max", "prompt tok/s", "TTFT s", "acceptance", "speed-up (95% CI)", "same text")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._launch: tuple[Path, EngineCaps, LaunchSettings] | None = None
        self._url: tuple[str, str | None] | None = None
        self._suite_override: BenchSuite | None = None
        self._thread: QThread | None = None
        self._worker: _Worker | None = None
        self._cancel = threading.Event()
        self.report: BenchReport | None = None
        self.summary: Summary | None = None

        self.suite_box = QComboBox()
        self.suite_box.addItems(list(BUILTIN_SUITES))
        self.mode_boxes = {m: QCheckBox(m) for m in (BASELINE, DFLASH, MODEL_FREE)}
        self.mode_boxes[BASELINE].setChecked(True)
        self.reps = QSpinBox()
        self.reps.setRange(1, 50)
        self.reps.setValue(DEFAULT_REPS)
        self.run_button = QPushButton("Run benchmark")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.status = QLabel("Pick a suite and the modes, then run.")
        self.status.setWordWrap(True)
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.table.verticalHeader().setVisible(False)
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
        layout.addLayout(charts)
        layout.addLayout(bottom)

        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.copy_button.clicked.connect(self._on_copy_clicked)

    # ---- configuration ----

    def set_launch(self, engine: Path, caps: EngineCaps, settings: LaunchSettings) -> None:
        """Benchmark by starting ``engine`` (the view stops its servers when done)."""
        self._launch, self._url = (Path(engine), caps, settings), None
        self.mode_boxes[DFLASH].setEnabled(caps.dflash_spec_type is not None and bool(settings.draft))
        self.mode_boxes[DFLASH].setChecked(self.mode_boxes[DFLASH].isEnabled())
        self.mode_boxes[MODEL_FREE].setEnabled(bool(caps.model_free_spec_types))

    def set_server_url(self, url: str, api_key: str | None = None) -> None:
        """Benchmark a server that is already running (one mode: it cannot be restarted from here)."""
        self._url, self._launch = (url, api_key), None

    def set_suite(self, suite: BenchSuite) -> None:
        """Use this suite instead of the picked built-in one (a user's file, or a short test suite)."""
        self._suite_override = suite

    def selected_modes(self) -> list[str]:
        return [m for m, box in self.mode_boxes.items() if box.isChecked() and box.isEnabled()]

    @property
    def running(self) -> bool:
        return self._thread is not None

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
        kwargs: dict[str, Any] = {"suite": suite, "modes": self.selected_modes(), "reps": self.reps.value()}
        if self._launch is not None:
            kwargs.update(engine=self._launch[0], caps=self._launch[1], base_settings=self._launch[2])
        else:
            assert self._url is not None
            kwargs.update(engine=None, caps=None, base_settings=None, url=self._url[0], api_key=self._url[1])
        self._cancel = threading.Event()
        self._thread = QThread(self)
        self._worker = _Worker(kwargs, self._cancel)
        self._worker.moveToThread(self._thread)
        self._thread.started.connect(self._worker.run)
        self._worker.progressed.connect(self._on_worker_progressed)
        self._worker.finished.connect(self._on_worker_finished)
        self._worker.failed.connect(self._on_worker_failed)
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText("Running…")
        self._thread.start()
        self.run_started.emit()

    @Slot()
    def cancel(self) -> None:
        self._cancel.set()
        self.status.setText("Cancelling after the current reply…")

    def _end_thread(self) -> None:
        if self._thread is not None:
            self._thread.quit()
            self._thread.wait()
            self._thread.deleteLater()
        if self._worker is not None:
            self._worker.deleteLater()
        self._thread = self._worker = None
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)

    def shutdown(self) -> None:
        """Cancel a run and wait for its thread (the owner calls this on close)."""
        if self.running:
            self._cancel.set()
            self._end_thread()

    @Slot(int, int, str)
    def _on_worker_progressed(self, done: int, total: int, label: str) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        self.status.setText(label)
        self.progress_changed.emit(done, total, label)

    @Slot(str)
    def _on_worker_failed(self, message: str) -> None:
        self._end_thread()
        self.status.setText(message)
        self.run_finished.emit(None)

    @Slot(object)
    def _on_worker_finished(self, report: BenchReport) -> None:
        self._end_thread()
        self.show_report(report)
        self.run_finished.emit(report)

    def show_report(self, report: BenchReport) -> None:
        """Fill the table and charts from a report (also for reports loaded from elsewhere)."""
        self.report, self.summary = report, summarize(report)
        s = self.summary
        self.table.setRowCount(0)
        for mode in report.modes:
            m = s.overall.get(mode)
            if m is None or m.gen_tps is None:
                continue
            cells = [mode, f"{m.gen_tps.median:.1f}", f"{m.gen_tps.min:.1f}-{m.gen_tps.max:.1f}",
                     f"{m.prompt_tps.median:.1f}" if m.prompt_tps else "-",
                     f"{m.ttft_s.median:.3f}" if m.ttft_s else "-",
                     f"{100 * m.acceptance:.1f} %" if m.acceptance is not None else "-",
                     f"{m.speedup.ratio:.2f}x ({m.speedup.ci_low:.2f}-{m.speedup.ci_high:.2f})" if m.speedup else "-",
                     f"{m.identical}/{m.compared}" if m.compared else "-"]
            row = self.table.rowCount()
            self.table.insertRow(row)
            for col, text in enumerate(cells):
                self.table.setItem(row, col, QTableWidgetItem(text))
        self.speed_chart.set_bars(speed_bars(report, s))
        self.speedup_chart.set_bars(speedup_bars(report, s))
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
        folder = QFileDialog.getExistingDirectory(self, "Save benchmark reports")
        if folder:
            files = self.save_reports(Path(folder))
            self.status.setText(f"Saved {len(files)} files to {folder}.")

    @Slot()
    def _on_copy_clicked(self) -> None:
        if self.report is not None:
            QGuiApplication.clipboard().setText(to_markdown(self.report, self.summary))


class BenchDialog(QDialog):
    """The main window's Benchmark dialog: a :class:`BenchView` set up from the window's profile.

    With the chat server ready it benchmarks that server in the one mode it runs; "Stop the chat
    server and compare" stops it so the view can start baseline and DFlash servers itself (one
    model in memory at a time), and the chat server is started again when the dialog closes.
    Closing cancels a run and waits for it (:meth:`BenchView.shutdown`).
    """

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window_ = window
        self.stopped_chat_server = False
        self.setWindowTitle("Benchmark")
        self.view = BenchView(self)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.compare_button = QPushButton("Stop the chat server and compare modes")
        self.compare_button.clicked.connect(self._on_compare_clicked)
        self.compare_button.hide()
        row = QHBoxLayout()
        row.addWidget(self.note, 1)
        row.addWidget(self.compare_button)
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.view, 1)
        self.resize(1040, 720)
        c = window.controller
        if c.state == "ready" and c.base_url:
            mode = DFLASH if has_draft(c.settings) else BASELINE
            self.use_running_server(c.base_url, c.settings.api_key if c.settings else None, mode)
        elif c.is_running():
            self.note.setText("The chat server is starting. Wait until it is ready to benchmark it, or stop it "
                              "to compare the modes.")
            self.view.run_button.setEnabled(False)
            self.compare_button.show()
        else:
            self.configure_launch()

    def use_running_server(self, url: str, api_key: str | None, mode: str) -> None:
        self.view.set_server_url(url, api_key)
        for m, box in self.view.mode_boxes.items():
            box.setChecked(m == mode)
            box.setEnabled(m == mode)
        self.note.setText(f"Benchmarking the running chat server as it is ({mode}). To compare baseline and "
                          "DFlash, BeeDeck starts its own servers: stop the chat server first.")
        self.compare_button.show()

    def configure_launch(self) -> None:
        """Let the view start the profile's engine per mode (probing it first if needed)."""
        profile = self.window_.profile
        self.compare_button.hide()
        if profile is None:
            self.note.setText("No engine or model is set up yet: open Settings or the setup wizard first.")
            self.view.run_button.setEnabled(False)
            return
        caps = self.window_.known_caps.get(profile.engine)
        if caps is not None:
            self._use_launch(caps)
            return
        self.note.setText("Probing the engine…")
        self.view.run_button.setEnabled(False)
        engine, probe = profile.engine, self.window_.probe
        run_in_background(lambda: probe(engine), self._on_probed,
                          lambda exc: self._set_note_if_alive(f"The engine could not be probed: {exc}"))

    def _on_probed(self, caps: EngineCaps) -> None:
        import shiboken6

        if shiboken6.isValid(self) and self.window_.profile is not None:
            self.window_.known_caps[self.window_.profile.engine] = caps
            self._use_launch(caps)

    def _set_note_if_alive(self, text: str) -> None:
        import shiboken6

        if shiboken6.isValid(self):
            self.note.setText(text)

    def _use_launch(self, caps: EngineCaps) -> None:
        profile = self.window_.profile
        assert profile is not None
        for box in self.view.mode_boxes.values():
            box.setEnabled(True)
        self.view.set_launch(Path(profile.engine), caps, profile.settings)
        self.view.run_button.setEnabled(True)
        self.note.setText(f"BeeDeck starts {Path(profile.engine).name} for each mode with the current profile "
                          "and stops it afterwards.")

    def _on_compare_clicked(self) -> None:
        self.compare_button.setEnabled(False)
        self.view.run_button.setEnabled(False)
        self.note.setText("Stopping the chat server…")
        self.stopped_chat_server = True
        # A bound slot: the controller's thread delivers it on the GUI thread. "failed" counts too:
        # a server that was still starting may fail instead of stopping.
        self.window_.controller.state_changed.connect(self._on_chat_server_state)
        self.window_.stop_server()

    def _on_chat_server_state(self, state: str) -> None:
        if state in ("stopped", "failed"):
            self.window_.controller.state_changed.disconnect(self._on_chat_server_state)
            self.configure_launch()

    def done(self, result: int) -> None:
        self.view.shutdown()
        super().done(result)
        if self.stopped_chat_server and not self.window_.closing and not self.window_.controller.is_running():
            self.window_.start_server()
            self.stopped_chat_server = False


def open_dialog(window: MainWindow) -> BenchDialog:
    """The main window's Benchmark slot."""
    return BenchDialog(window)
