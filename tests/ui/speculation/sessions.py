"""A session for the speculation views' tests: a real :class:`Session` (its switch, runner and checker)
over a server that records restarts and preloads instead of running an engine, the toggle bound to it as
the window binds it, and the events a real restart would send."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.speculation.standby import RESTARTED
from beedeck.core.engine.speculation.switching import PerRequestMemory
from beedeck.core.serving import Serving
from beedeck.core.settings import AppSettings
from beedeck.ui.background import Runner
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.session import Session
from beedeck.ui.speculation.mode_toggle import ModeToggle
from tests.fakes.inline_runner import run_inline

URL = "http://127.0.0.1:9"


class SwitchServing(Serving):
    """Records what a switch asks (a real restart needs a real engine and pair)."""

    def __init__(self) -> None:
        super().__init__()
        self.restarts: list[LaunchSettings] = []
        self.preloads: list[LaunchSettings] = []

    def restart(self, settings: LaunchSettings) -> None:
        self.restarts.append(settings)

    def preload(self, settings: LaunchSettings) -> None:
        self.preloads.append(settings)


def make_session(tmp_path: Path, runner: Runner = run_inline) -> Session:
    return Session(AppSettings(), ServerController(serving=SwitchServing()), saver=lambda s: None, runner=runner,
                   memory=PerRequestMemory(tmp_path / "per-request.json"))


def bind(qtbot: QtBot, session: Session) -> ModeToggle:
    """The toggle as the window binds it: it renders the session's switch, its clicks go to the session."""
    toggle = ModeToggle(session.switch)
    qtbot.addWidget(toggle)
    toggle.mode_clicked.connect(session.request_mode)
    session.switching.changed.connect(toggle.show_switch)
    return toggle


def restart_done(session: Session, went: str = RESTARTED) -> None:
    """The restarted server is ready (``went``: how the switch went, core/engine/speculation/standby.py)."""
    session.server.last_switch = went
    session.controller.ready.emit(URL)


def restart_failed(session: Session) -> None:
    session.controller.failed.emit(ServerFailure("crashed_signal", "llama-server crashed.", "See its log."))
