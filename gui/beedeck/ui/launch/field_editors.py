"""One input widget per launch-field kind (text, path, combo, tri-state, int, float, switch), reading and
writing LaunchSettings values through them, the engine's choices in the combos, and a refusal shown under
the field it is about.

Every value LaunchSettings.check() accepts reads back unchanged (``get_value(put_value(x)) == x``):
number ranges come from RANGES, and "engine default" (None) sits one step below a field's range
rather than on its lowest real value.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.known_issues import refused_spec_types
from beedeck.core.engine.mode import Mode
from beedeck.core.launcher import args_refusal
from beedeck.core.models.planner import CACHE_TYPES
from beedeck.ui.launch.launch_fields import FieldSpec, cache_type_reason, field_reason, value_range
from beedeck.ui.launch.wheel_guard import ComboBox, DoubleSpinBox, SpinBox
from beedeck.ui.wrap_label import WrapLabel

DEFAULT = "engine default"
TRI = {None: DEFAULT, True: "on", False: "off"}
FLOAT_DECIMALS = 3
FLOAT_STEP = 0.05
RED = "#d62728"


def make_editor(spec: FieldSpec, on_change: Callable[..., None]) -> QWidget:
    """The input widget for one field kind, wired to ``on_change``."""
    w: QWidget
    if spec.kind in ("path", "text", "secret", "args"):
        w = QLineEdit()
        w.setPlaceholderText(spec.placeholder)
        if spec.kind == "secret":
            w.setEchoMode(QLineEdit.EchoMode.Password)
        w.textEdited.connect(on_change)
    elif spec.kind in ("combo", "tristate", "cache", "layers"):
        w = ComboBox()
        w.setEditable(spec.kind == "layers")
        for i, choice in enumerate(spec.choices):  # shown by its label where it has one; read back by its value
            w.addItem(spec.labels[i] if spec.labels else choice, choice)
        w.currentTextChanged.connect(on_change)
    elif spec.kind == "int":
        w = SpinBox()
        low, high = value_range(spec)
        w.setRange(int(low) - (1 if spec.optional else 0), int(high))
        w.setSingleStep(spec.step)
        w.setGroupSeparatorShown(spec.name != "port")  # 8,477 reads as a count, not a port
        if spec.optional or spec.special:
            w.setSpecialValueText(spec.special or DEFAULT)
        w.valueChanged.connect(on_change)
    elif spec.kind == "float":
        w = DoubleSpinBox()
        w.setDecimals(FLOAT_DECIMALS)
        low, high = value_range(spec)
        w.setRange(low - (0.01 if spec.optional else 0), high)
        w.setSingleStep(FLOAT_STEP)
        if spec.optional:
            w.setSpecialValueText(spec.special or DEFAULT)
        w.valueChanged.connect(on_change)
    else:  # bool
        w = QCheckBox()
        w.toggled.connect(on_change)
    w.setObjectName(spec.name)
    return w


def put_value(w: QWidget, spec: FieldSpec, value: Any) -> None:
    """Show ``value`` (a LaunchSettings value) in the field's widget."""
    if isinstance(w, QLineEdit):
        text = shlex.join(value) if spec.kind == "args" else ("" if value is None else str(value))
        w.setText(text)
    elif isinstance(w, QComboBox) and spec.labels:
        w.setCurrentIndex(max(0, w.findData(str(value))))
    elif isinstance(w, QComboBox):
        text = TRI[value] if spec.kind == "tristate" else (DEFAULT if value is None else str(value))
        if w.findText(text) < 0:
            w.addItem(text)
        w.setCurrentText(text)
    elif isinstance(w, QSpinBox):
        w.setValue(w.minimum() if value is None else int(value))
    elif isinstance(w, QDoubleSpinBox):
        w.setValue(w.minimum() if value is None else float(value))
    elif isinstance(w, QCheckBox):
        w.setChecked(bool(value))


def get_value(w: QWidget, spec: FieldSpec) -> Any:
    """The LaunchSettings value the field's widget shows."""
    if isinstance(w, QLineEdit):
        text = w.text().strip()
        if spec.kind == "args":
            return text.split() if args_refusal(text) else shlex.split(text)  # the preflight refuses it
        if spec.name in ("target", "host"):
            return text
        return text or None
    if isinstance(w, QComboBox):
        text = w.currentText().strip()
        if spec.kind == "tristate":
            return {v: k for k, v in TRI.items()}.get(text)
        if spec.name == "spec_mode":
            return Mode(w.currentData())
        return None if text == DEFAULT and spec.optional else text
    if isinstance(w, QSpinBox):
        return None if spec.optional and w.value() == w.minimum() else w.value()
    if isinstance(w, QDoubleSpinBox):
        return None if spec.optional and w.value() <= w.minimum() else round(w.value(), FLOAT_DECIMALS)
    assert isinstance(w, QCheckBox)
    return w.isChecked()


def under_field(widget: QWidget) -> tuple[QWidget, WrapLabel]:
    """``widget`` with a line under it that says why Launch is refused over this field (hidden until then)."""
    cell = QWidget()
    box = QVBoxLayout(cell)
    box.setContentsMargins(0, 0, 0, 0)
    box.setSpacing(2)
    box.addWidget(widget)
    why = WrapLabel()
    why.setObjectName("field-refusal")
    why.setStyleSheet(f"color: {RED};")
    why.hide()
    box.addWidget(why)
    return cell, why


def mark_refused(rows: dict[str, QLabel], under: dict[str, WrapLabel], refused: dict[str, str]) -> None:
    """At the field a preflight refusal is about (its ``setting``): the reason under the field (wrapped) and
    the row's label red; every other row back to normal. The summary under the form lists them all too."""
    for name, label in rows.items():
        why = refused.get(name)
        label.setStyleSheet(f"color: {RED};" if why else "")
        line = under.get(name)
        if line is not None:
            line.setText(why or "")
            line.setVisible(bool(why))


def fill_engine_choices(widgets: dict[str, QWidget], caps: EngineCaps | None) -> None:
    """The combos whose choices depend on the engine: cache types, N-gram types, flash attention, and the
    speculation modes (each one the engine lacks greyed, with why), keeping what each shows."""
    for name in ("cache_type_k", "cache_type_v"):
        combo = widgets[name]
        assert isinstance(combo, QComboBox)
        current = combo.currentText()
        combo.blockSignals(True)
        combo.clear()
        names = list(caps.cache_types) if caps else []
        names += [t for t in CACHE_TYPES if t not in names]
        model = combo.model()
        assert isinstance(model, QStandardItemModel)
        for t in names:
            combo.addItem(t)
            item = model.item(combo.count() - 1)
            why = cache_type_reason(t, caps, "--" + name.replace("_", "-"))
            item.setEnabled(why is None)
            item.setToolTip(why or f"{t}: {CACHE_TYPES.get(t, (1, 2))[1] * 8 / CACHE_TYPES.get(t, (1, 2))[0]:.2f} "
                                   "bits per value")
        if current and combo.findText(current) < 0:
            combo.addItem(current)  # a profile's type the list does not know: shown, build_argv judges it
        combo.setCurrentText(current or "f16")
        combo.blockSignals(False)
    _fill_spec_types(widgets["spec_model_free_type"], caps)
    fa = widgets["flash_attn"]
    assert isinstance(fa, QComboBox)
    values = list(caps.flash_attn_values) if caps and caps.flash_attn_values else ["on", "off", "auto"]
    cur = fa.currentText()
    fa.blockSignals(True)
    fa.clear()
    fa.addItems(values)
    fa.setCurrentText(cur if cur in values else values[-1])
    fa.blockSignals(False)
    mode = widgets["spec_mode"]
    assert isinstance(mode, QComboBox)
    mmodel = mode.model()
    assert isinstance(mmodel, QStandardItemModel)
    for i in range(mode.count()):
        why = field_reason(f"spec_mode:{mode.itemData(i)}", caps)
        mmodel.item(i).setEnabled(why is None)
        mmodel.item(i).setToolTip(why or "")


def _fill_spec_types(spec_combo: QWidget, caps: EngineCaps | None) -> None:
    assert isinstance(spec_combo, QComboBox)
    current = spec_combo.currentText()
    spec_combo.blockSignals(True)
    spec_combo.clear()
    types = list(caps.model_free_spec_types) if caps else ["ngram-mod", "ngram-simple", "ngram-map-k"]
    refused = refused_spec_types(caps) if caps else frozenset()
    spec_combo.addItems(types)
    model = spec_combo.model()
    assert isinstance(model, QStandardItemModel)
    for i, t in enumerate(types):
        item = model.item(i)
        if item is not None and t in refused:
            item.setEnabled(False)
            item.setToolTip(f"{t} crashes this engine (see docs/known-issues.md): pick another type.")
    if current and spec_combo.findText(current) < 0:
        spec_combo.addItem(current)
    usable = [t for t in types if t not in refused]
    # A refused type stays as it is (the profile is not rewritten behind the user's back); in use, it is
    # one of the reasons Launch gives.
    spec_combo.setCurrentText(current or (usable[0] if usable else ""))
    spec_combo.blockSignals(False)
