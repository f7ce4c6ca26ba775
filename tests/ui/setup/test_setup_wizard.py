"""The setup wizard: detection (fake NVML), the recommendation page, the starter path with the real
engine, and the download step against a local Hub server."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from beedeck.core import settings
from beedeck.core.engine.building.builder import BuildResult
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.models import library
from beedeck.core.models.recommend.from_catalog import Choice, Recommendation
from beedeck.core.setup import SetupResult
from beedeck.core.starter import STARTER_MODEL_TITLE
from beedeck.ui.setup.services import WizardServices
from beedeck.ui.setup.setup_wizard import SetupWizard
from tests.fakes.fake_hub import FakeHub
from tests.fakes.fake_nvml import detect_no_gpu as no_gpu_detect
from tests.fakes.fake_nvml import detect_rtx4090 as gpu_detect
from tests.fakes.inline_runner import run_inline as sync


@pytest.fixture
def isolated_hf(tmp_path: Path) -> Path:
    """tests/conftest.py already points HF_HOME here and gives each test its own in-memory keyring."""
    return tmp_path / "hf-home"


def make_wizard(qtbot: QtBot, detect: Any, starter_engine: Path | None = None,
                app_settings: settings.AppSettings | None = None, **extra: Any) -> SetupWizard:
    ex: dict[str, Any] = {"registry": EngineRegistry()}
    if starter_engine is not None:
        ex["starter_engine"] = lambda: starter_engine
    ex.update(extra)
    models = settings.AppSettings().models_folder()
    ex.setdefault("find_local", lambda repo, f: library.find_local(repo, f, library.scan([models])))
    w = SetupWizard(WizardServices(detect=detect, runner=sync, extra=ex, settings=app_settings))
    qtbot.addWidget(w)
    w.restart()
    return w


def test_rtx_4090_shows_the_gpu_and_a_fitting_pair(qtbot: QtBot, catalog_sized: Path) -> None:
    # Offline (tests/ui/setup/conftest.py), with the catalog's headers read on an earlier run (the cache).
    w = make_wizard(qtbot, gpu_detect)
    page = w.detect_page
    assert page.report is not None and page.report.has_gpu and page.isComplete()
    items = [page.grid.itemAt(i) for i in range(page.grid.count())]
    texts = [lab.text() for it in items if it is not None and isinstance(lab := it.widget(), QLabel)]
    assert any("RTX 4090" in t and "24.0 GiB VRAM" in t and "compute 8.9" in t for t in texts)
    assert "580.159.04" in texts and "13.0" in texts
    w.next()
    rec = w.recommend_page
    assert rec.choice is not None and rec.choice.pair_id == "gemma-4-31b"
    assert rec.choice.sized_from.startswith("headers @ ")
    assert any("Sized from the GGUF headers" in x for x in rec.rec.reasons)  # type: ignore[union-attr]
    assert rec.memory_bar.plan is not None and rec.memory_bar.state == "ok"
    assert rec.size_label.text().startswith("Download: ") and "GiB" in rec.size_label.text()
    assert rec.runner_label.text().startswith("Runner-up:") and not rec.runner_button.isHidden()
    primary = rec.choice
    rec.runner_button.click()
    assert rec.choice is not primary and rec.rec is not None and rec.rec.runner_up is primary
    rec.goal_group.button(2).click()  # goal: context
    assert rec.goal() == "context" and rec.choice is not None
    assert rec.choice.settings.ctx_size >= primary.settings.ctx_size


def test_the_wizard_reads_the_catalogs_headers_live_then_recommends(qtbot: QtBot, catalog_hub: FakeHub) -> None:
    w = SetupWizard(WizardServices(detect=gpu_detect, runner=sync, endpoint=catalog_hub.endpoint,
                                   extra={"registry": EngineRegistry()}))
    qtbot.addWidget(w)
    w.restart()
    w.next()
    rec = w.recommend_page
    assert rec.choice is not None and rec.choice.pair_id == "gemma-4-31b" and rec.catalog_read
    assert rec.choice.target_repo == "unsloth/gemma-4-31B-it-GGUF" and rec.choice.download_bytes
    assert catalog_hub.cdn_gets() and all(r.headers.get("range") for r in catalog_hub.cdn_gets())  # headers only
    assert f"{rec.choice.download_bytes / (1 << 30):.1f} GiB" in rec.size_label.text()
    sent = catalog_hub.bytes_sent
    rec.goal_group.button(1).click()  # another goal: no second read
    assert catalog_hub.bytes_sent == sent and rec.choice is not None


def test_offline_without_headers_the_wizard_offers_the_starter_and_says_why(qtbot: QtBot) -> None:
    w = make_wizard(qtbot, gpu_detect)
    w.next()
    rec = w.recommend_page
    assert rec.choice is not None and rec.choice.pair_id == "starter"
    text = rec.reasons_label.text()
    assert "Sizes not read yet" in text and "Connect once (or run `beedeck recommend --refresh`)" in text


@pytest.mark.engine
def test_no_gpu_goes_straight_to_the_starter_and_finishes(qtbot: QtBot, starter_engine_path: Path,
                                                          starter_model_path: Path) -> None:
    shared = settings.load_settings()  # the session's one copy, as the window holds it
    w = make_wizard(qtbot, no_gpu_detect, starter_engine_path, shared, starter_model=lambda: starter_model_path)
    page = w.detect_page
    assert "No NVIDIA GPU found." in page.status.text() and "NVIDIA driver" in page.status.text()
    assert not page.starter_box.isHidden() and STARTER_MODEL_TITLE in page.starter_text.text()
    page.starter_button.click()
    assert w.currentPage() is w.recommend_page
    assert w.recommend_page.choice is not None and w.recommend_page.choice.pair_id == "starter"
    assert "nothing" in w.recommend_page.size_label.text()
    w.next()
    run = w.run_page
    assert run.found_combo.count() >= 1 and "Starter" in run.found_combo.currentText()
    assert not run.build_radio.isEnabled() and not run.download_radio.isEnabled()
    with qtbot.waitSignal(w.setup_finished, timeout=60000) as blocker:
        run.start_button.click()
    result = blocker.args[0]
    assert isinstance(result, SetupResult)
    assert Path(result.engine) == starter_engine_path.resolve()
    s = result.settings
    assert isinstance(s, LaunchSettings) and s.target == str(starter_model_path)
    assert s.jinja is True and s.chat_template is None and s.spec_mode == Mode.BASELINE
    stored = settings.load_settings()
    assert stored.first_run_done and stored.last_profile == s.to_dict() and stored.default_engine_id == "starter"
    # The wizard wrote the session's copy: the window's next save (a theme) keeps what the wizard set.
    # (With a copy of its own, that save wrote first_run_done False back and the wizard came again.)
    assert shared.first_run_done and shared.last_profile == s.to_dict()
    shared.theme = "dark"
    settings.save_settings(shared)
    again = settings.load_settings()
    assert again.first_run_done and again.last_profile == s.to_dict() and again.theme == "dark"
    assert run.isComplete() and run.start_button.text() == "Ready"
    assert all(st.status.text() != "waiting" for st in run.steps if st.key != "draft")


def _fake_choice() -> Recommendation:
    s = LaunchSettings(target="t.gguf", draft="d.gguf", spec_mode=Mode.DFLASH, ctx_size=8192,
                       flash_attn="on", kv_unified=True)
    c = Choice("fake", "Fake pair", Generation.MAINLINE, "org/target-GGUF", "target-Q4_K_M.gguf", "Q4_K_M",
               "org/draft-GGUF", "draft-Q4_K_M.gguf", "Q4_K_M", s, None)
    return Recommendation(c, None, ["A fake pair served by the local Hub."])


@pytest.mark.engine
def test_download_step_fetches_both_models_then_a_cpu_engine_fails_the_gpu_smoke_test(
        qtbot: QtBot, starter_engine_path: Path, isolated_hf: Path) -> None:
    rng = random.Random(5)
    target, draft = rng.randbytes(300_000), rng.randbytes(120_000)
    with FakeHub() as hub:
        hub.add_repo("org/target-GGUF", {"target-Q4_K_M.gguf": target})
        hub.add_repo("org/draft-GGUF", {"draft-Q4_K_M.gguf": draft})
        w = make_wizard(qtbot, gpu_detect, starter_engine_path)
        w.services.recommend = lambda vram, goal, **_kw: _fake_choice()
        w.services.endpoint = hub.endpoint
        w.next()
        assert w.recommend_page.choice is not None and w.recommend_page.choice.pair_id == "fake"
        w.next()
        run = w.run_page
        # The only engine is the CPU starter: on a GPU machine the prebuilt download comes first.
        assert run.download_radio.isChecked() and run.build_radio.isEnabled()
        run.use_found.setChecked(True)
        smoke = next(s for s in run.steps if s.key == "smoke")
        run.start_button.click()
        qtbot.waitUntil(lambda: not smoke.retry.isHidden(), timeout=60000)
    models = settings.AppSettings().models_folder()
    assert (models / "target-Q4_K_M.gguf").read_bytes() == target
    assert (models / "draft-Q4_K_M.gguf").read_bytes() == draft
    # The real starter engine is a CPU build: on a "GPU machine" it must not pass as ready.
    assert "lists no GPU" in smoke.status.text() and "driver" in smoke.status.text()
    assert "#d62728" in smoke.status.styleSheet()
    assert not run.isComplete() and run.start_button.isEnabled()
    draft_step = next(s for s in run.steps if s.key == "draft")
    assert draft_step.status.text().startswith("downloaded to ")



def test_closing_the_wizard_cancels_a_running_build_and_waits_for_it(qtbot: QtBot, tmp_path: Path) -> None:
    """Cancel (Esc / the window's X) while the engine builds: the build's process tree is stopped
    and the worker thread has ended before the wizard goes away."""
    import psutil

    from beedeck.core.engine.building import tools as build_tools

    pid_file = tmp_path / "build.pid"
    script = tmp_path / "fake-build.sh"
    script.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    script.chmod(0o755)

    def build_engine(**kw: Any) -> Any:
        if kw.get("dry_run"):  # the plan the page shows first (tests/ui/setup/test_build_preview.py)
            return BuildResult("fake", tmp_path / "llama-server", ["-DGGML_CUDA=ON"], tmp_path / "build.log", 0.0,
                               targets=["llama-server"], planned_steps=3, estimate_s=60.0, jobs=2, dry_run=True)
        # The real streaming runner (own process group, cancel watcher) around a never-ending "build".
        build_tools.run_streaming([str(script)], on_line=kw["on_line"], cancel_event=kw["cancel_event"])
        raise AssertionError("the fake build only ends by cancel")

    w = make_wizard(qtbot, gpu_detect, build_engine=build_engine)
    w.services.recommend = lambda vram, goal, **_kw: _fake_choice()
    w.next()
    w.next()
    run = w.run_page
    run.build_radio.setChecked(True)
    run.start_button.click()  # the first press shows the dry run's plan, the second builds
    qtbot.waitUntil(lambda: run.start_button.text() == "Build (about 60 s) and launch", timeout=10000)
    run.start_button.click()
    qtbot.waitUntil(lambda: pid_file.exists() and pid_file.read_text().strip() != "", timeout=10000)
    pid = int(pid_file.read_text())
    try:
        w.reject()
        thread = run.runner._thread
        assert thread is None or thread.isFinished()
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    finally:
        if psutil.pid_exists(pid):
            psutil.Process(pid).kill()


def test_run_page_lists_engines_off_the_gui_thread(qtbot: QtBot) -> None:
    """Registering the starter probes its binary (subprocesses): the page must not do it on the GUI thread."""
    import threading

    from beedeck.core.starter import StarterMissing
    from beedeck.ui.background import run_in_background

    seen: list[threading.Thread] = []

    def locate() -> Path:
        seen.append(threading.current_thread())
        raise StarterMissing("no starter in this test")

    w = make_wizard(qtbot, gpu_detect, starter_engine=None)
    w.run_page.tools.locate_starter = locate
    w.services.recommend = lambda vram, goal, **_kw: _fake_choice()
    w.next()
    w.services.runner = run_in_background  # the app's real background runner from here on
    w.next()
    run = w.run_page
    qtbot.waitUntil(lambda: run.start_button.isEnabled(), timeout=10000)
    assert seen and all(t is not threading.main_thread() for t in seen)
    assert run.download_radio.isChecked() and run.build_radio.isEnabled()  # no engine yet: a prebuilt one is quickest


def test_the_engine_can_be_downloaded_from_the_wizard(qtbot: QtBot) -> None:
    """Before: "Release downloads are not available in this build yet" (greyed). Now the wizard's
    download goes to core's release downloader with the backend the GPU needs."""
    from beedeck.core.engine.registry import EngineRecord

    calls: list[dict[str, Any]] = []

    def download_engine(**kw: Any) -> EngineRecord:
        calls.append(kw)
        raise RuntimeError("no network in this test: the call is what is checked")

    w = make_wizard(qtbot, gpu_detect, download_engine=download_engine)
    w.services.recommend = lambda vram, goal, **_kw: _fake_choice()
    w.next()
    w.next()
    run = w.run_page
    assert run.download_radio.isEnabled() and "sha256-checked" in run.download_radio.toolTip()
    run.download_radio.setChecked(True)
    engine_step = next(s for s in run.steps if s.key == "engine")
    run.start_button.click()
    qtbot.waitUntil(lambda: not engine_step.retry.isHidden(), timeout=10_000)
    assert calls and calls[0]["repo"] == "ggml-org/llama.cpp" and calls[0]["backend"] == "cuda"
    assert calls[0]["tag"] == "b11434"  # the release the page named, from the recorded listing
    assert calls[0]["cuda_driver_version"] == "13.0"
    assert "no network in this test" in engine_step.status.text()


def test_without_a_gpu_the_greyed_engine_choices_say_why(qtbot: QtBot, starter_engine_path: Path) -> None:
    w = make_wizard(qtbot, no_gpu_detect, starter_engine_path)
    w.next()
    w.next()
    run = w.run_page
    qtbot.waitUntil(lambda: run.start_button.isEnabled(), timeout=30_000)
    assert not run.download_radio.isEnabled() and "The starter runs on the engine installed with BeeDeck" in \
        run.download_radio.toolTip()
    assert not run.build_radio.isEnabled() and "Nothing to build" in run.build_radio.toolTip()


def _no_gpu_with_facts() -> Any:
    from beedeck.core.machine.report import GIB, HardwareReport, SystemInfo

    return HardwareReport(reason="No NVIDIA GPU driver found: BeeDeck will use the CPU starter profile.",
                          system=SystemInfo(ram_total=32 * GIB, ram_available=int(20.5 * GIB), cpu_cores_physical=8,
                                            cpu_cores_logical=16, disk_path="/data/models", disk_free=512 * GIB))


@pytest.mark.parametrize("gpu", [False, True])
def test_page_1_shows_the_ram_cores_and_disk_that_beedeck_detect_knows(qtbot: QtBot, gpu: bool) -> None:
    """Issue 37: page 1 showed the GPU (or why there is none) and nothing of the RAM, cores and disk that
    `beedeck detect` prints for the same report. Both say the same facts in the same words."""
    import dataclasses

    from beedeck.clicmd.machine import format_report

    report = _no_gpu_with_facts()
    if gpu:
        report = dataclasses.replace(gpu_detect(), system=report.system)
    w = make_wizard(qtbot, lambda: report)
    page = w.detect_page
    shown = [page.grid.itemAt(i).widget() for i in range(page.grid.count())]
    cells = [w.text() for w in shown if isinstance(w, QLabel)]
    pairs = {cells[i]: cells[i + 1] for i in range(0, len(cells), 2)}
    assert pairs["RAM"] == "20.5 GiB available of 32.0 GiB"
    assert pairs["CPU"] == "8 cores, 16 threads"
    assert pairs["Disk"] == "512.0 GiB free in /data/models"
    cli = format_report(report).splitlines()
    assert all(f"{k}: {pairs[k]}" in cli for k in ("RAM", "CPU", "Disk")), cli
    assert ("GPU 0" in pairs) == gpu


def test_page_2_says_why_there_is_no_gpu_plan_in_the_words_of_page_1(qtbot: QtBot) -> None:
    """Issue 37: page 2 said "No GPU memory was given", and the wizard has no field to give it: it says that no
    NVIDIA GPU was found; with a GPU and the starter button, that the starter was chosen."""
    w = make_wizard(qtbot, no_gpu_detect)
    w.next()
    reasons = w.recommend_page.reasons_label.text()
    assert "given" not in reasons
    assert reasons.startswith("• No NVIDIA GPU was found on this machine (page 1), so the starter profile")
    w2 = make_wizard(qtbot, gpu_detect)
    w2.detect_page.starter_button.click()
    assert w2.currentPage() is w2.recommend_page
    reasons = w2.recommend_page.reasons_label.text()
    assert "given" not in reasons and "No NVIDIA GPU" not in reasons
    assert reasons.startswith("• You chose the starter profile on page 1")


def test_the_greyed_engine_choices_do_not_repeat_one_reason(qtbot: QtBot, starter_engine_path: Path) -> None:
    """Issue 37: page 3 printed the same paragraph under both greyed choices on the starter path. Each says its
    own reason, and the starter's explanation is said once."""
    w = make_wizard(qtbot, no_gpu_detect, starter_engine_path)
    w.next()
    w.next()
    run = w.run_page
    qtbot.waitUntil(lambda: run.start_button.isEnabled(), timeout=30_000)
    why = run.choice.why
    texts = [why[k].text() for k in ("download", "build", "existing")]
    assert len(set(texts)) == 3 and all(texts), texts
    assert sum("installed with BeeDeck" in t for t in texts) == 1
    assert "download" in texts[0].lower() and "build" in texts[1].lower()
