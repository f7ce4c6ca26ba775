"""The main window's Benchmark dialog: a :class:`BenchView` set up from the session's profile."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QPushButton, QWidget

from beedeck.core.bench.advice_feed import bench_advice_samples
from beedeck.core.bench.report import summarize
from beedeck.core.bench.results import BenchReport
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.advice import setup_key
from beedeck.core.engine.speculation.spec_guard import references_from_bench
from beedeck.ui.bench.bench_view import BenchView
from beedeck.ui.bench.server_dialog import ChatServerDialog
from beedeck.ui.session import Session


class BenchDialog(ChatServerDialog):
    """The main window's Benchmark dialog: a :class:`BenchView` set up from the session's profile.

    With the chat server ready it benchmarks that server in the one mode it runs; "Stop the chat
    server and compare" stops it so the view can start a server per chosen mode itself (baseline,
    DFlash, EAGLE-3, DSpark, MTP, n-gram: one model in memory at a time), and the chat server is
    started again when the dialog closes. A server BeeDeck did not start (a remote profile) is only
    benchmarked as it runs: BeeDeck cannot start it per mode.
    A finished run teaches the guard's reference figures, the speed panel's last figure per mode
    (:meth:`Session.record_figure`) and, once read, the learnt advice (``guard.advice``, keyed by
    :func:`setup_key` of the engine's caps and the profile).
    Closing cancels a run and waits for it (:meth:`BenchView.shutdown`).
    """

    view: BenchView

    def __init__(self, session: Session, parent: QWidget | None = None) -> None:
        super().__init__(session, parent, "Benchmark")
        self.view = BenchView(self)
        self.compare_button = QPushButton("Stop the chat server and compare modes")
        self.compare_button.clicked.connect(self._on_compare_clicked)
        self._lay_out(self.compare_button, 720)
        self.view.run_finished.connect(self._on_run_finished)
        c = session.server
        if self._remote() and not (c.state == ServerState.READY and c.base_url):
            self.note.setText("This profile is a server BeeDeck did not start: connect to it first (Connect), then "
                              "benchmark it as it runs. Comparing modes needs BeeDeck to start the engine itself.")
            self.view.run_button.setEnabled(False)
        elif c.state == ServerState.READY and c.base_url:
            mode = c.settings.spec_mode if c.settings is not None else Mode.BASELINE
            self.use_running_server(c.base_url, c.settings.api_key if c.settings else None, mode)
        elif c.is_running():
            self.note.setText("The chat server is starting. Wait until it is ready to benchmark it, or stop it "
                              "to compare the modes.")
            self.view.run_button.setEnabled(False)
            self.compare_button.show()
        else:
            self.configure()

    def _remote(self) -> bool:
        profile = self.session.profile
        return self.session.server.is_remote() or (profile is not None and profile.is_remote)

    def use_running_server(self, url: str, api_key: str | None, mode: Mode) -> None:
        self.view.set_server_url(url, api_key)
        for m, box in self.view.mode_boxes.items():
            box.setChecked(m == mode)
            box.setEnabled(m == mode)
        if self._remote():
            # "Stop and compare" would stop the connection and then probe the URL as an engine binary.
            self.note.setText(f"Benchmarking the running server as it is ({mode.label}). It is a server "
                              "BeeDeck did not start, so BeeDeck cannot restart it in other modes to compare them: "
                              "run `beedeck bench` on the machine that serves it for that.")
            self.compare_button.hide()
            return
        self.note.setText(f"Benchmarking the running chat server as it is ({mode.label}). To compare "
                          "modes, BeeDeck starts its own server for each: stop the chat server first.")
        self.compare_button.show()

    def configure(self) -> None:
        """Let the view start the profile's engine per mode (probing it first if needed)."""
        profile = self.session.profile
        self.compare_button.hide()
        self.view.run_button.setEnabled(False)  # until the engine's capabilities are known
        if profile is not None and profile.is_remote:
            self.note.setText("This profile is a server BeeDeck did not start: connect to it to benchmark it as it "
                              "runs. Comparing modes needs a local engine profile (Settings).")
            return
        if profile is None:
            self.note.setText("No engine or model is set up yet: open Settings or the setup wizard first.")
            return
        self._with_caps(profile.engine)

    def _use_caps(self, caps: EngineCaps) -> None:
        profile = self.session.profile
        assert profile is not None
        for box in self.view.mode_boxes.values():
            box.setEnabled(True)
        self.view.set_launch(Path(profile.engine), caps, profile.settings)
        self.view.run_button.setEnabled(True)
        self.note.setText(f"BeeDeck starts {Path(profile.engine).name} for each chosen mode with the current "
                          "profile (only the speculation differs) and stops it afterwards. Greyed modes cannot run "
                          "with this engine and these model files: hover one to see why.")

    def _on_compare_clicked(self) -> None:
        self.view.run_button.setEnabled(False)
        self._stop_chat_server(self.compare_button)

    def _on_run_finished(self, report: BenchReport | None) -> None:
        """Give the speculation guard this machine's measured figures per mode and prompt kind (None: the
        run failed, and the view shows why)."""
        if report is None:
            return
        texts = {p.id: p.text for p in report.suite.prompts}
        refs = references_from_bench((s.variant.mode, s.prompt_id, texts.get(s.prompt_id, ""), s.gen_tps)
                                     for s in report.samples if s.error is None and not s.variant.draft_loaded)
        for (mode, kind), evidence in refs.items():
            self.session.guard.add_reference(mode, kind, evidence)
        kept = next((r.measured_at for r in report.runs if r.variant == Variant(Mode.BASELINE) and r.measured_at is not None), None)
        for variant, m in summarize(report).overall.items():  # the speed panel's last figure per mode
            if m.gen_tps is not None:
                self.session.record_figure(variant, m.gen_tps.median, "benchmark", m.speedup, kept)
        self._teach_advice(report)

    def _teach_advice(self, report: BenchReport) -> None:
        """Teach the learnt advice which mode was fastest per prompt kind (off the GUI thread: it writes a
        file). Needs the engine's caps for the setup's key: a server BeeDeck did not start has none."""
        advice, profile, c = self.session.guard.advice, self.session.profile, self.session.server
        if advice is None or profile is None or profile.is_remote or c.is_remote():
            return
        caps = self.session.known_caps.get(profile.engine) or (c.caps if c.engine == profile.engine else None)
        samples = bench_advice_samples(report)
        if caps is None or not samples:
            return
        self._learn(advice, setup_key(caps, profile.settings), samples, "benchmark")


def open_dialog(session: Session, parent: QWidget) -> BenchDialog:
    """The main window's Benchmark slot."""
    return BenchDialog(session, parent)
