"""The speculation mode's one type and one table (issue 35 item 2): every mode has its row, the words
earlier BeeDecks stored still read, and the benchmark's in-server baseline is a variant, not a mode."""

from __future__ import annotations

import json
import re

import pytest

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import IN_SERVER_BASELINE, MODE_TABLE, Mode, Variant
from beedeck.core.engine.speculation.modes import ModeOption


def test_one_row_per_mode_in_the_toggles_order_and_no_two_modes_alike() -> None:
    assert list(MODE_TABLE) == list(Mode) and Mode.BASELINE is list(Mode)[0]
    for column in ("label", "color", "setting"):
        values = [getattr(MODE_TABLE[m], column) for m in Mode]
        assert len(set(values)) == len(values), column  # one name, one colour, one stored word per mode
    assert all(re.fullmatch(r"#[0-9a-f]{6}", m.color) for m in Mode)
    assert [m.label for m in Mode] == ["Baseline", "DFlash", "EAGLE-3", "DSpark", "MTP", "N-gram"]
    assert Mode.EAGLE3.a_label == "an EAGLE-3" and Mode.DFLASH.a_label == "a DFlash" and Mode.MTP.a_label == "an MTP"
    assert [m for m in Mode if m.uses_draft_file] == [Mode.DFLASH, Mode.EAGLE3, Mode.DSPARK]
    assert [m for m in Mode if not m.speculates] == [Mode.BASELINE]
    assert ModeOption(Mode.EAGLE3, True).label == "EAGLE-3"  # an option's name is its mode's, never a copy


def test_the_words_earlier_beedecks_stored_still_read() -> None:
    # the chat database, benchmark files and the learnt advice store the mode's value
    assert [m.value for m in Mode] == ["baseline", "dflash", "eagle3", "dspark", "mtp", "model-free"]
    assert all(Mode.parse(m.value) is m for m in Mode) and Mode.parse("eagle9") is None and Mode.parse("") is None
    # profile.json, presets, known-issues.json and `--spec` store the setting word: Baseline's is "off"
    assert [m.setting for m in Mode] == ["off", "dflash", "eagle3", "dspark", "mtp", "model-free"]
    assert all(Mode.from_setting(m.setting) is m for m in Mode) and Mode.from_setting("baseline") is None


@pytest.mark.parametrize("mode", list(Mode))
def test_a_profile_keeps_its_spelling_both_ways(mode: Mode) -> None:
    """A profile written by an earlier BeeDeck ("spec_mode": "off") reads as Baseline, and one written now
    is what an earlier BeeDeck reads: the stored word did not change."""
    written = json.loads(json.dumps(LaunchSettings(target="/m/t.gguf", spec_mode=mode).to_dict()))
    assert written["spec_mode"] == mode.setting
    assert LaunchSettings.from_dict({"target": "/m/t.gguf", "spec_mode": mode.setting}).spec_mode is mode


def test_the_draft_kind_of_a_file_names_the_mode_that_runs_it() -> None:
    kinds = {"dflash": Mode.DFLASH, "dflash-draft": Mode.DFLASH, "eagle3": Mode.EAGLE3, "dspark": Mode.DSPARK,
             "mtp": Mode.MTP}
    assert {k: Mode.of_draft_kind(k) for k in kinds} == kinds
    assert Mode.of_draft_kind(None) is None and Mode.of_draft_kind("") is None and Mode.of_draft_kind("llama") is None


def test_the_plan_kinds_and_spec_types_name_their_mode() -> None:
    """The catalog's plan kinds (core/models/recommend/live_plan.py) and an attached server's --spec-type
    (core/engine/speculation/remote_switch.py) find their mode in the table, not in tables of their own."""
    plans = {"none": Mode.BASELINE, "mtp": Mode.MTP, "mtp-head": Mode.MTP, "dflash": Mode.DFLASH,
             "dflash2": Mode.DFLASH, "dflash-draft": Mode.DFLASH, "dspark": Mode.DSPARK, "eagle3": Mode.EAGLE3}
    assert {k: Mode.of_plan_kind(k) for k in plans} == plans and Mode.of_plan_kind("medusa") is None
    spec = {"draft-mtp": Mode.MTP, "draft-eagle3": Mode.EAGLE3, "draft-dspark": Mode.DSPARK}
    assert {k: Mode.of_spec_type(k) for k in spec} == spec
    assert Mode.of_spec_type("draft-dflash") is None and Mode.of_spec_type("ngram-mod") is None  # chosen per engine
    assert Mode.of_spec_type("") is None


def test_the_in_server_baseline_is_a_variant_of_baseline_not_a_mode() -> None:
    assert IN_SERVER_BASELINE.mode is Mode.BASELINE and IN_SERVER_BASELINE not in list(Mode)
    assert IN_SERVER_BASELINE.key == "baseline-draft-loaded"  # the word benchmark files wrote for it
    assert IN_SERVER_BASELINE.label == "Baseline (draft loaded)" and IN_SERVER_BASELINE.color == Mode.BASELINE.color
    assert Variant.parse("baseline-draft-loaded") == IN_SERVER_BASELINE and Variant.parse("dflash") == Variant(Mode.DFLASH)
    assert Variant.parse("dflash-draft-loaded") is None and Variant.parse("turbo") is None
    assert Variant.of(Mode.MTP) == Variant(Mode.MTP) and Variant.of(IN_SERVER_BASELINE) is IN_SERVER_BASELINE
    assert sorted([Variant(Mode.DFLASH), IN_SERVER_BASELINE, Variant(Mode.BASELINE)], key=lambda v: v.rank) == [
        Variant(Mode.BASELINE), IN_SERVER_BASELINE, Variant(Mode.DFLASH)]
    with pytest.raises(ValueError, match="only Baseline has a draft-loaded variant"):
        Variant(Mode.DFLASH, draft_loaded=True)
