"""Baseline | DFlash: disabled without a draft, per-request override on BeeLlama, restart on mainline."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.engine.modes import PER_REQUEST, RESTART, settings_for_mode
from beedeck.ui.engine.mode_toggle import ModeToggle

WITH_DRAFT = LaunchSettings(target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=SpecMode.DFLASH, ctx_size=8192)
BEE = EngineCaps(path="/e/bee", generation=Generation.BEE_B, spec_types=("draft-dflash",))
MAINLINE = EngineCaps(path="/e/ml", generation=Generation.MAINLINE, spec_types=("draft-dflash",))


def test_disabled_without_a_draft(qtbot: QtBot) -> None:
    t = ModeToggle()
    qtbot.addWidget(t)
    t.configure(LaunchSettings(target="/m/t.gguf"), MAINLINE)
    assert not t.isEnabled()
    assert "No DFlash draft" in t.toolTip()
    assert t.provider() == ("baseline", {})


def test_per_request_path_on_beellama(qtbot: QtBot) -> None:
    t = ModeToggle()
    qtbot.addWidget(t)
    t.configure(WITH_DRAFT, BEE)
    assert t.isEnabled() and t.path() == PER_REQUEST
    assert t.provider() == ("dflash", {})
    with qtbot.waitSignal(t.mode_changed) as blocker:
        t.baseline_button.click()
    assert blocker.args == ["baseline"]
    assert t.provider() == ("baseline", {"speculative.n_max": 0})
    assert "per request" in t.status.text()


def test_restart_path_on_mainline(qtbot: QtBot) -> None:
    t = ModeToggle()
    qtbot.addWidget(t)
    t.configure(WITH_DRAFT, MAINLINE)
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
    assert t.mode() == "baseline" and t.provider() == ("baseline", {})  # no per-request field on mainline
    t.configure(WITH_DRAFT, MAINLINE)  # the restarted server's caps arrive again: the mode stays
    assert t.mode() == "baseline" and t.baseline_button.isChecked()
    assert "restarted the server without the draft in" in t.status.text()


def test_restart_failure_restores_the_old_mode(qtbot: QtBot) -> None:
    t = ModeToggle()
    qtbot.addWidget(t)
    t.configure(WITH_DRAFT, MAINLINE)
    t.baseline_button.click()
    t.restart_failed()
    assert t.mode() == "dflash" and t.dflash_button.isChecked() and t.baseline_button.isEnabled()


def test_settings_for_mode_keeps_everything_else() -> None:
    base = settings_for_mode(WITH_DRAFT, "baseline")
    assert base.to_dict() | {"draft": WITH_DRAFT.draft, "spec_mode": "dflash"} == WITH_DRAFT.to_dict()
    assert settings_for_mode(WITH_DRAFT, "dflash") == WITH_DRAFT
