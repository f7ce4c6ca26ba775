"""The recommender: every pick is sized by the planner from the files' GGUF headers (the catalog types no
sizes) and runnable on the chosen engine. ``catalog_sized`` (tests/conftest.py) puts the headers a refresh
against the fake Hub read into this test's cache: the offline-with-cache case; ``catalog_hub`` serves them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.models import catalog
from beedeck.core.models.recommend.from_catalog import NOT_SIZED, recommend

MiB = 1 << 20
RTX_4090_FREE = int(23.5 * 1024 * MiB)  # 24,564 MiB total, ~23.5 GiB free on a desktop


def test_24gb_card_gets_the_gemma_guide_pair(catalog_sized: Path) -> None:
    r = recommend([RTX_4090_FREE], "quality")
    c = r.primary
    assert c.pair_id == "gemma-4-31b" and c.draft_quant == "Q5_K_M" and c.sized_from.startswith("headers @ ")
    assert c.target_quant in ("Q4_K_S", "Q4_K_M")
    assert c.settings.ctx_size >= 32768 and c.settings.flash_attn == "on" and c.settings.parallel == 1
    assert r.plan is not None and r.plan.fits
    assert min(d.left or 0 for d in r.plan.gpus) >= 1024 * MiB
    if c.target_quant != "Q4_K_S":  # a better configuration must say why it beat the guide's
        assert any("guide's choice" in x and "Q4_K_S" in x and "because" in x for x in r.reasons)
    assert r.runner_up is not None


@pytest.mark.parametrize("gib", [12, 16])
def test_a_card_too_small_for_every_sized_pair_gets_the_starter_and_the_unsized_pairs_named(
        gib: int, catalog_sized: Path) -> None:
    # Only the guide repos (27-31B) are on the fake Hub: nothing sized fits, and the smaller catalog pairs
    # (Qwen3.5 9B and 4B, whose repos it lacks) are named as not sized rather than guessed at.
    r = recommend([gib * 1024 * MiB - 512 * MiB], "quality", local=[])
    assert r.primary.pair_id == "starter" and r.plan is None
    assert r.reasons[0].startswith(f"No catalog pair fits {gib - 0.5:.1f} GiB")
    assert "Not sized yet, so not considered: " in r.reasons[1] and "Qwen3.5 9B + DFlash" in r.reasons[1]
    assert "Gemma 4 31B" not in r.reasons[1] and "`beedeck recommend --refresh`" in r.reasons[1]


def test_offline_without_any_headers_gives_the_starter_and_the_specific_message() -> None:
    r = recommend([RTX_4090_FREE], "quality", local=[])
    assert r.primary.pair_id == "starter" and r.plan is None
    assert r.reasons[0] == NOT_SIZED and r.reasons[0].startswith("Sizes not read yet:")
    assert "Connect once (or run `beedeck recommend --refresh`)" in r.reasons[0]


def test_no_gpu_gives_the_starter() -> None:
    r = recommend([], "quality")
    assert r.primary.pair_id == "starter" and r.plan is None
    assert r.primary.settings.n_gpu_layers == "0" and "starter" in r.reasons[0]
    # The starter is named as core/starter.py names it (it said "Gemma 3 270M", which it is not).
    from beedeck.core.starter import STARTER_MODEL_TITLE

    assert STARTER_MODEL_TITLE in r.primary.title and "Gemma" not in r.reasons[0]
    # Why there is no GPU plan is the caller's to say (issue 37: the wizard said "was given", with no field to
    # give it): the reason starts with it.
    from beedeck.core.models.recommend.from_catalog import NO_GPU_FOUND

    found = recommend([], "quality", no_gpu=NO_GPU_FOUND)
    assert found.reasons[0].startswith(NO_GPU_FOUND + ". It runs on the CPU") and "given" not in found.reasons[0]


@pytest.mark.parametrize("gen", [Generation.BEE_A, Generation.BEE_B, Generation.MAINLINE])
@pytest.mark.parametrize("goal", ["quality", "speed", "context"])
def test_never_a_pair_the_engine_cannot_run(gen: Generation, goal: str, catalog_sized: Path) -> None:
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


def test_goals_differ(catalog_sized: Path) -> None:
    q = recommend([RTX_4090_FREE], "quality").primary
    s = recommend([RTX_4090_FREE], "speed").primary
    c = recommend([RTX_4090_FREE], "context").primary
    assert (s.pair_id, s.target_quant) != (q.pair_id, q.target_quant)  # fewer weight bytes per token
    assert s.download_bytes is not None and q.download_bytes is not None and s.download_bytes < q.download_bytes
    assert c.settings.ctx_size >= q.settings.ctx_size


def test_unknown_goal() -> None:
    with pytest.raises(ValueError, match="Unknown goal"):
        recommend([RTX_4090_FREE], "cheapest")


def test_cli_recommend_and_plan(catalog_sized: Path, capsys: pytest.CaptureFixture[str]) -> None:

    from beedeck.cli import main

    assert main(["recommend", "--vram", "23.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["primary"]["pair"] == "gemma-4-31b" and d["plan"]["fits"] and d["sized_from"].startswith("headers @ ")
    assert d["primary"]["settings"]["ctx_size"] >= 32768 and d["sizing"] is None  # nothing read without --refresh
    assert main(["recommend", "--vram", "0"]) == 0
    assert "starter" in capsys.readouterr().out.lower()


def test_cli_recommend_offline_on_a_first_run_says_to_connect(capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.cli import main

    assert main(["recommend", "--vram", "23.5", "--offline"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Starter: SmolLM2 135M") and "Sizes not read yet" in out and "--refresh" in out
    assert main(["recommend", "--refresh", "--offline", "--vram", "23.5"]) == 1
    assert "--offline forbids that" in capsys.readouterr().err


def test_cli_refresh_reads_the_catalogs_headers_then_recommends_offline(
        catalog_hub: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:

    from beedeck.cli import main

    monkeypatch.setenv("HF_ENDPOINT", catalog_hub.endpoint)
    assert main(["recommend", "--refresh", "--vram", "23.5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    read = {x["repo"]: x for x in d["sizing"]["repos"]}
    assert {"unsloth/gemma-4-31B-it-GGUF", "Anbeeld/gemma-4-31B-it-DFlash-GGUF", "unsloth/Qwen3.8-27B-GGUF",
            "incoai/Qwen3.8-27B-DFlash2-GGUF", "Anbeeld/Qwen3.8-27B-DSpark-GGUF"} <= set(read)
    assert all(0 < x["fraction_read"] < (1e-3 if "DFlash" not in r and "DSpark" not in r else 1e-2)
               for r, x in read.items())  # headers only (a 1 GB drafter's header is a few MB: its token list)
    assert d["sizing"]["bytes_read"] == catalog_hub.bytes_sent
    assert "unsloth/Qwen3.5-9B-GGUF" in d["sizing"]["errors"]  # a repo this Hub lacks: a line, not the end
    assert d["primary"]["pair"] == "gemma-4-31b" and d["plan"]["fits"]
    # the same recommendation later, offline from the cache
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert main(["recommend", "--vram", "23.5", "--offline", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["primary"] == d["primary"] and again["plan"] == d["plan"]
    # the refresh also cached Qwen3.8 27B with the drafts the catalog gives it: `--repo` works offline, every kind
    assert main(["recommend", "--repo", "unsloth/Qwen3.8-27B-GGUF", "--vram", "23.5", "--card", "24gb-ada",
                 "--generation", "mainline", "--offline", "--json"]) == 0
    q = json.loads(capsys.readouterr().out)
    assert {r["kind"] for r in q["rows"] if r["quant"] == "Q4_K_M" and r["fits"]} == {"none", "mtp", "dflash2", "dspark"}
    assert q["mode"]["mode"] == "dflash2" and q["mode"]["evidence"] == "published"


def test_the_drafter_gets_ubd_64_on_24_gb_cards_where_the_engine_has_it(catalog_sized: Path) -> None:
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


@pytest.mark.parametrize("vram_gib", [23.5, 31.5, 79.0])
def test_a_pick_from_hub_headers_plans_as_the_full_files_do(vram_gib: float, catalog_sized: Path,
                                                            catalog_files: dict[str, dict[str, Path]]) -> None:
    """The recommendation sized from range-read headers equals the planner on the same files on disk: every
    device item, the fit, the context, the download size."""
    from beedeck.core.models.gguf.reader import inspect
    from beedeck.core.models.planner import plan

    vram = [int(vram_gib * 1024 * MiB)]
    r = recommend(vram, "quality", local=[])
    c = r.primary
    assert c.draft_repo is not None and c.draft_file is not None and r.plan is not None
    target = inspect(catalog_files[c.target_repo][c.target_file])
    draft = inspect(catalog_files[c.draft_repo][c.draft_file])
    full = plan(target, draft, c.settings, c.generation, vram)
    assert [(d.name, d.items) for d in full.devices] == [(d.name, d.items) for d in r.plan.devices]
    assert full.fits and full.n_ctx == r.plan.n_ctx == c.settings.ctx_size
    assert c.download_bytes == target.file_size + draft.file_size
    bigger = plan(target, draft, dataclasses.replace(c.settings, ctx_size=c.settings.ctx_size + 256), c.generation,
                  vram)
    assert not bigger.fits or c.settings.ctx_size + 256 > target.context_length  # the largest context that fits


def test_cli_recommend_without_engine_tunes_for_the_registrys_default_engine(
        catalog_sized: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`beedeck recommend` without --engine: -ubd 64 (24 GB card) and KVarN draft caches where the default engine's
    probe found them (a BeeLlama v0.4.7 here), and the card class and mode evidence in the JSON."""
    from beedeck.cli import main
    from beedeck.core.engine.help_text import caps_from_texts
    from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin
    from tests.fixtures.engines import HERE, help_stdout

    assert main(["recommend", "--vram", "23.5", "--generation", "bee-b", "--json"]) == 0
    before = json.loads(capsys.readouterr().out)["primary"]
    assert before["settings"]["draft_ubatch_size"] is None  # no engine registered: nothing to tune for
    caps = dataclasses.replace(caps_from_texts("/e/bee", (HERE / "beellama-0.4.3-cpu.version.txt").read_text(),
                                               help_stdout("beellama-0.4.7-cpu")), release="v0.4.7")
    registry = EngineRegistry()
    registry.save(EngineRecord("bee-047", Origin.DOWNLOADED, caps.path, generation="bee-b", caps=caps.to_dict()))
    registry.set_default("bee-047")
    assert main(["recommend", "--vram", "23.5", "--generation", "bee-b", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    p = d["primary"]
    assert d["card_class"] == "24gb-ada" and p["pair"] == before["pair"] and p["kind"] == "dflash"
    assert p["settings"]["draft_ubatch_size"] == 64 and p["settings"]["draft_cache_type"] == "kvarn5"
    assert p["mode"]["evidence"] == "rule" and p["cost_tokens"] is not None
