"""The Settings dialog: Cancel (Esc) changes nothing, Save saves without a restart, Launch saves and
restarts; it fits a 1366x768 screen with its buttons on screen; while the engine is probed (or the
probe failed) Launch says so."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QDialog, QPushButton, QSpinBox, QWidget
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.server_state import ServerState
from beedeck.core.machine.report import HardwareReport, SystemInfo
from beedeck.core.profile import Profile
from beedeck.core.serving import Serving
from beedeck.core.settings import AppSettings
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.launch import settings_dialog
from beedeck.ui.launch.settings_dialog import SettingsDialog
from beedeck.ui.screen_fit import FRAME_H
from beedeck.ui.session import Session
from tests.fakes.inline_runner import run_inline as sync
from tests.ui.launch.test_launch_form import ml_caps

ENGINE = "/opt/ml/llama-server"


@pytest.fixture(autouse=True)
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real (tiny) GGUF as the profiles' target: Save now needs a profile that can launch, as Launch does."""
    from tests.fixtures import meta_gguf as mg

    global TARGET
    TARGET = str(mg.tiny_model(tmp_path_factory.mktemp("m") / "t.gguf"))
    return TARGET


TARGET = ""


def no_probe(path: str) -> EngineCaps:
    pytest.fail(f"no probe expected here ({path})")


def make_dialog(qtbot: QtBot, profile: Profile | None = None, caps: EngineCaps | None = None,
                **kw: Any) -> SettingsDialog:
    profile = profile or Profile(ENGINE, LaunchSettings(target=TARGET, threads=1), "mainline")
    kw.setdefault("probe", no_probe)
    kw.setdefault("runner", sync)
    kw.setdefault("detect", HardwareReport)
    dialog = SettingsDialog(profile, caps or ml_caps(), **kw)
    qtbot.addWidget(dialog)
    return dialog


def set_threads(dialog: SettingsDialog, n: int) -> None:
    spin = dialog.form.widgets["threads"]
    assert isinstance(spin, QSpinBox)
    spin.setValue(n)


def test_cancel_and_escape_change_nothing(qtbot: QtBot) -> None:
    for close in ("cancel", "escape"):
        dialog = make_dialog(qtbot)
        assert dialog.profile is not None
        original = replace(dialog.profile.settings)
        dialog.show()
        qtbot.waitExposed(dialog)
        set_threads(dialog, 6)
        with qtbot.assertNotEmitted(dialog.profile_applied), qtbot.assertNotEmitted(dialog.profile_saved):
            if close == "cancel":
                dialog.cancel_button.click()
            else:
                qtbot.keyClick(dialog, Qt.Key.Key_Escape)
        assert dialog.result() == QDialog.DialogCode.Rejected and not dialog.isVisible(), close
        assert dialog.profile.settings == original


def test_save_saves_without_launching(qtbot: QtBot) -> None:
    dialog = make_dialog(qtbot)
    set_threads(dialog, 6)
    assert dialog.save_button.isEnabled(), dialog.save_button.toolTip()
    with qtbot.assertNotEmitted(dialog.profile_applied), qtbot.waitSignal(dialog.profile_saved) as blocker:
        dialog.save_button.click()
    profile, caps = blocker.args
    assert profile.engine == ENGINE and profile.label == "mainline" and profile.settings.threads == 6
    assert caps is dialog.caps and dialog.result() == QDialog.DialogCode.Accepted


def test_save_is_refused_for_settings_a_profile_cannot_hold(qtbot: QtBot) -> None:
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target=TARGET, batch_size=256, ubatch_size=512)))
    assert not dialog.save_button.isEnabled() and "larger than batch size" in dialog.save_button.toolTip()
    assert "larger than batch size" in dialog.form.check_label.text()  # Launch says it too


def test_launch_still_saves_and_restarts(qtbot: QtBot, starter_model_path: Path) -> None:
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target=str(starter_model_path), threads=1), "mainline"))
    set_threads(dialog, 3)
    with qtbot.assertNotEmitted(dialog.profile_saved), qtbot.waitSignal(dialog.profile_applied) as blocker:
        dialog.form.launch_button.click()
    assert blocker.args[0].settings.threads == 3


def test_a_missing_target_greys_launch_with_the_launchs_own_words(qtbot: QtBot) -> None:
    """The issue: /nonexistent/model.gguf left Launch enabled (and then stopped the working server)."""
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target="/nonexistent/model.gguf"), "mainline"))
    assert not dialog.form.launch_button.isEnabled()
    assert "The target model /nonexistent/model.gguf does not exist. Check the path" in dialog.form.check_label.text()
    row, under = dialog.form.rows["target"], dialog.form.under["target"]  # at the field it is about, too
    assert "#d62728" in row.styleSheet() and not under.isHidden() and "does not exist" in under.text()
    assert dialog.form.rows["ctx_size"].styleSheet() == "" and dialog.form.under["ctx_size"].isHidden()


def test_a_text_file_renamed_gguf_is_named_as_such(qtbot: QtBot, tmp_path: Path) -> None:
    fake = tmp_path / "fake.gguf"
    fake.write_text("just text\n")
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target=str(fake)), "mainline"))
    assert not dialog.form.launch_button.isEnabled()
    assert "fake.gguf is not a GGUF model BeeDeck can read" in dialog.form.check_label.text()


def test_a_context_the_host_cannot_hold_greys_launch(qtbot: QtBot, tmp_path: Path) -> None:
    """The issue: 4,000,000 tokens planned at 89.7 GiB on a 23 GiB machine, Launch enabled: host RAM now counts."""
    from tests.fixtures import meta_gguf as mg

    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    ram = HardwareReport(system=SystemInfo(ram_total=23 << 30))
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target=str(target), ctx_size=4_000_000,
                                                               n_gpu_layers="0"), "mainline"),
                         detect=lambda: ram)
    assert dialog.form.facts.host_ram == 23 << 30  # the dialog's detection (inline here) gave the form the RAM
    assert not dialog.form.launch_button.isEnabled()
    assert "of host memory (RAM), and this machine has 23.0 GiB" in dialog.form.check_label.text()
    assert "of host memory" in dialog.form.under["ctx_size"].text()


def bottom_right_in(widget: QWidget, dialog: QDialog) -> QPoint:
    return widget.mapTo(dialog, QPoint(widget.width(), widget.height()))


def test_the_dialog_fits_a_1366x768_screen_with_its_buttons_on_it(qtbot: QtBot) -> None:
    dialog = make_dialog(qtbot)
    dialog.fit_to(QRect(0, 0, 1366, 768 - 40))  # a 40-px taskbar
    dialog.show()
    qtbot.waitExposed(dialog)
    assert dialog.height() + FRAME_H <= 728 and dialog.width() <= 1366
    buttons: list[QPushButton] = [dialog.cancel_button, dialog.save_button, dialog.form.launch_button,
                                  dialog.form.copy_button]
    for b in buttons:
        corner = bottom_right_in(b, dialog)
        assert b.isVisible() and dialog.rect().contains(corner - QPoint(1, 1)), (b.text(), corner, dialog.size())
    assert dialog.form.widgets["extra_args"].visibleRegion().isEmpty()  # the fields scroll instead


def test_the_default_size_is_capped_to_the_screen(qtbot: QtBot) -> None:
    dialog = make_dialog(qtbot)
    available = dialog.screen().availableGeometry()
    assert dialog.height() + FRAME_H <= available.height() and dialog.width() <= available.width()


def test_launch_says_why_while_the_engine_is_probed_and_when_the_probe_fails(qtbot: QtBot) -> None:
    jobs: list[tuple[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]]] = []

    def held(fn: Callable[[], Any], ok: Callable[[Any], None], err: Callable[[BaseException], None]) -> None:
        jobs.append((fn, ok, err))

    dialog = SettingsDialog(Profile(ENGINE, LaunchSettings(target="/m/t.gguf")), None, probe=no_probe,
                            detect=HardwareReport, runner=held)
    qtbot.addWidget(dialog)
    label = dialog.form.check_label
    assert not dialog.form.launch_button.isEnabled()
    assert not label.isHidden() and "Checking the engine" in label.text()
    _, _, failed = next(j for j in jobs if "set_engine_path" in j[2].__qualname__)  # the probe (the form's own
    failed(RuntimeError("llama-server --help exited with 127."))  # look at the model file waits beside it)
    assert "could not be checked: llama-server --help exited with 127." in label.text()
    dialog.set_engine_path("")
    assert "No engine is picked" in label.text() and not dialog.save_button.isEnabled()


class Recorder(Serving):
    """A chat server that records what it was asked (nothing is started here)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        self.calls.append("start")


def make_session(qtbot: QtBot) -> tuple[Session, QWidget, list[Profile]]:
    """A session with a profile and its engine's caps, a parent widget, and the profiles it saved."""
    session = Session(AppSettings(), ServerController(serving=Recorder()), saver=lambda s: None)
    saved: list[Profile] = []
    session.profile_saver = saved.append
    session.probe, session.detect_hardware = no_probe, HardwareReport
    session.known_caps[ENGINE] = ml_caps()
    session.set_profile(Profile(ENGINE, LaunchSettings(target=TARGET), "mainline"))
    parent = QWidget()
    qtbot.addWidget(parent)
    return session, parent, saved


def test_open_dialog_wires_save_to_the_session(qtbot: QtBot) -> None:
    session, parent, saved = make_session(qtbot)
    dialog = settings_dialog.open_dialog(session, parent)
    dialog.save_button.click()
    assert [p.settings for p in saved] == [LaunchSettings(target=TARGET)]
    assert session.server.calls == []  # type: ignore[attr-defined]  # saved only: nothing (re)started


def test_settings_shows_the_mode_that_runs_not_the_profiles(qtbot: QtBot) -> None:
    """Issue 37: Settings showed "Baseline" while the toolbar's toggle ran N-gram."""
    from beedeck.core.engine.mode import Mode

    session, parent, saved = make_session(qtbot)
    session.server.restart = lambda *a, **k: None  # type: ignore[method-assign]  # no engine here
    session.server.state = ServerState.READY  # the profile's server runs
    session.switch.configure(session.profile.settings, session.known_caps[ENGINE])  # type: ignore[union-attr]
    assert session.request_mode(Mode.MODEL_FREE)  # the toggle: a restart into N-gram
    session.controller.ready.emit("http://127.0.0.1:9")
    assert session.switch.mode == "model-free"
    dialog = settings_dialog.open_dialog(session, parent)
    combo = dialog.form.widgets["spec_mode"]
    assert combo.currentText() == "N-gram" and dialog.form.settings().spec_mode == Mode.MODEL_FREE
    assert not dialog.running_note.isHidden()
    assert dialog.running_note.text().startswith("N-gram is running now: the toolbar's toggle switched to it. "
                                                 "The saved profile starts in Baseline;")
    dialog.save_button.click()  # Save keeps what runs, as the note says
    assert saved[-1].settings.spec_mode == Mode.MODEL_FREE
    # Saved, the profile's own mode is the running one: nothing more to say.
    plain = settings_dialog.open_dialog(session, parent)
    assert plain.running_note.isHidden() and plain.form.widgets["spec_mode"].currentText() == "N-gram"


URL = "http://127.0.0.1:9"


def test_a_remote_profile_starts_from_the_last_local_profile_without_probing_the_url(qtbot: QtBot) -> None:
    from beedeck.core.profile import remote_profile

    probed: list[str] = []
    session, parent, saved = make_session(qtbot)
    session.set_profile(Profile(ENGINE, LaunchSettings(target=TARGET, threads=3), "mainline"))
    session.set_profile(remote_profile(URL))  # the session keeps the last local profile
    session.probe = lambda path: probed.append(path) or ml_caps()  # type: ignore[assignment,func-returns-value]
    dialog = settings_dialog.open_dialog(session, parent)
    assert probed == [] and dialog.engine_path() == ENGINE and dialog.caps is session.known_caps[ENGINE]
    assert dialog.form.settings().threads == 3 and not dialog.origin_note.isHidden()
    assert "running server at http://127.0.0.1:9" in dialog.origin_note.text()
    assert "last local profile (mainline)" in dialog.origin_note.text()
    dialog.save_button.click()
    assert [p.engine for p in saved] == [ENGINE] and not saved[0].is_remote


def test_a_remote_profile_without_a_local_one_starts_from_the_starter(qtbot: QtBot) -> None:
    from beedeck.core.profile import remote_profile
    from beedeck.core.starter import StarterMissing

    probed: list[str] = []

    def probe(path: str) -> EngineCaps:
        probed.append(path)
        return ml_caps()

    starter = Profile("/opt/starter/llama-server", LaunchSettings(target="/m/starter.gguf"), "Starter")
    dialog = SettingsDialog(remote_profile(URL), None, probe=probe, detect=HardwareReport, runner=sync,
                            starter=lambda: starter)
    qtbot.addWidget(dialog)
    assert probed == ["/opt/starter/llama-server"] and dialog.engine_path() == starter.engine
    assert dialog.form.settings().target == "/m/starter.gguf"
    assert "start from the starter profile" in dialog.origin_note.text()

    def missing() -> Profile:
        raise StarterMissing("The starter model is not here: run `make install`.")

    dialog = SettingsDialog(remote_profile(URL), None, probe=no_probe, detect=HardwareReport, runner=sync,
                            starter=missing)
    qtbot.addWidget(dialog)
    assert dialog.engine_path() == "" and "run `make install`" in dialog.origin_note.text()
    assert "Choose a llama-server binary" in dialog.origin_note.text()


def test_save_is_greyed_for_a_profile_that_cannot_launch_and_says_why(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue 37: Save stayed enabled for a profile that could not launch, so it was saved and failed at the next
    start. The launch preflight's refusals grey it as they grey Launch, with the same reasons."""
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target="/nonexistent/model.gguf"), "mainline"))
    assert not dialog.form.launch_button.isEnabled()
    assert not dialog.save_button.isEnabled()
    assert "The target model /nonexistent/model.gguf does not exist" in dialog.save_button.toolTip()
    with qtbot.assertNotEmitted(dialog.profile_saved):
        dialog.save_button.click()
    target = dialog.form.widgets["target"]
    target.setText(TARGET)  # type: ignore[attr-defined]
    target.textEdited.emit(TARGET)  # type: ignore[attr-defined]  # as typing it does
    assert dialog.form.launch_button.isEnabled() and dialog.save_button.isEnabled(), dialog.save_button.toolTip()
    assert dialog.save_button.toolTip().startswith("Save the profile without restarting")


def test_a_refusal_found_after_the_dialog_opened_greys_save_too(qtbot: QtBot, tmp_path: Path) -> None:
    """A fact gathered off the GUI thread (here the machine's RAM, from the detection) can refuse the launch
    after the last edit: Save follows the preflight's every verdict, not only the edits."""
    from tests.fixtures import meta_gguf as mg

    jobs: list[tuple[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]]] = []
    target = mg.qwen36_27b(tmp_path / "q36.gguf")
    ram = HardwareReport(system=SystemInfo(ram_total=23 << 30))
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target=str(target), ctx_size=4_000_000,
                                                               n_gpu_layers="0"), "mainline"),
                         detect=lambda: ram, runner=lambda fn, ok, err: jobs.append((fn, ok, err)))
    while jobs:  # the header read, the build options, the detection: in the order asked
        fn, ok, err = jobs.pop(0)
        ok(fn())
    assert not dialog.form.launch_button.isEnabled()
    assert not dialog.save_button.isEnabled() and "of host memory (RAM)" in dialog.save_button.toolTip()


def test_a_preset_goes_back_to_the_starter_profile(qtbot: QtBot) -> None:
    """Issue 37: there was no way back to the starter profile once Settings held another one."""
    probed: list[str] = []

    def probe(path: str) -> EngineCaps:
        probed.append(path)
        return replace(ml_caps(), path=path)

    starter = Profile("/opt/starter/llama-server", LaunchSettings(target=TARGET, ctx_size=8192, n_gpu_layers="0",
                                                                  threads=1), "Starter engine")
    dialog = make_dialog(qtbot, Profile(ENGINE, LaunchSettings(target="/nonexistent/model.gguf", threads=4), "mine"),
                         probe=probe, starter=lambda: starter)
    combo = dialog.form.preset_combo
    names = [combo.itemText(i) for i in range(combo.count())]
    index = next(i for i, n in enumerate(names) if n.startswith("Starter profile"))
    assert "starter" in (combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "").lower()
    combo.activated.emit(index)
    assert dialog.engine_path() == starter.engine and probed == [starter.engine]
    assert dialog.form.settings() == starter.settings
    assert dialog.save_button.isEnabled(), dialog.save_button.toolTip()
    with qtbot.waitSignal(dialog.profile_saved) as saved:
        dialog.save_button.click()
    assert saved.args[0] == Profile(starter.engine, starter.settings, "Starter engine")
