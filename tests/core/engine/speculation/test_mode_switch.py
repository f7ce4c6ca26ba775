"""The Qt-free mode switch: every rule of a Baseline <-> mode click, in plain pytest (no widget).

The engines' capabilities come from the real help texts in tests/fixtures/engines; the model files'
facts are what their GGUF headers say (:class:`ModelFacts`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.speculation.mode_switch import FIRST_NOTE, NO_SPECULATION, ModeSwitch, Outcome
from beedeck.core.engine.speculation.modes import PER_REQUEST, RESTART, Mode, ModelFacts
from beedeck.core.engine.speculation.switching import NO_DRAFTS
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout

DFLASH_PROFILE = LaunchSettings(target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=SpecMode.DFLASH,
                                ctx_size=8192)
MTP_FACTS = ModelFacts(target_name="qwen-mtp.gguf", mtp_layers=1)


def caps(kind: str) -> EngineCaps:
    text, release = {"mainline": (MAINLINE, ""), "bee-a": (BEE_A, "v0.1.2")}[kind]
    return dataclasses.replace(caps_from_texts(f"/e/{kind}/llama-server", "", help_stdout(text)), release=release)


def dflash_switch(per_request: bool | None, kind: str = "bee-a") -> ModeSwitch:
    sw = ModeSwitch()
    sw.configure(DFLASH_PROFILE, caps(kind), per_request)
    sw.launch_settings(DFLASH_PROFILE)  # the server starts in the profile's own mode
    return sw


def test_nothing_to_switch_without_a_profile_or_speculation() -> None:
    sw = ModeSwitch()
    sw.configure(None, None)
    assert not sw.enabled and sw.status == NO_SPECULATION and sw.mode == Mode.BASELINE
    plain = LaunchSettings(target="/m/t.gguf")
    sw.configure(plain, None)
    assert [o.key for o in sw.shown()] == ["baseline"] and not sw.enabled
    refused = sw.request("dflash")
    assert refused.outcome == Outcome.REFUSED and "No DFlash draft model is configured" in refused.reason
    assert sw.request("warp").outcome == Outcome.REFUSED
    assert sw.request("baseline").outcome == Outcome.SWITCHED


def test_the_probe_bringing_a_mode_clears_the_no_speculation_line() -> None:
    sw = ModeSwitch()
    plain = LaunchSettings(target="/m/t.gguf")
    sw.configure(plain, None)
    assert sw.status == NO_SPECULATION
    sw.configure(plain, caps("mainline"))
    assert sw.enabled and sw.status == "" and Mode.MODEL_FREE in [o.key for o in sw.shown()]


def test_restart_until_the_engine_was_checked() -> None:
    sw = dflash_switch(per_request=None)
    assert sw.path() == RESTART and sw.path_note == FIRST_NOTE and FIRST_NOTE in sw.tooltip()
    d = sw.request("baseline")
    assert d.outcome == Outcome.RESTART and d.mode == Mode.BASELINE
    assert d.settings is not None and d.settings.draft is None and d.settings.spec_mode == SpecMode.OFF
    assert d.settings.ctx_size == 8192  # nothing else changes
    assert sw.mode == Mode.DFLASH and sw.pending == Mode.BASELINE  # unchanged until the restart is done
    assert sw.status.startswith("restarting without the draft…")
    assert sw.request("dflash").outcome == Outcome.REFUSED  # one switch at a time
    assert sw.restart_done(2.5) == Mode.BASELINE
    assert sw.mode == sw.served == Mode.BASELINE and sw.request_extra() == {}
    assert sw.status == "Baseline: restarted the server without the draft in 2.5 s"


def test_a_failed_restart_keeps_the_old_mode() -> None:
    sw = dflash_switch(per_request=False)
    sw.request("baseline")
    sw.restart_failed()
    assert sw.mode == Mode.DFLASH and sw.pending is None and "switch failed" in sw.status
    assert sw.restart_done(1.0) is None  # a late "ready" after a failure changes nothing


def test_per_request_only_where_measured_and_only_between_baseline_and_dflash() -> None:
    sw = dflash_switch(per_request=True)
    assert sw.path() == PER_REQUEST
    d = sw.request("baseline")
    assert d.outcome == Outcome.SWITCHED and d.extra == NO_DRAFTS and sw.request_extra() == NO_DRAFTS
    assert "draft stays loaded" in sw.status and sw.served == Mode.DFLASH
    assert sw.launch_settings(DFLASH_PROFILE) is DFLASH_PROFILE  # a later Start keeps the draft loaded
    back = sw.request("dflash")
    assert back.outcome == Outcome.SWITCHED and back.extra == {}
    model_free = sw.request("model-free")
    assert model_free.outcome == Outcome.RESTART and model_free.settings is not None
    assert model_free.settings.spec_mode == SpecMode.MODEL_FREE and model_free.settings.draft is None


def test_what_baseline_does_on_an_engine_that_ignores_per_request_speculation() -> None:
    """The rule the issue measured the spread of: a per-request verdict contradicted by a baseline reply
    that drafted turns the switch to restarts, and restarts into a true baseline at once."""
    sw = dflash_switch(per_request=True)
    sw.request("baseline")
    assert sw.reply_finished(Mode.DFLASH, 40) is None  # a DFlash reply with drafts is no contradiction
    assert sw.reply_finished(Mode.BASELINE, 0) is None  # nor a baseline reply without
    d = sw.reply_finished(Mode.BASELINE, 12)
    assert d is not None and d.outcome == Outcome.RESTART and d.settings is not None and d.settings.draft is None
    assert sw.path() == RESTART and "drafted 12 tokens" in sw.path_note
    assert sw.request_extra() == {}  # never again the per-request field on this build
    sw.restart_done(1.0)
    assert sw.reply_finished(Mode.BASELINE, 3) is None  # the restart path now: nothing left to learn


def test_a_check_verdict_sets_the_path_and_its_status() -> None:
    sw = dflash_switch(per_request=None)
    sw.set_per_request(True, "this engine honours a per-request 'no drafts'")
    assert sw.path() == PER_REQUEST and sw.status == "Baseline switches per request: the draft stays loaded, no restart"
    assert "This engine honours a per-request 'no drafts'." in sw.tooltip()
    sw.set_per_request(False)
    assert sw.status == "Baseline switches by restarting the server without the draft"


def test_the_same_profile_keeps_the_chosen_mode_a_new_one_starts_in_its_own() -> None:
    sw = dflash_switch(per_request=False)
    sw.request("baseline")
    sw.restart_done(1.0)
    sw.configure(DFLASH_PROFILE, caps("bee-a"))  # the restarted server's caps arrive again
    assert sw.mode == Mode.BASELINE and sw.path() == RESTART  # same engine: the verdict is kept
    other = dataclasses.replace(DFLASH_PROFILE, ctx_size=4096)
    sw.configure(other, caps("bee-a"))
    assert sw.mode == sw.served == Mode.DFLASH and sw.launch_settings(other) is other
    assert sw.launch_settings(DFLASH_PROFILE) is DFLASH_PROFILE  # not the profile shown: started as saved


def test_another_engine_forgets_the_verdict(tmp_path: Path) -> None:
    sw = dflash_switch(per_request=True)
    other = EngineCaps(path=str(tmp_path / "llama-server"), generation=Generation.MAINLINE,
                       spec_types=("draft-dflash",), flags=frozenset({"--spec-type"}))
    sw.configure(DFLASH_PROFILE, other)
    assert sw.per_request is None and sw.path() == RESTART


def test_the_headers_decide_which_modes_are_offered() -> None:
    sw = ModeSwitch()
    profile = LaunchSettings(target="/m/qwen-mtp.gguf", ctx_size=8192, draft_n_max=4)
    sw.configure(profile, caps("mainline"))
    assert [o.key for o in sw.shown()] == ["baseline", "model-free"]  # MTP heads not read yet
    sw.set_facts(MTP_FACTS)
    assert [o.key for o in sw.shown()] == ["baseline", "mtp", "model-free"]
    assert "• DFlash: No DFlash draft model is configured" in sw.tooltip()
    d = sw.request("mtp")
    assert d.settings is not None and d.settings.spec_mode == SpecMode.MTP and d.settings.draft_n_max == 4
    assert sw.status.startswith("restarting with the target's MTP heads…")
    sw.restart_done(3.0)
    assert sw.status == "MTP: restarted the server with the target's MTP heads in 3.0 s"
    assert sw.launch_settings(profile).spec_mode == SpecMode.MTP  # a later Start keeps the mode shown
    n = sw.request("model-free")
    assert n.settings is not None and n.settings.spec_model_free_type == "ngram-mod"
    sw.restart_done(1.0)
    assert sw.status == "N-gram: restarted the server with ngram-mod speculation in 1.0 s"


def test_the_engine_decides_too() -> None:
    sw = ModeSwitch()
    sw.configure(LaunchSettings(target="/m/qwen-mtp.gguf"), caps("bee-a"), facts=MTP_FACTS)
    assert [o.key for o in sw.shown()] == ["baseline", "model-free"]
    assert "• MTP: BeeLlama v0.1.2 has no MTP" in sw.tooltip()
    d = sw.request("model-free")
    assert d.settings is not None and d.settings.spec_model_free_type == "ngram-simple"  # ngram-mod aborts there


def test_the_other_server_to_keep_loaded_once_the_restart_path_is_known() -> None:
    """standby_settings: what ModeGlue preloads beside the running server (standby.py)."""
    assert dflash_switch(None, "mainline").standby_settings() is None  # not checked yet: nothing preloaded
    assert dflash_switch(True, "mainline").standby_settings() is None  # per request: one server does both
    sw = dflash_switch(False, "mainline")
    baseline = sw.standby_settings()
    assert baseline is not None and baseline.spec_mode == SpecMode.OFF and baseline.draft is None
    decision = sw.request("baseline")
    assert decision.outcome == Outcome.RESTART and sw.standby_settings() is None  # a switch under way
    sw.restart_done(0.1)
    dflash = sw.standby_settings()
    assert dflash is not None and dflash.spec_mode == SpecMode.DFLASH and dflash.draft == DFLASH_PROFILE.draft
    plain = ModeSwitch()
    plain.configure(LaunchSettings(target="/m/t.gguf"), caps("mainline"), False)
    assert plain.standby_settings() is None  # a Baseline profile: nothing else of its own to keep
