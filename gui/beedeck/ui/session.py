"""The session: what BeeDeck is running with, owned once and handed to whoever needs it.

One :class:`Session` owns the profile, the probed engine capabilities, the ONE :class:`AppSettings` copy
(the window, the setup wizard and the dialogs change and save this same object, so a later save never
writes back what another part changed meanwhile), the server controller, the Qt-free mode switch, the
per-request verdicts, the speculation guard and the learnt advice. Widgets render it; dialogs get it
instead of the window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.engine.speculation.mode_switch import ModeSwitch
from beedeck.core.engine.speculation.spec_guard import SpecGuard
from beedeck.core.engine.speculation.switching import PerRequestMemory
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.settings import AppSettings, load_settings, save_settings
from beedeck.ui.engine.server_controller import ServerController


class Session(QObject):
    """The session's state and services.

    Signals: ``profile_changed(Profile)`` when a new profile is shown; ``caps_known(EngineCaps)`` when an
    engine's capabilities are learnt (probe or launch); ``settings_saved(AppSettings)`` after the one copy
    was written.
    """

    profile_changed = Signal(Profile)
    caps_known = Signal(EngineCaps)
    settings_saved = Signal(AppSettings)

    def __init__(self, app_settings: AppSettings | None = None, controller: ServerController | None = None,
                 parent: QObject | None = None, *, saver: Callable[[AppSettings], object] = save_settings,
                 memory: PerRequestMemory | None = None) -> None:
        super().__init__(parent)
        self.app_settings = app_settings if app_settings is not None else load_settings()
        self.controller = controller or ServerController(self)
        self.switch = ModeSwitch()
        self.per_request_memory = memory or PerRequestMemory()
        self.guard = SpecGuard()
        self.advice: WorkloadAdvice | None = None
        self.profile: Profile | None = None
        self.last_local_profile: Profile | None = None  # what Settings starts from on a remote profile
        self.known_caps: dict[str, EngineCaps] = {}
        self._saver = saver
        self.controller.caps_known.connect(self._on_controller_caps)
        self.controller.standby = self.app_settings.standby

    def set_profile(self, profile: Profile) -> None:
        self.profile = profile
        if not profile.is_remote:
            self.last_local_profile = profile
        self.profile_changed.emit(profile)

    def caps(self) -> EngineCaps | None:
        """The shown profile's engine capabilities, where known."""
        return self.known_caps.get(self.profile.engine) if self.profile is not None else None

    def learn_caps(self, engine: str, caps: EngineCaps) -> None:
        self.known_caps[engine] = caps
        self.caps_known.emit(caps)

    def _on_controller_caps(self, caps: object) -> None:
        if isinstance(caps, EngineCaps) and self.controller.engine:
            self.learn_caps(self.controller.engine, caps)

    def save_settings(self) -> str | None:
        """Write the one AppSettings copy; None when saved, else why not (for a status line)."""
        try:
            self._saver(self.app_settings)
        except OSError as exc:
            return str(exc)
        self.controller.standby = self.app_settings.standby
        self.settings_saved.emit(self.app_settings)
        return None


# The core calls the window and the dialogs make by default (tests replace the ones that need a GPU);
# imported lazily: the window opens without them.
def default_client(base_url: str, api_key: str | None) -> Any:
    from beedeck.core.engine.client import LlamaClient

    return LlamaClient(base_url, api_key)


def default_probe(engine: str) -> EngineCaps:
    from beedeck.core.engine.probe import probe_engine

    return probe_engine(engine)


def default_detect() -> HardwareReport:
    from beedeck.core.machine import hardware

    return hardware.detect(disk_path=paths.models_dir())
