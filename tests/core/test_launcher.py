"""The one preflight: every refusal a launch would meet, before anything stops or starts, with one type
(a code, a message, a remedy and the setting it is about)."""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import pytest

from beedeck.core.engine.argv import LaunchRefused
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed
from beedeck.core.launcher import (
    Held,
    Preflight,
    Refusal,
    build_options_of,
    given_back,
    launch,
    preflight,
    room_now,
)
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.planner import GiB
from tests.fakes.fake_nvml import MIB, FakeNvml, rtx4090
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout


@pytest.fixture(scope="module")
def ml() -> EngineCaps:
    return caps_from_texts("/e/ml/llama-server", "version: 11434 (515e85511)", help_stdout(MAINLINE))


@pytest.fixture(scope="module")
def bee() -> EngineCaps:
    return dataclasses.replace(caps_from_texts("/e/bee/llama-server", "version: 1 (ba1fdce)", help_stdout(BEE_A)),
                               release="v0.1.2")


def codes(p: Preflight) -> list[str]:
    return [r.code for r in p.refusals]


def test_a_missing_target_is_refused_with_its_remedy(ml: EngineCaps) -> None:
    p = preflight(ml, LaunchSettings(target="/nonexistent/model.gguf"))
    assert codes(p) == ["model_missing"] and not p.ok
    r = p.refusals[0]
    assert isinstance(r, Refusal) and "/nonexistent/model.gguf does not exist" in r.message
    assert r.remedy == "Check the path, or download it again." and r.setting == "target"


def test_a_text_file_renamed_gguf_is_said_to_be_no_gguf(ml: EngineCaps, tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_text("not a model\n")
    p = preflight(ml, LaunchSettings(target=str(fake)))
    assert codes(p) == ["not_gguf"]
    assert "fake.gguf is not a GGUF model" in p.refusals[0].message and "renamed" in p.refusals[0].remedy
    assert "could not look for drafts" not in p.failure().message


def test_a_context_the_host_cannot_hold_is_refused(ml: EngineCaps, tmp_path: Path) -> None:
    """The issue: 4,000,000 tokens planned at 89.7 GiB on a 23 GiB machine, and Launch stayed enabled."""
    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    settings = LaunchSettings(target=str(target), ctx_size=4_000_000, n_gpu_layers="0")
    p = preflight(ml, settings, host_ram=23 * GiB)
    assert p.memory is not None and p.memory.host.total > 23 * GiB
    assert codes(p) == ["out_of_memory"] and p.refusals[0].setting == "ctx_size"
    assert "of host memory (RAM), and this machine has 23.0 GiB" in p.refusals[0].message
    small = preflight(ml, LaunchSettings(target=str(target), ctx_size=4096, n_gpu_layers="0"), host_ram=64 * GiB)
    assert small.ok, small.refusals


def test_a_gpu_too_small_is_refused_unless_the_engine_fits_itself(ml: EngineCaps, tmp_path: Path) -> None:
    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    all_layers = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="all", flash_attn="on")
    p = preflight(ml, all_layers, devices=[8 * GiB], host_ram=64 * GiB)
    assert codes(p) == ["out_of_memory"] and p.refusals[0].setting == "n_gpu_layers" and "CUDA0" in p.refusals[0].message
    auto = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="auto", flash_attn="on")
    assert preflight(ml, auto, devices=[8 * GiB], host_ram=64 * GiB).ok


def test_the_mode_and_the_known_issue_table_refuse_once_each(bee: EngineCaps, tmp_path: Path) -> None:
    target = mg.tiny_model(tmp_path / "t.gguf", n_embd=128)
    draft = mg.tiny_model(tmp_path / "eagle.gguf", arch="eagle3", n_embd=128, n_layer=1)
    s = LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH)
    p = preflight(bee, s, host_ram=64 * GiB)
    assert codes(p) == ["wrong_draft_format"] and p.refusals[0].setting == "spec_mode"
    assert p.refusals[0].message == "eagle.gguf is an EAGLE-3 draft, so it cannot run as DFlash: use the EAGLE-3 mode for it."
    # The N-gram type that crashes this build: the table's row (no copy of it elsewhere).
    crash = LaunchSettings(target=str(target), spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-mod")
    q = preflight(bee, crash, host_ram=64 * GiB)
    assert [(r.code, r.issue, r.setting) for r in q.refusals] == [
        ("engine_bug", "bee-a-sampling-assert", "spec_model_free_type")]
    assert "ngram-simple" in q.refusals[0].remedy


def test_the_form_judges_only_what_it_has_read(ml: EngineCaps, tmp_path: Path) -> None:
    """read=False: no header is read (the form's come off the GUI thread); a missing file is still refused,
    and a read the form saw fail is refused with the same words as a launch's."""
    assert codes(preflight(ml, LaunchSettings(target="/nonexistent/model.gguf"), read=False)) == ["model_missing"]
    fake = tmp_path / "fake.gguf"
    fake.write_text("text\n")
    p = preflight(ml, LaunchSettings(target=str(fake)), read=False)
    assert p.ok and p.argv is not None and p.memory is None  # not read yet: judged once it is
    q = preflight(ml, LaunchSettings(target=str(fake)), read=False, errors={str(fake): "bad magic"})
    assert codes(q) == ["not_gguf"]
    assert q.refusals[0].message == "The target model fake.gguf is not a GGUF model BeeDeck can read (bad magic)."
    assert codes(preflight(None, LaunchSettings(target="x.gguf"), read=False)) == ["no_engine"]


def test_launch_refuses_before_starting_anything(ml: EngineCaps, tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_text("text\n")
    with pytest.raises(ServerFailed) as err:  # a LaunchRefused: one refusal type, caught as any failed start
        launch("/e/ml/llama-server", ml, LaunchSettings(target=str(fake)))  # no such binary: never reached
    assert isinstance(err.value, LaunchRefused) and err.value.failure.code == "not_gguf"
    assert err.value.refusals == preflight(ml, LaunchSettings(target=str(fake))).refusals


def test_the_preflight_chooses_the_port_by_its_rule(ml: EngineCaps, tmp_path: Path) -> None:
    """One place says what port 0 means: the form sees BeeDeck's default (never --port 0), the CLI any free port,
    and a host that cannot be listened on is a refusal of the host."""
    from beedeck.core.engine.launch_settings import DEFAULT_PORT
    from beedeck.core.engine.ports import ANY_FREE

    target = str(mg.tiny_model(tmp_path / "t.gguf"))
    shown = preflight(ml, LaunchSettings(target=target), read=False)
    assert shown.settings is not None and shown.settings.port == DEFAULT_PORT and shown.argv is not None
    assert shown.argv.argv[shown.argv.argv.index("--port") + 1] == str(DEFAULT_PORT)
    cli = preflight(ml, LaunchSettings(target=target), port=ANY_FREE, host_ram=64 * GiB)
    assert cli.ok and cli.port is not None and cli.port.used not in (0, DEFAULT_PORT)
    assert cli.argv is not None and cli.argv.argv[cli.argv.argv.index("--port") + 1] == str(cli.port.used)
    far = preflight(ml, LaunchSettings(target=target, host="no-such-host.invalid", api_key="k"), port=ANY_FREE)
    assert [(r.code, r.setting) for r in far.refusals] == [("bad_value", "host")]
    assert "'no-such-host.invalid' cannot be resolved" in far.refusals[0].message


def test_launch_starts_the_argument_list_its_preflight_built(ml: EngineCaps, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: the argument list was built again by the start (twice for port 0); the preflight's is what runs."""
    from beedeck.core import launcher

    checked: list[Preflight] = []
    started: list[object] = []

    def seen(passed: Preflight) -> None:
        checked.append(passed)

    def start_server(engine: object, caps: EngineCaps, plan: object, **kw: object) -> object:
        started.append(plan)
        return dataclasses.make_dataclass("Proc", [("notes", tuple)])(())

    monkeypatch.setattr(launcher, "start_server", start_server)
    target = str(mg.tiny_model(tmp_path / "t.gguf"))
    launch("/e/ml/llama-server", ml, LaunchSettings(target=target), on_checked=seen,
           room=launcher.Room(None, 64 * GiB))
    assert started == [checked[0].argv] and started[0] is checked[0].argv


def test_the_headers_given_are_used_as_read(ml: EngineCaps, tmp_path: Path) -> None:
    target = mg.tiny_model(tmp_path / "t.gguf")
    info = inspect(target)
    target.unlink()  # preflight must not read it again
    p = preflight(ml, LaunchSettings(target=str(target), ctx_size=2048), target=info, host_ram=64 * GiB)
    assert p.ok, p.refusals


def test_a_cuda_build_without_the_kvarn_kernels_refuses_a_kvarn_cache(tmp_path: Path) -> None:
    """BeeDeck's builder leaves KVarN out when the profile uses none (-DGGML_CUDA_KVARN=OFF, the Gen B
    build in 459 s instead of 1,172): a later kvarn cache on that build is refused with the rebuild."""
    from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    caps = caps_from_texts(str(binary), "version: 11434 (515e85511)", help_stdout(MAINLINE))
    EngineRegistry().save(EngineRecord(id="bee-b-cuda", origin=Origin.BUILT, binary=str(binary),
                                       build_options=["-DGGML_CUDA=ON", "-DGGML_CUDA_FA=ON", "-DGGML_CUDA_KVARN=OFF"]))
    target = mg.tiny_model(tmp_path / "t.gguf")
    refused = preflight(caps, LaunchSettings(target=str(target), cache_type_k="kvarn4", cache_type_v="kvarn4"))
    kernels = [r for r in refused.refusals if "without KVarN kernels" in r.message]
    assert len(kernels) == 1 and "--cache-type kvarn4/kvarn4" in kernels[0].message
    assert (kernels[0].code, kernels[0].setting) == ("unsupported_cache_type", "cache_type_k")
    fine = preflight(caps, LaunchSettings(target=str(target), cache_type_k="f16", cache_type_v="f16"))
    assert "unsupported_cache_type" not in codes(fine)
    # The form reads nothing on the GUI thread: it passes the options it looked up off it (the same cached lookup).
    kvarn = LaunchSettings(target=str(target), cache_type_k="kvarn4", cache_type_v="kvarn4")
    options = build_options_of(str(binary))
    assert options is not None and "-DGGML_CUDA_KVARN=OFF" in options
    form = preflight(caps, kvarn, read=False, build_options=options)
    assert form.refusals == refused.refusals
    assert kernels[0] not in preflight(caps, kvarn, read=False).refusals  # not looked up yet: judged once it is


# -- memory as it will be once the running server stopped (a relaunch) -----------------------------


def _card_running(pid: int, held: int, *, shown: bool = True) -> FakeNvml:
    """An RTX 4090 (24 GiB) whose running llama-server (``pid``) holds ``held`` bytes; ``shown``: the driver
    lists the process (a pid namespace or WDDM may hide it)."""
    card = rtx4090()
    card.used += held
    if shown:
        card.processes = {pid: held, 99999: 300 * MIB}  # another program's share is not ours to count
    return FakeNvml([card])


def test_a_relaunch_counts_what_the_running_server_holds_as_free(ml: EngineCaps, tmp_path: Path) -> None:
    """The issue: relaunching the same 19 GB model on a 24 GB card with GPU layers "all" was refused as out of
    memory, the running server's own 19 GB counted as taken."""
    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    s = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="all", flash_attn="on")
    held = int(18.9 * GiB)
    fake = _card_running(4242, held)
    now = room_now(nvml_module=fake)
    assert now.gpus == [fake.gpus[0].free] and now.gpus[0] < 4 * GiB
    assert codes(preflight(ml, s, devices=now.gpus, host_ram=64 * GiB)) == ["out_of_memory"]
    relaunch = room_now([Held(4242, ml, s)], nvml_module=fake)
    assert relaunch.given_back == [held] and relaunch.gpus == [fake.gpus[0].free + held]
    assert preflight(ml, s, devices=relaunch.gpus, host_ram=64 * GiB).ok
    bigger = preflight(ml, replace(s, ctx_size=131072), devices=relaunch.gpus, host_ram=64 * GiB)
    assert codes(bigger) == ["out_of_memory"] and bigger.refusals[0].setting == "n_gpu_layers"
    assert f"which has {relaunch.gpus[0] / GiB:.1f} GiB free" in bigger.refusals[0].message  # the counted-back figure


def test_where_the_driver_hides_the_process_its_plan_is_counted_back(ml: EngineCaps, tmp_path: Path) -> None:
    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    s = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="all", flash_attn="on")
    fake = _card_running(4242, int(18.9 * GiB), shown=False)
    free = [fake.gpus[0].free]
    back = given_back([Held(4242, ml, s)], free, nvml_module=fake)
    planned = preflight(ml, s, devices=free).memory
    assert planned is not None and back == [planned.gpus[0].total] and back[0] > 18 * GiB
    assert given_back([], free, nvml_module=fake) == [0]  # nothing stops: nothing comes back
    assert given_back([Held(4242, ml, replace(s, n_gpu_layers="0"))], free, nvml_module=fake)[0] < GiB


def test_a_model_split_over_rpc_workers_is_judged_by_the_split(ml: EngineCaps, tmp_path: Path) -> None:
    """The preflight's memory plan is the launch's (core/models/planner/launch.py): over RPC workers the layers
    go to the workers, so this machine's RAM is judged by what stays here, as the form's bar shows it."""
    from beedeck.core.engine.rpc import RpcDevice

    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    s = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="all", rpc_workers=["10.0.0.2:50052"])
    workers = [RpcDevice("RPC0", "10.0.0.2:50052", 48 * 1024, 47 * 1024, worker="10.0.0.2:50052")]
    p = preflight(ml, s, rpc=workers, host_ram=8 * GiB, build_options=None)
    assert p.ok, p.refusals
    assert p.memory is not None and [g.name for g in p.memory.gpus] == ["RPC0[10.0.0.2:50052]"]
    assert p.memory.host.total < 8 * GiB < p.memory.gpus[0].total


def test_workers_named_with_no_layers_to_give_them_are_refused_with_the_remedy(ml: EngineCaps, tmp_path: Path) -> None:
    """Issue 37: the starter profile (GPU layers 0) with two workers launched with -ngl 0: the plan gave each
    worker 0 MiB and kept every tensor here, so the workers held none of the model. That launch is refused,
    under the GPU layers field, with the way out; with the layers given, they go to the workers."""
    from beedeck.core.engine.rpc import RpcDevice, parse_workers

    target = mg.tiny_model(tmp_path / "t.gguf")
    workers = ["127.0.0.1:50552", "127.0.0.1:50553"]
    devices = [RpcDevice(f"RPC{i}", str(w), 24 * 1024, 24 * 1024, worker=w) for i, w in enumerate(parse_workers(workers))]
    s = LaunchSettings(target=str(target), ctx_size=2048, n_gpu_layers="0", rpc_workers=workers)
    p = preflight(ml, s, rpc=devices, build_options=None)
    why = [r for r in p.refusals if r.setting == "n_gpu_layers"]
    assert len(why) == 1 and why[0].code == "rpc:no-layers", p.refusals
    assert "GPU layers is 0" in why[0].message and "127.0.0.1:50552, 127.0.0.1:50553" in why[0].message
    assert "none of the model" in why[0].message and "all" in why[0].remedy
    p = preflight(ml, replace(s, n_gpu_layers="all"), rpc=devices, build_options=None)
    assert p.ok, p.refusals
    assert p.memory is not None and all(g.items.get("weights", 0) > 0 for g in p.memory.gpus)
    assert "-ngl" in p.argv.argv and p.argv.argv[p.argv.argv.index("-ngl") + 1] == "all"  # type: ignore[union-attr]


def test_workers_without_room_for_their_share_are_refused_by_name(ml: EngineCaps, tmp_path: Path) -> None:
    """With workers named, the preflight judges each worker's share as it judges a GPU's (it judged none)."""
    from beedeck.core.engine.rpc import RpcDevice, parse_workers

    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    w = "10.0.0.2:50052"
    s = LaunchSettings(target=str(target), ctx_size=8192, n_gpu_layers="all", rpc_workers=[w])
    small = [RpcDevice("RPC0", w, 8 * 1024, 6 * 1024, worker=parse_workers(w)[0])]
    p = preflight(ml, s, rpc=small, build_options=None)
    why = [r for r in p.refusals if r.code == "out_of_memory"]
    assert len(why) == 1 and f"on RPC0[{w}] (the RPC worker at {w})" in why[0].message, p.refusals
    assert "6.0 GiB free" in why[0].message and "fewer layers" in why[0].remedy
