"""The main window with its real dialogs plugged in: Settings, Benchmark and the setup wizard open
from the toolbar/menu, their results reach the profile, profile.json and the server controller
(a recording fake: no GPU engine here), first start picks the wizard or the starter, and the
speculation guard's banner speaks once after slow DFlash replies and switches the mode."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLineEdit, QSpinBox
from pytestqt.qtbot import QtBot

from beedeck.core import profile as profile_mod
from beedeck.core import settings
from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.server import ServerState
from beedeck.core.engine.speculation.comparison import Evidence
from beedeck.core.engine.speculation.modes import PER_REQUEST
from beedeck.core.engine.speculation.spec_guard import Advice
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile
from beedeck.core.serving import Replacing, Serving
from beedeck.core.setup import SetupResult
from beedeck.ui.bench.bench_dialog import BenchDialog
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.launch.settings_dialog import SettingsDialog
from beedeck.ui.setup.setup_wizard import SetupWizard
from beedeck.ui.window import app as app_mod
from beedeck.ui.window.main_window import MainWindow, PlaceholderDialog
from tests.fakes.fake_nvml import detect_no_gpu as no_gpu_detect
from tests.fakes.fake_nvml import detect_rtx4090 as gpu_detect
from tests.fakes.sse_server import FakeLlamaServer
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import BEE_A, MAINLINE, help_stdout

ENGINE = "/opt/ml/llama-server"
SECRET = "s3cret-key-never-saved"


def ml_caps() -> EngineCaps:
    return caps_from_texts(ENGINE, "version: 11434 (515e85511)\nbuilt with cc", help_stdout(MAINLINE))


def bee_caps(path: str) -> EngineCaps:
    return caps_from_texts(path, "version: 1 (ba1fdce)\nbuilt with cc", help_stdout(BEE_A))


class RecordingServing(Serving):
    """The app's server state and events, with its commands recorded instead of running an engine."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []

    def start(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None) -> None:
        self.calls.append(("start", engine, settings, caps))
        self.engine, self.settings = engine, settings
        self._set_state(ServerState.STARTING)

    def stop(self) -> None:
        self.calls.append(("stop",))
        self._set_state(ServerState.STOPPED)
        self.events.stopped()

    def restart(self, settings: LaunchSettings) -> None:
        self.calls.append(("restart", settings))

    def replace(self, engine: str, settings: LaunchSettings, caps: EngineCaps | None = None, *,
                in_mode: Callable[[LaunchSettings], LaunchSettings] | None = None) -> Replacing:
        """Settings → Launch while a server runs: the real one runs the preflight first, then stops and starts;
        this one's preflight passes at once."""
        if not self.is_running():
            return Replacing.NONE
        settings = in_mode(settings) if in_mode is not None else settings
        self.calls.append(("replace", engine, settings, caps))
        self.events.replace_started(engine)
        self.engine, self.settings = engine, settings
        self._set_state(ServerState.STARTING)
        return Replacing.PREFLIGHT

    def shutdown(self, timeout_s: float = 0) -> None:
        self.calls.append(("shutdown",))


class RecordingController(ServerController):
    """The controller's signals over a :class:`RecordingServing`."""

    serving: RecordingServing

    def __init__(self) -> None:
        super().__init__(serving=RecordingServing())


def make_window(qtbot: QtBot, store: ChatStore, detect: Callable[[], HardwareReport] = no_gpu_detect,
                ) -> tuple[MainWindow, RecordingController]:
    controller = RecordingController()
    w = MainWindow(store, controller)
    qtbot.addWidget(w)
    w.session.detect_hardware = detect
    w.session.probe = lambda path: pytest.fail(f"no probe expected here ({path})")  # caps are known below
    app_mod.plug_views(w)
    w.open_latest_chat()
    w.show()
    return w, controller


def opened(w: MainWindow, cls: type[Any]) -> Any:
    found = [d for d in w.findChildren(cls) if d.isVisible()]
    assert len(found) == 1, f"expected one open {cls.__name__}, got {found}"
    assert not w.findChildren(PlaceholderDialog)
    return found[0]


def test_each_action_opens_its_real_dialog(qtbot: QtBot, store: ChatStore) -> None:
    w, _ = make_window(qtbot, store, detect=gpu_detect)
    w.session.known_caps[ENGINE] = ml_caps()
    w.session.set_profile(Profile(ENGINE, LaunchSettings(target="/m/gemma.gguf"), "mainline"))

    w.settings_action.trigger()
    dialog = opened(w, SettingsDialog)
    qtbot.waitUntil(lambda: dialog.devices is not None, timeout=10_000)
    assert dialog.devices == [gpu_detect().gpus[0].memory_free] and dialog.form.facts.devices == dialog.devices
    assert "RTX 4090" in dialog.devices_label.text()
    assert dialog.form.facts.caps is w.session.known_caps[ENGINE] and dialog.engine_path() == ENGINE
    assert dialog.form.settings().target == "/m/gemma.gguf"
    dialog.reject()

    w.bench_action.trigger()
    bench = opened(w, BenchDialog)
    assert bench.view._launch is not None and bench.view._launch[0] == Path(ENGINE)
    assert bench.view.run_button.isEnabled() and "starts llama-server for each chosen mode" in bench.note.text()
    # A finished benchmark hands its per-mode figures to the speculation guard.
    from beedeck.core.bench.results import BenchReport, Sample
    from beedeck.core.bench.suites import BenchPrompt, BenchSuite

    suite = BenchSuite("seed", (BenchPrompt("p1", "Write a Python function that sorts a list"),))
    samples = [Sample(Variant(mode), "p1", r, 1, gen_tps=(40.0 if mode == "baseline" else 30.0) + r,
                      draft_n=0 if mode == "baseline" else 9)
               for mode in (Mode.BASELINE, Mode.DFLASH) for r in range(3)]
    bench.view.run_finished.emit(BenchReport(suite, [Variant(Mode.BASELINE), Variant(Mode.DFLASH)], 3, 0,
                                             samples=samples))
    found = w.session.guard.comparison(Mode.DFLASH, "code")  # like for like: the same prompt, 3 runs each
    assert found is not None and found[1] == "a benchmark on this server" and found[0].below(1.0)
    bench.reject()

    w.wizard_action.trigger()
    wizard = opened(w, SetupWizard)
    qtbot.waitUntil(lambda: wizard.detect_page.report is not None, timeout=10_000)
    assert "Found 1 NVIDIA GPU" in wizard.detect_page.status.text()
    wizard.reject()


def test_the_wizard_and_the_window_share_the_sessions_one_app_settings(qtbot: QtBot, store: ChatStore) -> None:
    """The wizard used to load and save a copy of its own, which the window's next save (a theme, the
    advice toggle) overwrote: first_run_done went back to False. Now both change the session's copy."""
    w, _ = make_window(qtbot, store)
    w.wizard_action.trigger()
    wizard = opened(w, SetupWizard)
    assert wizard.services.settings is w.session.app_settings is w.session.app_settings
    wizard.services.settings.first_run_done = True  # what the run page does when setup completes
    w.follow_advice_action.setChecked(True)  # the window saves the one copy
    stored = settings.load_settings()
    assert stored.first_run_done and stored.follow_advice
    wizard.reject()


def test_wizard_without_gpu_says_why(qtbot: QtBot, store: ChatStore) -> None:
    w, _ = make_window(qtbot, store, detect=no_gpu_detect)
    w.wizard_action.trigger()
    wizard = opened(w, SetupWizard)
    qtbot.waitUntil(lambda: wizard.detect_page.report is not None, timeout=10_000)
    text = wizard.detect_page.status.text()
    assert "No NVIDIA GPU found" in text and no_gpu_detect().reason in text
    assert wizard.detect_page.use_starter and wizard.detect_page.starter_box.isVisible()


def test_settings_launch_saves_the_profile_without_the_key_and_restarts(qtbot: QtBot, store: ChatStore,
                                                                       tmp_path: Path) -> None:
    w, controller = make_window(qtbot, store)
    w.session.known_caps[ENGINE] = ml_caps()
    target = mg.tiny_model(tmp_path / "gemma.gguf", n_embd=128)  # a real file: the form's preflight reads it
    w.session.set_profile(Profile(ENGINE, LaunchSettings(target=str(target), ctx_size=4096), "starter (CPU)"))
    controller.serving._set_state(ServerState.READY)  # the chat server runs: Launch must restart it
    w.settings_action.trigger()
    dialog = opened(w, SettingsDialog)
    qtbot.waitUntil(lambda: dialog.devices is not None, timeout=10_000)
    form = dialog.form
    ctx = form.widgets["ctx_size"]
    key = form.widgets["api_key"]
    assert isinstance(ctx, QSpinBox) and isinstance(key, QLineEdit)
    ctx.setValue(8192)
    key.setText(SECRET)
    key.textEdited.emit(SECRET)
    assert form.launch_button.isEnabled(), form.check_label.text()
    with qtbot.waitSignal(dialog.profile_applied):
        form.launch_button.click()

    assert w.session.profile is not None and w.session.profile.settings.ctx_size == 8192
    assert w.session.profile.settings.api_key == SECRET  # kept for this session's server
    assert w.session.profile.label == "starter (CPU)"  # same engine: the label stays
    text = profile_mod.profile_path().read_text()
    assert SECRET not in text and "api_key" not in json.loads(text)["settings"]
    saved = profile_mod.load_saved_profile()
    assert saved is not None and saved.engine == ENGINE and saved.settings.ctx_size == 8192
    assert saved.settings.api_key == SECRET  # back from the (test) OS keyring, never from the file
    assert [c[0] for c in controller.serving.calls] == ["replace"]  # preflight, then stop and start: the controller's
    _, engine, started, caps = controller.serving.calls[0]
    assert engine == ENGINE and started.ctx_size == 8192 and started.api_key == SECRET and caps is w.session.known_caps[ENGINE]
    assert not dialog.isVisible()


def test_wizard_result_sets_the_profile_and_starts(qtbot: QtBot, store: ChatStore) -> None:
    w, controller = make_window(qtbot, store)
    w.wizard_action.trigger()
    wizard = opened(w, SetupWizard)
    qtbot.waitUntil(lambda: wizard.detect_page.report is not None, timeout=10_000)
    s = LaunchSettings(target="/m/q.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, api_key=SECRET)
    wizard.setup_finished.emit(SetupResult("/opt/bee/llama-server", s, "BeeLlama 0.1", "bee-0.1"))
    assert w.session.profile is not None and w.session.profile.engine == "/opt/bee/llama-server" and w.session.profile.label == "BeeLlama 0.1"
    assert w.pair_label.text() == "model: q.gguf + d.gguf" and w.mode.isEnabled()
    assert controller.serving.calls == [("start", "/opt/bee/llama-server", s, None)]  # caps unknown: the controller probes
    data = json.loads(profile_mod.profile_path().read_text())
    assert data["engine"] == "/opt/bee/llama-server" and data["settings"]["draft"] == "/m/d.gguf"
    assert SECRET not in profile_mod.profile_path().read_text()
    wizard.reject()


@pytest.mark.parametrize(("gpu", "first_run_done", "wizard_shown"),
                         [(True, False, True), (False, False, False), (True, True, False)])
def test_first_start_picks_the_wizard_or_the_starter(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, gpu: bool,
                                                     first_run_done: bool, wizard_shown: bool) -> None:
    starter = Profile("/opt/starter/llama-server", LaunchSettings(target="/m/gemma-3-270m.gguf"), "starter (CPU)")
    # The real starter needs minutes to assemble its model in a fresh home; its loading is not under test.
    monkeypatch.setattr(app_mod, "load_starter_profile", lambda on_progress=None: starter)
    if first_run_done:
        settings.save_settings(settings.AppSettings(first_run_done=True))
    controller = RecordingController()
    w = app_mod.build_window(detect=gpu_detect if gpu else no_gpu_detect, controller=controller)
    qtbot.addWidget(w)
    qtbot.waitUntil(lambda: w.session.profile is not None, timeout=10_000)
    assert w.session.profile is starter
    wizards = [d for d in w.findChildren(SetupWizard) if d.isVisible()]
    if wizard_shown:
        assert len(wizards) == 1 and controller.serving.calls == []  # the starter waits behind the wizard
        qtbot.waitUntil(lambda: wizards[0].detect_page.report is not None, timeout=10_000)
    else:
        assert wizards == [] and controller.serving.calls == [("start", starter.engine, starter.settings, None)]


def test_guard_banner_speaks_once_and_switches_to_baseline(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer
) -> None:
    w, controller = make_window(qtbot, store)
    engine = "/opt/bee/llama-server"
    w.session.known_caps[engine] = controller.serving.caps = bee_caps(engine)
    w.session.set_profile(Profile(engine, LaunchSettings(target="/m/q.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH)))
    fake_server.script.tokens = [f"t{i} " for i in range(12)]
    # A server that honours a per-request "no drafts" (BeeLlama 0.1-0.3): the check on ready finds out,
    # and the mode then switches per request, without a restart.
    fake_server.script.draft_n = fake_server.script.draft_n_accepted = 8
    fake_server.script.honours_no_drafts = True
    controller.ready.emit(fake_server.base_url)
    qtbot.waitUntil(lambda: w.session.switch.path() == PER_REQUEST, timeout=10_000)
    advices: list[Advice] = []
    w.guard_monitor.advice_given.connect(advices.append)
    prompt = "Write a Python function that reverses a list."

    def reply(rate: float) -> ReplyFacts:
        fake_server.script.rate = rate
        w.chat.input.setPlainText(prompt)
        with qtbot.waitSignal(w.chat.reply_finished, timeout=15_000) as blocker:
            w.chat.send()
        return blocker.args[0]

    with qtbot.waitSignal(w.session.switching.mode_changed):
        w.mode.baseline_button.click()
    for _ in range(3):
        assert reply(0).mode == "baseline"  # as fast as the fake can go
    with qtbot.waitSignal(w.session.switching.mode_changed):
        w.mode.dflash_button.click()
    for i in range(4):  # replies alone are no evidence, slower or not: two replies are two prompts (issue 37)
        stats = reply(300)  # paced: at most 300 tok/s, far below the unpaced baseline
        assert stats.mode == "dflash" and not w.banner.isVisible(), i
    # A benchmark on this server found DFlash slower on code, like for like (the same prompts, 3 runs each).
    w.session.guard.add_reference(Mode.BASELINE, "code", Evidence({"a": [300.0, 310.0, 290.0]}))
    w.session.guard.add_reference(Mode.DFLASH, "code", Evidence({"a": [200.0, 205.0, 195.0]}, drafted=90))
    reply(300)
    assert w.banner.isVisible() and len(advices) == 1
    assert advices[0].mode == "dflash" and advices[0].kind == "code"
    assert advices[0].comparison is not None and advices[0].comparison.below(0.95)
    assert "DFlash is slower than Baseline on code prompts here: 0.67x (95 % CI" in w.banner.text.text()
    for _ in range(2):  # never nags: the guard spoke for this conversation and kind
        reply(300)
    assert len(advices) == 1

    with qtbot.waitSignal(w.session.switching.mode_changed) as switched:
        w.banner.switch_button.click()
    assert switched.args == [Mode.BASELINE] and w.session.switch.mode == "baseline" and not w.banner.isVisible()
    assert reply(0).mode == "baseline"
    assert fake_server.requests[-1].body.get("speculative.n_max") == 0
    assert controller.serving.calls == []  # per-request switching: the server was never restarted

    first = w.session.guard.conversation
    w.new_chat()
    assert w.session.guard.conversation not in (None, first) and not w.banner.isVisible()


def test_benchmark_runs_against_the_running_server_then_stops_it_to_compare(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer
) -> None:
    from beedeck.core.bench.results import BenchReport
    from beedeck.core.bench.suites import BenchPrompt, BenchSuite

    w, controller = make_window(qtbot, store)
    w.session.known_caps[ENGINE] = ml_caps()
    w.session.set_profile(Profile(ENGINE, LaunchSettings(target="/m/gemma.gguf")))
    controller.serving.base_url, controller.serving.settings = fake_server.base_url, w.session.profile.settings  # type: ignore[union-attr]
    controller.serving._set_state(ServerState.READY)
    w.bench_action.trigger()
    bench = opened(w, BenchDialog)
    assert bench.view._url == (fake_server.base_url, None) and bench.view.selected_modes() == [Mode.BASELINE]
    assert not bench.view.mode_boxes[Mode.DFLASH].isEnabled() and bench.compare_button.isVisible()
    bench.view.set_suite(BenchSuite("t", (BenchPrompt("a", "Write code A."),), max_tokens=8, temperature=0.0))
    bench.view.reps.setValue(1)
    with qtbot.waitSignal(bench.view.run_finished, timeout=30_000) as finished:
        bench.view.run_button.click()
    report = finished.args[0]
    assert isinstance(report, BenchReport) and report.ok and report.variants == [Variant(Mode.BASELINE)]

    bench.compare_button.click()  # frees the GPU: the view will start its own servers per mode
    assert controller.serving.calls == [("stop",)]
    assert bench.view._launch is not None and bench.view._url is None and not bench.compare_button.isVisible()
    bench.reject()  # the chat server comes back when the dialog closes
    assert controller.serving.calls[-1][:2] == ("start", ENGINE)
