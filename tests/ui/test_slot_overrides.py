"""No widget overrides a ``@Slot`` of a BeeDeck base class: PySide6 6.11 then calls the override on
the emitting thread (AutoConnection) or never (QueuedConnection). Shown here for real with a worker
thread, then checked over every ui module, since the crash it caused (a progress bar painted from the
benchmark's worker thread) showed only 1 run in 6."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from PySide6.QtCore import QObject, QThread, Signal, Slot
from pytestqt.qtbot import QtBot

import beedeck.ui

UI = Path(beedeck.ui.__file__).parent


class _Emitter(QObject):
    value = Signal(int)

    @Slot()
    def run(self) -> None:
        self.value.emit(1)


class _Base(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    @Slot(int)
    def on_value(self, _v: int) -> None:
        self.threads.append(threading.get_ident())


class _Override(_Base):
    @Slot(int)
    def on_value(self, v: int) -> None:
        super().on_value(v)


def _slot_threads(qtbot: QtBot, receiver: _Base) -> list[int]:
    thread, emitter = QThread(), _Emitter()
    emitter.moveToThread(thread)
    thread.started.connect(emitter.run)
    emitter.value.connect(receiver.on_value)
    thread.start()
    qtbot.waitUntil(lambda: bool(receiver.threads), timeout=5000)
    thread.quit()
    thread.wait()
    return receiver.threads


def test_why_the_rule_exists_an_overridden_slot_runs_on_the_worker_thread(qtbot: QtBot) -> None:
    main = threading.get_ident()
    assert _slot_threads(qtbot, _Base()) == [main]
    # If a PySide6 upgrade fixes this, the assertion fails: the rule below may then be relaxed.
    assert _slot_threads(qtbot, _Override()) != [main]


def _classes() -> dict[str, tuple[Path, set[str], set[str], list[str]]]:
    found: dict[str, tuple[Path, set[str], set[str], list[str]]] = {}
    for path in UI.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = [m for m in node.body if isinstance(m, ast.FunctionDef)]
                slots = {m.name for m in methods if any("Slot" in ast.unparse(d) for d in m.decorator_list)}
                found[node.name] = (path, slots, {m.name for m in methods}, [ast.unparse(b) for b in node.bases])
    return found


def test_no_ui_class_overrides_a_slot_of_its_base() -> None:
    classes = _classes()
    assert "RunView" in classes and "BenchView" in classes  # the scan sees the package
    overrides = [f"{path.relative_to(UI)}: {name}.{meth} overrides {base}.{meth}"
                 for name, (path, _slots, methods, bases) in classes.items()
                 for base in bases if base in classes
                 for meth in sorted(classes[base][1] & methods)]
    assert overrides == [], "listen to a signal of the base instead:\n" + "\n".join(overrides)
