"""Settings: the engine binary plus the launch form, fed with the engine's probed capabilities, the
GPUs' free memory and the current profile. "Launch" hands a new :class:`Profile` to the main window,
which saves it (profile.json, never the API key) and restarts the server if it runs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import shiboken6
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.host import WindowHost
from beedeck.ui.launch.launch_form import LaunchForm

GiB = 1 << 30


def caps_label(caps: EngineCaps) -> str:
    """"mainline 11434 (cpu)": what the status bar and the engine row show for probed caps."""
    gen = getattr(caps.generation, "value", caps.generation)
    backend = f" ({caps.gpu_backend})" if caps.gpu_backend else ""
    return f"{gen} {caps.version}".strip() + backend


class SettingsDialog(QDialog):
    """The engine row and the :class:`LaunchForm`. Probing and GPU detection run in the background.

    Signals: ``profile_applied(object, object)``: the new :class:`Profile` and the engine's
    EngineCaps (None if unknown) when the user pressed Launch. ``caps_probed(object)``,
    ``devices_detected(object)`` (list of free bytes per GPU) when those background jobs end.
    """

    profile_applied = Signal(object, object)
    caps_probed = Signal(object)
    devices_detected = Signal(object)

    def __init__(self, profile: Profile | None, caps: EngineCaps | None, parent: QWidget | None = None, *,
                 probe: Callable[[str], EngineCaps], detect: Callable[[], HardwareReport],
                 runner: Runner = run_in_background, form: LaunchForm | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.profile = profile
        self.caps = caps
        self.devices: list[int] | None = None  # None until detection reported
        self._probe, self._runner = probe, runner
        self.engine_edit = QLineEdit(profile.engine if profile else "")
        self.engine_edit.setPlaceholderText("Path to llama-server (BeeLlama.cpp or mainline llama.cpp)")
        self.engine_edit.editingFinished.connect(lambda: self.set_engine_path(self.engine_edit.text().strip()))
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
        layout = QVBoxLayout(self)
        layout.addLayout(row)
        layout.addWidget(self.devices_label)
        layout.addWidget(self.form, 1)
        if profile is not None:
            self.form.set_settings(profile.settings)
        self.form.set_engine(caps, profile.engine if profile else None)
        self._show_caps()
        if profile is not None and caps is None:
            self.set_engine_path(profile.engine, force=True)
        runner(detect, self._on_detected, self._on_detect_failed)
        self.resize(1120, 780)

    # -- engine ------------------------------------------------------------------------------
    def engine_path(self) -> str:
        return self.engine_edit.text().strip()

    def set_engine_path(self, path: str, force: bool = False) -> None:
        """Probe ``path`` in the background (unless its caps are already known)."""
        self.engine_edit.setText(path)
        if not path or (not force and self.caps is not None and self.caps.path == path):
            return
        self.caps = None
        self.form.set_engine(None, path)
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

    def _show_caps(self) -> None:
        self.engine_status.setStyleSheet("")
        self.engine_status.setText(f"✓ {caps_label(self.caps)}" if self.caps else "")

    def _on_browse_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose llama-server", str(Path(self.engine_path()).parent))
        if path:
            self.set_engine_path(path)

    # -- devices -----------------------------------------------------------------------------
    def _on_detected(self, report: HardwareReport) -> None:
        if not shiboken6.isValid(self):
            return
        self.devices = [g.memory_free for g in report.gpus]
        self.form.set_devices(self.devices)
        if report.gpus:
            free = ", ".join(f"{g.name}: {g.memory_free / GiB:.1f} GiB free" for g in report.gpus)
            self.devices_label.setText(f"GPUs: {free}")
        else:
            self.devices_label.setText("No NVIDIA GPU found: the memory plan is for the CPU (hover for why).")
        self.devices_label.setToolTip(report.reason or report.detail)
        self.devices_detected.emit(self.devices)

    def _on_detect_failed(self, exc: BaseException) -> None:
        self._on_detected(HardwareReport(reason=f"Detection failed: {exc}"))

    # -- applying ----------------------------------------------------------------------------
    def _on_form_launch_requested(self, settings: LaunchSettings) -> None:
        engine = self.engine_path()
        if not engine:
            return
        same = self.profile is not None and self.profile.engine == engine
        label = self.profile.label if same and self.profile else (caps_label(self.caps) if self.caps else "")
        self.profile_applied.emit(Profile(engine, settings, label), self.caps)
        self.accept()


def open_dialog(window: WindowHost) -> SettingsDialog:
    """The main window's Settings slot: the dialog, fed from the window and wired back to it."""
    profile = window.profile
    caps = window.known_caps.get(profile.engine) if profile else None
    dialog = SettingsDialog(profile, caps, window.dialog_parent(), probe=window.probe, detect=window.detect_hardware)
    dialog.profile_applied.connect(window.apply_profile)
    return dialog
