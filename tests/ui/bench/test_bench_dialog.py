"""The Benchmark dialog over a host that stands in for the main window: a finished run teaches the
learnt workload advice (off the GUI thread), and a server BeeDeck did not start is only benchmarked
as it runs (no "stop and compare", which would probe its URL as an engine binary)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.bench.results import BASELINE, DFLASH, BenchReport, Sample
from beedeck.core.bench.suites import BenchPrompt, BenchSuite
from beedeck.core.chat.advice import CODE, PROSE, WorkloadAdvice, setup_key
from beedeck.core.chat.spec_guard import SpecGuard
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import Profile, remote_profile
from beedeck.ui.bench.bench_dialog import BenchDialog
from beedeck.ui.engine.server_controller import ServerController
from tests.core.bench.test_tune import CPU_CAPS, START

ENGINE = "/e/llama-server"
URL = "http://127.0.0.1:9"
SUITE = BenchSuite("mixed", (BenchPrompt("c", "Write a Python function that sorts."),
                             BenchPrompt("p", "Tell me a story about the sea at dusk.")), max_tokens=8)


class Controller(ServerController):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        self.calls.append("start")

    def stop(self) -> None:
        self.calls.append("stop")
        self._set_state("stopped")


class Host:
    """The WindowHost services the dialog uses."""

    def __init__(self, parent: QWidget, profile: Profile, advice: WorkloadAdvice | None = None) -> None:
        self.parent = parent
        self.profile: Profile | None = profile
        self.known_caps: dict[str, EngineCaps] = {}
        self.probed: list[str] = []
        self.controller = Controller()
        self.guard = SpecGuard(advice=advice)
        self.closing = False

    def probe(self, path: str) -> EngineCaps:
        self.probed.append(path)
        return CPU_CAPS

    def detect_hardware(self) -> Any:
        raise AssertionError("not used")

    def apply_profile(self, profile: Profile, caps: EngineCaps | None = None, start: bool = False) -> None:
        raise AssertionError("not used")

    def save_profile(self, profile: Profile, caps: EngineCaps | None = None) -> None:
        raise AssertionError("not used")

    def start_server(self) -> None:
        self.controller.start(ENGINE, START)

    def stop_server(self) -> None:
        self.controller.stop()

    def dialog_parent(self) -> QWidget:
        return self.parent


def _host(qtbot: QtBot, profile: Profile, advice: WorkloadAdvice | None = None) -> Host:
    parent = QWidget()
    qtbot.addWidget(parent)
    return Host(parent, profile, advice)


def _report() -> BenchReport:
    report = BenchReport(SUITE, [BASELINE, DFLASH], 3, 0)
    for rep in range(3):
        for mode, code_tps, prose_tps in ((BASELINE, 50.0, 50.0), (DFLASH, 120.0, 40.0)):
            report.samples.append(Sample(mode, "c", rep, 42, gen_tps=code_tps + rep))
            report.samples.append(Sample(mode, "p", rep, 42, gen_tps=prose_tps + rep))
    return report


def test_a_finished_run_teaches_the_learnt_advice(qtbot: QtBot, tmp_path: Any) -> None:
    advice = WorkloadAdvice(tmp_path / "advice.json")
    host = _host(qtbot, Profile(ENGINE, START, "mine"), advice)
    dialog = BenchDialog(host)
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.view.run_button.isEnabled(), timeout=10_000)  # probed in the background
    assert host.probed == [ENGINE]
    dialog.view.run_finished.emit(_report())
    key = setup_key(CPU_CAPS, START)
    qtbot.waitUntil(lambda: advice.best_mode(key, CODE) == DFLASH, timeout=10_000)  # learnt in the background
    assert advice.best_mode(key, PROSE) == BASELINE
    assert host.guard.figure(DFLASH, CODE) is not None  # the session's reference figures too
    dialog.reject()


def test_a_remote_server_is_benchmarked_as_it_runs_without_stop_and_compare(qtbot: QtBot) -> None:
    host = _host(qtbot, remote_profile(URL))
    c = host.controller
    c.engine, c.settings, c.base_url, c.state = URL, LaunchSettings(), URL, "ready"
    dialog = BenchDialog(host)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.compare_button.isHidden() and "did not start" in dialog.note.text()
    assert "cannot restart it in other modes" in dialog.note.text()
    assert dialog.view.run_button.isEnabled() and dialog.view.selected_modes() == [BASELINE]
    assert host.probed == [] and c.calls == []
    dialog.reject()


def test_a_remote_profile_not_connected_is_never_probed_as_an_engine(qtbot: QtBot) -> None:
    host = _host(qtbot, remote_profile(URL))
    dialog = BenchDialog(host)
    qtbot.addWidget(dialog)
    dialog.configure_launch()  # what "stop and compare" would have led to
    assert host.probed == [] and not dialog.view.run_button.isEnabled()
    assert "connect to it" in dialog.note.text() and dialog.compare_button.isHidden()
    dialog.reject()
