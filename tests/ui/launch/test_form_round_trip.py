"""Every LaunchSettings value reads back from the form unchanged: opening Settings and pressing Launch
without touching anything must launch exactly the profile (issue: the starter's ``-t 1`` read back as
"engine default", and the restarted server ran on 2 threads at 31.9 tok/s instead of 76-86)."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import DEFAULT_PORT, RANGES, LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.starter import StarterProfile
from beedeck.ui.launch.launch_form import LaunchForm
from beedeck.ui.launch.settings_dialog import SettingsDialog
from tests.fakes.inline_runner import run_inline as sync
from tests.ui.launch.test_launch_form import bee_caps, ml_caps

# A non-default value in every field (threads=1 and the lowest real values included).
EVERYTHING = LaunchSettings(
    target="/m/target.gguf", draft="/m/draft.gguf", spec_mode=Mode.DFLASH, spec_model_free_type="ngram-simple",
    draft_n_max=0, draft_n_min=0, dflash_cross_ctx=1, draft_ctx_size=0, draft_ubatch_size=1, draft_cache_type="kvarn4", ctx_size=0,
    n_gpu_layers="12",
    draft_n_gpu_layers="auto", threads=1, batch_size=1, ubatch_size=1, cache_type_k="q8_0", cache_type_v="q4_0",
    flash_attn="on", parallel=3, kv_unified=False, mmap=False, mlock=True, no_host=True, cache_ram=-1, cache_reuse=512, temp=0.0,
    top_k=0, top_p=0.95, min_p=0.025, repeat_penalty=1.15, dry_multiplier=0.5, reasoning="off", jinja=False, chat_template="chatml", host="0.0.0.0",
    port=8478, api_key="sk-test", metrics=False, extra_args=["--seed", "7", "--alias", "my model"],
    ctx_is_total=True, rpc_workers=["127.0.0.1:50052", "192.168.1.21:50052"],
)


def at_edge(index: int) -> LaunchSettings:
    """EVERYTHING with every ranged number at its lowest (0) or highest (1) allowed value."""
    return replace(EVERYTHING, **{name: RANGES[name][index] for name in RANGES})


def starter() -> LaunchSettings:
    return StarterProfile(Path("/opt/starter/llama-server"), Path("/m/gemma.gguf")).settings(threads=1)


CASES = {"everything": EVERYTHING, "lowest": at_edge(0), "highest": at_edge(1), "defaults": LaunchSettings(),
         "starter": starter(), "guide": LaunchSettings.guide_dflash("/m/t.gguf", "/m/d.gguf")}


def test_the_cases_are_valid_and_cover_every_field() -> None:
    for name, s in CASES.items():
        assert s.check() == [], name
    default = LaunchSettings()
    unchanged = [f.name for f in fields(LaunchSettings) if getattr(EVERYTHING, f.name) == getattr(default, f.name)]
    assert unchanged == [], "EVERYTHING must change every field"


@pytest.mark.parametrize("caps", [None, ml_caps(), bee_caps()], ids=["no-engine", "mainline", "beellama"])
@pytest.mark.parametrize("case", list(CASES))
def test_settings_read_back_unchanged(qtbot: QtBot, case: str, caps: EngineCaps | None) -> None:
    s = CASES[case]
    form = LaunchForm(runner=sync)
    qtbot.addWidget(form)
    form.set_engine(caps, caps.path if caps else None)
    form.set_settings(s)
    assert form.settings() == s
    form.set_engine(caps, caps.path if caps else None)  # the Settings dialog's order: settings, then engine
    assert form.settings() == s


def test_threads_1_is_a_value_and_engine_default_is_its_own_state(qtbot: QtBot) -> None:
    form = LaunchForm(runner=sync)
    qtbot.addWidget(form)
    form.set_settings(LaunchSettings(target="/m/t.gguf", threads=1))
    spin = form.widgets["threads"]
    assert spin.text() == "1"  # type: ignore[attr-defined]
    form.set_settings(LaunchSettings(target="/m/t.gguf", threads=None))
    assert spin.text() == "engine default" and form.settings().threads is None  # type: ignore[attr-defined]
    spin.stepUp()  # type: ignore[attr-defined]
    assert form.settings().threads == 1


def test_settings_dialog_launch_unchanged_launches_the_profile(qtbot: QtBot, starter_model_path: Path) -> None:
    """The issue's steps: open Settings on the starter profile and press Launch without touching anything
    (the real starter model: the preflight judges the file)."""
    settings = StarterProfile(Path("/opt/starter/llama-server"), starter_model_path).settings(threads=1)
    profile = Profile("/opt/starter/llama-server", settings, "starter (CPU)")
    dialog = SettingsDialog(profile, ml_caps(), probe=lambda p: pytest.fail(f"no probe expected ({p})"),
                            detect=HardwareReport, runner=sync)
    qtbot.addWidget(dialog)
    assert dialog.form.launch_button.isEnabled(), dialog.form.check_label.text()
    with qtbot.waitSignal(dialog.profile_applied, timeout=1000) as blocker:
        dialog.form.launch_button.click()
    launched = blocker.args[0]
    assert launched.settings == profile.settings and launched.settings.threads == 1


def test_the_port_field_shows_the_default_port(qtbot: QtBot) -> None:
    form = LaunchForm(runner=sync)
    qtbot.addWidget(form)
    form.set_settings(LaunchSettings(target="/m/t.gguf"))
    port = form.widgets["port"]
    assert port.text() == f"{DEFAULT_PORT} (default)" and form.settings().port == 0  # type: ignore[attr-defined]
    form.set_settings(LaunchSettings(target="/m/t.gguf", port=DEFAULT_PORT + 1))
    assert port.text() == str(DEFAULT_PORT + 1)  # type: ignore[attr-defined]
