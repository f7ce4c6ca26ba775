"""The one memory plan of a launch (core/models/planner/launch.py): what the preflight refuses by, the launch
form's bar shows and ``beedeck serve`` prints over RPC workers. Issue 35: the three disagreed on when the
draft is planned (the worker's print left out an MTP head file the launch loads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.rpc.probe import RpcDevice
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.planner import GiB
from beedeck.core.models.planner.devices import plan_across
from beedeck.core.models.planner.launch import plan_launch
from beedeck.core.models.planner.memory import plan
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout


def test_the_draft_is_planned_in_every_mode_but_baseline(tmp_path: Path) -> None:
    target, draft = mg.gemma4_pair(tmp_path, "Q4_K_M", "dflash")
    t, d = inspect(target), inspect(draft)
    s = LaunchSettings.guide_dflash(str(target), str(draft))
    ml = caps_from_texts("/e/llama-server", "version: 11434 (515e85511)", help_stdout(MAINLINE))
    with_draft = plan_launch(t, d, s, ml, [24 * GiB])
    assert with_draft.gpus[0].total == plan(t, d, s, Generation.MAINLINE, [24 * GiB]).gpus[0].total
    baseline = LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.BASELINE)
    assert plan_launch(t, d, baseline, ml, [24 * GiB]).gpus[0].total == plan(
        t, None, baseline, Generation.MAINLINE, [24 * GiB]).gpus[0].total < with_draft.gpus[0].total


def test_an_mtp_head_file_is_planned_where_the_launch_loads_it(tmp_path: Path) -> None:
    from tests.core.models import sidecar_files as sf
    from tests.fixtures import synth_mtp as sm

    raw = sm.write_mtp_target(tmp_path / "raw.gguf", sticky=True, mtp=False)
    target = inspect(sf.rewrite(raw, tmp_path / "Qwen-Q4_K_M.gguf", kv={"general.file_type": sf.Q4_K_M}))
    head = inspect(sf.mtp_head(tmp_path, "mtp-Qwen-Q4_K_M.gguf"))
    s = LaunchSettings(target=str(target.path), draft=str(head.path), spec_mode=Mode.MTP, ctx_size=2048)
    mem = plan_launch(target, head, s, None, [])
    assert mem.devices[-1].items["draft_weights"] == head.tensor_bytes  # the file the engine loads, counted


def test_the_engine_family_decides_and_an_unknown_one_plans_as_mainline(tmp_path: Path) -> None:
    target = inspect(mg.qwen36_27b(tmp_path / "q36.gguf"))
    s = LaunchSettings(target=str(target.path), ctx_size=32768, n_gpu_layers="all")
    bee = caps_from_texts("/e/bee/llama-server", "version: 1 (ba1fdce)", help_stdout(BEE_A))
    assert plan_launch(target, None, s, bee, [24 * GiB]) == plan(target, None, s, Generation.BEE_A, [24 * GiB])
    assert plan_launch(target, None, s, None, []) == plan(target, None, s, Generation.MAINLINE, [])


@pytest.mark.parametrize("probed", [True, False], ids=["workers-probed", "workers-not-probed-yet"])
def test_rpc_workers_plan_across_their_devices_once_probed(tmp_path: Path, probed: bool) -> None:
    target = inspect(mg.qwen36_27b(tmp_path / "q36.gguf"))
    s = LaunchSettings(target=str(target.path), n_gpu_layers="all", rpc_workers=["10.0.0.2:50052"])
    devices = [RpcDevice("RPC0", "10.0.0.2:50052", 24576, 24000, worker="10.0.0.2:50052")]
    mem = plan_launch(target, None, s, None, [8 * GiB], devices if probed else [])
    if probed:
        assert mem == plan_across(target, None, s, Generation.MAINLINE, devices)
        assert [g.name for g in mem.gpus] == ["RPC0[10.0.0.2:50052]"]
    else:
        assert mem == plan(target, None, s, Generation.MAINLINE, [8 * GiB])
