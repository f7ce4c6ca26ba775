"""The launch form: every LaunchSettings field, grouped, explained, and checked against the engine.

Only options the probed engine supports are enabled; the others are greyed out with a tooltip that
says why. The memory bar, the pair check and the command preview all follow the form live, and
"Copy command" copies exactly what ``build_argv`` produces (API key masked; port 0 shown as the
app's default port). Launch is greyed by the launch's own :func:`beedeck.core.launcher.preflight`, asked of the
form's :class:`~beedeck.core.launch_facts.LaunchFacts` (the headers, the engine's build options, the RPC workers'
check, the memory free, all gathered off the GUI thread); each reason shows under the field it is about, and the
label beside Launch lists them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import shiboken6
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.engine.argv import LaunchPlan, LaunchRefused
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.launch_facts import LaunchFacts
from beedeck.core.launcher import build_options_of
from beedeck.core.models.gguf import reader as gguf
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.header_cache import HeaderCache, Read
from beedeck.core.models.planner import MemoryPlan
from beedeck.ui.background import Runner, run_in_background
from beedeck.ui.launch import launch_presets
from beedeck.ui.launch.field_editors import (
    fill_engine_choices,
    get_value,
    make_editor,
    mark_refused,
    put_value,
    under_field,
)
from beedeck.ui.launch.launch_fields import FIELDS, SECTIONS, FieldSpec, field_reason
from beedeck.ui.launch.memory_bar import MemoryBar
from beedeck.ui.launch.mode_check import GREY, Verdict, draft_verdict, modes_line
from beedeck.ui.launch.rpc_workers import RpcWorkersEditor
from beedeck.ui.launch.sidecar_offer import SidecarOffer
from beedeck.ui.wrap_label import WrapLabel


class LaunchForm(QWidget):
    """Edit a :class:`LaunchSettings` for one engine.

    Signals: ``settings_changed(LaunchSettings)`` (on every edit), ``launch_requested(LaunchSettings)``
    (LaunchSettings, the Launch button), ``command_copied(str)``, ``launch_checked(list)`` after every preflight
    (its refusals: empty when Launch is enabled; also when a fact gathered off the GUI thread arrives).
    Feed it with :meth:`set_engine` (probed caps + binary), :meth:`set_devices` (free bytes per GPU, host RAM)
    and :meth:`set_settings`. A dialog adds its own buttons beside Launch with :meth:`insert_button`. What the
    preflight knows is :attr:`facts` (Qt-free); the form fills it off the GUI thread and renders it.
    """

    settings_changed = Signal(LaunchSettings)
    launch_requested = Signal(LaunchSettings)
    command_copied = Signal(str)
    launch_checked = Signal(list)

    def __init__(self, parent: QWidget | None = None, *, runner: Runner = run_in_background,
                 inspect_fn: Callable[[str], ModelInfo] = gguf.inspect) -> None:
        super().__init__(parent)
        self.facts = LaunchFacts(HeaderCache(inspect_fn))
        self._runner = runner
        self._loading = False
        self.widgets: dict[str, QWidget] = {}
        self.extra_presets: list[tuple[str, str, Callable[[], None]]] = []  # a dialog's own: name, tooltip, action
        self.rows: dict[str, QLabel] = {}
        self.under: dict[str, WrapLabel] = {}  # the line under each field: why Launch is refused over it
        self._build()
        self.set_settings(LaunchSettings())

    # -- building ---------------------------------------------------------------------------
    def _build(self) -> None:
        groups: dict[str, QFormLayout] = {}
        boxes: dict[str, QGroupBox] = {}
        for section in SECTIONS:
            box = QGroupBox(section.replace("&", "&&"))  # a bare & would become a mnemonic
            form = QFormLayout(box)
            form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
            form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            form.setHorizontalSpacing(10)
            form.setVerticalSpacing(6)
            groups[section], boxes[section] = form, box
        for spec in FIELDS:
            widget = make_editor(spec, self._on_widget_changed)
            label = QLabel(spec.label)
            label.setToolTip(spec.tooltip)
            widget.setToolTip(spec.tooltip)
            cell, self.under[spec.name] = under_field(self._with_browse(spec, widget))
            self.widgets[spec.name], self.rows[spec.name] = widget, label
            groups[spec.section].addRow(label, cell)
            if spec.name == "draft":
                self.pair_label = WrapLabel()
                self.pair_label.setObjectName("pair-verdict")
                groups[spec.section].addRow("", self.pair_label)
                self._pair_form = groups[spec.section]
                # the drafts next to a picked target, offered in a note (sidecar_offer)
                self.sidecar_offer = SidecarOffer(self.widgets, self._on_widget_changed, runner=self._runner)
                groups[spec.section].addRow("", self.sidecar_offer)
            elif spec.name == "spec_mode":  # which modes this engine and these files run (mode_check)
                self.modes_label = WrapLabel()
                self.modes_label.setObjectName("spec-modes")
                groups[spec.section].addRow("", self.modes_label)
        self.rpc_workers = RpcWorkersEditor(runner=self._runner)  # machines that hold part of the model
        groups["GPU & loading"].addRow("RPC workers", self.rpc_workers)
        self.rpc_workers.workers_changed.connect(self._on_widget_changed)
        columns = QHBoxLayout()
        columns.setSpacing(12)
        for names in (SECTIONS[:3], SECTIONS[3:]):
            col = QVBoxLayout()
            col.setSpacing(12)
            for n in names:
                col.addWidget(boxes[n])
            col.addStretch(1)
            columns.addLayout(col, 1)
        inner = QWidget()
        inner.setLayout(columns)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(10, 10, 10, 10)
        layout.setSpacing(8)
        layout.addWidget(scroll, 1)
        self._build_bottom(layout)

    def _build_bottom(self, layout: QVBoxLayout) -> None:
        """The memory bar, the presets, the reasons and the buttons under the fields."""
        self.memory_bar = MemoryBar()
        mem_box = QGroupBox("Memory plan")
        QVBoxLayout(mem_box).addWidget(self.memory_bar)
        mem_box.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self.check_label = WrapLabel()
        self.check_label.setObjectName("argv-check")
        self.check_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.check_label.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)

        self.preset_combo = QComboBox()
        self.preset_combo.setMinimumContentsLength(22)
        self.preset_combo.setToolTip("Apply a preset: the guide's lines, BeeLlama's combos, or your own.")
        self.preset_combo.activated.connect(self._on_preset_activated)
        self.save_preset_button = QPushButton("Save preset…")
        self.save_preset_button.clicked.connect(self._on_save_preset_clicked)
        self.copy_button = QPushButton("Copy command")
        self.copy_button.setToolTip("Copy the exact llama-server command line (the API key is masked).")
        self.copy_button.clicked.connect(self.copy_command)
        self.launch_button = QPushButton("Launch")
        self.launch_button.setDefault(True)
        self.launch_button.clicked.connect(lambda: self.launch_requested.emit(self.settings()))
        presets = QHBoxLayout()
        presets.addWidget(QLabel("Preset:"))
        presets.addWidget(self.preset_combo)
        presets.addWidget(self.save_preset_button)
        presets.addStretch(1)
        # The reasons sit beside the buttons they grey out: a greyed Launch always says why.
        self.button_row = QHBoxLayout()
        self.button_row.addWidget(self.check_label, 1)
        self.button_row.addStretch(0)
        self.button_row.addWidget(self.copy_button, 0, Qt.AlignmentFlag.AlignBottom)
        self.button_row.addWidget(self.launch_button, 0, Qt.AlignmentFlag.AlignBottom)

        layout.addWidget(mem_box)
        layout.addLayout(presets)
        layout.addLayout(self.button_row)
        self._fill_presets()

    def insert_button(self, button: QPushButton) -> None:
        """Put a dialog's own button (Cancel, Save) in the button row, left of Launch."""
        self.button_row.insertWidget(self.button_row.indexOf(self.launch_button), button, 0,
                                     Qt.AlignmentFlag.AlignBottom)

    def _with_browse(self, spec: FieldSpec, widget: QWidget) -> QWidget:
        if spec.kind != "path":
            return widget
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(widget, 1)
        button = QToolButton()
        button.setText("…")
        button.setToolTip(f"Choose the {spec.label.lower()} GGUF file")
        button.clicked.connect(lambda: self._browse(spec.name))
        lay.addWidget(button)
        return row

    def _browse(self, name: str) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a GGUF model", "", "GGUF models (*.gguf)")
        if path:
            edit = self.widgets[name]
            assert isinstance(edit, QLineEdit)
            edit.setText(path)
            self._on_widget_changed()

    # -- inputs from the window -----------------------------------------------------------------
    def set_engine(self, caps: EngineCaps | None, binary: str | None = None, problem: str | None = None) -> None:
        """The probed engine; enables what it supports and re-checks everything. With no caps,
        ``problem`` is what Launch says instead (e.g. "Checking the engine…", or the probe's error)."""
        lookup = self.facts.set_engine(caps, binary, problem)
        self.rpc_workers.set_engine(caps.path if caps else None)
        fill_engine_choices(self.widgets, caps)
        self._fill_presets()
        if lookup is not None:  # which FlashAttention kernels this build has (its registry record): file I/O
            self._runner(lambda: build_options_of(lookup), lambda found: self._on_build_options(lookup, found),
                         lambda _exc: self._on_build_options(lookup, None))
        self._on_widget_changed()

    def _on_build_options(self, path: str, options: tuple[str, ...] | None) -> None:
        if shiboken6.isValid(self) and self.facts.build_options_found(path, options):
            self._check_argv(self.settings())

    def set_devices(self, free_bytes: list[int], host_ram: int | None = None) -> None:
        """Free bytes per GPU (empty: CPU only) and this machine's RAM (None: unknown), for the memory bar and
        the preflight."""
        self.facts.devices, self.facts.host_ram = list(free_bytes), host_ram
        self._check_argv(self.settings())
        self._schedule_plan()

    def set_settings(self, s: LaunchSettings) -> None:
        self._loading = True
        try:
            for spec in FIELDS:
                put_value(self.widgets[spec.name], spec, getattr(s, spec.name))
            self.rpc_workers.set_workers(s.rpc_workers)
            self.sidecar_offer.known(s.target)
        finally:
            self._loading = False
        self._on_widget_changed()

    # -- reading and writing widgets --------------------------------------------------------------
    def settings(self) -> LaunchSettings:
        """The settings the form shows now (the API key is kept from set_settings or the field)."""
        values = {spec.name: get_value(self.widgets[spec.name], spec) for spec in FIELDS}
        known = {f.name for f in fields(LaunchSettings)}
        return LaunchSettings(**{k: v for k, v in values.items() if k in known}, rpc_workers=self.rpc_workers.workers())

    # -- engine rules --------------------------------------------------------------------------
    def reason_disabled(self, name: str) -> str | None:
        """Why field ``name`` is disabled now (engine support or another setting), or None."""
        why = field_reason(name, self.facts.caps)
        if why:
            return why
        mode: Mode = self._get_spec("spec_mode")
        if name in ("draft", "draft_ctx_size", "draft_n_gpu_layers") and not mode.uses_draft_file and not (
                name == "draft" and mode == Mode.MTP):  # MTP: an mtp- head file for a target without heads
            return "Used only with a draft model's mode: DFlash, EAGLE-3, DSpark (or MTP with an mtp- head file)."
        if name == "dflash_cross_ctx" and mode != Mode.DFLASH:
            return "Used only with DFlash speculation."
        if name == "spec_model_free_type" and mode != Mode.MODEL_FREE:
            return "Used only with N-gram speculation."
        if name in ("draft_n_max", "draft_n_min") and mode == Mode.BASELINE:
            return "Used only when speculation is on."
        return None

    def _get_spec(self, name: str) -> Any:
        spec = next(s for s in FIELDS if s.name == name)
        return get_value(self.widgets[name], spec)

    def _apply_enabled(self) -> None:
        for spec in FIELDS:
            why = self.reason_disabled(spec.name)
            w, label = self.widgets[spec.name], self.rows[spec.name]
            w.setEnabled(why is None)
            label.setEnabled(why is None)
            tip = spec.tooltip if why is None else f"{spec.tooltip}\n\nDisabled: {why}"
            w.setToolTip(tip)
            label.setToolTip(tip)

    # -- reactions ----------------------------------------------------------------------------
    def _on_widget_changed(self, *_: object) -> None:
        if self._loading:
            return
        self._apply_enabled()
        s = self.settings()
        self._read_headers(s)
        self._check_argv(s)
        self._check_pair(s)
        self._schedule_plan()
        self.sidecar_offer.target_changed(s, self.facts.caps, self.facts.header(s.target))
        self.settings_changed.emit(s)

    def build_plan(self) -> LaunchPlan:
        """The argument list after the same :func:`preflight` a launch runs (with what the form gathered: the
        headers read so far, the build options, the workers' check, free GPU memory, host RAM), else
        LaunchRefused with every refusal. Port 0 shows as BeeDeck's default, never ``--port 0`` (the preflight's
        port rule, unclaimed)."""
        extra = self.widgets["extra_args"]
        assert isinstance(extra, QLineEdit)
        self.facts.rpc = self.rpc_workers.result()
        checked = self.facts.check(self.settings(), extra.text())
        if checked.refusals or checked.argv is None:
            raise LaunchRefused(checked.refusals or ["The command line could not be built."])
        return checked.argv

    def command_line(self) -> str | None:
        try:
            return self.build_plan().command_line(self.facts.binary)
        except LaunchRefused:
            return None

    def copy_command(self) -> None:
        line = self.command_line()
        if line is None:
            return
        QGuiApplication.clipboard().setText(line)
        self.command_copied.emit(line)

    def _check_argv(self, s: LaunchSettings) -> None:
        try:
            lp = self.build_plan()
        except LaunchRefused as exc:
            mark_refused(self.rows, self.under, self.facts.refused_fields)
            text = "Cannot launch yet:\n• " + "\n• ".join(exc.reasons)
            self.check_label.setStyleSheet("color: #d62728;")
            self.check_label.setText(text)
            self.check_label.setVisible(True)  # notes may have hidden it: a refusal is always shown
            self.launch_button.setEnabled(False)
            self.launch_button.setToolTip(text)
            self.copy_button.setEnabled(False)
            self.copy_button.setToolTip(text)
            self.launch_checked.emit(list(self.facts.refusals))
            return
        mark_refused(self.rows, self.under, {})
        notes = [n.message for n in lp.notes]
        self.check_label.setStyleSheet("color: palette(placeholder-text);")
        self.check_label.setText("\n".join(f"• {n}" for n in notes))
        self.check_label.setVisible(bool(notes))
        self.launch_button.setEnabled(True)
        self.launch_button.setToolTip("Start llama-server with these settings")
        self.copy_button.setEnabled(True)
        self.copy_button.setToolTip(lp.command_line(self.facts.binary))
        self.launch_checked.emit([])

    def _read_headers(self, s: LaunchSettings) -> None:
        """The target's and the draft's headers, looked at off the GUI thread (read again only when the file
        changed); a look that found something new checks everything again."""
        headers = self.facts.headers
        for path in self.facts.to_read(s):
            def done(result: Read, path: str = path) -> None:
                if shiboken6.isValid(self) and headers.store(path, result):
                    self._on_widget_changed()

            def failed(_exc: BaseException, path: str = path) -> None:
                headers.forget(path)

            self._runner(headers.reader(path), done, failed)

    def _check_pair(self, s: LaunchSettings) -> None:
        """The draft's verdict for the chosen mode, and the modes this engine and these files run."""
        caps, target, draft = self.facts.caps, self.facts.info(s.target), self.facts.info(s.draft)
        # A file that is no GGUF is said under its own field (the preflight's refusal), not here.
        self._show(self.pair_label, Verdict(GREY, "") if self.facts.unreadable(s) else
                   draft_verdict(caps, s, target, draft, None, self.facts.reading(s)))
        self._pair_form.setRowVisible(self.pair_label, bool(self.pair_label.text()))
        self._show(self.modes_label, modes_line(caps, s, target, draft))

    def _show(self, label: WrapLabel, verdict: Verdict) -> None:
        label.setStyleSheet(f"color: {verdict.color};")
        label.setText(verdict.text)
        label.setToolTip(verdict.tooltip)

    def _schedule_plan(self) -> None:
        self.memory_bar.schedule(self.compute_plan)

    def compute_plan(self) -> MemoryPlan | None:
        """The memory bar's plan: the launch's (:func:`plan_launch`), with the headers read so far, the GPUs'
        free memory and, with workers set, the devices their check found (workers first)."""
        self.facts.rpc_devices = self.rpc_workers.devices
        return self.facts.plan(self.settings())

    # -- presets --------------------------------------------------------------------------------
    def _fill_presets(self) -> None:
        combo = self.preset_combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("Choose a preset…")
        model = combo.model()
        assert isinstance(model, QStandardItemModel)
        for i, (name, tip, _apply) in enumerate(self.extra_presets):
            combo.addItem(name, ("extra", i))
            combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        for p in launch_presets.BUILTIN_PRESETS:
            combo.addItem(p.name, ("builtin", p.name))
            why = p.unavailable_reason(self.facts.caps)
            item = model.item(combo.count() - 1)
            item.setEnabled(why is None)
            item.setToolTip(why or p.description)
        for name in launch_presets.load_presets():
            combo.addItem(f"★ {name}", ("user", name))
        combo.setCurrentIndex(0)
        combo.blockSignals(False)

    def add_preset(self, name: str, tooltip: str, apply: Callable[[], None]) -> None:
        """A dialog's own preset, listed first (Settings: back to the starter profile, engine and all)."""
        self.extra_presets.append((name, tooltip, apply))
        self._fill_presets()

    def apply_preset(self, name: str) -> None:
        """Apply a built-in preset (keeps the model files) or a user preset (replaces everything)."""
        cur = self.settings()
        builtin = next((p for p in launch_presets.BUILTIN_PRESETS if p.name == name), None)
        if builtin is not None:
            new = builtin.make(cur)
        else:
            new = launch_presets.load_presets()[name]
        new.api_key = cur.api_key  # the key is never stored in a preset; keep the one typed
        self.set_settings(new)

    def save_preset(self, name: str) -> Path:
        path = launch_presets.save_preset(name, self.settings())
        self._fill_presets()
        return path

    def _on_preset_activated(self, index: int) -> None:
        data = self.preset_combo.itemData(index)
        if data and data[0] == "extra":
            self.extra_presets[data[1]][2]()
        elif data:
            self.apply_preset(data[1])
        self.preset_combo.setCurrentIndex(0)

    def _on_save_preset_clicked(self) -> None:
        name, ok = QInputDialog.getText(self, "Save preset", "Preset name:")
        if ok and name.strip():
            self.save_preset(name)
