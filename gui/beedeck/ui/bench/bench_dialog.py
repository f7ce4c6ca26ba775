"""The main window's Benchmark dialog: a :class:`BenchView` set up from the window's profile."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from beedeck.core.bench.results import BASELINE, BenchReport
from beedeck.core.chat.spec_guard import references_from_bench
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.modes import LABELS, mode_of
from beedeck.ui.background import run_in_background
from beedeck.ui.bench.bench_view import BenchView
from beedeck.ui.host import WindowHost


class BenchDialog(QDialog):
    """The main window's Benchmark dialog: a :class:`BenchView` set up from the window's profile.

    With the chat server ready it benchmarks that server in the one mode it runs; "Stop the chat
    server and compare" stops it so the view can start a server per chosen mode itself (baseline,
    DFlash, EAGLE-3, DSpark, MTP, n-gram: one model in memory at a time), and the chat server is
    started again when the dialog closes.
    Closing cancels a run and waits for it (:meth:`BenchView.shutdown`).
    """

    def __init__(self, window: WindowHost) -> None:
        super().__init__(window.dialog_parent())
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
        self.view.run_finished.connect(self._on_run_finished)
        c = window.controller
        if c.state == "ready" and c.base_url:
            mode = mode_of(c.settings) if c.settings is not None else BASELINE
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
        self.note.setText(f"Benchmarking the running chat server as it is ({LABELS.get(mode, mode)}). To compare "
                          "modes, BeeDeck starts its own server for each: stop the chat server first.")
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
                          lambda exc: self.note.setText(f"The engine could not be probed: {exc}"), owner=self)

    def _on_probed(self, caps: EngineCaps) -> None:
        if self.window_.profile is not None:
            self.window_.known_caps[self.window_.profile.engine] = caps
            self._use_launch(caps)

    def _use_launch(self, caps: EngineCaps) -> None:
        profile = self.window_.profile
        assert profile is not None
        for box in self.view.mode_boxes.values():
            box.setEnabled(True)
        self.view.set_launch(Path(profile.engine), caps, profile.settings)
        self.view.run_button.setEnabled(True)
        self.note.setText(f"BeeDeck starts {Path(profile.engine).name} for each chosen mode with the current "
                          "profile (only the speculation differs) and stops it afterwards. Greyed modes cannot run "
                          "with this engine and these model files: hover one to see why.")

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

    def _on_run_finished(self, report: BenchReport) -> None:
        """Give the speculation guard this machine's measured figures per mode and prompt kind."""
        texts = {p.id: p.text for p in report.suite.prompts}
        refs = references_from_bench((s.mode, texts.get(s.prompt_id, ""), s.gen_tps)
                                     for s in report.samples if s.error is None)
        for (mode, kind), values in refs.items():
            self.window_.guard.add_reference(mode, kind, values)

    def done(self, result: int) -> None:
        self.view.shutdown()
        super().done(result)
        if self.stopped_chat_server and not self.window_.closing and not self.window_.controller.is_running():
            self.window_.start_server()
            self.stopped_chat_server = False


def open_dialog(window: WindowHost) -> BenchDialog:
    """The main window's Benchmark slot."""
    return BenchDialog(window)
