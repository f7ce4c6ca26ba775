"""A host that stands in for the main window in the Benchmark and Tune dialog tests, with a chat
server controller that only records what it was asked."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.engine.speculation.spec_guard import SpecGuard
from beedeck.core.profile import Profile
from beedeck.ui.engine.server_controller import ServerController
from tests.core.bench.tune.test_search import CPU_CAPS, START

ENGINE = "/e/llama-server"


class Controller(ServerController):
    """Records start/stop; started it is "starting" (running), stopped "stopped"."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        self.calls.append("start")
        self._set_state("starting")

    def stop(self) -> None:
        self.calls.append("stop")
        self._set_state("stopped")


class Host:
    """The WindowHost services the dialogs use; probing records the engine and gives CPU_CAPS."""

    def __init__(self, parent: QWidget, profile: Profile | None, advice: WorkloadAdvice | None = None) -> None:
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
        raise AssertionError("the dialogs never apply a profile themselves")

    def save_profile(self, profile: Profile, caps: EngineCaps | None = None) -> None:
        raise AssertionError("the dialogs never save a profile themselves")

    def start_server(self) -> None:
        self.controller.start(ENGINE, START)

    def stop_server(self) -> None:
        self.controller.stop()

    def dialog_parent(self) -> QWidget:
        return self.parent


def make_host(qtbot: QtBot, profile: Profile | None, advice: WorkloadAdvice | None = None) -> Host:
    """A :class:`Host` over a parent widget qtbot cleans up."""
    parent = QWidget()
    qtbot.addWidget(parent)
    return Host(parent, profile, advice)
