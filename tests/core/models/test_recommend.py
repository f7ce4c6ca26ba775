"""The recommender: every pick is sized by the planner and runnable on the chosen engine."""

from __future__ import annotations

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.models import catalog
from beedeck.core.models.recommend import recommend

MiB = 1 << 20
RTX_4090_FREE = int(23.5 * 1024 * MiB)  # 24,564 MiB total, ~23.5 GiB free on a desktop


def test_24gb_card_gets_the_gemma_guide_pair() -> None:
    r = recommend([RTX_4090_FREE], "quality")
    c = r.primary
    assert c.pair_id == "gemma-4-31b" and c.draft_quant == "Q5_K_M"
    assert c.target_quant in ("Q4_K_S", "Q4_K_M")
    assert c.settings.ctx_size >= 32768 and c.settings.flash_attn == "on" and c.settings.parallel == 1
    assert r.plan is not None and r.plan.fits
    assert min(d.left or 0 for d in r.plan.gpus) >= 1024 * MiB
    if c.target_quant != "Q4_K_S":  # a better configuration must say why it beat the guide's
        assert any("guide's choice" in x and "Q4_K_S" in x and "because" in x for x in r.reasons)
    assert r.runner_up is not None


@pytest.mark.parametrize("gib", [12, 16])
def test_smaller_cards_get_a_smaller_pair(gib: int) -> None:
    r = recommend([gib * 1024 * MiB - 512 * MiB], "quality")
    assert r.primary.pair_id not in ("gemma-4-31b", "starter")
    assert r.plan is not None and r.plan.fits
    size = catalog.load().pair(r.primary.pair_id).target.file(r.primary.target_quant)
    assert size is not None and (size.best_size or 0) < gib * 1024 * MiB


def test_no_gpu_gives_the_starter() -> None:
    r = recommend([], "quality")
    assert r.primary.pair_id == "starter" and r.plan is None
    assert r.primary.settings.n_gpu_layers == "0" and "starter" in r.reasons[0]
    # The starter is named as core/starter.py names it (it said "Gemma 3 270M", which it is not).
    from beedeck.core.starter import STARTER_MODEL_TITLE

    assert STARTER_MODEL_TITLE in r.reasons[0] and "Gemma" not in r.reasons[0]


@pytest.mark.parametrize("gen", [Generation.BEE_A, Generation.BEE_B, Generation.MAINLINE])
@pytest.mark.parametrize("goal", ["quality", "speed", "context"])
def test_never_a_pair_the_engine_cannot_run(gen: Generation, goal: str) -> None:
    r = recommend([RTX_4090_FREE], goal, gen)
    c = r.primary
    assert c.generation == gen
    pair = catalog.load().pair(c.pair_id)
    fmts = {d.fmt for d in pair.drafts_for(gen)}
    assert any(d.repo == c.draft_repo for d in pair.drafts_for(gen)) and fmts
    caches = {c.settings.cache_type_k, c.settings.cache_type_v}
    if gen == Generation.BEE_A:
        assert all(t.startswith("turbo") for t in caches)
    else:
        assert not any(t.startswith("turbo") for t in caches)
        if gen == Generation.MAINLINE:
            assert not any(t.startswith("kvarn") for t in caches)


def test_goals_differ() -> None:
    q = recommend([RTX_4090_FREE], "quality").primary
    s = recommend([RTX_4090_FREE], "speed").primary
    c = recommend([RTX_4090_FREE], "context").primary
    assert s.pair_id != q.pair_id  # the MoE reads ~10x fewer bytes per token
    assert c.settings.ctx_size >= q.settings.ctx_size


def test_unknown_goal() -> None:
    with pytest.raises(ValueError, match="Unknown goal"):
        recommend([RTX_4090_FREE], "cheapest")


def test_cli_recommend_and_plan(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from beedeck.cli import main

    assert main(["recommend", "--vram", "23.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["primary"]["pair"] == "gemma-4-31b" and d["plan"]["fits"]
    assert d["primary"]["settings"]["ctx_size"] >= 32768
    assert main(["recommend", "--vram", "0"]) == 0
    assert "starter" in capsys.readouterr().out.lower()


def test_the_drafter_gets_ubd_64_on_24_gb_cards_where_the_engine_has_it() -> None:
    import dataclasses

    from beedeck.core.engine.help_text import caps_from_texts
    from tests.fixtures.engines import BEE_B, help_stdout

    old = caps_from_texts("/e/llama-server", "version: 11207 (ba27edad2)", help_stdout(BEE_B))
    assert "q8_0" in old.draft_cache_types and "kvarn5" not in old.draft_cache_types  # v0.4.3: no KVarN drafts
    new = dataclasses.replace(old, version="0.4.7", build=240, flags=old.flags | {"--spec-draft-ubatch-size", "-ubd"},
                              draft_cache_types=(*old.draft_cache_types, "kvarn4", "kvarn5"))
    r = recommend([RTX_4090_FREE], "quality", caps=new, local=[])
    assert r.primary.settings.draft_ubatch_size == 64 and r.plan is not None and r.plan.fits
    assert r.primary.settings.draft_cache_type == "kvarn5"  # KVarN for the drafter's own cache where offered
    from beedeck.core.engine.argv import build_argv

    argv = build_argv(r.primary.settings, new).argv
    assert argv[argv.index("--spec-draft-ubatch-size") + 1] == "64"
    assert argv[argv.index("--spec-draft-type-k") + 1] == argv[argv.index("--spec-draft-type-v") + 1] == "kvarn5"
    assert "--spec-draft-ubatch-size" not in build_argv(r.primary.settings, old).argv  # dropped where absent
    dropped = build_argv(r.primary.settings, old)
    assert "--spec-draft-type-k" not in dropped.argv
    assert any(n.setting == "draft_cache_type" and "takes f32, f16" in n.message for n in dropped.notes)
    assert recommend([RTX_4090_FREE], "quality", caps=old, local=[]).primary.settings.draft_cache_type is None
    assert recommend([RTX_4090_FREE], "quality", caps=old, local=[]).primary.settings.draft_ubatch_size is None
    assert recommend([int(31.5 * 1024 * MiB)], "quality", caps=new, local=[]).primary.settings.draft_ubatch_size is None
