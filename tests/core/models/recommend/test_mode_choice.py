"""Which speculation mode is the fast path per card class and engine, and the evidence named for it."""

from __future__ import annotations

from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import WorkloadAdvice
from beedeck.core.models.recommend import mode_choice as mc

GiB = 2**30
ALL = ("none", "mtp", "dflash2", "dspark")


def test_card_classes_from_memory_and_compute_capability() -> None:
    assert mc.card_class(24 * GiB, (8, 6), "NVIDIA GeForce RTX 3090") == "24gb-ampere"
    assert mc.card_class(24 * GiB, (8, 9), "NVIDIA GeForce RTX 4090") == "24gb-ada"
    assert mc.card_class(32 * GiB, (12, 0), "NVIDIA GeForce RTX 5090") == "32gb-blackwell"
    assert mc.card_class(141 * GiB, (9, 0), "NVIDIA H200") == "larger"
    assert mc.card_class(12 * GiB, (8, 6), "RTX 3060") == "smaller"


def test_the_four_card_classes_on_published_figures_with_their_sources() -> None:
    ev = mc.load_evidence()
    rows = {c.card_class: c for c in mc.table("qwen3.8-27b", ev, [(Generation.MAINLINE, "")])}
    assert {k: v.mode for k, v in rows.items()} == {"24gb-ampere": "mtp", "24gb-ada": "dflash2",
                                                      "32gb-blackwell": "mtp", "larger": "dflash2"}
    assert all(r.evidence == "published" and r.source for r in rows.values())
    assert "0.92-1.01x of MTP" in rows["24gb-ampere"].why and "36k tokens" in rows["24gb-ampere"].why
    assert "102.2" in rows["24gb-ada"].why and "zedong-peng" in rows["24gb-ada"].source


def test_bee_before_0_4_4_cannot_take_dflash2_and_says_why() -> None:
    ev = mc.load_evidence()
    old = mc.choose("24gb-ada", Generation.BEE_B, "v0.4.3", "qwen3.8-27b", ALL, ev)
    assert old.mode == "mtp" and "v0.4.3 cannot load DFlash2" in old.why and "issues/134" in old.source
    new = mc.choose("24gb-ada", Generation.BEE_B, "0.4.7", "qwen3.8-27b", ALL, ev)
    assert new.mode == "dflash2"
    assert mc.choose("24gb-ada", Generation.BEE_A, "v0.3.1", "qwen3.8-27b", ("none", "dflash-draft"), ev).mode \
        == "dflash-draft"


def test_only_what_runs_and_fits_is_chosen_and_unknown_models_fall_back_to_the_rule() -> None:
    ev = mc.load_evidence()
    no_room = mc.choose("24gb-ada", Generation.MAINLINE, "", "qwen3.8-27b", ("none", "mtp"), ev)
    assert no_room.mode == "mtp" and "does not run or fit" in no_room.why
    other = mc.choose("24gb-ada", Generation.MAINLINE, "", None, ("none", "mtp", "dflash"), ev)
    assert other.mode == "mtp" and other.evidence == "rule" and "costs no download" in other.why
    assert mc.choose("24gb-ada", Generation.MAINLINE, "", None, ("none",), ev).mode == "none"


def test_beedecks_own_measured_advice_wins_over_published_figures(tmp_path: Path) -> None:
    advice = WorkloadAdvice(tmp_path / "advice.json")
    key = "BeeLlama 0.4.7 | Qwen3.8-27B-Q4_K_M.gguf | Qwen3.8-27B-DFlash2-Q4_K_M.gguf"
    for tps in (70.0, 71.0, 72.0):
        advice.record(key, "code", Mode.MTP, tps, "p")  # the same prompt in both modes: like for like
    for tps in (60.0, 61.0, 62.0):
        advice.record(key, "code", Mode.DFLASH, tps, "p")
    own = mc.measured(advice, ["Q4/Qwen3.8-27B-Q4_K_M.gguf"])
    assert own is not None and own[0] == "mtp"
    c = mc.choose("24gb-ada", Generation.BEE_B, "0.4.7", "qwen3.8-27b", ALL, mc.load_evidence(), own)
    assert c.mode == "mtp" and c.evidence == "measured" and "71.0 tok/s" in c.why
    assert mc.measured(advice, ["another.gguf"]) is None


def test_ubd_64_on_24_gb_cards_only_where_the_probe_found_it() -> None:
    ev = mc.load_evidence()
    with_flag = EngineCaps(path="/e", generation=Generation.BEE_B, flags=frozenset({"--spec-draft-ubatch-size", "-ubd"}))
    without = EngineCaps(path="/e", generation=Generation.BEE_B, flags=frozenset())
    assert mc.ubd_for("24gb-ada", with_flag, ev) == 64 and mc.ubd_for("24gb-ampere", with_flag, ev) == 64
    assert mc.ubd_for("32gb-blackwell", with_flag, ev) is None and mc.ubd_for("24gb-ada", without, ev) is None


def _advice(tmp_path: Path, setup: str, figures: dict[Mode, tuple[float, ...]]) -> WorkloadAdvice:
    advice = WorkloadAdvice(tmp_path / "advice.json")
    for mode, values in figures.items():
        for tps in values:
            advice.record(setup, "code", mode, tps, "p")
    return advice


def test_measured_dflash_means_the_plans_dflash2_and_wins_as_measured_here(tmp_path: Path) -> None:
    """The advice records "dflash" whichever DFlash file ran; a Qwen3.8 plan's runnable kind is "dflash2", so the
    measurement must map onto it (it used to be dropped, and the published MTP pick won on a 3090)."""
    setup = "BeeLlama 0.4.7 | Qwen3.8-27B-Q4_K_M.gguf | Qwen3.8-27B-DFlash2-Q4_K_M.gguf"
    advice = _advice(tmp_path, setup, {Mode.DFLASH: (95.0, 96.0, 97.0), Mode.MTP: (80.0, 81.0, 82.0)})
    own = mc.measured(advice, ["Qwen3.8-27B-Q4_K_M.gguf"])
    assert own is not None and own[0] == Mode.DFLASH
    ev = mc.load_evidence()
    published = mc.choose("24gb-ampere", Generation.MAINLINE, "", "qwen3.8-27b", ALL, ev)
    assert published.mode == "mtp" and published.evidence == "published"  # what the 3090 gets without it
    c = mc.choose("24gb-ampere", Generation.MAINLINE, "", "qwen3.8-27b", ALL, ev, own)
    assert c.mode == "dflash2" and c.evidence == "measured" and "96.0 tok/s" in c.why
    assert "(measured here: BeeDeck's own advice:" in c.line()
    # a measured mode that does not run here is no evidence: the published figures decide
    assert mc.choose("24gb-ampere", Generation.MAINLINE, "", "qwen3.8-27b", ("none", "mtp"), ev, own).mode == "mtp"


def test_a_bare_build_number_is_an_unknown_release_and_the_recorded_release_wins() -> None:
    """BeeLlama v0.4.3 printed "version: 11207 (ba27edad2)": 11207 is no release (it used to count as newer
    than 0.4.4, letting DFlash2 through). The release recorded beside the binary decides where known."""
    ev = mc.load_evidence()
    built = EngineCaps(path="/e", generation=Generation.BEE_B, version="11207", build=11207)
    assert mc.engine_version(built) == "11207"
    no, why, src = mc.engine_excludes(Generation.BEE_B, mc.engine_version(built), ev)
    assert no == {"dflash2"} and "release is unknown" in why and "'11207'" in why and "v0.4.4" in why
    assert "issues/134" in src
    c = mc.choose("24gb-ada", Generation.BEE_B, mc.engine_version(built), "qwen3.8-27b", ALL, ev)
    assert c.mode == "mtp" and "release is unknown" in c.why
    recorded = EngineCaps(path="/e", generation=Generation.BEE_B, version="11207", release="v0.4.7")
    assert mc.engine_version(recorded) == "v0.4.7"
    assert mc.choose("24gb-ada", Generation.BEE_B, mc.engine_version(recorded), "qwen3.8-27b", ALL, ev).mode \
        == "dflash2"
    new_format = EngineCaps(path="/e", generation=Generation.BEE_B, version="0.4.5-dev", build=213)
    assert mc.engine_excludes(Generation.BEE_B, mc.engine_version(new_format), ev)[0] == set()
    assert mc.engine_excludes(Generation.BEE_B, "", ev)[0] == set()  # no engine known: a generation-wide answer
    assert mc.engine_excludes(Generation.MAINLINE, "11207", ev)[0] == set()  # mainline's build numbers are fine


def test_the_table_covers_every_class_and_generation_and_own_advice_only_for_this_card(tmp_path: Path) -> None:
    ev = mc.load_evidence()
    rows = mc.table("qwen3.8-27b", ev)
    assert {(r.card_class, r.engine) for r in rows} == {(c, f"{g.value} {v}".strip()) for c in mc.CLASSES
                                                         for g, v in mc.TABLE_ENGINES}
    by = {(r.card_class, r.engine): r for r in rows}
    assert by[("24gb-ada", "bee-b v0.4.3")].mode == "mtp" and "v0.4.4" in by[("24gb-ada", "bee-b v0.4.3")].why
    assert by[("24gb-ada", "bee-b v0.4.7")].mode == "dflash2"
    assert by[("24gb-ampere", "bee-a v0.3.1")].mode == "dflash-draft"
    advice = _advice(tmp_path, "mainline b11434 | Qwen3.8-27B-UD-Q4_K_XL.gguf | Qwen3.8-27B-DFlash2-Q4_K_M.gguf",
                     {Mode.DFLASH: (90.0, 91.0, 92.0), Mode.MTP: (70.0, 71.0, 72.0)})
    own = mc.measured_family(advice, "qwen3.8-27b", ev)
    assert own is not None
    mine = {(r.card_class, r.engine): r for r in mc.table("qwen3.8-27b", ev, own=own, own_card="24gb-ampere")}
    assert mine[("24gb-ampere", "mainline")].mode == "dflash2" and mine[("24gb-ampere", "mainline")].evidence == "measured"
    assert mine[("24gb-ada", "mainline")].evidence == "published"  # another card class: its own evidence
    assert mc.measured_family(advice, "gemma-4-31b", ev) is None
