"""What a dialog may use of the main window: a small protocol, so dialogs never import MainWindow.

:class:`beedeck.ui.window.main_window.MainWindow` satisfies it; tests can pass any object that does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from PySide6.QtWidgets import QDialog, QWidget

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.speculation.spec_guard import SpecGuard
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.settings import AppSettings
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.gauge.speed_gauge import SpeedPanel


class WindowHost(Protocol):
    """The services the Settings, Setup and Benchmark dialogs get from the window that opens them (the
    state is the session's: :class:`beedeck.ui.session.Session`)."""

    probe: Callable[[str], EngineCaps]
    detect_hardware: Callable[[], HardwareReport]
    closing: bool

    @property
    def profile(self) -> Profile | None: ...

    @property
    def known_caps(self) -> dict[str, EngineCaps]: ...

    @property
    def controller(self) -> ServerController: ...

    @property
    def guard(self) -> SpecGuard: ...

    @property
    def app_settings(self) -> AppSettings:
        """The session's one copy: change it and save it, never load another."""
        ...

    def apply_profile(self, profile: Profile, caps: EngineCaps | None = None, start: bool = False) -> None: ...

    def save_profile(self, profile: Profile, caps: EngineCaps | None = None) -> None: ...

    def start_server(self) -> None: ...

    def stop_server(self) -> None: ...

    def dialog_parent(self) -> QWidget: ...


@runtime_checkable
class LocalProfileMemory(Protocol):
    """A host that keeps the last local (engine-starting) profile it applied, so the Settings dialog opened
    on a remote profile can start from it (else it starts from the starter profile). Optional: the main
    window satisfies it with a ``last_local_profile`` attribute set whenever a local profile is applied."""

    last_local_profile: Profile | None


@runtime_checkable
class ShowsSpeed(Protocol):
    """A host with the speed panel (the main window's ``speed``): a benchmark's and a tune's figures
    become its last figure per mode, and Tune sizes its minimum budget from them. Optional."""

    speed: SpeedPanel


DialogFactory = Callable[[WindowHost], QDialog]
