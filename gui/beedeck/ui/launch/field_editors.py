"""One input widget per launch-field kind (text, path, combo, tri-state, int, float, switch), and
reading and writing LaunchSettings values through them.

Every value LaunchSettings.check() accepts reads back unchanged (``get_value(put_value(x)) == x``):
number ranges come from RANGES, and "engine default" (None) sits one step below a field's range
rather than on its lowest real value.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLabel, QLineEdit, QSpinBox, QWidget

from beedeck.core.engine.launch_settings import SpecMode
from beedeck.ui.launch.launch_fields import FieldSpec, value_range
from beedeck.ui.launch.wheel_guard import ComboBox, DoubleSpinBox, SpinBox

DEFAULT = "engine default"
TRI = {None: DEFAULT, True: "on", False: "off"}
FLOAT_DECIMALS = 3
FLOAT_STEP = 0.05


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


def args_problem(text: str) -> str | None:
    """Why an extra-arguments line cannot be read as a command line (an open quote), or None."""
    try:
        shlex.split(text)
    except ValueError as exc:
        return f"Extra arguments cannot be read ({exc}): close the quote, or remove it."
    return None


def get_value(w: QWidget, spec: FieldSpec) -> Any:
    """The LaunchSettings value the field's widget shows."""
    if isinstance(w, QLineEdit):
        text = w.text().strip()
        if spec.kind == "args":
            return text.split() if args_problem(text) else shlex.split(text)
        if spec.name in ("target", "host"):
            return text
        return text or None
    if isinstance(w, QComboBox):
        text = w.currentText().strip()
        if spec.kind == "tristate":
            return {v: k for k, v in TRI.items()}.get(text)
        if spec.name == "spec_mode":
            return SpecMode(w.currentData())
        return None if text == DEFAULT and spec.optional else text
    if isinstance(w, QSpinBox):
        return None if spec.optional and w.value() == w.minimum() else w.value()
    if isinstance(w, QDoubleSpinBox):
        return None if spec.optional and w.value() <= w.minimum() else round(w.value(), FLOAT_DECIMALS)
    assert isinstance(w, QCheckBox)
    return w.isChecked()


def mark_refused(rows: dict[str, QLabel], refused: dict[str, str]) -> None:
    """At the field a preflight refusal is about (its ``setting``): the row's label red, the reason in its
    tooltip; every other row back to normal. The reasons themselves are listed under the form too."""
    for name, label in rows.items():
        why = refused.get(name)
        label.setStyleSheet("color: #d62728;" if why else "")
        if why:
            label.setToolTip(f"Launch is refused: {why}")
