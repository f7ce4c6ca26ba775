"""The launch form and the launch refuse the same things for the same reasons: the same settings go to the
form (which greys Launch), to ``launch()`` (which refuses before starting anything) and to ``beedeck serve``
(which prints the refusals), and all three give the same refusals (code, message, remedy, setting).

The machine is the one thing faked: NVML at the library level (tests/fakes/fake_nvml.py: an RTX 4090 with
10 GiB in use by another program) and 23 GiB of RAM; both sides read them through the same detection
(:func:`beedeck.core.launcher.room_now`). Engines are the recorded --help texts; no launch gets as far as
running one (the binary paths do not exist)."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from beedeck.clicmd.engine import serve
from beedeck.core.engine.argv import LaunchRefused, Refusal
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin
from beedeck.core.engine.server import free_port
from beedeck.core.launcher import launch, room_now
from beedeck.core.machine import hardware, nvml
from beedeck.core.machine.report import SystemInfo
from beedeck.ui.launch.launch_form import LaunchForm
from tests.fakes.fake_nvml import MIB, FakeNvml, rtx4090
from tests.fakes.inline_runner import run_inline
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout

GiB = 1 << 30


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    """An RTX 4090 with 10 GiB held by another program, and 23 GiB of RAM, as every detection sees them."""
    card = rtx4090()
    card.used += 10 * GiB
    fake = FakeNvml([card])
    monkeypatch.setattr(hardware, "import_pynvml", lambda: fake)
    monkeypatch.setattr(nvml, "import_pynvml", lambda: fake)
    monkeypatch.setattr(hardware, "system_info", lambda disk_path=None: SystemInfo(ram_total=23 * GiB))
    return fake


def ml(path: str = "/nowhere/ml/llama-server") -> EngineCaps:
    return caps_from_texts(path, "version: 11434 (515e85511)", help_stdout(MAINLINE))


def bee() -> EngineCaps:
    return caps_from_texts("/nowhere/bee/llama-server", "version: 1 (ba1fdce)", help_stdout(BEE_A))


Case = Callable[[Path], tuple[EngineCaps, LaunchSettings]]


def _text_as_gguf(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    fake = d / "fake.gguf"
    fake.write_text("a text file renamed .gguf\n")
    return ml(), LaunchSettings(target=str(fake))


def _wrong_draft(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    target = mg.tiny_model(d / "t.gguf", n_embd=128)
    eagle = mg.tiny_model(d / "eagle.gguf", arch="eagle3", n_embd=128, n_layer=1)
    return ml(), LaunchSettings(target=str(target), draft=str(eagle), spec_mode=Mode.DFLASH)


def _engine_and_args(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    return ml(), LaunchSettings(target=str(mg.tiny_model(d / "t.gguf")), spec_mode=Mode.DFLASH,
                                extra_args=["--no-such-flag", "3"], host="0.0.0.0")


def _key_on_the_command_line(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    caps = ml()
    caps = dataclasses.replace(caps, flags=frozenset(caps.flags - {"--api-key-file"}))
    return caps, LaunchSettings(target=str(mg.tiny_model(d / "t.gguf")), api_key="sk-test")


def _crashing_ngram(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    return bee(), LaunchSettings(target=str(mg.tiny_model(d / "t.gguf")), spec_mode=Mode.MODEL_FREE,
                                 spec_model_free_type="ngram-mod")


def _kernels_missing(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    binary = d / "llama-server"
    binary.write_text("#!/bin/sh\n")
    EngineRegistry().save(EngineRecord(id="bee-b-cuda", origin=Origin.BUILT, binary=str(binary),
                                       build_options=["-DGGML_CUDA=ON", "-DGGML_CUDA_KVARN=OFF"]))
    return ml(str(binary)), LaunchSettings(target=str(mg.tiny_model(d / "t.gguf")), cache_type_k="kvarn4",
                                           cache_type_v="kvarn4")


def _gpu_too_small(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    return ml(), LaunchSettings(target=str(mg.qwen36_27b(d / "q36.gguf")), ctx_size=8192, n_gpu_layers="all",
                                flash_attn="on")


def _host_too_small(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    return ml(), LaunchSettings(target=str(mg.qwen36_27b(d / "q36.gguf")), ctx_size=4_000_000, n_gpu_layers="0")


def _worker_gone(d: Path) -> tuple[EngineCaps, LaunchSettings]:
    return ml(), LaunchSettings(target=str(mg.tiny_model(d / "t.gguf")), rpc_workers=[f"127.0.0.1:{free_port()}"])


CASES: dict[str, tuple[Case, set[str]]] = {
    "missing target": (lambda d: (ml(), LaunchSettings(target="/nonexistent/model.gguf")), {"model_missing"}),
    "text renamed .gguf": (_text_as_gguf, {"not_gguf"}),
    "wrong draft kind": (_wrong_draft, {"wrong_draft_format"}),
    "engine and extra args": (_engine_and_args, {"model_missing", "unknown_argument", "bad_value"}),
    "key on the command line": (_key_on_the_command_line, {"unknown_argument"}),
    "crashing N-gram type": (_crashing_ngram, {"engine_bug"}),
    "kernels missing": (_kernels_missing, {"unsupported_cache_type"}),
    "GPU too small": (_gpu_too_small, {"out_of_memory"}),
    "host too small": (_host_too_small, {"out_of_memory"}),
    "RPC worker gone": (_worker_gone, {"rpc:unreachable"}),
}


def _form_refusals(qtbot: QtBot, caps: EngineCaps, settings: LaunchSettings) -> tuple[list[Refusal], LaunchSettings]:
    form = LaunchForm(runner=run_inline)  # the form's background reads, run inline
    qtbot.addWidget(form)
    room = room_now()  # what the Settings dialog's detection hands the form
    form.set_devices(room.gpus or [], room.host_ram)
    form.set_engine(caps, caps.path)
    form.set_settings(settings)
    assert not form.launch_button.isEnabled()
    for r in form.facts.refusals:  # every refusal said under its field too (where the field has a row)
        if r.setting in form.under:
            assert str(r) in form.under[r.setting].text() and not form.under[r.setting].isHidden()
    return form.facts.refusals, form.settings()


@pytest.mark.parametrize("name", list(CASES))
def test_the_form_launch_and_serve_refuse_alike(qtbot: QtBot, tmp_path: Path, machine: FakeNvml, name: str,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    make, codes = CASES[name]
    caps, settings = make(tmp_path)
    in_form, shown = _form_refusals(qtbot, caps, settings)
    assert {r.code for r in in_form} == codes, in_form
    assert shown == settings  # the form reads back what it was given: the same settings go to the launch

    with pytest.raises(LaunchRefused) as refused:
        launch(caps.path, caps, shown)
    assert refused.value.refusals == in_form

    monkeypatch.setattr(serve, "resolve", lambda args: (Path(caps.path), caps, shown))
    capsys.readouterr()
    # exit 2 for a refusal of the arguments alone, 1 when the files or the machine refuse (the fault matrix's)
    arguments_only = all(r.code in serve.ARGUMENT_CODES for r in in_form)
    assert serve.start_from_args(argparse.Namespace()) == (2 if arguments_only else 1)
    printed = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("error: ", "  what to do: "))]
    expected = []
    for r in in_form:
        expected += [f"error: {r.message}", *([f"  what to do: {r.remedy}"] if r.remedy else [])]
    assert printed == expected


def test_the_gpu_refusal_counts_the_card_as_the_driver_does(machine: FakeNvml) -> None:
    """The figures in the GPU refusal are the fake card's: 23.99 GiB, less its reserve and 11.2 GiB in use."""
    room = room_now()
    card = machine.gpus[0]
    assert room.gpus == [card.free] and room.host_ram == 23 * GiB
    assert card.free == card.total - 387 * MIB - 1210 * MIB - 10 * GiB
