"""The catalog path recommends like ``recommend --repo``: every draft kind the engine runs (the target's own MTP
head with no download, DFlash2, DSpark, ...), the fast mode by evidence (BeeDeck's own measurements first, else
the published figures, named), the drafter's cost in tokens of context, DFlash2 greyed on BeeLlama before
v0.4.4 with the upgrade named, and -ubd 64 on 24 GB cards where the engine has it. ``catalog_sized``
(tests/conftest.py): the catalog repos' headers as a refresh against the fake Hub read them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.models import catalog
from beedeck.core.models.recommend.catalog_plan import PlanContext, pair_choices
from beedeck.core.models.recommend.from_catalog import recommend
from tests.fixtures.engines import BEE_B, HERE, help_stdout

MiB = 1 << 20
FREE = int(23.5 * 1024 * MiB)  # a 24 GB card on a desktop
QWEN38, DFLASH2_REPO = "qwen3.8-27b", "incoai/Qwen3.8-27B-DFlash2-GGUF"


def _only(pair_id: str) -> catalog.Catalog:
    cat = catalog.load()
    return dataclasses.replace(cat, pairs=tuple(p for p in cat.pairs if p.id == pair_id))


def _bee(name: str, release: str) -> EngineCaps:
    text = (HERE / "beellama-0.4.3-cpu.version.txt").read_text()
    return dataclasses.replace(caps_from_texts(f"/e/{name}", text, help_stdout(name)), release=release)


def test_a_3090_and_a_4090_get_the_mode_the_published_figures_say_with_the_evidence_named(catalog_sized: Path) -> None:
    q = _only(QWEN38)
    amp = recommend([FREE], "quality", Generation.MAINLINE, cat=q, local=[], card="24gb-ampere")
    c = amp.primary
    assert (c.pair_id, c.draft_kind, c.draft_file, c.settings.spec_mode) == (QWEN38, "mtp", None, Mode.MTP)
    assert c.title == "Qwen3.8 27B + MTP (its own head)" and c.mode is not None and c.mode.evidence == "published"
    assert "0.92-1.01x of MTP" in c.mode.why and "gilesknap" in c.mode.source
    assert any(r.startswith("Speculation: MTP (its own head), the fast path on 24 GB Ampere (3090) with mainline by "
                            "published figures: DFlash2 landed at 0.92-1.01x of MTP") and "(source: gilesknap" in r
               for r in amp.reasons)
    cost = next(r for r in amp.reasons if "tokens of context here" in r)
    assert cost.startswith("MTP (its own head) costs about ") and cost.endswith("nothing more is downloaded.")
    assert not any("does not run on" in r for r in amp.reasons)  # no engine named: no generation's noise
    assert c.download_bytes is not None and c.cost_tokens is not None and c.cost_tokens > 0
    ada = recommend([FREE], "quality", Generation.MAINLINE, cat=q, local=[], card="24gb-ada")
    d = ada.primary
    assert (d.draft_kind, d.draft_repo, d.draft_quant, d.settings.draft_n_max) == ("dflash2", DFLASH2_REPO, "Q4_K_M", 7)
    assert d.mode is not None and d.mode.evidence == "published" and "zedong-peng" in d.mode.source
    assert any(r.startswith("DFlash2 costs about ") for r in ada.reasons)
    assert d.plan is not None and d.plan.fits and d.settings.ctx_size >= 32768


def test_beedecks_own_measurements_on_this_machine_win_and_are_named(catalog_sized: Path, tmp_path: Path) -> None:
    advice = WorkloadAdvice(tmp_path / "advice.json")
    setup = "mainline b11434 | Qwen3.8-27B-Q4_K_M.gguf | Qwen3.8-27B-DFlash2-Q4_K_M.gguf"
    for dflash, mtp in ((101.0, 80.0), (102.0, 81.0), (103.0, 82.0)):
        advice.record(setup, "code", Mode.DFLASH, dflash, "p")  # the same prompt: like for like
        advice.record(setup, "code", Mode.MTP, mtp, "p")
    r = recommend([FREE], "quality", Generation.MAINLINE, cat=_only(QWEN38), local=[], card="24gb-ampere",
                  advice=advice)
    c = r.primary
    assert c.draft_kind == "dflash2" and c.mode is not None and c.mode.evidence == "measured"  # not the published MTP
    assert any("by measured here:" in x and "BeeDeck's own advice: DFlash 102.0 tok/s over MTP 81.0" in x
               for x in r.reasons)


def test_dflash2_is_greyed_on_beellama_0_4_3_with_the_upgrade_named(catalog_sized: Path) -> None:
    old = _bee(BEE_B, "v0.4.3")
    r = recommend([FREE], "quality", cat=_only(QWEN38), local=[], caps=old, card="24gb-ada")
    assert r.primary.draft_kind == "mtp" and r.primary.generation == Generation.BEE_B
    greyed = next(x for x in r.reasons if "DFlash2 is refused" in x)
    assert greyed.startswith("Qwen3.8 27B on bee-b: DFlash2 is refused: BeeLlama v0.4.3 cannot load DFlash2 GGUFs")
    assert "Upgrade to BeeLlama v0.4.4 or newer" in greyed
    new = _bee("beellama-0.4.7-cpu", "v0.4.7")
    assert recommend([FREE], "quality", cat=_only(QWEN38), local=[], caps=new, card="24gb-ada").primary.draft_kind \
        == "dflash2"


def test_ubd_64_on_24_gb_cards_for_the_default_engine_without_engine_named(catalog_sized: Path) -> None:
    """`recommend` without --engine tunes for the registry's default engine (``tune_caps``): -ubd 64 and KVarN draft
    caches on its generation's setups, where its probe found them; nothing on a 32 GB card."""
    v047 = _bee("beellama-0.4.7-cpu", "v0.4.7")
    r = recommend([FREE], "quality", Generation.BEE_B, cat=_only(QWEN38), local=[], card="24gb-ada", tune_caps=v047)
    c = r.primary
    assert c.draft_kind == "dflash2" and c.settings.draft_ubatch_size == 64 and c.settings.draft_cache_type == "kvarn5"
    assert any("#172" in n for n in (c.plan.notes if c.plan else []))  # the v0.4.5+ draft window is counted
    plain = recommend([FREE], "quality", Generation.BEE_B, cat=_only(QWEN38), local=[], card="24gb-ada")
    assert plain.primary.settings.draft_ubatch_size is None and plain.primary.settings.ctx_size < c.settings.ctx_size
    big = recommend([int(31.5 * 1024 * MiB)], "quality", Generation.BEE_B, cat=_only(QWEN38), local=[],
                    card="32gb-blackwell", tune_caps=v047)
    assert big.primary.settings.draft_ubatch_size is None
    mainline = recommend([FREE], "quality", Generation.MAINLINE, cat=_only(QWEN38), local=[], card="24gb-ada",
                         tune_caps=v047)  # the default engine is a BeeLlama: mainline setups are not tuned for it
    assert mainline.primary.settings.draft_ubatch_size is None


def test_every_kind_is_planned_and_only_the_fast_path_offered(catalog_sized: Path) -> None:
    pair = catalog.load().pair(QWEN38)
    ctx = PlanContext([FREE], "quality", "24gb-ada")
    got = pair_choices(pair, Generation.MAINLINE, ctx)
    assert got and {c.draft_kind for c in got} == {"dflash2"} and all(c.mode is got[0].mode for c in got)
    # the same pair with the fast path forced away: MTP is next in the published figures
    ctx_no_room = PlanContext([FREE], "quality", "24gb-ada", evidence={**ctx.evidence, "families": {}})
    rule = pair_choices(pair, Generation.MAINLINE, ctx_no_room)
    assert rule and {c.draft_kind for c in rule} == {"mtp"} and rule[0].mode is not None
    assert rule[0].mode.evidence == "rule" and "costs no download" in rule[0].mode.why
    # Gemma 4 (DFlash drafts only, no MTP head in its file) stays a DFlash pair, by the rule
    gemma = pair_choices(catalog.load().pair("gemma-4-31b"), Generation.BEE_B, ctx)
    assert gemma and {c.draft_kind for c in gemma} == {"dflash"} and gemma[0].mode is not None
    assert gemma[0].mode.evidence == "rule"
    unsized = catalog.load().pair("qwen3.5-9b")  # the fake Hub never served it
    assert pair_choices(unsized, Generation.MAINLINE, ctx) is None
