"""The session the Benchmark and Tune dialog tests open their dialogs for: a real :class:`Session` over a chat
server that only records what it was asked, with probing recorded, and a widget to be the
dialogs' parent."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.profile import Profile
from beedeck.core.serving import Serving
from beedeck.core.settings import AppSettings
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.session import Session
from tests.core.bench.tune.test_search import CPU_CAPS

ENGINE = "/e/llama-server"


class Server(Serving):
    """Records start/stop; started it is starting (running), stopped stopped."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        self.calls.append("start")
        self._set_state(ServerState.STARTING)

    def stop(self) -> None:
        self.calls.append("stop")
        self._set_state(ServerState.STOPPED)


class Host(Session):
    """A session whose probe records the engine and gives CPU_CAPS (no GPU, no engine run here); ``widget``
    is the parent the dialogs open over. Its advice is ``advice`` (None: a fresh one in the test's home)."""

    server: Server

    def __init__(self, widget: QWidget, profile: Profile | None, advice: WorkloadAdvice | None = None) -> None:
        loader = (lambda: advice) if advice is not None else None
        super().__init__(AppSettings(), ServerController(serving=Server()), saver=lambda s: None, advice_loader=loader)
        self.widget = widget
        self.probed: list[str] = []
        self.probe = self._record_probe
        self.detect_hardware = self._no_detect
        if profile is not None:
            self.set_profile(profile)

    def _record_probe(self, path: str) -> EngineCaps:
        self.probed.append(path)
        return CPU_CAPS

    def _no_detect(self) -> Any:
        raise AssertionError("not used")


def make_host(qtbot: QtBot, profile: Profile | None, advice: WorkloadAdvice | None = None) -> Host:
    """A :class:`Host` over a parent widget qtbot cleans up, its advice read."""
    widget = QWidget()
    qtbot.addWidget(widget)
    host = Host(widget, profile, advice)
    qtbot.waitUntil(lambda: host.advice is not None, timeout=5000)  # read off the GUI thread
    return host
