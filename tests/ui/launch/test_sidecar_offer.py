"""The launch form's sidecar offer, on real synthetic GGUFs in a folder: picking a target with an empty
draft field fills in the best draft next to it with its mode (a note, undoable), says why the others are
not used, and leaves a loaded profile's (or a user's) draft alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLineEdit
from pytestqt.qtbot import QtBot

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.ui.launch.launch_form import LaunchForm
from tests.core.models import sidecar_files as sf
from tests.fakes.inline_runner import run_inline as sync
from tests.fixtures import synth_mtp as sm
from tests.ui.launch.test_launch_form import bee_caps, ml_caps


@pytest.fixture(scope="module")
def shelf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("offer")
    a = root / "Synth-GGUF"
    a.mkdir()
    t = sf.target(a, "Synth-Q4_K_M.gguf")
    sf.dflash(a, "dflash-Synth-Q4_K_M.gguf", t)
    sf.dflash(a, "dflash-Synth-legacy-Q4_K_M.gguf", t, fmt="bee")
    q = root / "Qwen-GGUF"
    q.mkdir()
    raw = sm.write_mtp_target(root / "raw.gguf", sticky=True, mtp=False)
    sf.rewrite(raw, q / "Qwen-Q4_K_M.gguf", kv={"general.file_type": sf.Q4_K_M})
    sf.mtp_head(q, "mtp-Qwen-Q4_K_M.gguf")
    return root


def _form(qtbot: QtBot, caps: object = None) -> LaunchForm:
    form = LaunchForm(runner=sync)
    qtbot.addWidget(form)
    form.set_engine(caps or ml_caps(), "/e/llama-server")  # type: ignore[arg-type]
    return form


def _pick_target(form: LaunchForm, path: Path) -> None:
    edit = form.widgets["target"]
    assert isinstance(edit, QLineEdit)
    edit.setText(str(path))
    edit.textEdited.emit(str(path))  # as typing or the … button do


def test_picking_a_target_fills_in_its_draft_says_why_not_the_other_and_undoes(qtbot: QtBot, shelf: Path) -> None:
    form = _form(qtbot)
    offer = form.sidecar_offer
    _pick_target(form, shelf / "Synth-GGUF" / "Synth-Q4_K_M.gguf")
    s = form.settings()
    assert s.draft == str(shelf / "Synth-GGUF" / "dflash-Synth-Q4_K_M.gguf") and s.spec_mode == Mode.DFLASH
    assert "Found dflash-Synth-Q4_K_M.gguf next to the model: filled in as the DFlash draft" in offer.note.text()
    assert not offer.isHidden() and not offer.undo_button.isHidden()
    assert "dflash-Synth-legacy-Q4_K_M.gguf: " in offer.note.toolTip()  # why the fork-format file is not used
    assert "dflash-draft" in offer.note.toolTip()
    offer.undo_button.click()
    s = form.settings()
    assert not s.draft and s.spec_mode == Mode.BASELINE and offer.undo_button.isHidden()
    assert "no longer the draft" in offer.note.text()


def test_an_mtp_head_is_offered_in_mtp_mode_on_mainline_and_refused_on_beellama_0_1(qtbot: QtBot,
                                                                                  shelf: Path) -> None:
    form = _form(qtbot)
    _pick_target(form, shelf / "Qwen-GGUF" / "Qwen-Q4_K_M.gguf")
    s = form.settings()
    assert s.draft == str(shelf / "Qwen-GGUF" / "mtp-Qwen-Q4_K_M.gguf") and s.spec_mode == Mode.MTP
    assert form.widgets["draft"].isEnabled()  # MTP mode takes a head file as its draft
    assert "--spec-draft-model" in form.build_plan().argv
    old = _form(qtbot, bee_caps())
    _pick_target(old, shelf / "Qwen-GGUF" / "Qwen-Q4_K_M.gguf")
    assert not old.settings().draft and "none that this engine runs" in old.sidecar_offer.note.text()


def test_a_loaded_profile_or_a_chosen_draft_is_left_alone(qtbot: QtBot, shelf: Path) -> None:
    form = _form(qtbot)
    form.set_settings(LaunchSettings(target=str(shelf / "Synth-GGUF" / "Synth-Q4_K_M.gguf")))
    assert not form.settings().draft and form.sidecar_offer.isHidden()
    form = _form(qtbot)
    form.set_settings(LaunchSettings(draft="/m/mine.gguf", spec_mode=Mode.DFLASH))
    _pick_target(form, shelf / "Synth-GGUF" / "Synth-Q4_K_M.gguf")
    assert form.settings().draft == "/m/mine.gguf" and form.sidecar_offer.isHidden()


def test_a_text_file_renamed_gguf_picked_in_the_field_gets_no_draft_lookup(qtbot: QtBot, tmp_path: Path) -> None:
    """The issue: a text file renamed .gguf, picked in the target field, said "BeeDeck could not look for drafts
    next to fake.gguf". The header is read first (off the GUI thread): no GGUF, no lookup; the preflight's
    refusal (not a GGUF model, and the remedy) is what the form says."""
    fake = tmp_path / "fake.gguf"
    fake.write_text("this is a text file\n")
    sf.dflash(tmp_path, "dflash-fake.gguf", sf.target(tmp_path, "real.gguf"))  # a draft the lookup would find
    jobs: list[tuple[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]]] = []

    def later(fn: Callable[[], Any], ok: Callable[[Any], None], err: Callable[[BaseException], None]) -> None:
        jobs.append((fn, ok, err))

    form = LaunchForm(runner=later)
    qtbot.addWidget(form)
    form.set_engine(ml_caps(), "/e/llama-server")
    jobs.clear()  # the engine's build options: not this test's business
    _pick_target(form, fake)
    assert len(jobs) == 1  # the header read alone: no lookup while the header is not known
    fn, ok, err = jobs.pop()
    try:
        ok(fn())
    except Exception as exc:
        err(exc)
    assert jobs == [] and form.sidecar_offer.isHidden() and form.sidecar_offer.note.text() == ""
    assert "could not look for drafts" not in form.check_label.text()
    assert "fake.gguf is not a GGUF model BeeDeck can read" in form.check_label.text()
    assert "not a renamed file" in form.check_label.text() and not form.launch_button.isEnabled()


def test_a_real_target_is_looked_next_to_once_its_header_is_read(qtbot: QtBot, shelf: Path) -> None:
    jobs: list[tuple[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]]] = []
    form = LaunchForm(runner=lambda fn, ok, err: jobs.append((fn, ok, err)))
    qtbot.addWidget(form)
    form.set_engine(ml_caps(), "/e/llama-server")
    jobs.clear()
    _pick_target(form, shelf / "Synth-GGUF" / "Synth-Q4_K_M.gguf")
    assert len(jobs) == 1  # the header first
    while jobs:
        fn, ok, _ = jobs.pop(0)
        ok(fn())
    assert form.settings().draft == str(shelf / "Synth-GGUF" / "dflash-Synth-Q4_K_M.gguf")
