"""One input widget per launch-field kind (text, path, combo, tri-state, int, float, switch), and
reading and writing LaunchSettings values through them.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QCheckBox, QComboBox, QDoubleSpinBox, QLineEdit, QSpinBox, QWidget

from beedeck.core.engine.launch_settings import SpecMode
from beedeck.ui.launch.launch_fields import FieldSpec

DEFAULT = "engine default"
TRI = {None: DEFAULT, True: "on", False: "off"}


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
        w = QComboBox()
        w.setEditable(spec.kind == "layers")
        w.addItems(list(spec.choices))
        w.currentTextChanged.connect(on_change)
    elif spec.kind == "int":
        w = QSpinBox()
        w.setRange(spec.minimum, spec.maximum)
        w.setSingleStep(spec.step)
        w.setGroupSeparatorShown(True)
        if spec.optional:
            w.setSpecialValueText(spec.special or DEFAULT)
        w.valueChanged.connect(on_change)
    elif spec.kind == "float":
        w = QDoubleSpinBox()
        w.setDecimals(2)
        w.setRange(-0.01, spec.maximum)
        w.setSingleStep(0.05)
        w.setSpecialValueText(DEFAULT)
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
            try:
                return shlex.split(text)
            except ValueError:
                return text.split()
        if spec.name in ("target", "host"):
            return text
        return text or None
    if isinstance(w, QComboBox):
        text = w.currentText().strip()
        if spec.kind == "tristate":
            return {v: k for k, v in TRI.items()}.get(text)
        if spec.name == "spec_mode":
            return SpecMode(text)
        return None if text == DEFAULT and spec.optional else text
    if isinstance(w, QSpinBox):
        return None if spec.optional and w.value() == w.minimum() and spec.name != "port" else w.value()
    if isinstance(w, QDoubleSpinBox):
        return None if w.value() < 0 else round(w.value(), 2)
    assert isinstance(w, QCheckBox)
    return w.isChecked()
