"""The Qt-free mode switch: every rule of a Baseline <-> mode click, in plain pytest (no widget).

The engines' capabilities come from the real help texts in tests/fixtures/engines; the model files'
facts are what their GGUF headers say (:class:`ModelFacts`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.remote import RemoteInfo
from beedeck.core.engine.speculation.mode_switch import (
    CHECKING,
    FIRST_NOTE,
    NO_SPECULATION,
    ModeSwitch,
    Outcome,
)
from beedeck.core.engine.speculation.modes import PER_REQUEST, RESTART, ModelFacts
from beedeck.core.engine.speculation.remote_switch import toggle_reason
from beedeck.core.engine.speculation.standby import LOADED_BESIDE
from beedeck.core.engine.speculation.switch_cost import SwitchForecast
from beedeck.core.engine.speculation.switching import NO_DRAFTS, PerRequestVerdict
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout

DFLASH_PROFILE = LaunchSettings(target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=Mode.DFLASH,
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
    refused = sw.request(Mode.DFLASH)
    assert refused.outcome == Outcome.REFUSED and "No DFlash draft model is configured" in refused.reason
    assert sw.request(Mode.BASELINE).outcome == Outcome.SWITCHED


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
    d = sw.request(Mode.BASELINE)
    assert d.outcome == Outcome.RESTART and d.mode == Mode.BASELINE
    assert d.settings is not None and d.settings.draft is None and d.settings.spec_mode == Mode.BASELINE
    assert d.settings.ctx_size == 8192  # nothing else changes
    assert sw.mode == Mode.DFLASH and sw.pending == Mode.BASELINE  # unchanged until the restart is done
    assert sw.status.startswith("restarting without the draft…")
    assert sw.request(Mode.DFLASH).outcome == Outcome.REFUSED  # one switch at a time
    assert sw.restart_done(2.5) == Mode.BASELINE
    assert sw.mode == sw.served == Mode.BASELINE and sw.request_extra() == {}
    assert sw.status == "Baseline: restarted the server without the draft in 2.5 s"


def test_a_failed_restart_keeps_the_old_mode() -> None:
    sw = dflash_switch(per_request=False)
    sw.request(Mode.BASELINE)
    sw.restart_failed()
    assert sw.mode == Mode.DFLASH and sw.pending is None and "switch failed" in sw.status
    assert sw.restart_done(1.0) is None  # a late "ready" after a failure changes nothing


def test_per_request_only_where_measured_and_only_between_baseline_and_dflash() -> None:
    sw = dflash_switch(per_request=True)
    assert sw.path() == PER_REQUEST
    d = sw.request(Mode.BASELINE)
    assert d.outcome == Outcome.SWITCHED and d.extra == NO_DRAFTS and sw.request_extra() == NO_DRAFTS
    assert "draft stays loaded" in sw.status and sw.served == Mode.DFLASH
    assert sw.launch_settings(DFLASH_PROFILE) is DFLASH_PROFILE  # a later Start keeps the draft loaded
    back = sw.request(Mode.DFLASH)
    assert back.outcome == Outcome.SWITCHED and back.extra == {}
    model_free = sw.request(Mode.MODEL_FREE)
    assert model_free.outcome == Outcome.RESTART and model_free.settings is not None
    assert model_free.settings.spec_mode == Mode.MODEL_FREE and model_free.settings.draft is None


def test_what_baseline_does_on_an_engine_that_ignores_per_request_speculation() -> None:
    """The rule the issue measured the spread of: a per-request verdict contradicted by a baseline reply
    that drafted turns the switch to restarts, and restarts into a true baseline at once."""
    sw = dflash_switch(per_request=True)
    sw.request(Mode.BASELINE)
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
    sw.request(Mode.BASELINE)
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
    d = sw.request(Mode.MTP)
    assert d.settings is not None and d.settings.spec_mode == Mode.MTP and d.settings.draft_n_max == 4
    assert sw.status.startswith("restarting with the target's MTP heads…")
    sw.restart_done(3.0)
    assert sw.status == "MTP: restarted the server with the target's MTP heads in 3.0 s"
    assert sw.launch_settings(profile).spec_mode == Mode.MTP  # a later Start keeps the mode shown
    n = sw.request(Mode.MODEL_FREE)
    assert n.settings is not None and n.settings.spec_model_free_type == "ngram-mod"
    sw.restart_done(1.0)
    assert sw.status == "N-gram: restarted the server with N-gram speculation in 1.0 s"


def test_the_engine_decides_too() -> None:
    sw = ModeSwitch()
    sw.configure(LaunchSettings(target="/m/qwen-mtp.gguf"), caps("bee-a"), facts=MTP_FACTS)
    assert [o.key for o in sw.shown()] == ["baseline", "model-free"]
    assert "• MTP: BeeLlama v0.1.2 has no MTP" in sw.tooltip()
    d = sw.request(Mode.MODEL_FREE)
    assert d.settings is not None and d.settings.spec_model_free_type == "ngram-simple"  # ngram-mod aborts there


def test_the_other_server_to_keep_loaded_once_the_restart_path_is_known() -> None:
    """standby_settings: what ModeGlue preloads beside the running server (standby.py)."""
    assert dflash_switch(None, "mainline").standby_settings() is None  # not checked yet: nothing preloaded
    assert dflash_switch(True, "mainline").standby_settings() is None  # per request: one server does both
    sw = dflash_switch(False, "mainline")
    baseline = sw.standby_settings()
    assert baseline is not None and baseline.spec_mode == Mode.BASELINE and baseline.draft is None
    decision = sw.request(Mode.BASELINE)
    assert decision.outcome == Outcome.RESTART and sw.standby_settings() is None  # a switch under way
    sw.restart_done(0.1)
    dflash = sw.standby_settings()
    assert dflash is not None and dflash.spec_mode == Mode.DFLASH and dflash.draft == DFLASH_PROFILE.draft
    plain = ModeSwitch()
    plain.configure(LaunchSettings(target="/m/t.gguf"), caps("mainline"), False)
    assert plain.standby_settings() is None  # a Baseline profile: nothing else of its own to keep


# ---------------------------------------------------------------- when to check, and a restart's clock


def _verdict(honoured: bool | None, normal: int = 33, asked: int = 0) -> PerRequestVerdict:
    return PerRequestVerdict(honoured, normal, asked, 0.0)


def test_a_server_with_its_draft_is_checked_once_per_engine_unless_a_verdict_is_remembered() -> None:
    sw = dflash_switch(per_request=None)
    engine = caps("bee-a")
    remembered: dict[str, bool | None] = {}
    assert sw.server_ready(None, lambda c: None) is False  # nothing known of the engine
    assert sw.server_ready(engine, lambda c: remembered.get(c.path)) is True
    assert sw.status == CHECKING and engine.path in sw.checked
    assert sw.server_ready(engine, lambda c: None) is False  # checked this session: not again
    sw.check_done(_verdict(True))
    assert sw.path() == PER_REQUEST and "honours a per-request" in sw.tooltip()
    assert sw.status == "Baseline switches per request: the draft stays loaded, no restart"
    # A remembered verdict is used instead of a check, and said.
    again = dflash_switch(per_request=None)
    assert again.server_ready(engine, lambda c: False) is False
    assert again.path() == RESTART and "Checked earlier on this engine build: it ignores" in again.tooltip()
    # A server without its draft has nothing to check: the field would change nothing.
    plain = dflash_switch(per_request=None)
    plain.request(Mode.BASELINE)
    plain.restart_done(1.0)
    assert plain.server_ready(engine, lambda c: pytest.fail("not looked up")) is False


def test_a_failed_or_inconclusive_check_keeps_restarting() -> None:
    sw = dflash_switch(per_request=None)
    sw.server_ready(caps("bee-a"), lambda c: None)
    sw.check_failed("connection reset")
    assert sw.path() == RESTART and "The check failed (connection reset)" in sw.tooltip()
    sw.check_done(_verdict(None, normal=0))
    assert sw.path() == RESTART and "inconclusive" in sw.tooltip()


def test_a_contradiction_is_told_apart_from_a_reply_that_drafted_as_asked() -> None:
    sw = dflash_switch(per_request=None)
    assert not sw.contradicts(Mode.BASELINE, 12)  # not checked yet: Baseline restarts, nothing to contradict
    sw = dflash_switch(per_request=True)
    sw.request(Mode.BASELINE)
    assert sw.contradicts(Mode.BASELINE, 12) and not sw.contradicts(Mode.BASELINE, 0)
    assert not sw.contradicts(Mode.DFLASH, 12)


def test_a_restart_is_timed_against_what_it_took_here_before() -> None:
    sw = dflash_switch(per_request=False)
    assert sw.progress(10.0) is None  # nothing under way
    sw.request(Mode.BASELINE)
    sw.timed(100.0, 4.2)
    assert sw.progress(102.1) == 475 and sw.restart_status(102.1) == "restarting without the draft… 2.1 s of about 4 s"
    assert sw.progress(108.0) == 990  # a switch that runs long never fills the bar before the server is ready
    assert sw.restart_done(sw.elapsed(103.0)) == Mode.BASELINE
    assert sw.status == "Baseline: restarted the server without the draft in 3.0 s" and sw.began is None
    assert sw.last_switch_s == 3.0
    sw.request(Mode.DFLASH)
    sw.timed(200.0, None)  # never measured: no promise, no bar
    assert sw.progress(201.0) is None and sw.restart_status(201.0) == "restarting with the draft… 1.0 s"


def test_before_the_click_a_switch_says_what_it_costs_here_and_whether_the_chat_comes_along() -> None:
    """The 24 GB desk (issue 36): every click restarts the server. The toggle says, before the click, the seconds
    measured here and what happens to the conversation: kept (what re-reading it would have cost), or read again."""
    sw = dflash_switch(per_request=False, kind="mainline")
    assert sw.cost_line("baseline") == ""  # nothing measured or known yet: nothing promised
    sw.forecast = SwitchForecast({True: 4.4, False: 3.96}, None, {"baseline": "", "model-free": "its cache has 1 "
                                 "stream in one mode and 2 in the other"}, carry_s=0.6, tokens=16_012, prefill_tps=1284.0)
    assert sw.cost_line("baseline") == ("Switching restarts the server: about 5 s here; the conversation's cache comes "
                                        "along, which saves reading its 16,012 tokens again (about 12 s).")
    assert sw.cost_line("model-free") == (
        "Switching restarts the server: about 4 s here; then the next reply reads the conversation again (16,012 "
        "tokens, about 12 s at 1,284 tokens/s) (its cache has 1 stream in one mode and 2 in the other).")
    assert sw.cost_line("dflash") == ""  # the mode in effect
    sw.forecast = dataclasses.replace(sw.forecast, beside=False)  # Baseline's server kept loaded beside
    assert sw.cost_line("baseline") == "Switching loads nothing: that mode's server is loaded beside this one."
    sw.request("baseline")
    assert sw.cost_line("baseline") == ""  # a switch under way
    per_request = dflash_switch(per_request=True)
    per_request.forecast = sw.forecast
    assert per_request.cost_line("baseline") == ""  # per request: instant, nothing to say
    unmeasured = SwitchForecast({True: None, False: None}, None, {}, tokens=0)
    assert unmeasured.line("baseline", False) == "Switching restarts the server (its time is measured at the first switch)."


# ---------------------------------------------------------------- a server BeeDeck did not start

REMOTE = RemoteInfo(url="http://pod:8080", model="/m/Target.gguf", n_ctx=8192, n_ctx_train=None, total_slots=1,
                    build_info="b1-x", engine="BeeLlama", speculative=True, spec_types="", metrics=True, slots=True,
                    needs_key=False)


def test_an_attached_dflash_server_is_checked_and_switched_per_request_where_it_honours_it() -> None:
    sw = ModeSwitch()
    assert sw.attach(REMOTE) is True
    assert not sw.enabled and sw.status == "checking…" and "checking whether it honours" in sw.tooltip()
    sw.remote_checked(REMOTE, _verdict(True))
    assert sw.enabled and sw.held == "" and [o.key for o in sw.shown()] == ["baseline", "dflash"]
    assert not sw.local_files  # its paths are the server's: no header is read here
    d = sw.request(Mode.BASELINE)
    assert d.outcome == Outcome.SWITCHED and d.extra == NO_DRAFTS  # per request: no restart of a server not ours


def test_an_attached_server_that_ignores_no_drafts_is_held_on_what_it_runs() -> None:
    sw = ModeSwitch()
    sw.attach(REMOTE)
    sw.remote_checked(REMOTE, _verdict(False, asked=12))
    assert not sw.enabled and sw.mode == Mode.DFLASH and sw.request_extra() == {}
    assert "did not start this server" in sw.tooltip() and "ignores a per-request" in sw.tooltip()
    assert sw.status == "the server's own speculation; no switching here"
    sw.restart_refused()  # what a contradicted per-request baseline asks for: refused by the controller
    assert not sw.enabled and "still drafted" in sw.held
    sw.detach()
    sw.remote_check_failed(REMOTE, "late")  # a verdict or failure for a server gone is ignored
    assert "still drafted" in sw.held
    sw.configure(DFLASH_PROFILE, caps("bee-a"))  # a local profile again: nothing held
    assert sw.held == "" and sw.enabled and sw.local_files


@pytest.mark.parametrize(("info", "words", "mode"), [
    (dataclasses.replace(REMOTE, speculative=False), "runs without speculation", Mode.BASELINE),
    (dataclasses.replace(REMOTE, speculative=None), "does not tell whether it speculates", Mode.BASELINE),
    (dataclasses.replace(REMOTE, spec_types="ngram-mod"), "speculates with ngram-mod", Mode.MODEL_FREE),
    (dataclasses.replace(REMOTE, spec_types="draft-mtp"), "speculates with draft-mtp", Mode.MTP),
])
def test_servers_the_switch_cannot_switch_are_not_checked(info: RemoteInfo, words: str, mode: Mode) -> None:
    assert toggle_reason(info) is not None
    sw = ModeSwitch()
    assert sw.attach(info) is False
    assert not sw.enabled and words in sw.tooltip() and sw.mode == mode and sw.request_extra() == {}



def test_a_switchs_report_is_news_that_goes_when_the_server_stops_or_it_is_old() -> None:
    """"N-gram: loaded the server … beside the other in 3.2 s; both stay loaded" stayed in the toolbar for ever,
    after Stop too. What a switch did is news (it goes when the server stops, or when the view says it is old);
    what the switch is doing (a restart under way) or cannot do lasts as long as it is true."""
    sw = ModeSwitch()
    sw.configure(LaunchSettings(target="/m/t.gguf"), caps("mainline"))
    assert sw.request(Mode.MODEL_FREE).outcome == Outcome.RESTART
    sw.server_stopped()  # the restart stops the old server: its line stays
    assert sw.status.startswith("restarting with N-gram speculation")
    sw.restart_done(3.2, LOADED_BESIDE)
    assert "both stay loaded" in sw.status and sw.news
    sw.server_stopped()  # Stop: both servers are gone, so is the line that said they stay loaded
    assert sw.status == "" and not sw.news
    assert sw.request(Mode.BASELINE).outcome == Outcome.RESTART
    sw.restart_done(1.0)
    assert sw.status == "Baseline: restarted the server without speculation in 1.0 s"
    sw.clear_news()  # the view's clock: old news
    assert sw.status == "" and sw.mode == Mode.BASELINE
    sw.configure(LaunchSettings(target="/m/t.gguf"), None)
    sw.clear_news()
    sw.server_stopped()
    assert sw.status == NO_SPECULATION  # true for as long as it lasts
