"""The launch form against the real --help texts: engine-aware enable rules, memory bar, copy command,
presets, pair verdict."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QStandardItemModel
from PySide6.QtWidgets import QComboBox, QLineEdit
from pytestqt.qtbot import QtBot

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import inspect
from beedeck.ui.launch import launch_presets
from beedeck.ui.launch.launch_fields import FIELDS, cache_type_reason, field_reason
from beedeck.ui.launch.launch_form import LaunchForm
from tests.fakes.inline_runner import run_inline as sync
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout

GiB = 1 << 30


def bee_caps() -> EngineCaps:
    return caps_from_texts("/opt/bee/llama-server", "version: 1 (ba1fdce)\nbuilt with cc", help_stdout(BEE_A))


def ml_caps() -> EngineCaps:
    return caps_from_texts("/opt/ml/llama-server", "version: 11434 (515e85511)\nbuilt with cc",
                           help_stdout(MAINLINE))


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("models")
    t = mg.qwen36_27b(d / "Qwen3.6-27B-Q5_K_S.gguf")
    dr = mg.dflash_draft(d / "Qwen3.6-27B-DFlash-Q4_K_M.gguf", "dflash-draft", 5120, [1, 16, 31, 46, 61], 1000)
    return str(t), str(dr)


@pytest.fixture(scope="module")
def m(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A small target and its (upstream-format) DFlash draft: the preflight judges real files, so a form
    with a path that does not exist greys Launch (the issue's /nonexistent/model.gguf)."""
    d = tmp_path_factory.mktemp("small")
    t = mg.tiny_model(d / "t.gguf", "qwen35", 1000, "", 8, 128)  # head size 32: every cache type fits
    dr = mg.dflash_draft(d / "d.gguf", "dflash", 128, (1, 3, 6), 1000, n_layer=2, n_head=4, n_kv=2, hd=32,
                         n_ff=256, qtype=mg.Q.F32)
    return SimpleNamespace(t=str(t), d=str(dr))


def make_form(qtbot: QtBot, caps: EngineCaps | None, settings: LaunchSettings | None = None) -> LaunchForm:
    form = LaunchForm(runner=sync)
    qtbot.addWidget(form)
    form.set_engine(caps, caps.path if caps else None)
    if settings is not None:
        form.set_settings(settings)
    return form


def combo_item(combo: QComboBox, text: str) -> Any:
    model = combo.model()
    assert isinstance(model, QStandardItemModel)
    return model.item(combo.findText(text))


def test_gen_a_enables_cross_ctx_and_turbo_types(qtbot: QtBot) -> None:
    form = make_form(qtbot, bee_caps(), LaunchSettings(target="t.gguf", draft="d.gguf",
                                                       spec_mode=Mode.DFLASH, dflash_cross_ctx=1024))
    assert form.widgets["dflash_cross_ctx"].isEnabled()
    ctk = form.widgets["cache_type_k"]
    assert isinstance(ctk, QComboBox)
    for t in ("turbo4", "turbo3_tcq", "turbo2"):
        assert combo_item(ctk, t).isEnabled(), t
    assert not combo_item(ctk, "kvarn4").isEnabled()
    assert "BeeLlama 0.4+" in combo_item(ctk, "kvarn4").toolTip()
    assert form.reason_disabled("dflash_cross_ctx") is None


def test_mainline_disables_bee_only_options_with_reasons(qtbot: QtBot) -> None:
    form = make_form(qtbot, ml_caps(), LaunchSettings(target="t.gguf", draft="d.gguf", spec_mode=Mode.DFLASH))
    cross = form.widgets["dflash_cross_ctx"]
    assert not cross.isEnabled()
    assert "--spec-dflash-cross-ctx exists only in BeeLlama 0.1-0.3" in cross.toolTip()
    ctk = form.widgets["cache_type_k"]
    assert isinstance(ctk, QComboBox)
    turbo = combo_item(ctk, "turbo4")
    assert not turbo.isEnabled() and "TurboQuant" in turbo.toolTip() and "BeeLlama 0.1-0.3" in turbo.toolTip()
    assert combo_item(ctk, "q8_0").isEnabled()
    # mainline spells mmap/mlock as --load-mode: still supported
    assert form.widgets["mmap"].isEnabled() and form.widgets["mlock"].isEnabled()
    # the BeeLlama turbo presets are offered but disabled, with the reason
    item = combo_item(form.preset_combo, "BeeLlama: precision")
    assert not item.isEnabled() and "TurboQuant" in item.toolTip()


def test_state_rules_follow_speculation_mode(qtbot: QtBot) -> None:
    form = make_form(qtbot, bee_caps(), LaunchSettings(target="t.gguf"))
    assert not form.widgets["draft"].isEnabled()
    assert not form.widgets["spec_model_free_type"].isEnabled()
    mode = form.widgets["spec_mode"]
    assert isinstance(mode, QComboBox)
    mode.setCurrentText("N-gram")
    assert form.widgets["spec_model_free_type"].isEnabled() and not form.widgets["draft"].isEnabled()
    assert form.settings().spec_mode == Mode.MODEL_FREE


def test_field_rules_are_pure_and_cover_the_fixtures() -> None:
    bee, ml = bee_caps(), ml_caps()
    assert field_reason("dflash_cross_ctx", None) is None  # no engine picked: allow, build_argv checks later
    assert field_reason("spec_mode:dflash", bee) is None and field_reason("spec_mode:dflash", ml) is None
    no_spec = caps_from_texts("/x/old", "", "-m, --model FNAME   model path\n--port PORT   port\n")
    why = field_reason("spec_mode:dflash", no_spec)
    assert why is not None and "no --spec-type" in why
    assert cache_type_reason("q8_0", ml) is None
    assert cache_type_reason("turbo3_tcq", ml) is not None
    names = {f.name for f in FIELDS} | {"rpc_workers"}  # the worker list is its own widget (rpc_workers.py)
    assert names == set(LaunchSettings.__dataclass_fields__), "every LaunchSettings field has a form row"
    assert all(f.tooltip and f.label for f in FIELDS)


def test_memory_bar_turns_red_when_context_passes_the_vram(qtbot: QtBot, qwen: tuple[str, str]) -> None:
    target, draft = qwen
    form = make_form(qtbot, bee_caps(), LaunchSettings.guide_dflash(target, draft))
    form.set_devices([int(23.5 * GiB)])
    with qtbot.waitSignal(form.memory_bar.plan_changed, timeout=2000):
        pass  # the debounce timer fires
    assert form.memory_bar.plan is not None and form.memory_bar.state == "ok"
    s = form.settings()
    s.ctx_size = 262144
    with qtbot.waitSignal(form.memory_bar.fits_changed, timeout=2000) as blocker:
        form.set_settings(s)
    assert blocker.args == [False]
    assert form.memory_bar.state == "over"
    text = form.memory_bar.summary.text()
    assert "runs out of memory" in text and "Lower the context" in text


def test_memory_bar_debounces_bursts(qtbot: QtBot, qwen: tuple[str, str]) -> None:
    target, _ = qwen
    form = make_form(qtbot, ml_caps(), LaunchSettings.guide_baseline(target))
    form.set_devices([24 * GiB])
    calls: list[Any] = []
    form.memory_bar.plan_changed.connect(calls.append)
    spin = form.widgets["ctx_size"]
    with qtbot.waitSignal(form.memory_bar.plan_changed, timeout=2000):
        for ctx in range(8192, 65536, 8192):
            spin.setValue(ctx)  # type: ignore[attr-defined]
    qtbot.wait(150)
    assert len(calls) == 1
    assert calls[0].n_ctx_seq >= 57344


def test_copy_command_equals_build_argv(qtbot: QtBot, qwen: tuple[str, str]) -> None:
    target, draft = qwen
    caps = bee_caps()
    s = LaunchSettings.guide_dflash(target, draft)
    form = make_form(qtbot, caps, s)
    with qtbot.waitSignal(form.command_copied, timeout=1000) as blocker:
        form.copy_button.click()
    # Port 0 (the profile's "BeeDeck's default") is copied as the port the app uses, never as --port 0.
    expected = shlex.join([caps.path, *build_argv(replace(form.settings(), port=DEFAULT_PORT), caps).argv])
    assert blocker.args == [expected]
    assert f"--port {DEFAULT_PORT}" in expected and "--port 0" not in expected
    assert QGuiApplication.clipboard().text() == expected
    assert form.settings() == s


def test_copy_masks_the_api_key(qtbot: QtBot, m: SimpleNamespace) -> None:
    caps = ml_caps()
    form = make_form(qtbot, caps, LaunchSettings(target=m.t, api_key="sk-live-123"))
    assert form.settings().api_key == "sk-live-123"
    line = form.command_line()
    assert line is not None and "sk-live-123" not in line and "--api-key '********'" in line


def test_refused_settings_disable_launch_and_say_why(qtbot: QtBot, m: SimpleNamespace) -> None:
    form = make_form(qtbot, ml_caps(), LaunchSettings(target=m.t, cache_type_k="turbo4"))
    assert not form.launch_button.isEnabled() and not form.copy_button.isEnabled()
    assert "TurboQuant" in form.check_label.text()
    ctk = form.widgets["cache_type_k"]
    assert isinstance(ctk, QComboBox)
    ctk.setCurrentText("q8_0")
    assert form.launch_button.isEnabled()
    with qtbot.waitSignal(form.launch_requested, timeout=1000) as blocker:
        form.launch_button.click()
    assert blocker.args[0].cache_type_k == "q8_0"


def test_user_presets_round_trip_without_the_key(qtbot: QtBot, beedeck_home: Path) -> None:
    s = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, ctx_size=65536,
                       cache_type_k="q8_0", cache_type_v="q8_0", temp=0.3, top_k=None, extra_args=["--seed", "7"],
                       api_key="sk-secret")
    form = make_form(qtbot, ml_caps(), s)
    path = form.save_preset("My fast setup")
    assert path.parent == beedeck_home / "config" / "presets"
    assert "sk-secret" not in path.read_text()
    assert json.loads(path.read_text())["name"] == "My fast setup"
    other = make_form(qtbot, ml_caps(), LaunchSettings(target="/other.gguf"))
    assert other.preset_combo.findText("★ My fast setup") > 0
    other.apply_preset("My fast setup")
    back = other.settings()
    s.api_key = None
    assert back == s


def test_guide_presets_keep_the_models(qtbot: QtBot) -> None:
    form = make_form(qtbot, bee_caps(), LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", port=8080))
    form.apply_preset("Guide: DFlash")
    expected = LaunchSettings.guide_dflash("/m/t.gguf", "/m/d.gguf")
    expected.port = 8080  # the network settings stay as they were
    assert form.settings() == expected
    form.apply_preset("BeeLlama: speed / VRAM")
    got = form.settings()
    assert (got.cache_type_k, got.cache_type_v, got.target) == ("turbo3_tcq", "turbo2_tcq", "/m/t.gguf")
    assert launch_presets.load_presets() == {}


def test_pair_verdict_next_to_the_draft(qtbot: QtBot, tmp_path: Path) -> None:
    t = mg.tiny_model(tmp_path / "t.gguf", "qwen35", 1000, "", 8, 64)
    fork = mg.dflash_draft(tmp_path / "fork.gguf", "dflash-draft", 64, (1, 3, 6), 1000, n_layer=2, n_head=4,
                           n_kv=2, hd=16, n_ff=128, qtype=mg.Q.F32)
    form = make_form(qtbot, ml_caps(), LaunchSettings(target=str(t), draft=str(fork), spec_mode=Mode.DFLASH))
    assert form.pair_label.text().startswith("✗")
    assert inspect(fork).dflash is not None
    form.set_engine(bee_caps())
    assert not form.pair_label.text().startswith("✗"), form.pair_label.text()


def replace_text(qtbot: QtBot, edit: QLineEdit, text: str) -> None:
    """Type ``text`` over the field's content, as a user does (textEdited fires)."""
    qtbot.keyClick(edit, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClick(edit, Qt.Key.Key_Backspace)
    qtbot.keyClicks(edit, text)


def test_a_greyed_launch_always_says_every_reason_and_follows_each_fix(qtbot: QtBot, m: SimpleNamespace) -> None:
    """Issue: once a check had passed with nothing to note, the reasons label stayed hidden for good,
    so choosing DFlash without a draft (or a bad extra argument) greyed Launch out with no reason."""
    form = make_form(qtbot, ml_caps(), LaunchSettings(target=m.t))
    label, draft, extra = form.check_label, form.widgets["draft"], form.widgets["extra_args"]
    assert isinstance(draft, QLineEdit) and isinstance(extra, QLineEdit)
    assert form.launch_button.isEnabled() and label.isHidden()  # launchable, nothing to note
    mode = form.widgets["spec_mode"]
    assert isinstance(mode, QComboBox)
    mode.setCurrentText("DFlash")
    assert not form.launch_button.isEnabled() and not form.copy_button.isEnabled()
    assert not label.isHidden() and "DFlash needs a draft model" in label.text()
    assert "DFlash needs a draft model" in form.launch_button.toolTip()
    replace_text(qtbot, extra, "--no-such-flag 3")
    assert "DFlash needs a draft model" in label.text() and "--no-such-flag is not an option" in label.text()
    replace_text(qtbot, draft, m.d)
    assert not label.isHidden() and not form.launch_button.isEnabled()
    assert "DFlash needs" not in label.text() and "--no-such-flag" in label.text()
    replace_text(qtbot, extra, "--alias 'my model")  # an open quote is a reason too, not a silent split
    assert not form.launch_button.isEnabled() and "Close the quote" in label.text()
    under = form.under["extra_args"]  # under the field it is about, wrapped, as well as in the summary
    assert not under.isHidden() and under.wordWrap() and "Close the quote" in under.text()
    assert form.under["target"].isHidden() and form.under["target"].text() == ""
    replace_text(qtbot, extra, "--alias 'my model'")
    assert form.launch_button.isEnabled() and "Cannot launch" not in label.text()
    assert form.settings().extra_args == ["--alias", "my model"]
    mode.setCurrentText("Baseline")
    replace_text(qtbot, draft, "")
    assert form.launch_button.isEnabled()
    replace_text(qtbot, form.widgets["target"], "")  # type: ignore[arg-type]
    assert not label.isHidden() and "No target model is set" in label.text()


def test_without_an_engine_launch_says_what_the_engine_is_doing(qtbot: QtBot, m: SimpleNamespace) -> None:
    form = make_form(qtbot, None, LaunchSettings(target=m.t))
    assert not form.launch_button.isEnabled() and "No engine is picked" in form.check_label.text()
    form.set_engine(None, "/opt/x/llama-server", "Checking the engine (llama-server --help)…")
    assert "Checking the engine" in form.check_label.text() and not form.check_label.isHidden()
    form.set_engine(ml_caps())
    assert form.launch_button.isEnabled()


def test_a_model_free_type_that_crashes_the_engine_is_kept_and_named(qtbot: QtBot, m: SimpleNamespace) -> None:
    """BeeLlama 0.1-0.3 aborts with ngram-mod: the form keeps the profile's type (no silent rewrite) and
    Launch says why (the known-issue table's row, as a launch says it) until the user picks another."""
    s = LaunchSettings(target=m.t, spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-mod")
    form = make_form(qtbot, bee_caps(), s)
    assert form.settings() == s
    assert not form.launch_button.isEnabled() and "ngram-mod" in form.check_label.text()
    assert "aborts on the first sampled reply" in form.check_label.text()
    kind = form.widgets["spec_model_free_type"]
    assert isinstance(kind, QComboBox) and not combo_item(kind, "ngram-mod").isEnabled()
    kind.setCurrentText("copyspec")
    assert form.launch_button.isEnabled(), form.check_label.text()


# ------------------------------------------------------------------ every speculation mode


def test_the_form_offers_what_the_engine_and_the_files_run(qtbot: QtBot, tmp_path: Path) -> None:
    mtp = mg.tiny_model(tmp_path / "qwen-mtp.gguf", "qwen35", 1000, n_embd=128,
                        extra={"qwen35.nextn_predict_layers": 1})
    form = make_form(qtbot, ml_caps(), LaunchSettings(target=str(mtp)))
    assert form.modes_label.text() == "Runs here: Baseline · MTP · N-gram"  # the toggle's names (issue 37)
    assert "N-gram runs as --spec-type ngram-mod on this engine." in form.modes_label.toolTip()
    assert "• DFlash: No DFlash draft model is configured" in form.modes_label.toolTip()
    mode = form.widgets["spec_mode"]
    assert isinstance(mode, QComboBox)
    assert [mode.itemText(i) for i in range(mode.count())] == ["Baseline", "DFlash", "EAGLE-3", "DSpark", "MTP", "N-gram"]
    mode.setCurrentText("MTP")
    assert form.launch_button.isEnabled(), form.check_label.text()
    # the draft field takes an mtp- head file in MTP mode (for a target without heads); its size fields do not
    assert form.widgets["draft"].isEnabled() and form.widgets["draft_n_max"].isEnabled()
    assert not form.widgets["draft_n_gpu_layers"].isEnabled()
    line = form.command_line()
    assert line is not None and "--spec-type draft-mtp" in line and "--spec-draft-model" not in line
    # A target without MTP heads: Launch says so, naming the file.
    replace_text(qtbot, form.widgets["target"], str(mg.tiny_model(tmp_path / "plain.gguf", n_embd=128)))  # type: ignore[arg-type]
    assert not form.launch_button.isEnabled()
    assert "plain.gguf has no MTP heads" in form.check_label.text()
    assert form.modes_label.text() == "Runs here: Baseline · N-gram"


def test_modes_the_engine_lacks_are_greyed_with_the_reason(qtbot: QtBot, m: SimpleNamespace) -> None:
    form = make_form(qtbot, bee_caps(), LaunchSettings(target=m.t))
    mode = form.widgets["spec_mode"]
    assert isinstance(mode, QComboBox)
    for label in ("EAGLE-3", "DSpark", "MTP"):  # the combo shows each mode's one name
        item = combo_item(mode, label)
        assert not item.isEnabled() and f"has no {label}" in item.toolTip() and "0.4 or newer" in item.toolTip()
    assert combo_item(mode, "DFlash").isEnabled() and combo_item(mode, "N-gram").isEnabled()
    assert form.modes_label.text() == "Runs here: Baseline · N-gram"
    assert "as --spec-type ngram-simple" in form.modes_label.toolTip()  # ngram-mod aborts BeeLlama 0.1


def test_the_drafts_kind_decides_its_mode(qtbot: QtBot, tmp_path: Path) -> None:
    t = mg.tiny_model(tmp_path / "t.gguf", "qwen35", 1000, "", 8, 64)
    eagle = mg.tiny_model(tmp_path / "eagle.gguf", "eagle3", 1000, n_layer=1, n_embd=64)
    form = make_form(qtbot, ml_caps(), LaunchSettings(target=str(t), draft=str(eagle), spec_mode=Mode.DFLASH))
    assert form.pair_label.text() == ("✗ eagle.gguf is an EAGLE-3 draft, so it cannot run as DFlash: use the EAGLE-3 "
                                      "mode for it.")
    assert not form.launch_button.isEnabled() and "use the EAGLE-3 mode for it" in form.check_label.text()
    assert form.modes_label.text() == "Runs here: Baseline · EAGLE-3 · N-gram"
    mode = form.widgets["spec_mode"]
    assert isinstance(mode, QComboBox)
    mode.setCurrentText("EAGLE-3")
    assert form.pair_label.text() == "✓ An EAGLE-3 draft." and form.launch_button.isEnabled()
    assert form.widgets["draft"].isEnabled() and not form.widgets["dflash_cross_ctx"].isEnabled()
    line = form.command_line()
    assert line is not None and f"--spec-draft-model {eagle} --spec-type draft-eagle3" in line
