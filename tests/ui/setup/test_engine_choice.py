"""The run page's engine choice on an NVIDIA machine: a prebuilt download of the newest release whose CUDA
runtime the driver runs comes first, building from source is the alternative, an engine you have sits
beside them, and each says why it is offered or greyed. Releases: the recorded listings (conftest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.registry import EngineRecord
from beedeck.core.engine.releases.index import RELEASES_API_ENV
from beedeck.core.machine import hardware
from beedeck.core.models.recommend.from_catalog import Choice, Recommendation
from beedeck.ui.setup.setup_wizard import SetupWizard
from tests.conftest import FIXTURES
from tests.fakes.fake_nvml import FakeNvml, rtx4090
from tests.fakes.fake_nvml import detect_rtx4090 as gpu_detect
from tests.fakes.fake_releases import FakeReleases, make_tar_gz, server_bundle
from tests.ui.setup.test_setup_wizard import make_wizard


def _no_smi(argv: Any, timeout: float) -> str:
    raise FileNotFoundError("nvidia-smi")


def detect_old_driver() -> Any:
    """An RTX 4090 on driver 535 (CUDA 12.2): older than every CUDA build either project publishes."""
    return hardware.detect(nvml_module=FakeNvml([rtx4090()], driver="535.183.01", cuda=12020), smi_runner=_no_smi)


def _pair(generation: Generation) -> Recommendation:
    s = LaunchSettings(target="t.gguf", draft="d.gguf", spec_mode=Mode.DFLASH, ctx_size=8192,
                       flash_attn="on", kv_unified=True)
    c = Choice("fake", "Fake pair", generation, "org/target-GGUF", "target-Q4_K_M.gguf", "Q4_K_M",
               "org/draft-GGUF", "draft-Q4_K_M.gguf", "Q4_K_M", s, None)
    return Recommendation(c, None, ["A fake pair."])


def _wizard_at_run_page(qtbot: QtBot, detect: Any, generation: Generation, **extra: Any) -> SetupWizard:
    """The wizard on its run page, the engine list and offers in. Keep the wizard: qtbot holds it weakly."""
    extra.setdefault("missing_build_tools", lambda report, root: [])
    w: SetupWizard = make_wizard(qtbot, detect, **extra)
    w.services.recommend = lambda vram, goal, **_kw: _pair(generation)
    w.next()
    w.next()
    run = w.run_page
    qtbot.waitUntil(lambda: run.start_button.isEnabled(), timeout=10_000)
    return w


@pytest.mark.parametrize(("generation", "tag", "asset", "runtime"), [
    (Generation.MAINLINE, "b11434", "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
     "cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"),
    (Generation.BEE_B, "v0.4.7", "beellama-v0.4.7-bin-ubuntu-cuda-12.4-x64.tar.gz", None),
])
def test_on_an_nvidia_machine_the_download_comes_first_and_says_why(
        qtbot: QtBot, releases: FakeReleases, monkeypatch: pytest.MonkeyPatch, generation: Generation, tag: str,
        asset: str, runtime: str | None) -> None:
    import beedeck.core.engine.engine_offers as offers_mod

    monkeypatch.setattr(offers_mod, "host_platform", lambda: ("linux", "x64"))
    calls: list[dict[str, Any]] = []

    def download_engine(**kw: Any) -> EngineRecord:
        calls.append(kw)
        raise RuntimeError("the call is what is checked")

    w = _wizard_at_run_page(qtbot, gpu_detect, generation, download_engine=download_engine)
    run = w.run_page
    c = run.choice
    assert run.download_radio.isChecked() and run.download_radio.isEnabled()
    assert tag in run.download_radio.text() and "MiB" in run.download_radio.text()
    why = c.why["download"].text()
    assert why.startswith("Recommended") and asset in why and "your driver (CUDA 13.0) runs" in why
    assert "sha256-checked" in why and run.download_radio.toolTip() == why
    assert ("with its CUDA runtime" in why) == (runtime is not None)
    assert run.build_radio.isEnabled() and "The alternative" in c.why["build"].text()
    # The only engine here is the CPU starter: offered, and it says what it would cost on this machine.
    assert run.use_found.isEnabled() and "leave the GPU idle" in c.why["existing"].text()
    engine_step = next(s for s in run.steps if s.key == "engine")
    run.start_button.click()
    qtbot.waitUntil(lambda: not engine_step.retry.isHidden(), timeout=10_000)
    assert calls and calls[0]["tag"] == tag and calls[0]["backend"] == "cuda"
    assert calls[0]["repo"] == ("ggml-org/llama.cpp" if generation is Generation.MAINLINE else "Anbeeld/beellama.cpp")
    assert calls[0]["api_url"] == releases.url and calls[0]["cuda_driver_version"] == "13.0"
    # After the failure every choice is as its offer says again (the download was greyed here before).
    assert run.download_radio.isEnabled() and run.build_radio.isEnabled()


def test_a_driver_too_old_for_every_build_greys_the_download_and_says_which_driver(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    import beedeck.core.engine.engine_offers as offers_mod

    monkeypatch.setattr(offers_mod, "host_platform", lambda: ("linux", "x64"))
    w = _wizard_at_run_page(qtbot, detect_old_driver, Generation.MAINLINE,
                            missing_build_tools=lambda report, root: ["nvcc (Install the NVIDIA CUDA Toolkit)"])
    run = w.run_page
    why = run.choice.why["download"].text()
    assert not run.download_radio.isEnabled()
    assert "supports CUDA 12.2" in why and "Update the driver (>= 570)" in why and "build from source" in why
    assert run.build_radio.isChecked() and run.build_radio.isEnabled()
    assert "Missing here: nvcc (Install the NVIDIA CUDA Toolkit)" in run.choice.why["build"].text()


def test_an_unreachable_releases_api_greys_the_download_and_names_the_mirror_setting(
        qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RELEASES_API_ENV, "http://127.0.0.1:9")
    w = _wizard_at_run_page(qtbot, gpu_detect, Generation.MAINLINE)
    run = w.run_page
    why = run.choice.why["download"].text()
    assert not run.download_radio.isEnabled() and "Could not reach http://127.0.0.1:9" in why
    assert RELEASES_API_ENV in why and "releases_api setting" in why
    assert run.build_radio.isChecked()


def test_a_bad_mirror_setting_is_named_in_the_greyed_download(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RELEASES_API_ENV, "ftp://cache.internal/gh")
    w = _wizard_at_run_page(qtbot, gpu_detect, Generation.BEE_B)
    run = w.run_page
    assert not run.download_radio.isEnabled()
    assert "BEEDECK_RELEASES_API is 'ftp://cache.internal/gh', which is not an http(s) URL" in \
        run.choice.why["download"].text()


@pytest.mark.engine
def test_the_wizard_downloads_verifies_unpacks_and_probes_the_chosen_archive(
        qtbot: QtBot, releases: FakeReleases, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        starter_engine_path: Path) -> None:
    """The whole download path from the click: mainline's Linux CUDA 12.8 archive (holding the real starter
    llama-server, a CPU build) and its runtime tarball, from the recorded listing. On this "GPU machine" the
    engine step must end in the silent-CPU-fallback refusal, not pass the engine on."""
    import beedeck.core.engine.engine_offers as offers_mod
    import beedeck.core.engine.releases.download as releases_mod

    for mod in (offers_mod, releases_mod):
        monkeypatch.setattr(mod, "host_platform", lambda: ("linux", "x64"))
    files, links = server_bundle(starter_engine_path.parent)
    archives = {a.name: a for a in (
        make_tar_gz(tmp_path / "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
                    {f"build/bin/{k}": v for k, v in files.items()}, {f"build/bin/{k}": v for k, v in links.items()}),
        make_tar_gz(tmp_path / "cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
                    {"libcudart.so.12": b"stand-in runtime"}))}
    releases.add_listing(FIXTURES / "releases" / "mainline.json", archives)
    w = _wizard_at_run_page(qtbot, gpu_detect, Generation.MAINLINE)
    run = w.run_page
    assert run.download_radio.isChecked()
    engine_step = next(s for s in run.steps if s.key == "engine")
    run.start_button.click()
    qtbot.waitUntil(lambda: not engine_step.retry.isHidden(), timeout=60_000)
    text = engine_step.status.text()
    assert text.startswith("Downloaded llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz, but it is not ready")
    assert "silently run on the CPU" in text
    fetched = [p.rsplit("/", 1)[-1] for p, _ in releases.requests if p.startswith("/download/")]
    assert fetched[-2:] == list(archives)
    log = run.log.toPlainText()
    assert "checked by sha256" in log and "unpacking cudart-llama-b11434" in log
    rec = next(r for r in run.tools.registry.list() if r.id.endswith("b11434-cuda"))
    assert not rec.ready and rec.generation == "mainline"  # probed, so the list can say what it is
