"""Baseline | <the modes this setup can run>: offered by the engine's spec types and the model files'
headers, each unavailable mode with its reason; Baseline/DFlash per request only where the engine was
measured to honour it; restart otherwise (and after a reply contradicts the measurement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.speculation.modes import PER_REQUEST, RESTART, Mode, settings_for_mode
from beedeck.core.engine.speculation.switching import PerRequestMemory
from beedeck.core.models import gguf
from beedeck.ui.speculation import mode_toggle as mode_toggle_module
from beedeck.ui.speculation.mode_toggle import ModeToggle
from beedeck.ui.speculation.switch_checker import SwitchChecker
from tests.fakes.sse_server import FakeLlamaServer, SSEScript

WITH_DRAFT = LaunchSettings(target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=SpecMode.DFLASH, ctx_size=8192)


def _caps(tmp_path: Path, generation: Generation) -> EngineCaps:
    binary = tmp_path / f"llama-server-{generation.value}"  # the memory is keyed by the real file
    binary.write_text("#!/bin/sh\n")
    dflash = "dflash" if generation == Generation.BEE_A else "draft-dflash"
    return EngineCaps(path=str(binary), generation=generation, spec_types=(dflash,), flags=frozenset({"--spec-type"}))


def _inline(fn: Any, done: Any, err: Any) -> None:
    try:
        result = fn()
    except Exception as exc:
        err(exc)
        return
    done(result)


def _toggle(qtbot: QtBot, caps: EngineCaps | None, per_request: bool | None = None) -> ModeToggle:
    t = ModeToggle()
    qtbot.addWidget(t)
    t.configure(WITH_DRAFT, caps, per_request)
    return t


def test_disabled_without_a_draft(qtbot: QtBot) -> None:
    t = ModeToggle()
    qtbot.addWidget(t)
    t.configure(LaunchSettings(target="/m/t.gguf"), None)
    assert not t.isEnabled() and t.offered() == ["baseline"]
    assert "No DFlash draft" in t.toolTip()
    # The ? says why in plain words (rich text: Qt wraps it), even while the toggle is disabled.
    said = t.why_button.toolTip()
    assert said.startswith("<p>") and "DFlash needs a small DFlash draft model trained for your model" in said
    assert "--" not in said
    t.popover.set_options(t.unavailable())  # what a click on ? shows once the toggle is enabled
    assert "DFlash needs a small DFlash draft" in t.popover.text() and t.popover.width() <= 400
    with qtbot.waitSignal(t.popover.action_requested) as blocker:
        t.popover.buttons["settings"].click()
    assert blocker.args == ["settings"] and not t.popover.isVisible()
    assert t.provider() == ("baseline", {})
    assert t.request_mode("dflash") is False and t.request_mode("warp") is False
    assert t.request_mode("baseline") is True and t.mode() == "baseline"


def test_no_speculation_note_goes_when_the_probe_brings_a_mode(qtbot: QtBot, tmp_path: Path) -> None:
    """The starter: no draft, so at first nothing; once the probe shows n-gram types, N-gram is offered
    and the toggle must not keep saying 'no speculation here' beside it (seen in the installed app)."""
    t = ModeToggle()
    qtbot.addWidget(t)
    starter = LaunchSettings(target="/m/t.gguf")
    t.configure(starter, None)
    assert t.status.text() == "no speculation here"
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    caps = EngineCaps(path=str(binary), generation=Generation.MAINLINE, spec_types=("draft-dflash", "ngram-mod"),
                      flags=frozenset({"--spec-type"}))
    t.configure(starter, caps)
    assert t.isEnabled() and t.offered() == ["baseline", "model-free"] and t.status.text() == ""
    assert t.why_button.text() == "?"


def test_restart_until_the_engine_is_known_whatever_its_generation(qtbot: QtBot, tmp_path: Path) -> None:
    for generation in (Generation.BEE_A, Generation.BEE_B, Generation.MAINLINE):
        t = _toggle(qtbot, _caps(tmp_path, generation))
        assert t.path() == RESTART and "until BeeDeck has checked" in t.toolTip()


def test_per_request_path_where_measured(qtbot: QtBot, tmp_path: Path) -> None:
    t = _toggle(qtbot, _caps(tmp_path, Generation.BEE_A), per_request=True)
    assert t.isEnabled() and t.path() == PER_REQUEST
    assert t.provider() == ("dflash", {})
    with qtbot.waitSignal(t.mode_changed) as blocker:
        t.baseline_button.click()
    assert blocker.args == ["baseline"]
    assert t.provider() == ("baseline", {"speculative.n_max": 0, "speculative.n_min": 0})
    assert "per request" in t.status.text() and "draft stays loaded" in t.status.text()


def test_restart_path(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.MAINLINE)
    t = _toggle(qtbot, caps, per_request=False)
    assert t.path() == RESTART
    with qtbot.waitSignal(t.restart_requested) as blocker:
        t.baseline_button.click()
    settings = blocker.args[0]
    assert settings.draft is None and settings.spec_mode == SpecMode.OFF
    assert settings.ctx_size == 8192 and settings.target == WITH_DRAFT.target  # same argv otherwise
    assert t.is_switching() and not t.dflash_button.isEnabled()
    assert t.mode() == "dflash"  # unchanged until the restart finished
    with qtbot.waitSignal(t.mode_changed):
        t.restart_finished()
    assert t.mode() == "baseline" and t.provider() == ("baseline", {})  # no per-request field
    t.configure(WITH_DRAFT, caps)  # the restarted server's caps arrive again: the mode stays
    assert t.mode() == "baseline" and t.baseline_button.isChecked() and t.path() == RESTART
    assert "restarted the server without the draft in" in t.status.text()


def test_a_restart_says_in_advance_how_long_it_took_here_before(qtbot: QtBot, tmp_path: Path) -> None:
    """The issue: a 19 GB switch cost 11-12 s and the app showed nothing of it in advance. The toggle asks
    what such a switch took before (the controller's learnt times, by whether the new mode loads the
    draft) and shows it beside the seconds so far, with a bar that never fills before the server is ready."""
    caps = _caps(tmp_path, Generation.MAINLINE)
    t = _toggle(qtbot, caps, per_request=False)
    asked: list[bool] = []
    t.expected_s = lambda with_draft: asked.append(with_draft) or (4.2 if not with_draft else 5.1)
    with qtbot.waitSignal(t.restart_requested):
        t.baseline_button.click()
    assert asked == [False] and t.progress.isVisibleTo(t)
    t._t0 -= 8.0  # the switch runs long: the bar stays short of full
    t._on_tick()
    assert "of about 4 s" in t.status.text() and t.progress.value() == 990
    t.restart_finished()
    assert not t.progress.isVisibleTo(t)
    t.expected_s = lambda with_draft: None  # never measured: no promise, no bar
    with qtbot.waitSignal(t.restart_requested):
        t.dflash_button.click()
    assert not t.progress.isVisibleTo(t)
    t._on_tick()
    assert "of about" not in t.status.text()


def test_restart_failure_restores_the_old_mode(qtbot: QtBot, tmp_path: Path) -> None:
    t = _toggle(qtbot, _caps(tmp_path, Generation.MAINLINE))
    t.baseline_button.click()
    t.restart_failed()
    assert t.mode() == "dflash" and t.dflash_button.isChecked() and t.baseline_button.isEnabled()


def test_settings_for_mode_keeps_everything_else() -> None:
    base = settings_for_mode(WITH_DRAFT, "baseline")
    assert base.to_dict() | {"draft": WITH_DRAFT.draft, "spec_mode": "dflash"} == WITH_DRAFT.to_dict()
    assert settings_for_mode(WITH_DRAFT, "dflash") == WITH_DRAFT


def test_checker_measures_a_server_that_ignores_no_drafts_and_remembers_it(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_B)
    t = _toggle(qtbot, caps)
    memory = PerRequestMemory(tmp_path / "per-request.json")
    checker = SwitchChecker(t, memory=memory, runner=_inline)
    with FakeLlamaServer(SSEScript(tokens=["1,"] * 30, draft_n=36, draft_n_accepted=36)) as srv:
        checker.server_ready(caps, LlamaClient(srv.base_url))
        bodies = [r.body for r in srv.requests if r.method == "POST"]
    assert [b.get("speculative.n_max") for b in bodies] == [None, 0]  # as it is, then asking for none
    assert t.path() == RESTART and "ignores a per-request" in t.toolTip() and "still drafted 36" in t.toolTip()
    assert memory.get(caps) is False
    # A new window on the same build does not ask again.
    t2 = _toggle(qtbot, caps, memory.get(caps))
    SwitchChecker(t2, memory=memory, runner=lambda *a: (_ for _ in ()).throw(AssertionError("checked again")))
    assert t2.path() == RESTART


def test_checker_measures_a_server_that_honours_it(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_A)
    t = _toggle(qtbot, caps)
    memory = PerRequestMemory(tmp_path / "per-request.json")
    checker = SwitchChecker(t, memory=memory, runner=_inline)
    script = SSEScript(tokens=["1,"] * 30, draft_n=33, draft_n_accepted=33, honours_no_drafts=True)
    with FakeLlamaServer(script) as srv:
        checker.server_ready(caps, LlamaClient(srv.base_url))
    assert t.path() == PER_REQUEST and memory.get(caps) is True
    assert "honours a per-request" in t.toolTip() and "Baseline switches per request" in t.status.text()


def test_an_inconclusive_check_keeps_restarting_and_is_not_remembered(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_A)
    t = _toggle(qtbot, caps)
    memory = PerRequestMemory(tmp_path / "per-request.json")
    with FakeLlamaServer(SSEScript(tokens=["x"] * 10, draft_n=0)) as srv:
        SwitchChecker(t, memory=memory, runner=_inline).server_ready(caps, LlamaClient(srv.base_url))
    assert t.path() == RESTART and "inconclusive" in t.toolTip() and memory.get(caps) is None


def test_a_drafted_baseline_reply_switches_to_restarting(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_A)
    memory = PerRequestMemory(tmp_path / "per-request.json")
    t = _toggle(qtbot, caps, per_request=True)
    checker = SwitchChecker(t, memory=memory, runner=_inline)
    t.baseline_button.click()
    assert t.mode() == "baseline" and t.path() == PER_REQUEST
    with qtbot.waitSignal(t.restart_requested) as blocker:
        checker.reply_finished(caps, ReplyFacts(mode=Mode.BASELINE, draft_n=12, draft_accepted=12))
    assert blocker.args[0].draft is None  # the server restarts without the draft: a real baseline
    assert t.path() == RESTART and memory.get(caps) is False and "drafted 12 tokens" in t.toolTip()
    # A DFlash reply with drafts is no contradiction.
    checker.reply_finished(caps, ReplyFacts(mode=Mode.DFLASH, draft_n=40))


# ---------------------------------------------------------------- every mode this setup can run


def _real_caps(kind: str) -> EngineCaps:
    import dataclasses

    from beedeck.core.engine.help_text import caps_from_texts
    from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout

    text, release = {"mainline": (MAINLINE, ""), "bee-a": (BEE_A, "v0.1.2")}[kind]
    return dataclasses.replace(caps_from_texts(f"/e/{kind}/llama-server", "", help_stdout(text)), release=release)


def _mtp_target(tmp_path: Path) -> Path:
    from tests.fixtures import meta_gguf as mg

    return mg.tiny_model(tmp_path / "qwen-mtp.gguf", arch="qwen35", n_embd=128, extra={"qwen35.nextn_predict_layers": 1})


def _file_toggle(qtbot: QtBot, profile: LaunchSettings, caps: EngineCaps | None) -> ModeToggle:
    t = ModeToggle(runner=_inline)
    qtbot.addWidget(t)
    t.configure(profile, caps)
    return t


def test_an_mtp_target_offers_mtp_and_says_why_the_draft_modes_cannot_run(qtbot: QtBot, tmp_path: Path) -> None:
    profile = LaunchSettings(target=str(_mtp_target(tmp_path)), ctx_size=8192, draft_n_max=4)
    t = _file_toggle(qtbot, profile, _real_caps("mainline"))
    assert t.isEnabled() and t.offered() == ["baseline", "mtp", "model-free"] and t.mode() == "baseline"
    assert [t.button(k).text() for k in t.offered()] == ["Baseline", "MTP", "N-gram"]  # type: ignore[union-attr]
    assert "MTP heads" in t.button("mtp").toolTip() and "ngram-mod" in t.button("model-free").toolTip()  # type: ignore[union-attr]
    assert t.button("dflash") is None and t.why_button.isVisibleTo(t)
    t.why_button.click()
    why = t.popover.text()
    assert "DFlash needs a small DFlash draft" in why and "EAGLE-3 needs" in why
    assert "nextn" not in why and "--" not in why and "spec-type" not in why  # no GGUF keys, no CLI flags
    assert "Baseline | MTP | N-gram: the mode of the next reply." in t.toolTip()
    with qtbot.waitSignal(t.restart_requested) as blocker:
        assert t.request_mode("mtp") is True
    settings = blocker.args[0]
    assert settings.spec_mode == SpecMode.MTP and settings.draft is None
    assert settings.ctx_size == 8192 and settings.draft_n_max == 4  # nothing else changes
    assert t.is_switching() and "restarting with the target's MTP heads" in t.status.text()
    assert t.request_mode("baseline") is False  # one switch at a time
    with qtbot.waitSignal(t.mode_changed) as changed:
        t.restart_finished()
    assert changed.args == ["mtp"] and t.provider() == ("mtp", {})
    assert "MTP: restarted the server with the target's MTP heads in" in t.status.text()
    assert t.launch_settings(profile).spec_mode == SpecMode.MTP  # a later Start keeps the mode shown
    with qtbot.waitSignal(t.restart_requested) as blocker:
        t.button("model-free").click()  # type: ignore[union-attr]
    assert blocker.args[0].spec_mode == SpecMode.MODEL_FREE and blocker.args[0].spec_model_free_type == "ngram-mod"
    t.restart_finished()
    assert "N-gram: restarted the server with ngram-mod speculation" in t.status.text()


def test_the_engine_decides_too(qtbot: QtBot, tmp_path: Path) -> None:
    # BeeLlama 0.1.2 has no MTP, and aborts with ngram-mod: the toggle offers what runs, with the type that runs.
    profile = LaunchSettings(target=str(_mtp_target(tmp_path)))
    t = _file_toggle(qtbot, profile, _real_caps("bee-a"))
    assert t.offered() == ["baseline", "model-free"]
    assert "• MTP: BeeLlama v0.1.2 has no MTP" in t.toolTip()
    assert "Your engine build cannot run MTP" in t.why_button.toolTip()
    with qtbot.waitSignal(t.restart_requested) as blocker:
        t.request_mode("model-free")
    assert blocker.args[0].spec_model_free_type == "ngram-simple"
    # Before the engine is probed, only the profile's own mode can run.
    t2 = _file_toggle(qtbot, profile, None)
    assert t2.offered() == ["baseline"] and not t2.isEnabled()
    assert "has not probed the engine yet" in t2.toolTip()


def test_a_draft_of_another_kind_keeps_the_profiles_mode_visible_with_the_reason(qtbot: QtBot, tmp_path: Path) -> None:
    from tests.fixtures import meta_gguf as mg

    draft = mg.tiny_model(tmp_path / "eagle.gguf", arch="eagle3", n_embd=128, n_layer=1)
    target = mg.tiny_model(tmp_path / "t.gguf", n_embd=128)
    profile = LaunchSettings(target=str(target), draft=str(draft), spec_mode=SpecMode.DFLASH)
    t = _file_toggle(qtbot, profile, _real_caps("mainline"))
    assert t.offered() == ["baseline", "dflash", "eagle3", "model-free"]
    dflash = t.button("dflash")
    assert dflash is not None and not dflash.isEnabled() and dflash.isChecked()
    assert "eagle.gguf is an EAGLE-3 draft, so it cannot run as DFlash: use the EAGLE-3 mode for it" in dflash.toolTip()
    with qtbot.waitSignal(t.restart_requested) as blocker:
        assert t.request_mode("eagle3")
    assert blocker.args[0].spec_mode == SpecMode.EAGLE3 and blocker.args[0].draft == str(draft)
    t.restart_finished()
    assert t.mode() == "eagle3" and "EAGLE-3: restarted the server with the draft in" in t.status.text()


def test_headers_are_read_off_the_gui_thread_and_the_segments_follow(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending: list[Any] = []
    read: list[str] = []

    def inspect(path: str) -> Any:
        read.append(path)
        return gguf.inspect(path)

    def no_stat_here(*_a: object) -> None:
        raise AssertionError("a file was looked at on the GUI thread")

    t = ModeToggle(runner=lambda fn, done, err: pending.append((fn, done)), inspect_fn=inspect)
    qtbot.addWidget(t)
    target = _mtp_target(tmp_path)
    caps = _real_caps("mainline")  # made (its modules imported) before stat is forbidden
    with monkeypatch.context() as m:  # configure touches no file: even a stat can hang on a network mount
        m.setattr(mode_toggle_module.os, "stat", no_stat_here)
        t.configure(LaunchSettings(target=str(target)), caps)
    assert t.offered() == ["baseline", "model-free"]  # the header is not read yet
    assert "has not read qwen-mtp.gguf's header" in t.toolTip()
    fn, done = pending.pop()
    done(fn())
    assert t.offered() == ["baseline", "mtp", "model-free"] and read == [str(target)]
    t.configure(t.switch.profile, _real_caps("mainline"))  # same file, same version: checked, not read again
    fn, done = pending.pop()
    done(fn())
    assert read == [str(target)] and t.offered() == ["baseline", "mtp", "model-free"]
    target.write_bytes(target.read_bytes() + b"\0" * 32)  # a new version of the file is read again
    t.configure(t.switch.profile, _real_caps("mainline"))
    fn, done = pending.pop()
    done(fn())
    assert read == [str(target)] * 2


def test_a_running_servers_paths_are_not_read_on_this_machine(qtbot: QtBot, tmp_path: Path) -> None:
    """A server BeeDeck did not start names files on its own machine: a file of that name here must not
    decide its modes (and is not even opened)."""
    here = tmp_path / "model.gguf"
    here.write_bytes(b"GGUF")
    opened: list[str] = []

    def inspect(path: str) -> Any:
        opened.append(path)
        raise OSError("not a model")

    t = ModeToggle(runner=_inline, inspect_fn=inspect)
    qtbot.addWidget(t)
    t.configure(LaunchSettings(target=str(here), spec_mode=SpecMode.MTP), None, per_request=False, local_files=False)
    assert opened == []
    t.configure(LaunchSettings(target=str(here)), None)  # a local profile: its header is read
    assert opened == [str(here)]
