"""``beedeck setup`` as a user runs it: a subprocess against the local Hub fake (serving the starter-sized model
as a Hub repo) and the GitHub-releases fake, on this GPU-less machine's real detection, with the real starter
engine as the engine you have; the profile it saves is what ``beedeck serve --saved`` starts. Ctrl-C cancels the
download under way and keeps it, so the next run resumes; refused flags and a failed step have their exit status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck.cli import main
from beedeck.core import paths
from beedeck.core.engine.releases.index import RELEASES_API_ENV
from tests.conftest import REPO
from tests.fakes.fake_hub import FakeHub
from tests.fakes.fake_releases import FakeReleases, recorded_listings

MODEL_REPO = "bee-test/SmolLM2-135M-Instruct-GGUF"
MiB = 1 << 20


@pytest.fixture
def hub(starter_model_path: Path) -> Iterator[FakeHub]:
    with FakeHub() as h:
        h.add_repo(MODEL_REPO, {starter_model_path.name: starter_model_path.read_bytes()})
        yield h


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeReleases]:
    yield from recorded_listings(monkeypatch)


def _env(home: Path, hub: FakeHub, releases: FakeReleases) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BEEDECK_", "HF_"))}
    env.update(BEEDECK_HOME=str(home), HF_HOME=str(home.parent / "hf-home"), HF_ENDPOINT=hub.endpoint,
               PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join([str(REPO / "gui"), str(REPO)]))
    env[RELEASES_API_ENV] = releases.url
    return env


def _setup_args(engine: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "beedeck", "setup", "--repo", MODEL_REPO, "--engine", str(engine), *extra]


@pytest.mark.engine
def test_setup_downloads_checks_and_saves_a_profile_that_serve_starts(
        beedeck_home: Path, hub: FakeHub, releases: FakeReleases, starter_engine_path: Path,
        starter_model_path: Path, tmp_path: Path) -> None:
    env = _env(beedeck_home, hub, releases)
    started = time.monotonic()
    done = subprocess.run(_setup_args(starter_engine_path, "--yes"), env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for line in ("[1/4] Engine", "[2/4] Target model", "[3/4] Smoke test", "[4/4] Save"):
        assert line in out
    assert "pair: SmolLM2-135M-Instruct + no speculation: Q4_1" in out and "(mainline)" in out
    assert f"downloading {MODEL_REPO}/{starter_model_path.name}" in out and "MB (100 %)" in done.stderr
    model = paths.models_dir() / starter_model_path.name
    assert model.read_bytes() == starter_model_path.read_bytes()  # every byte, from the Hub
    assert [r for r in hub.cdn_gets() if not r.headers.get("range", "").startswith("bytes=0-")]  # a download
    saved = json.loads((beedeck_home / "config" / "profile.json").read_text())
    assert Path(saved["engine"]) == starter_engine_path.resolve() and saved["settings"]["target"] == str(model)
    settings = json.loads((beedeck_home / "config" / "settings.json").read_text())
    assert settings["first_run_done"] and settings["last_profile"] == saved["settings"]
    assert f"command: {starter_engine_path.resolve()} -m {model}" in out  # the launch's own preflight passed
    print(f"beedeck setup end to end on the fakes: {seconds:.1f} s")  # the figure the report quotes (-s)

    served = subprocess.run([sys.executable, "-m", "beedeck", "serve", "--saved", "--exit-when-ready", "--json"],
                            env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert served.returncode == 0, served.stderr[-3000:]
    ready = json.loads(served.stdout.strip().splitlines()[-1])
    assert ready["state"] == "ready" and ready["n_ctx"] == saved["settings"]["ctx_size"]
    assert ready["argv"][ready["argv"].index("-m") + 1] == str(model)


@pytest.mark.engine
def test_ctrl_c_cancels_the_download_keeps_it_and_the_next_run_resumes(
        beedeck_home: Path, hub: FakeHub, releases: FakeReleases, starter_engine_path: Path, tmp_path: Path) -> None:
    env = _env(beedeck_home, hub, releases)
    hub.cdn.throttle_bps = 4 * MiB  # about 25 s for the whole file: Ctrl-C comes in the middle
    err = tmp_path / "setup.err"
    with open(err, "wb") as e:
        proc = subprocess.Popen(_setup_args(starter_engine_path, "--yes"), env=env, stdout=subprocess.DEVNULL,
                                stderr=e, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 120
            while not any(p.stat().st_size > MiB for p in paths.models_dir().rglob("*.part")):
                assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
    said = err.read_text()
    assert "cancelling: stopping the step under way" in said and "`beedeck setup` resumes where it stopped" in said
    part = next(paths.models_dir().rglob("*.part"))
    kept = part.stat().st_size
    assert kept > MiB and not (beedeck_home / "config" / "profile.json").exists()
    hub.cdn.throttle_bps = 0
    again = subprocess.run(_setup_args(starter_engine_path, "--yes"), env=env, capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert any(r.headers.get("range") == f"bytes={kept}-" for r in hub.cdn_gets())  # resumed, not restarted
    assert (beedeck_home / "config" / "profile.json").exists()


@pytest.mark.engine
def test_refused_flags_and_a_failed_step_have_their_exit_status(
        beedeck_home: Path, hub: FakeHub, releases: FakeReleases, starter_engine_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    assert main(["setup", "--quant", "Q4_1"]) == 2
    assert "--quant and --kind go with --repo" in capsys.readouterr().err
    assert main(["setup", "--starter", "--engine", "/nowhere/llama-server", "--yes"]) == 2
    assert "was not added" in capsys.readouterr().err
    assert main(["setup", "--starter", "--engine", "build", "--yes"]) == 2  # the starter's engine is installed
    assert "the starter's engine comes ready-made with BeeDeck" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # no terminal to ask on, and no --yes
    assert main(["setup", "--repo", MODEL_REPO, "--engine", str(starter_engine_path)]) == 1
    said = capsys.readouterr()
    assert "steps: engine, target model, smoke test, save" in said.out and "Nothing done" in said.err
    assert not list(paths.models_dir().rglob("*.gguf*"))  # nothing fetched before the yes
    # A step that fails: the launch check refuses a K/V type this engine does not have.
    assert main(["setup", "--repo", MODEL_REPO, "--engine", str(starter_engine_path), "--cache-type-k", "turbo4",
                 "--yes"]) == 1
    said = capsys.readouterr()
    assert "[3/4] Smoke test" in said.out and "error: " in said.err and "what to do: " in said.err
    assert "turbo4" in said.err and not (beedeck_home / "config" / "profile.json").exists()


def test_on_a_gpu_machine_the_default_is_the_recommendation_read_from_the_headers_and_a_download(
        beedeck_home: Path, catalog_hub: FakeHub, releases: FakeReleases, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An RTX 4090 (fake NVML, as every detection sees it): --refresh reads the catalog's headers from the Hub
    first (as the wizard does), the pair is the recommendation `beedeck recommend` makes, and the engine comes by
    the prebuilt download the wizard preselects; without a terminal and --yes nothing is fetched."""
    import beedeck.core.engine.engine_offers as offers_mod
    from beedeck.core.machine import hardware
    from tests.fakes.fake_nvml import FakeNvml, rtx4090

    fake = FakeNvml([rtx4090()])
    monkeypatch.setattr(hardware, "import_pynvml", lambda: fake)
    monkeypatch.setattr(offers_mod, "host_platform", lambda: ("linux", "x64"))
    monkeypatch.setenv("HF_ENDPOINT", catalog_hub.endpoint)
    monkeypatch.setattr(sys, "stdin", open(os.devnull))
    assert main(["setup", "--refresh"]) == 1
    said = capsys.readouterr()
    assert "machine: 1 NVIDIA GPU(s)" in said.out and "reading the headers of unsloth/gemma-4-31B-it-GGUF" in said.err
    assert "recommended: Gemma 4 31B" in said.out and "pair: Gemma 4 31B" in said.out
    assert "engine: Download BeeLlama v0.4.7 prebuilt" in said.out and "your driver (CUDA 13.0) runs" in said.out
    assert "steps: engine, target model, draft model, smoke test, save" in said.out and "Nothing done" in said.err
    assert catalog_hub.cdn_gets() and all(r.headers.get("range") for r in catalog_hub.cdn_gets())  # headers only
    assert not (beedeck_home / "config" / "profile.json").exists()
