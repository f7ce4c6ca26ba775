"""Settings: the engine binary plus the launch form, fed with the engine's probed capabilities, the
GPUs' free memory and the current profile. "Launch" hands a new :class:`Profile` to the session, which
saves it (profile.json, never the API key) and restarts the server if it runs (once the new launch passed
its preflight); "Save" hands it over to be saved only (used at the next start); "Cancel" (Esc) changes
nothing.

Opened with a remote profile (a running server BeeDeck did not start), the dialog never probes the URL
as an engine: it starts from the last local profile the session kept (``Session.last_local_profile``) or
else the starter profile (found off the GUI thread), and says so.

The dialog fits a 1366x768 screen: the fields scroll inside the form, and the dialog's size is capped
to the screen's available area, so the buttons are always on screen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import shiboken6
from PySide6.QtCore import QRect, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.registry import STARTER_NAME
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.starter import StarterMissing, StarterProfile, starter_engine, starter_model
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.launch.launch_form import LaunchForm
from beedeck.ui.screen_fit import available_area, fit_to
from beedeck.ui.session import Session

GiB = 1 << 30
PREFERRED_SIZE = (1100, 700)  # fits a 768-px screen with a panel; the fields scroll


def starter_local_profile() -> Profile:
    """The starter profile (blocking: run it off the GUI thread); never downloads. StarterMissing says why
    it is not there."""
    sp = StarterProfile(engine=starter_engine(), model=starter_model(download=False))
    return Profile(str(sp.engine), sp.settings(), STARTER_NAME)


def caps_label(caps: EngineCaps) -> str:
    """"mainline 11434 (cpu)": what the status bar and the engine row show for probed caps."""
    gen = getattr(caps.generation, "value", caps.generation)
    backend = f" ({caps.gpu_backend})" if caps.gpu_backend else ""
    return f"{gen} {caps.version}".strip() + backend


class SettingsDialog(QDialog):
    """The engine row and the :class:`LaunchForm`. Probing and GPU detection run in the background.

    Signals: ``profile_applied(Profile, EngineCaps)``: the new :class:`Profile` and the engine's
    capabilities (None if unknown) when the user pressed Launch (save and restart).
    ``profile_saved(Profile, EngineCaps)``: the same when the user pressed Save (save, no restart).
    ``caps_probed(EngineCaps)``, ``devices_detected(list)`` (free bytes per GPU) when those
    background jobs end.

    ``held(free)``: what the running server holds on each GPU (``free``: each GPU's free bytes now), which
    Launch gets back since it stops that server first: the form judges memory as it will be then (the
    default: nothing runs). It runs off the GUI thread with the detection.
    """

    profile_applied = Signal(Profile, EngineCaps)
    profile_saved = Signal(Profile, EngineCaps)
    caps_probed = Signal(EngineCaps)
    devices_detected = Signal(list)

    def __init__(self, profile: Profile | None, caps: EngineCaps | None, parent: QWidget | None = None, *,
                 probe: Callable[[str], EngineCaps], detect: Callable[[], HardwareReport],
                 runner: Runner | None = None, form: LaunchForm | None = None,
                 local: Profile | None = None, local_caps: EngineCaps | None = None,
                 starter: Callable[[], Profile] = starter_local_profile,
                 held: Callable[[list[int]], list[int]] | None = None, running: Mode | None = None) -> None:
        super().__init__(parent)
        # The jobs' answers touch this dialog's widgets: one that arrives after it closed (deleted) is dropped.
        runner = runner or (lambda fn, ok, err: run_in_background(fn, ok, err, owner=self))
        self.setWindowTitle("Settings")
        # A remote profile's "engine" is a URL: never probe it. Start from a local profile instead.
        self.remote: Profile | None = None
        if profile is not None and profile.is_remote:
            self.remote = profile
            profile, caps = (local, local_caps) if local is not None and not local.is_remote else (None, None)
        self.origin_note = QLabel()
        self.origin_note.setObjectName("origin-note")
        self.origin_note.setWordWrap(True)
        self.origin_note.setVisible(self.remote is not None)
        self.running_note = QLabel()  # the mode the toolbar's toggle runs, when it is not the profile's
        self.running_note.setObjectName("running-note")
        self.running_note.setWordWrap(True)
        self.running_note.hide()
        self.profile = profile
        self.caps = caps
        self.devices: list[int] | None = None  # None until detection reported
        self._probe, self._runner, self._starter = probe, runner, starter
        self.engine_edit = QLineEdit(profile.engine if profile else "")
        self.engine_edit.setPlaceholderText("Path to llama-server (BeeLlama.cpp or mainline llama.cpp)")
        self.engine_edit.editingFinished.connect(lambda: self.set_engine_path(self.engine_edit.text().strip()))
        self.engine_edit.textChanged.connect(self._update_save)
        browse = QToolButton()
        browse.setText("…")
        browse.setToolTip("Choose the llama-server binary")
        browse.clicked.connect(self._on_browse_clicked)
        self.engine_status = QLabel()
        self.engine_status.setObjectName("engine-status")
        self.devices_label = QLabel("Looking for NVIDIA GPUs…")
        self.devices_label.setObjectName("devices-status")
        row = QHBoxLayout()
        row.addWidget(QLabel("Engine"))
        row.addWidget(self.engine_edit, 1)
        row.addWidget(browse)
        row.addWidget(self.engine_status)
        self.form = form or LaunchForm(self, runner=runner)
        self.form.launch_requested.connect(self._on_form_launch_requested)
        self.form.settings_changed.connect(self._update_save)
        self.form.launch_checked.connect(self._update_save)  # also a refusal found off the GUI thread
        self.form.add_preset("Starter profile (tiny CPU demo)", "Back to the starter profile: its engine, installed "
                             "with BeeDeck, and its model, SmolLM2 135M on the CPU. Save or Launch to keep it.",
                             self.use_starter)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Close without changing the profile (Esc)")
        self.cancel_button.setAutoDefault(False)
        self.cancel_button.clicked.connect(self.reject)
        self.save_button = QPushButton("Save")
        self.save_button.setAutoDefault(False)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.form.insert_button(self.cancel_button)
        self.form.insert_button(self.save_button)
        self.form.launch_button.setText("Launch")
        layout = QVBoxLayout(self)
        layout.addWidget(self.origin_note)
        layout.addWidget(self.running_note)
        layout.addLayout(row)
        layout.addWidget(self.devices_label)
        layout.addWidget(self.form, 1)
        if profile is not None:
            self.form.set_settings(profile.settings)
            self._show_running(profile, running)
        self.form.set_engine(caps, profile.engine if profile else None, None if profile else self._no_engine())
        self._show_caps()
        if profile is not None and caps is None:
            self.set_engine_path(profile.engine, force=True)
        if self.remote is not None:
            self._from_remote(profile, starter)
        runner(lambda: self._room(detect, held), self._on_detected, self._on_detect_failed)
        self.fit_to(available_area(self, parent))
        self._update_save()

    def _show_running(self, profile: Profile, running: Mode | None) -> None:
        """Show the mode that runs now: the toolbar's toggle may have switched away from the profile's own
        (the issue: Settings said "Baseline" while N-gram ran). Speculation shows the running mode, and a
        note says which one the saved profile starts in."""
        own = profile.settings.spec_mode
        if running is None or running == own or self.remote is not None:
            return
        self.form.set_settings(replace(profile.settings, spec_mode=running))
        self.running_note.setText(f"{running.label} is running now: the toolbar's toggle switched to it. The saved "
                                  f"profile starts in {own.label}; Save or Launch makes {running.label} the "
                                  "profile's mode, Cancel changes nothing.")
        self.running_note.show()

    def fit_to(self, available: QRect) -> None:
        """Size the dialog for a screen whose free area (without panels and taskbars) is ``available``:
        the preferred size, capped so the whole window, buttons included, is on screen."""
        fit_to(self, PREFERRED_SIZE, available)

    def _from_remote(self, local: Profile | None, starter: Callable[[], Profile]) -> None:
        assert self.remote is not None
        where = f"The current profile is the running server at {self.remote.engine}, which BeeDeck did not start"
        if local is not None:
            self.origin_note.setText(f"{where}: these settings start from your last local profile "
                                     f"({local.label or Path(local.engine).name}). Launch or Save replaces the "
                                     "server profile with this one; Cancel keeps it.")
            return
        self.origin_note.setText(f"{where}: looking for the starter profile to start from…")
        self._runner(starter, self._on_starter_found, self._on_starter_missing)

    def _on_starter_found(self, starter: Profile) -> None:
        if not shiboken6.isValid(self) or self.engine_path():
            return  # closed, or the user already chose an engine
        assert self.remote is not None
        self.profile = starter
        self.form.set_settings(starter.settings)
        self.set_engine_path(starter.engine, force=True)
        self.origin_note.setText(f"The current profile is the running server at {self.remote.engine}, which BeeDeck "
                                 "did not start: these settings start from the starter profile. Launch or Save "
                                 "replaces the server profile with this one; Cancel keeps it.")

    def _on_starter_missing(self, exc: BaseException) -> None:
        if not shiboken6.isValid(self):
            return
        why = str(exc) if isinstance(exc, StarterMissing) else f"the starter profile could not be read ({exc})"
        if self.remote is None:  # the Preset list's "Starter profile"
            self.origin_note.setText(f"The starter profile is not available: {why}")
            return
        self.origin_note.setText(f"The current profile is the running server at {self.remote.engine}, which BeeDeck "
                                 f"did not start, and there is no local profile to start from: {why} Choose a "
                                 "llama-server binary in the Engine row below.")

    # -- engine ------------------------------------------------------------------------------
    def engine_path(self) -> str:
        return self.engine_edit.text().strip()

    def set_engine_path(self, path: str, force: bool = False) -> None:
        """Probe ``path`` in the background (unless its caps are already known)."""
        self.engine_edit.setText(path)
        if not path:
            self.caps = None
            self.form.set_engine(None, None, self._no_engine())
            self._show_caps()
            return
        if not force and self.caps is not None and self.caps.path == path:
            return
        self.caps = None
        self.form.set_engine(None, path, f"Checking the engine ({Path(path).name} --help)…")
        self.engine_status.setStyleSheet("")
        self.engine_status.setText("probing…")
        self._runner(lambda: self._probe(path), lambda caps: self._on_probed(path, caps),
                     lambda exc: self._on_probe_failed(path, exc))

    def _on_probed(self, path: str, caps: EngineCaps) -> None:
        if not shiboken6.isValid(self) or path != self.engine_path():
            return  # the dialog closed, or the user picked another engine meanwhile
        self.caps = caps
        self.form.set_engine(caps, path)
        self._show_caps()
        self.caps_probed.emit(caps)

    def _on_probe_failed(self, path: str, exc: BaseException) -> None:
        if not shiboken6.isValid(self) or path != self.engine_path():
            return
        self.engine_status.setStyleSheet("color: #d62728;")
        self.engine_status.setText(f"✗ {exc}")
        self.engine_status.setToolTip(str(exc))
        self.form.set_engine(None, path, f"The engine could not be checked: {exc} Pick a llama-server binary in "
                                         "the Engine row above.")

    @staticmethod
    def _no_engine() -> str:
        return "No engine is picked: choose a llama-server binary in the Engine row above."

    def _show_caps(self) -> None:
        self.engine_status.setStyleSheet("")
        self.engine_status.setText(f"✓ {caps_label(self.caps)}" if self.caps else "")

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose llama-server", str(Path(self.engine_path()).parent))
        if path:
            self.set_engine_path(path)

    # -- devices -----------------------------------------------------------------------------
    @staticmethod
    def _room(detect: Callable[[], HardwareReport], held: Callable[[list[int]], list[int]] | None
              ) -> tuple[HardwareReport, list[int]]:
        """Blocking: the hardware, and what the running server gives back on each GPU when Launch stops it."""
        report = detect()
        free = [g.memory_free for g in report.gpus]
        back = held(free) if held is not None and free else []
        return report, back if len(back) == len(free) else [0] * len(free)

    def _on_detected(self, found: tuple[HardwareReport, list[int]]) -> None:
        if not shiboken6.isValid(self):
            return
        report, back = found
        self.devices = [g.memory_free + b for g, b in zip(report.gpus, back, strict=True)]
        self.form.set_devices(self.devices, report.system.ram_total)
        if report.gpus:
            free = ", ".join(f"{g.name}: {g.memory_free / GiB:.1f} GiB free"
                             + (f" + {b / GiB:.1f} GiB the running server frees when Launch restarts it" if b else "")
                             for g, b in zip(report.gpus, back, strict=True))
            self.devices_label.setText(f"GPUs: {free}")
        else:
            self.devices_label.setText("No NVIDIA GPU found: the memory plan is for the CPU (hover for why).")
        self.devices_label.setToolTip(report.reason or report.detail)
        self.devices_detected.emit(self.devices)

    def _on_detect_failed(self, exc: BaseException) -> None:
        self._on_detected((HardwareReport(reason=f"Detection failed: {exc}"), []))

    # -- applying ----------------------------------------------------------------------------
    def _new_profile(self, settings: LaunchSettings) -> Profile:
        engine = self.engine_path()
        same = self.profile is not None and self.profile.engine == engine
        label = self.profile.label if same and self.profile else (caps_label(self.caps) if self.caps else "")
        return Profile(engine, settings, label)

    def _update_save(self, *_: object) -> None:
        """Save needs what Launch needs: an engine, and settings the launch preflight passes (the form's last
        verdict, its refusals said as Launch says them). A profile that cannot launch is not saved to fail at the
        next start."""
        refusals = self.form.facts.refusals
        why = ("Choose the engine first." if not self.engine_path() else
               "Cannot save a profile that cannot launch:\n• " + "\n• ".join(map(str, refusals)) if refusals else "")
        self.save_button.setEnabled(not why)
        self.save_button.setToolTip(why or "Save the profile without restarting the server: the next start uses it")

    def use_starter(self) -> None:
        """The Preset list's "Starter profile": the starter's engine and settings, found off the GUI thread."""
        self.origin_note.setText("Looking for the starter profile…")
        self.origin_note.show()
        self._runner(self._starter, self._on_starter_chosen, self._on_starter_missing)

    def _on_starter_chosen(self, starter: Profile) -> None:
        if not shiboken6.isValid(self):
            return
        self.profile = starter
        self.form.set_settings(starter.settings)
        self.set_engine_path(starter.engine, force=True)
        self.origin_note.setText("The starter profile: Save keeps it for the next start, Launch starts it now, "
                                 "Cancel changes nothing.")

    def _on_save_clicked(self) -> None:
        if not self.save_button.isEnabled():
            return
        self.profile_saved.emit(self._new_profile(self.form.settings()), self.caps)
        self.accept()

    def _on_form_launch_requested(self, settings: LaunchSettings) -> None:
        if not self.engine_path():
            return  # the form greys Launch out without an engine, and says why
        self.profile_applied.emit(self._new_profile(settings), self.caps)
        self.accept()


def open_dialog(session: Session, parent: QWidget) -> SettingsDialog:
    """The main window's Settings slot: the dialog, fed from the session and wired back to it (the GPU memory
    the running server holds counts as free for a launch that replaces it)."""
    profile = session.profile
    caps = session.known_caps.get(profile.engine) if profile and not profile.is_remote else None
    local = session.last_local_profile
    local_caps = session.known_caps.get(local.engine) if local is not None else None
    switch = session.switch
    running = (switch.pending or switch.mode) if switch.enabled and session.server.is_running() else None
    dialog = SettingsDialog(profile, caps, parent, probe=session.probe, detect=session.detect_hardware,
                            local=local, local_caps=local_caps, held=session.server.held_gpu_memory,
                            running=running)
    # Launch always starts or restarts, also when the server is stopped or has failed.
    dialog.profile_applied.connect(lambda profile, caps: session.apply_profile(profile, caps, start=True))
    dialog.profile_saved.connect(session.save_profile)  # saved for the next start; the server is left as it is
    return dialog
