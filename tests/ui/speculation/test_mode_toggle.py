"""Baseline | <the modes this setup can run>, as the window shows the session's switch: offered by the engine's
spec types and the model files' headers, each unavailable mode with its reason; Baseline/DFlash per request only
where the engine was measured to honour it; restart otherwise. The toggle renders and reports clicks; the
session's switch decides (tests/core/engine/speculation/test_mode_switch.py has every rule in plain pytest)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QToolButton
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import PER_REQUEST, RESTART, settings_for_mode
from beedeck.ui.session import Session
from beedeck.ui.speculation.mode_toggle import ModeToggle
from beedeck.ui.window.theme import apply_theme
from tests.ui.speculation.sessions import bind, make_session, restart_done, restart_failed

WITH_DRAFT = LaunchSettings(target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=Mode.DFLASH, ctx_size=8192)


def _caps(tmp_path: Path, generation: Generation) -> EngineCaps:
    binary = tmp_path / f"llama-server-{generation.value}"  # the memory is keyed by the real file
    binary.write_text("#!/bin/sh\n")
    dflash = "dflash" if generation == Generation.BEE_A else "draft-dflash"
    return EngineCaps(path=str(binary), generation=generation, spec_types=(dflash,), flags=frozenset({"--spec-type"}))


def _toggle(qtbot: QtBot, tmp_path: Path, caps: EngineCaps | None, per_request: bool | None = None,
            profile: LaunchSettings = WITH_DRAFT) -> tuple[Session, ModeToggle]:
    """The session's switch on ``profile`` and ``caps`` (``per_request``: what a check left for this build)."""
    s = make_session(tmp_path)
    t = bind(qtbot, s)
    s.switching.configure(profile, caps, per_request)
    return s, t


def test_disabled_without_a_draft(qtbot: QtBot, tmp_path: Path) -> None:
    s, t = _toggle(qtbot, tmp_path, None, profile=LaunchSettings(target="/m/t.gguf"))
    assert not t.isEnabled() and t.offered() == [Mode.BASELINE]
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
    assert s.switching.provider() == (Mode.BASELINE, {})
    assert s.request_mode(Mode.DFLASH) is False
    assert s.request_mode(Mode.BASELINE) is True and s.switch.mode == "baseline"


def test_no_speculation_note_goes_when_the_probe_brings_a_mode(qtbot: QtBot, tmp_path: Path) -> None:
    """The starter: no draft, so at first nothing; once the probe shows n-gram types, N-gram is offered
    and the toggle must not keep saying 'no speculation here' beside it (seen in the installed app)."""
    starter = LaunchSettings(target="/m/t.gguf")
    s, t = _toggle(qtbot, tmp_path, None, profile=starter)
    assert t.status.text() == "no speculation here"
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    caps = EngineCaps(path=str(binary), generation=Generation.MAINLINE, spec_types=("draft-dflash", "ngram-mod"),
                      flags=frozenset({"--spec-type"}))
    s.switching.configure(starter, caps)
    assert t.isEnabled() and t.offered() == [Mode.BASELINE, Mode.MODEL_FREE] and t.status.text() == ""
    assert t.why_button.text() == "?"


def test_restart_until_the_engine_is_known_whatever_its_generation(qtbot: QtBot, tmp_path: Path) -> None:
    for generation in (Generation.BEE_A, Generation.BEE_B, Generation.MAINLINE):
        s, t = _toggle(qtbot, tmp_path, _caps(tmp_path, generation))
        assert s.switch.path() == RESTART and "until BeeDeck has checked" in t.toolTip()


def test_per_request_path_where_measured(qtbot: QtBot, tmp_path: Path) -> None:
    s, t = _toggle(qtbot, tmp_path, _caps(tmp_path, Generation.BEE_A), per_request=True)
    assert t.isEnabled() and s.switch.path() == PER_REQUEST
    assert s.switching.provider() == (Mode.DFLASH, {})
    with qtbot.waitSignal(s.switching.mode_changed) as blocker:
        t.baseline_button.click()
    assert blocker.args == [Mode.BASELINE]
    assert s.switching.provider() == (Mode.BASELINE, {"speculative.n_max": 0, "speculative.n_min": 0})
    assert "per request" in t.status.text() and "draft stays loaded" in t.status.text()


def test_restart_path(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.MAINLINE)
    s, t = _toggle(qtbot, tmp_path, caps, per_request=False)
    assert s.switch.path() == RESTART
    with qtbot.waitSignal(s.switching.restarting) as blocker:
        t.baseline_button.click()
    settings = blocker.args[0]
    assert settings.draft is None and settings.spec_mode == Mode.BASELINE
    assert settings.ctx_size == 8192 and settings.target == WITH_DRAFT.target  # same argv otherwise
    assert s.switch.pending is not None and not t.dflash_button.isEnabled()
    assert s.switch.mode == "dflash"  # unchanged until the restart finished
    with qtbot.waitSignal(s.switching.mode_changed):
        restart_done(s)
    assert s.switch.mode == "baseline" and s.switching.provider() == (Mode.BASELINE, {})  # no per-request field
    s.switching.configure(WITH_DRAFT, caps)  # the restarted server's caps arrive again: the mode stays
    assert s.switch.mode == "baseline" and t.baseline_button.isChecked() and s.switch.path() == RESTART
    assert "restarted the server without the draft in" in t.status.text()


def test_a_restart_says_in_advance_how_long_it_took_here_before(qtbot: QtBot, tmp_path: Path) -> None:
    """The issue: a 19 GB switch cost 11-12 s and the app showed nothing of it in advance. The toggle asks
    what such a switch took before (the server's learnt times, by whether the new mode loads the
    draft) and shows it beside the seconds so far, with a bar that never fills before the server is ready."""
    caps = _caps(tmp_path, Generation.MAINLINE)
    s, t = _toggle(qtbot, tmp_path, caps, per_request=False)
    asked: list[bool] = []
    # the server's learnt times: 4.2 s to a mode without the draft, 5.1 s to one with it
    s.server.expected_switch_s = (  # type: ignore[method-assign]
        lambda with_draft: asked.append(with_draft) or (4.2 if not with_draft else 5.1))
    with qtbot.waitSignal(s.switching.restarting):
        t.baseline_button.click()
    assert asked == [False] and t.progress.isVisibleTo(t)
    s.switch.began -= 8.0  # type: ignore[operator]  # the switch runs long: the bar stays short of full
    t._on_tick()
    assert "of about 4 s" in t.status.text() and t.progress.value() == 990
    restart_done(s)
    assert not t.progress.isVisibleTo(t)
    s.server.expected_switch_s = lambda with_draft: None  # type: ignore[method-assign]  # never measured
    with qtbot.waitSignal(s.switching.restarting):
        t.dflash_button.click()
    assert not t.progress.isVisibleTo(t)
    t._on_tick()
    assert "of about" not in t.status.text()


def test_restart_failure_restores_the_old_mode(qtbot: QtBot, tmp_path: Path) -> None:
    s, t = _toggle(qtbot, tmp_path, _caps(tmp_path, Generation.MAINLINE))
    t.baseline_button.click()
    restart_failed(s)
    assert s.switch.mode == "dflash" and t.dflash_button.isChecked() and t.baseline_button.isEnabled()


def test_settings_for_mode_keeps_everything_else() -> None:
    base = settings_for_mode(WITH_DRAFT, Mode.BASELINE)
    assert base.to_dict() | {"draft": WITH_DRAFT.draft, "spec_mode": "dflash"} == WITH_DRAFT.to_dict()
    assert settings_for_mode(WITH_DRAFT, Mode.DFLASH) == WITH_DRAFT


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


def _file_toggle(qtbot: QtBot, tmp_path: Path, profile: LaunchSettings,
                 caps: EngineCaps | None) -> tuple[Session, ModeToggle]:
    """The switch on real model files, their headers read (inline here)."""
    return _toggle(qtbot, tmp_path, caps, profile=profile)


def test_an_mtp_target_offers_mtp_and_says_why_the_draft_modes_cannot_run(qtbot: QtBot, tmp_path: Path) -> None:
    profile = LaunchSettings(target=str(_mtp_target(tmp_path)), ctx_size=8192, draft_n_max=4)
    s, t = _file_toggle(qtbot, tmp_path, profile, _real_caps("mainline"))
    assert t.isEnabled() and t.offered() == [Mode.BASELINE, Mode.MTP, Mode.MODEL_FREE] and s.switch.mode == "baseline"
    assert [t.button(k).text() for k in t.offered()] == ["Baseline", "MTP", "N-gram"]  # type: ignore[union-attr]
    assert "MTP heads" in t.button(Mode.MTP).toolTip() and "ngram-mod" in t.button(Mode.MODEL_FREE).toolTip()  # type: ignore[union-attr]
    assert t.button(Mode.DFLASH) is None and t.why_button.isVisibleTo(t)
    t.why_button.click()
    why = t.popover.text()
    assert "DFlash needs a small DFlash draft" in why and "EAGLE-3 needs" in why
    assert "nextn" not in why and "--" not in why and "spec-type" not in why  # no GGUF keys, no CLI flags
    assert "Baseline | MTP | N-gram: the mode of the next reply." in t.toolTip()
    with qtbot.waitSignal(s.switching.restarting) as blocker:
        assert s.request_mode(Mode.MTP) is True
    settings = blocker.args[0]
    assert settings.spec_mode == Mode.MTP and settings.draft is None
    assert settings.ctx_size == 8192 and settings.draft_n_max == 4  # nothing else changes
    assert s.switch.pending is not None and "restarting with the target's MTP heads" in t.status.text()
    assert s.request_mode(Mode.BASELINE) is False  # one switch at a time
    with qtbot.waitSignal(s.switching.mode_changed) as changed:
        restart_done(s)
    assert changed.args == [Mode.MTP] and s.switching.provider() == (Mode.MTP, {})
    assert "MTP: restarted the server with the target's MTP heads in" in t.status.text()
    assert s.switching.launch_settings(profile).spec_mode == Mode.MTP  # a later Start keeps the mode shown
    with qtbot.waitSignal(s.switching.restarting) as blocker:
        t.button(Mode.MODEL_FREE).click()  # type: ignore[union-attr]
    assert blocker.args[0].spec_mode == Mode.MODEL_FREE and blocker.args[0].spec_model_free_type == "ngram-mod"
    restart_done(s)
    assert "N-gram: restarted the server with N-gram speculation" in t.status.text()


def test_the_engine_decides_too(qtbot: QtBot, tmp_path: Path) -> None:
    # BeeLlama 0.1.2 has no MTP, and aborts with ngram-mod: the toggle offers what runs, with the type that runs.
    profile = LaunchSettings(target=str(_mtp_target(tmp_path)))
    s, t = _file_toggle(qtbot, tmp_path, profile, _real_caps("bee-a"))
    assert t.offered() == [Mode.BASELINE, Mode.MODEL_FREE]
    assert "• MTP: BeeLlama v0.1.2 has no MTP" in t.toolTip()
    assert "Your engine build cannot run MTP" in t.why_button.toolTip()
    with qtbot.waitSignal(s.switching.restarting) as blocker:
        s.request_mode(Mode.MODEL_FREE)
    assert blocker.args[0].spec_model_free_type == "ngram-simple"
    # Before the engine is probed, only the profile's own mode can run.
    s2, t2 = _file_toggle(qtbot, tmp_path, profile, None)
    assert t2.offered() == [Mode.BASELINE] and not t2.isEnabled()
    assert "has not probed the engine yet" in t2.toolTip()


def test_a_draft_of_another_kind_keeps_the_profiles_mode_visible_with_the_reason(qtbot: QtBot, tmp_path: Path) -> None:
    from tests.fixtures import meta_gguf as mg

    draft = mg.tiny_model(tmp_path / "eagle.gguf", arch="eagle3", n_embd=128, n_layer=1)
    target = mg.tiny_model(tmp_path / "t.gguf", n_embd=128)
    profile = LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH)
    s, t = _file_toggle(qtbot, tmp_path, profile, _real_caps("mainline"))
    assert t.offered() == [Mode.BASELINE, Mode.DFLASH, Mode.EAGLE3, Mode.MODEL_FREE]
    dflash = t.button(Mode.DFLASH)
    assert dflash is not None and not dflash.isEnabled() and dflash.isChecked()
    assert "eagle.gguf is an EAGLE-3 draft, so it cannot run as DFlash: use the EAGLE-3 mode for it" in dflash.toolTip()
    with qtbot.waitSignal(s.switching.restarting) as blocker:
        assert s.request_mode(Mode.EAGLE3)
    assert blocker.args[0].spec_mode == Mode.EAGLE3 and blocker.args[0].draft == str(draft)
    restart_done(s)
    assert s.switch.mode == "eagle3" and "EAGLE-3: restarted the server with the draft in" in t.status.text()




def test_on_the_starter_n_gram_is_offered_with_the_measured_reason_it_will_not_help(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue 37: N-gram was the starter's speculation mode and drafted nothing (0 draft tokens over 735);
    it stays offered, and its segment says what was measured."""
    from beedeck.core.starter import STARTER_MODEL_NAME, STARTER_NGRAM_NOTE, StarterProfile

    starter = StarterProfile(engine=tmp_path / "llama-server", model=tmp_path / STARTER_MODEL_NAME).settings()
    s, t = _toggle(qtbot, tmp_path, _real_caps("mainline"), profile=starter)
    assert "model-free" in t.offered()
    tip = t.button(Mode.MODEL_FREE).toolTip()  # type: ignore[union-attr]
    assert tip.startswith("<p>N-gram: ") and STARTER_NGRAM_NOTE in tip and "will not speed" in tip  # wrapped
    other = replace(starter, target=str(tmp_path / "qwen.gguf"))
    s.switching.configure(other, _real_caps("mainline"))
    assert STARTER_NGRAM_NOTE not in t.button(Mode.MODEL_FREE).toolTip()  # type: ignore[union-attr]  # another model


def _mean_colour(button: QToolButton) -> tuple[float, float, float]:
    img = button.grab().toImage()
    cs = [img.pixelColor(x, y) for x in range(3, img.width() - 3) for y in range(3, img.height() - 3)]
    return tuple(sum(getattr(c, part)() for c in cs) / len(cs) for part in ("red", "green", "blue"))  # type: ignore[return-value]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_checked_segment_stands_out_in_either_theme(qtbot: QtBot, tmp_path: Path, theme: str) -> None:
    """Issue 37: in the dark theme the checked segment looked unchecked (Fusion darkens a checked button's
    background, and the dark palette's is dark already: 81 against 87 of lightness)."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, theme)
    caps = replace(_caps(tmp_path, Generation.MAINLINE), spec_types=("ngram-mod",))
    _s, t = _toggle(qtbot, tmp_path, caps, profile=LaunchSettings(target="/m/t.gguf"))
    t.show()
    qtbot.waitExposed(t)
    on, off = t.button(Mode.BASELINE), t.button(Mode.MODEL_FREE)
    assert on is not None and off is not None and on.isChecked() and not off.isChecked()
    a, b = _mean_colour(on), _mean_colour(off)
    assert math.dist(a, b) >= 80, (theme, a, b)
