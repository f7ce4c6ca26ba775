"""The live plan's engine rules: what a kind needs from the engine (its probe where one is known, DFlash2 from
BeeLlama v0.4.4, a bare build number as an unknown release) and the known-issue table applied when choosing
a row's cache (a KVarN target cache with MTP on Gemma 4 is never offered)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.hub.sizing import RemoteModel, RepoSizing
from beedeck.core.models.planner import GiB, plan
from beedeck.core.models.recommend import live_plan
from tests.conftest import PERSISTENT
from tests.fixtures import hub_models
from tests.fixtures.engines import BEE_B, HERE, help_stdout
from tests.fixtures.meta_gguf import gemma4_31b

BARE = (HERE / "beellama-0.4.3-cpu.version.txt").read_text()  # a tarball build: "version: 0 (unknown)"


def _bee(name: str, release: str = "", version_text: str = BARE) -> EngineCaps:
    caps = caps_from_texts(f"/engines/{name}", version_text, help_stdout(name))
    return dataclasses.replace(caps, release=release)


def test_dflash2_is_refused_on_beellama_before_0_4_4_and_on_an_unknown_release_with_the_upgrade_named() -> None:
    old = _bee(BEE_B, "v0.4.3")
    why = live_plan.kind_problem("dflash2", Generation.BEE_B, old)
    assert why.startswith("DFlash2 is refused: BeeLlama v0.4.3 cannot load DFlash2 GGUFs")
    assert "Upgrade to BeeLlama v0.4.4 or newer" in why
    # v0.4.3 built from git printed "version: 11207 (ba27edad2)": a bare build number, no release
    git_build = _bee(BEE_B, "", "version: 11207 (ba27edad2)\nbuilt with GNU 12.2.0 for Linux x86_64\n")
    assert git_build.version == "11207" and git_build.build == 11207
    unknown = live_plan.kind_problem("dflash2", Generation.BEE_B, git_build)
    assert "release is unknown (--version says '11207')" in unknown and "Upgrade to BeeLlama v0.4.4" in unknown
    assert live_plan.kind_problem("dflash2", Generation.BEE_B, _bee("beellama-0.4.7-cpu", "v0.4.7")) == ""
    assert live_plan.kind_problem("dflash", Generation.BEE_B, old) == ""  # DFlash (v1) loads on v0.4.3
    assert live_plan.kind_problem("dflash2", Generation.BEE_B) == ""  # no engine known: the generation runs it


def test_what_runs_comes_from_the_probe_where_an_engine_is_known() -> None:
    old = _bee(BEE_B, "v0.4.3")
    assert {"draft-eagle3", "draft-mtp", "draft-dspark"} <= set(old.spec_types)  # v0.4.3's own --help
    for kind in ("dspark", "eagle3", "mtp", "dflash"):
        assert live_plan.kind_problem(kind, Generation.BEE_B, old) == "", kind
    trimmed = dataclasses.replace(old, spec_types=tuple(t for t in old.spec_types if t != "draft-dspark"))
    assert live_plan.kind_problem("dspark", Generation.BEE_B, trimmed) == \
        "DSpark does not run on this engine: its --help lists no --spec-type draft-dspark"
    assert "loads no 'dflash-draft' drafts" in live_plan.kind_problem("dflash-draft", Generation.BEE_B, old)
    # without an engine: what the generation runs (BeeLlama 0.1-0.3: its fork format only)
    assert live_plan.kind_problem("eagle3", Generation.BEE_B) == ""
    assert live_plan.kind_problem("mtp", Generation.BEE_A) == "MTP (its own head) does not run on bee-a engines"


def _sized(path: Path, quant: str, **metadata: object) -> RepoSizing:
    info = inspect(path)
    info = dataclasses.replace(info, metadata={**info.metadata, **metadata})
    size = path.stat().st_size
    return RepoSizing("org/model-GGUF", "0" * 40, [RemoteModel(path.name, [path.name], size, quant, "target", info)])


def _vram_between(info_path: Path, caches: tuple[tuple[str, str], tuple[str, str]], **metadata: object) -> int:
    """Free memory at which the first cache pair reaches 32k context with the margin and the second does not."""
    info = dataclasses.replace(inspect(info_path), metadata={**inspect(info_path).metadata, **metadata})
    need = []
    for ctk, ctv in caches:
        s = LaunchSettings(target="t", spec_mode=Mode.MTP, ctx_size=live_plan.MIN_CTX, cache_type_k=ctk,
                           cache_type_v=ctv, flash_attn="on", parallel=1, kv_unified=True, batch_size=1024,
                           ubatch_size=512, n_gpu_layers="all")
        need.append(plan(info, None, s, Generation.BEE_B, [1 << 45]).gpu_total)
    assert need[0] < need[1]
    return (need[0] + need[1]) // 2 + GiB


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gemma4_31b(tmp_path_factory.mktemp("gemma") / "gemma-4-31B-it-Q4_K_M.gguf", quant="Q4_K_M")


def test_the_known_issue_table_is_applied_when_choosing_a_rows_cache(gemma: Path) -> None:
    """Gemma 4 with MTP and a KVarN target cache segfaults on BeeLlama (#125, the kvarn-mtp-gemma4-segfault row):
    where only kvarn4 would reach 32k, the MTP row keeps a standard cache (and says it is short of 32k),
    while the same card's row without speculation takes kvarn4."""
    heads = {"gemma4.nextn_predict_layers": 1}  # a Gemma 4 file that carries an MTP head
    vram = _vram_between(gemma, (("kvarn4", "kvarn4"), ("q5_0", "q4_1")), **heads)
    rows, _notes = live_plan.plan_live(_sized(gemma, "Q4_K_M", **heads), [], [vram], Generation.BEE_B)
    by = {r.kind: r for r in rows}
    assert by["none"].settings.cache_type_k == "kvarn4" and by["none"].fits  # KVarN is fine without MTP
    mtp = by["mtp"]
    assert mtp.settings.cache_type_k != "kvarn4" and not mtp.fits and mtp.plan is not None
    s = dataclasses.replace(mtp.settings, cache_type_k="kvarn4", cache_type_v="kvarn4")
    assert "segfaults with a KVarN cache (kvarn4) and MTP on Gemma 4" in live_plan.guard_refusal(
        s, mtp.target.info, None, Generation.BEE_B)
    assert live_plan.guard_refusal(mtp.settings, mtp.target.info, None, Generation.BEE_B) == ""
    # the control: a Qwen3.8 target with its MTP head does take kvarn4 in the same squeeze
    q38 = hub_models.build_all(PERSISTENT / "hub-models")["Qwen3.8-27B-Q4_K_M.gguf"]
    vram = _vram_between(q38, (("kvarn4", "kvarn4"), ("q5_0", "q4_1")))
    qrows, _ = live_plan.plan_live(_sized(q38, "Q4_K_M"), [], [vram], Generation.BEE_B)
    assert next(r for r in qrows if r.kind == "mtp").settings.cache_type_k == "kvarn4"
