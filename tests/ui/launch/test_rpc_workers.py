"""The launch form's RPC worker list with the probe injected (the real workers and engine are in
tests/engine/test_rpc_real.py): a bad address, a refused worker and a check not done yet keep Launch
greyed with the reason; a good check feeds the memory plan."""

from __future__ import annotations

from collections.abc import Sequence

from pytestqt.qtbot import QtBot

from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.rpc import VERSION, RpcError, Worker
from beedeck.core.engine.rpc.probe import RpcDevice
from beedeck.core.launcher import UNSET, preflight
from beedeck.ui.launch.rpc_workers import RpcWorkersEditor
from tests.fakes.inline_runner import run_inline
from tests.fixtures.engines import MAINLINE, help_stdout

ML = caps_from_texts("/e/llama-server", "version: 11434 (515e85511)", help_stdout(MAINLINE))


def _editor(qtbot: QtBot, calls: list[tuple[str, list[Worker]]]) -> RpcWorkersEditor:
    def probe(engine: str, workers: Sequence[Worker]) -> list[RpcDevice]:
        calls.append((engine, list(workers)))
        if any(w.port == 1 for w in workers):
            raise RpcError(VERSION, "The worker at 127.0.0.1:1 speaks RPC protocol 3.0.0.", "Use the same release.")
        return [RpcDevice(f"RPC{i}", str(w), 1000, 900, w) for i, w in enumerate(workers)]

    editor = RpcWorkersEditor(runner=run_inline, probe=probe)
    qtbot.addWidget(editor)
    return editor


def test_checks_go_through_the_engine_and_say_what_they_found(qtbot: QtBot) -> None:
    calls: list[tuple[str, list[Worker]]] = []
    editor = _editor(qtbot, calls)
    assert editor.result() == [] and editor.workers() == []
    editor.edit.setText("127.0.0.1:50052")
    assert editor.result() is UNSET  # being checked: the preflight greys Launch until it is
    assert [r.code for r in preflight(ML, LaunchSettings(target=__file__, rpc_workers=editor.workers()), read=False,
                                      rpc=editor.result()).refusals if r.setting == "rpc_workers"] == ["rpc_unchecked"]
    editor.check()
    assert "Pick the engine first" in editor.status.text() and calls == []
    with qtbot.waitSignal(editor.devices_probed) as probed:
        editor.set_engine("/e/llama-server")
    assert calls == [("/e/llama-server", [Worker("127.0.0.1", 50052)])] and len(probed.args[0]) == 1
    assert editor.result() == probed.args[0] and "900 of 1,000 MiB free" in editor.status.text()
    editor.edit.setText("127.0.0.1:50052, 127.0.0.1:1")
    assert editor.devices == []  # the old check no longer describes the list
    editor.check()
    failed = editor.result()
    assert isinstance(failed, RpcError) and "protocol 3.0.0" in failed.message
    refusal = preflight(ML, LaunchSettings(target=__file__, rpc_workers=editor.workers()), read=False,
                        rpc=failed).refusals[-1]  # what a launch's own probe would refuse, in the same words
    assert (refusal.code, refusal.setting, refusal.message) == ("rpc:version", "rpc_workers", failed.message)
    editor.edit.setText("pod")
    bad = editor.result()
    assert isinstance(bad, RpcError) and "not a worker address" in bad.message and editor.workers() == []
    editor.set_workers([])
    assert editor.result() == []


def test_a_list_already_checked_is_not_probed_again_unless_asked(qtbot: QtBot) -> None:
    """Each probe runs the engine and may wait on a worker: focus-outs and form loads reuse a check."""
    calls: list[tuple[str, list[Worker]]] = []
    editor = _editor(qtbot, calls)
    editor.set_engine("/e/llama-server")
    editor.set_workers(["127.0.0.1:50052"])
    assert len(calls) == 1
    editor.edit.editingFinished.emit()  # leaving the field unchanged
    editor.set_engine("/e/llama-server")
    assert len(calls) == 1 and isinstance(editor.result(), list)
    editor.check_button.click()  # the user asks: checked again
    assert len(calls) == 2
    editor.edit.setText("127.0.0.1:50053")
    editor.edit.editingFinished.emit()  # a new list: checked
    assert len(calls) == 3 and calls[-1][1] == [Worker("127.0.0.1", 50053)]
