"""The session: what BeeDeck is running with and what happens to it, owned once and handed to whoever
needs it.

One :class:`Session` owns the profile (shown, saved, applied), the probed engine capabilities, the
hardware found, the ONE :class:`AppSettings` copy (the window, the setup wizard and the dialogs change and
save this same object, so a later save never writes back what another part changed meanwhile), the app's
server (``core/serving``; its events arrive as the controller's signals) and what they mean (a start, a crash,
a refused launch, a disconnect), the Qt-free mode switch with its runner (:class:`SwitchRunner`), the
per-request verdicts, the speculation guard with the learnt advice (:class:`AdviceFollower`) and the speed
figures per mode. It decides; the
window lays out views and renders it from its signals; dialogs get it (and a parent widget).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from beedeck.core import paths
from beedeck.core.chat.speed import ModeFigures
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure, as_failure
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.engine.speculation.comparison import Comparison
from beedeck.core.engine.speculation.mode_switch import ModeSwitch
from beedeck.core.engine.speculation.spec_guard import SpecGuard
from beedeck.core.engine.speculation.switching import PerRequestMemory
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import NewerProfileError, Profile, save_profile
from beedeck.core.serving import Replacing
from beedeck.core.settings import AppSettings, NewerSettingsError, load_settings, save_settings
from beedeck.ui.background import Runner
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.speculation.advice_follow import AdviceFollower
from beedeck.ui.speculation.switch_runner import SwitchRunner

NOT_LAUNCHED = "Not launched: the running server keeps serving"


class Session(QObject):
    """The session's state and what happens to it.

    Signals: ``profile_changed(Profile)`` when a new profile is shown; ``caps_known(EngineCaps)`` when an
    engine's capabilities are learnt (probe or launch); ``settings_saved(AppSettings)`` after the one copy was
    written; ``hardware_known(HardwareReport)``; ``said(str, int)`` a status-bar line and how long it stays
    (ms); ``notice_changed(str)`` the chat's notice line; ``failure_shown(ServerFailure, str, bool)`` what
    failed, the panel's title, and whether to offer "Use the local server"; ``notice_shown(str, str, str,
    bool)`` a problem already handled (title, message, remedy, offer the local server); ``lasting_notice(str, str,
    str)`` (key, title, text) a notice that stays until dismissed (a change kept for this session only because
    its file could not be written or a newer BeeDeck wrote it); ``failure_cleared()``
    when a shown failure is stale; ``serving_interrupted()`` when the server answering the chat goes away (a
    stop, a mode restart, a replacement): a reply in flight stops; ``setup_wanted()`` (Start without a
    profile: the setup wizard) and ``settings_wanted()`` (no local profile to go back to: Settings);
    ``figures_changed()`` when a benchmark or a tune recorded a mode's speed; ``serving(str)`` with the base
    URL of a server that became ready, before the switch hears of it (so the chat has its client by the time
    a switch says it is done).

    ``server`` is the app's server and its rules (:class:`~beedeck.core.serving.serving.Serving`); ``controller``
    brings its events as signals, which the session hears first.

    ``probe`` (engine path -> EngineCaps), ``detect_hardware``, ``profile_saver`` and ``client_factory(url,
    api_key)`` are the core calls the session and its dialogs make; tests replace the ones that need a GPU.
    """

    profile_changed = Signal(Profile)
    caps_known = Signal(EngineCaps)
    settings_saved = Signal(AppSettings)
    hardware_known = Signal(HardwareReport)
    said = Signal(str, int)
    notice_changed = Signal(str)
    failure_shown = Signal(ServerFailure, str, bool)
    notice_shown = Signal(str, str, str, bool)
    lasting_notice = Signal(str, str, str)
    failure_cleared = Signal()
    serving_interrupted = Signal()
    setup_wanted = Signal()
    settings_wanted = Signal()
    figures_changed = Signal()
    serving = Signal(str)

    def __init__(self, app_settings: AppSettings | None = None, controller: ServerController | None = None,
                 parent: QObject | None = None, *, saver: Callable[[AppSettings], object] = save_settings,
                 memory: PerRequestMemory | None = None, runner: Runner | None = None,
                 advice_loader: Callable[[], WorkloadAdvice] | None = None) -> None:
        super().__init__(parent)
        self.app_settings = app_settings if app_settings is not None else load_settings()
        self.controller = controller or ServerController(self)
        self.server = self.controller.serving  # the server and its rules (core/serving); the controller: its signals
        self.server.standby = self.app_settings.standby
        self.switch = ModeSwitch()
        self.per_request_memory = memory or PerRequestMemory()
        self.guard = SpecGuard()
        self.figures = ModeFigures()  # the last speed per mode on this server (the speed panel shows them)
        self.profile: Profile | None = None
        self.last_local_profile: Profile | None = None  # what Settings starts from on a remote profile
        self.known_caps: dict[str, EngineCaps] = {}
        self.hardware: HardwareReport | None = None
        self.notice = ""  # the chat's notice line now
        self.served = False  # the current server became ready once (a later failure is a crash, not a start)
        self.closing = False  # the window is closing: dialogs closing with it start nothing
        self.probe: Callable[[str], EngineCaps] = default_probe
        self.detect_hardware: Callable[[], HardwareReport] = default_detect
        self.profile_saver: Callable[[Profile], object] = save_profile
        self.client_factory: Callable[[str, str | None], Any] = default_client
        self._saver = saver
        self._replacing: deque[tuple[Profile, EngineCaps | None]] = deque()  # launches waiting for their preflight
        self.switching = SwitchRunner(self.switch, self.server, self.per_request_memory,
                                      lambda url, key: self.client_factory(url, key), self, runner=runner)
        self.switching.restarting.connect(self._on_switch_restarting)
        self.advice_follower = AdviceFollower(self.guard, self.switching, self._setup, self,
                                              follow=self.app_settings.follow_advice, loader=advice_loader)
        self.advice_follower.said.connect(self.said)
        self.advice_follower.notice_changed.connect(self._set_notice)
        self._wire(self.controller)
        self._state_notice(self.server.state)

    def _wire(self, c: ServerController) -> None:
        # The session hears the controller first and hands its helpers each event in order; views connect later.
        c.state_changed.connect(self._on_state)
        c.ready.connect(self._on_ready)
        c.failed.connect(self._on_failed)
        c.refused.connect(self._on_refused)
        c.replace_started.connect(self._on_replace_started)
        c.caps_known.connect(self._on_controller_caps)
        c.remote_attached.connect(self._on_attached)

    # -- the profile -----------------------------------------------------------------------
    @property
    def advice(self) -> WorkloadAdvice | None:
        """The learnt advice, once read (None until then)."""
        return self.advice_follower.advice

    def caps(self) -> EngineCaps | None:
        """The shown profile's engine capabilities, where known."""
        return self.known_caps.get(self.profile.engine) if self.profile is not None else None

    def _setup(self) -> tuple[EngineCaps | None, LaunchSettings | None]:
        return self.caps(), self.profile.settings if self.profile is not None else None

    def set_profile(self, profile: Profile) -> None:
        """Show ``profile`` (not saved: the saved one at start, the starter)."""
        self.profile = profile
        if not profile.is_remote:
            self.last_local_profile = profile
        caps = self.caps()
        self.switching.configure(profile.settings, caps, self.per_request_memory.get(caps),
                                 local_files=not profile.is_remote)
        self.advice_follower.refresh()
        self.profile_changed.emit(profile)
        self._state_notice(self.server.state)

    def learn_caps(self, engine: str, caps: EngineCaps) -> None:
        self.known_caps[engine] = caps
        if self.profile is not None and self.profile.engine == engine and not self.profile.is_remote:
            self.switching.configure(self.profile.settings, caps, self.per_request_memory.get(caps))
            self.advice_follower.refresh()
        self.caps_known.emit(caps)

    def save_profile(self, profile: Profile, caps: EngineCaps | None = None) -> None:
        """Settings' Save: show and save the profile (profile.json, without the API key) for the next start;
        a running server keeps its settings until it is restarted."""
        self._store(profile, caps)
        if self.server.is_running():
            self.said.emit("Saved: the new settings apply when the server next starts.", 15000)

    def apply_profile(self, profile: Profile, caps: EngineCaps | None = None, start: bool = False) -> None:
        """A new profile from Settings, the wizard, Connect or Tool-safe: shown and saved (profile.json, without
        the API key), and the server restarted on it if one runs (``start``: started even if none runs).

        What happens to the running server is the serving's rule (:meth:`Serving.replace`): one of BeeDeck's is
        replaced only once the new launch passed its preflight: until then nothing changes, and a refused launch
        leaves the old profile shown and saved, the reply in flight going and the old server serving (the panel
        says why)."""
        caps = caps or self.known_caps.get(profile.engine)
        self._replacing.append((profile, caps))
        how = self.server.replace(profile.engine, profile.settings, caps, in_mode=self.switch.launch_settings)
        if how is Replacing.PREFLIGHT:
            return  # replace_started commits it, refused drops it
        self._replacing.pop()
        if how is Replacing.AT_ONCE:  # a connection (to or from a server not ours) is replaced at once
            self.serving_interrupted.emit()
        self._commit(profile, caps)
        if how is Replacing.NONE and start:
            self.start_server()

    def _commit(self, profile: Profile, caps: EngineCaps | None) -> None:
        self._store(profile, caps)
        self.failure_cleared.emit()  # an old failure panel is stale now

    def _store(self, profile: Profile, caps: EngineCaps | None) -> None:
        if caps is not None:
            self.learn_caps(profile.engine, caps)
        self.set_profile(profile)
        if profile.is_remote:
            self._remember_remote(profile)
        try:
            self.profile_saver(profile)
        except NewerProfileError as exc:  # left as it is: said until dismissed, not cleared by the next start
            self.lasting_notice.emit("profile", "The profile applies to this session only", str(exc))
        except OSError as exc:
            self.failure_shown.emit(as_failure(OSError(
                f"The profile could not be saved ({exc}): check that BeeDeck's config folder is writable. It is "
                "used for this session only.")), "The profile could not be saved", False)

    def _remember_remote(self, profile: Profile) -> None:
        """File → Connect offers the last server connected to again, once the window is back on a local profile
        or after a restart: its address and name in the settings (its key is the keyring's, with the profile)."""
        s = self.app_settings
        if (s.last_remote_url, s.last_remote_label) != (profile.engine, profile.label):
            s.last_remote_url, s.last_remote_label = profile.engine, profile.label
            self._save_choice("server address")

    def last_remote(self) -> tuple[str, str] | None:
        """The last server connected to (address, name), for File → Connect; None: none yet."""
        s = self.app_settings
        return (s.last_remote_url, s.last_remote_label or "") if s.last_remote_url else None

    def use_local_server(self) -> None:
        """Back from a server BeeDeck did not start (disconnected, or gone) to the last local profile."""
        local = self.last_local_profile
        if local is not None:
            self.apply_profile(local, self.known_caps.get(local.engine), start=True)
        else:
            self.settings_wanted.emit()  # Settings opens on the starter profile

    # -- the server ------------------------------------------------------------------------
    def launch_settings(self) -> LaunchSettings:
        """The profile's settings in the mode the switch shows: after a switch, a later Start (or a restart for
        new settings) must not bring back the mode the toggle and the reply stats no longer show."""
        assert self.profile is not None
        return self.switching.launch_settings(self.profile.settings)

    def start_server(self) -> None:
        if self.profile is None:
            self.setup_wanted.emit()
            return
        if self.server.start_if_idle(self.profile.engine, self.launch_settings(), self.caps()):
            self.failure_cleared.emit()

    def stop_server(self) -> None:
        self.serving_interrupted.emit()
        self.server.stop()

    def client(self, base_url: str) -> Any:
        """A client of the server ready at ``base_url`` (with the key it was started or connected with)."""
        return self.client_factory(base_url, self._api_key())

    def request_mode(self, key: Mode) -> bool:
        """A click on mode ``key`` (the toggle, the guard's banner, Chat → Next mode): :meth:`SwitchRunner.request`."""
        return self.switching.request(key)

    def _api_key(self) -> str | None:
        return self.server.settings.api_key if self.server.settings else None

    def _on_switch_restarting(self, _settings: LaunchSettings) -> None:
        self.serving_interrupted.emit()
        self._set_notice("Switching mode: restarting the server…")

    def _on_state(self, state: ServerState) -> None:
        if state == ServerState.STARTING:
            self.served = False
        self.switching.state_changed(state)
        self._state_notice(state)

    def _state_notice(self, state: ServerState) -> None:
        """What the chat says in this state, and the "Disconnected" panel after a Disconnect."""
        profile = self.profile
        remote = profile is not None and profile.is_remote
        if remote and state == ServerState.STARTING:
            assert profile is not None
            self._set_notice(f"Connecting to {profile.engine}…")
        elif state in (ServerState.STARTING, ServerState.LOADING):
            self._set_notice("Starting the server and loading the model…")
        elif state == ServerState.STOPPED and remote:
            assert profile is not None
            self._set_notice(f"Not connected. Press Connect to chat with the server at {profile.engine}.")
            if self.served and self.switch.pending is None:  # after Disconnect
                self.notice_shown.emit("Disconnected", f"The server at {profile.engine} keeps running where it is.",
                                       "Connect again, or go back to BeeDeck's own server.", True)
        elif state == ServerState.STOPPED and self.switch.pending is None:
            self._set_notice("The server is stopped. Press Start to chat." if profile else
                             "No engine or model is set up yet: open Settings.")

    def _set_notice(self, text: str) -> None:
        self.notice = text
        self.notice_changed.emit(text)

    def _on_ready(self, base_url: str) -> None:
        self.serving.emit(base_url)  # the views first: a switch that ends now finds the chat ready to send
        self.served = True
        self._set_notice("")
        self.failure_cleared.emit()
        self.switching.server_ready(base_url, self._api_key())
        self.advice_follower.server_ready()

    def _on_failed(self, failure: ServerFailure) -> None:
        was_serving = self.served
        self.switching.server_failed(failure)
        self.advice_follower.server_failed()
        self.failure_shown.emit(failure, "The server stopped while running" if was_serving
                                else "The server could not start", bool(self.profile and self.profile.is_remote))
        self._set_notice("")

    def _on_refused(self, failure: ServerFailure) -> None:
        if self._replacing:
            self._replacing.popleft()  # the launch it was: the old profile stays shown and saved
        self.failure_shown.emit(failure, NOT_LAUNCHED, False)

    def _on_replace_started(self, _engine: str) -> None:
        if not self._replacing:
            return
        profile, caps = self._replacing.popleft()
        self.serving_interrupted.emit()  # the running server stops now
        self._commit(profile, caps)

    def _on_controller_caps(self, caps: EngineCaps) -> None:
        self.learn_caps(self.server.engine or caps.path, caps)

    def _on_attached(self, info: RemoteInfo) -> None:
        self.switching.attached(info, self._api_key())

    # -- settings, hardware, figures -------------------------------------------------------
    def save_settings(self) -> str | None:
        """Write the one AppSettings copy; None when saved, else why not (for a status line)."""
        try:
            self._saver(self.app_settings)
        except (OSError, NewerSettingsError) as exc:
            return str(exc)
        self.server.standby = self.app_settings.standby
        self.settings_saved.emit(self.app_settings)
        return None

    def _save_choice(self, what: str) -> None:
        problem = self.save_settings()
        if problem:  # a lasting notice: a status-bar line goes at the next menu hover
            self.lasting_notice.emit("settings", f"The {what} applies to this session only",
                                     f"The {what} could not be saved ({problem}); it applies to this session.")

    def set_theme(self, theme: str) -> None:
        self.app_settings.theme = theme
        self._save_choice("theme")

    def set_follow_advice(self, on: bool) -> None:
        """Server → Follow the fastest mode per prompt kind."""
        self.app_settings.follow_advice = self.advice_follower.follow = on
        self._save_choice("choice")

    def set_standby(self, on: bool) -> None:
        """Server → Keep the other mode loaded (core/engine/speculation/standby.py); the server follows."""
        self.app_settings.standby = self.server.standby = on  # for this session, saved or not
        self._save_choice("choice")

    def set_hardware(self, report: HardwareReport) -> None:
        self.hardware = report
        self.hardware_known.emit(report)

    def record_figure(self, mode: Mode | Variant, tps: float, source: str, comparison: Comparison | None = None,
                      baseline_at: float | None = None) -> None:
        """A mode's speed measured by a benchmark or a tune: the speed panel's last figure for it, with its
        speed-up over the baseline where the rule gave one (core/engine/speculation/comparison.py); ``baseline_at``:
        that baseline was kept from an earlier run, measured then (core/bench/baseline_cache.py)."""
        self.figures.record(mode, tps, source, comparison=comparison, baseline_at=baseline_at)
        self.figures_changed.emit()

    def say(self, text: str, ms: int = 0) -> None:
        self.said.emit(text, ms)

    def shutdown(self) -> None:
        """Nothing is left running after the window closes."""
        self.closing = True
        self.server.shutdown()


# The core calls the session and the dialogs make by default (tests replace the ones that need a GPU);
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

