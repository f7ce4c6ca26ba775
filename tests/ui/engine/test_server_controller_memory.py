"""Settings → Launch over a running server (Serving.replace, through the controller): the preflight it runs before stopping
the working server checks GPU memory too, counting what that server holds as free (it is stopped first).
The card is the fake NVML's RTX 4090 (tests/fakes/fake_nvml.py); the servers are fake processes with a pid,
the target a real GGUF header of Qwen3.6-27B Q5_K_S (the planner sizes it at about 18.5 GiB at 8k)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server import ServerState
from beedeck.core.launcher import Held, Preflight, Room, room_now
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.serving import Serving, ServingParts
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.launch.settings_dialog import SettingsDialog
from tests.fakes.fake_launch import FakeProc, mainline_caps
from tests.fakes.fake_nvml import FakeNvml, rtx4090
from tests.fakes.inline_runner import run_inline
from tests.fixtures.meta_gguf import qwen36_27b

GiB = 1 << 30
HELD = int(18.9 * GiB)  # what the running server's process holds on the card, as NVML lists it


class Pid(FakeProc):
    def __init__(self, plan: Preflight, on_state: object, pid: int) -> None:
        super().__init__(plan, on_state)
        self.pid, self.gone = pid, False  # gone: its memory is back on the card


@pytest.fixture
def card() -> FakeNvml:
    return FakeNvml([rtx4090()])


def _controller(card: FakeNvml, procs: list[Pid], *, shown: bool = True) -> ServerController:
    """A controller whose every start holds HELD on the card (listed under its pid when ``shown``)."""

    def start(engine: str, plan: Preflight, **kw: object) -> Pid:
        gpu = card.gpus[0]
        for old in procs:  # a stopped server gave its memory back
            if old.stopped and not old.gone:
                old.gone = True
                gpu.used -= HELD
                gpu.processes.pop(old.pid, None)
        procs.append(Pid(plan, kw.get("on_state"), 4242 + len(procs)))
        gpu.used += HELD
        if shown:
            gpu.processes[procs[-1].pid] = HELD
        return procs[-1]

    def room(stopping: Sequence[Held]) -> Room:
        return room_now(stopping, nvml_module=card)

    return ServerController(serving=Serving(ServingParts(start=start, room=room, default_port=18477)))


def _settings(tmp_path: Path, ctx: int = 8192) -> LaunchSettings:
    return LaunchSettings(target=str(qwen36_27b(tmp_path / "q36.gguf")), ctx_size=ctx, n_gpu_layers="all",
                          flash_attn="on")


@pytest.mark.parametrize("shown", [True, False], ids=["nvml-lists-the-process", "its-plan-counts-instead"])
def test_relaunching_the_same_model_on_a_24_gb_card_is_not_refused(qtbot: QtBot, tmp_path: Path, card: FakeNvml,
                                                                   shown: bool) -> None:
    procs: list[Pid] = []
    c = _controller(card, procs, shown=shown)
    s, caps = _settings(tmp_path), mainline_caps("/e/llama-server")
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.serving.start("/e/llama-server", s, caps)
    assert card.gpus[0].free < 4 * GiB  # the running server holds the rest
    refused: list[ServerFailure] = []
    c.refused.connect(refused.append)
    with qtbot.waitSignal(c.ready, timeout=10_000):
        c.serving.replace("/e/llama-server", replace(s, threads=4), caps)  # Settings → Launch, same model and layers
    assert refused == [] and len(procs) == 2 and procs[0].stopped and not procs[1].stopped

    # A launch that does not fit even once the running server is stopped is refused before it is stopped.
    with qtbot.waitSignal(c.refused, timeout=10_000) as blocker:
        c.serving.replace("/e/llama-server", replace(s, ctx_size=131072), caps)
    failure = blocker.args[0]
    assert failure.code == "out_of_memory" and failure.setting == "n_gpu_layers" and "GiB free" in failure.message
    assert len(procs) == 2 and not procs[1].stopped and c.serving.state == ServerState.READY
    c.serving.shutdown()


def test_the_settings_form_counts_the_running_server_back(qtbot: QtBot, tmp_path: Path, card: FakeNvml,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The dialog's memory inputs: NVML's free memory less nothing the running server holds (Launch stops it)."""
    from beedeck.core.machine import hardware, nvml

    monkeypatch.setattr(nvml, "import_pynvml", lambda: card)  # what the controller's count reads
    procs: list[Pid] = []
    c = _controller(card, procs)
    s, caps = _settings(tmp_path), mainline_caps("/e/llama-server")
    with qtbot.waitSignal(c.ready, timeout=5000):
        c.serving.start("/e/llama-server", s, caps)

    def detect() -> HardwareReport:
        return hardware.detect(nvml_module=card)

    free = card.gpus[0].free
    dialog = SettingsDialog(Profile("/e/llama-server", s), caps, probe=lambda p: caps, detect=detect,
                            runner=run_inline, held=c.serving.held_gpu_memory)
    qtbot.addWidget(dialog)
    assert dialog.devices == [free + HELD]
    assert dialog.form.launch_button.isEnabled(), dialog.form.check_label.text()
    assert f"{free / GiB:.1f} GiB free + {HELD / GiB:.1f} GiB the running server frees" in dialog.devices_label.text()
    alone = SettingsDialog(Profile("/e/llama-server", s), caps, probe=lambda p: caps, detect=detect, runner=run_inline)
    qtbot.addWidget(alone)  # without the count: refused as out of memory, the old behaviour
    assert alone.devices == [free] and not alone.form.launch_button.isEnabled()
    assert f"which has {free / GiB:.1f} GiB free" in alone.form.check_label.text()
    c.serving.shutdown()
