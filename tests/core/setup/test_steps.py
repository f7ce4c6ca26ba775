"""The setup steps without Qt: which steps a setup runs, each step on real parts (the starter engine and model,
downloads from the local Hub and GitHub-releases fakes, the hardware through fake NVML), their failures as a
ServerFailure with a remedy, a cancel that keeps what was fetched, and the save."""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from beedeck.core import paths, settings
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.engine_offers import DOWNLOAD, EXISTING
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.machine.report import HardwareReport, SystemInfo
from beedeck.core.models import library
from beedeck.core.models.recommend.from_catalog import Choice
from beedeck.core.profile import load_saved_profile, profile_path, save_profile
from beedeck.core.setup import (
    STEP,
    Setup,
    SetupChoices,
    SetupServices,
    Step,
    StepCancelled,
    StepFailed,
    find_engines,
    run_all,
)
from tests.conftest import FIXTURES
from tests.fakes.fake_hub import FakeHub
from tests.fakes.fake_nvml import detect_no_gpu, detect_rtx4090
from tests.fakes.fake_releases import FakeReleases, make_tar_gz, server_bundle
from tests.fixtures import meta_gguf as mg

MiB = 1 << 20


def _pick(draft: bool = True, mode: Mode = Mode.DFLASH) -> Choice:
    s = LaunchSettings(target="t.gguf", draft="d.gguf" if draft else None, spec_mode=mode, ctx_size=8192,
                       flash_attn="on", kv_unified=True, cache_type_k="q8_0", cache_type_v="q8_0")
    return Choice("fake", "Fake pair", Generation.MAINLINE, "org/target-GGUF", "target-Q4_K_M.gguf", "Q4_K_M",
                  "org/draft-GGUF" if draft else None, "draft-Q4_K_M.gguf" if draft else None,
                  "Q4_K_M" if draft else None, s, None)


def _local(repo: str, filename: str) -> library.LocalModel | None:
    """library.find_local over BeeDeck's own models folder only (not the machine's LM Studio folder)."""
    return library.find_local(repo, filename, library.scan([paths.models_dir()]))


def _services(**kw: Any) -> SetupServices:
    kw.setdefault("find_local", _local)
    return SetupServices(**kw)


def _quiet() -> dict[str, Any]:
    return {"on_progress": lambda *_a: None, "on_line": lambda _l: None, "cancel_event": threading.Event()}


def test_a_setup_runs_the_steps_its_choices_need() -> None:
    """One list: the starter has no draft to fetch, an MTP pick neither (its head is in the target), a DFlash
    pick runs every step; the target's row is named for the starter."""
    services = _services()
    starter = Setup(SetupChoices(None, None), services)
    assert [s.key for s in starter.steps()] == ["engine", "target", "smoke", "save"]
    assert STEP["target"].title_for(starter.choices) == "Starter model"
    dflash = Setup(SetupChoices(detect_rtx4090(), _pick()), services)
    assert [s.key for s in dflash.steps()] == ["engine", "target", "draft", "smoke", "save"]
    assert STEP["target"].title_for(dflash.choices) == "Target model"
    mtp = Setup(SetupChoices(detect_rtx4090(), _pick(draft=False, mode=Mode.MTP)), services)
    assert [s.key for s in mtp.steps()] == ["engine", "target", "smoke", "save"]
    assert [s.key for s in Setup(SetupChoices(detect_rtx4090(), _pick(), use_starter=True), services).steps()] \
        == ["engine", "target", "smoke", "save"]  # the starter button wins over the recommendation
    assert [s.here for s in dflash.steps()] == [False, False, False, False, True]  # the save: the caller's thread


@pytest.mark.engine
def test_the_starter_setup_runs_every_step_on_the_real_engine_and_saves(starter_engine_path: Path,
                                                                         starter_model_path: Path) -> None:
    services = _services(locate_starter=lambda: starter_engine_path, starter_model=lambda: starter_model_path,
                         save_profile=save_profile)
    choices = SetupChoices(detect_no_gpu(), None, goal="speed")
    records, offers = find_engines(choices, services)
    assert offers.default == EXISTING and records[0].id == "starter"
    assert not offers[DOWNLOAD].enabled  # the starter runs on the engine installed with BeeDeck
    choices.engine_id = records[0].id
    setup = Setup(choices, services)
    seen: list[tuple[str, int, int]] = []
    lines: list[str] = []
    done: list[tuple[str, str]] = []
    result = run_all(setup, on_progress=lambda *_a: None, on_line=lines.append, cancel_event=threading.Event(),
                     on_step=lambda s, i, n: seen.append((s.key, i, n)), on_done=lambda s, line: done.append((s.key, line)))
    assert seen == [("engine", 1, 4), ("target", 2, 4), ("smoke", 3, 4), ("save", 4, 4)]
    assert Path(result.engine) == starter_engine_path.resolve() and result.engine_id == "starter"
    assert result.settings.target == str(starter_model_path) and result.settings.jinja is True
    assert result.settings.spec_mode == Mode.BASELINE
    command = next(line for line in lines if line.startswith("command: "))  # the launch's own preflight passed
    assert f"-m {starter_model_path}" in command and "--jinja" in command
    assert dict(done)["target"] == f"{starter_model_path.name} (installed with BeeDeck)"
    stored = settings.load_settings()
    assert stored.first_run_done and stored.default_engine_id == "starter" and stored.goal == "speed"
    assert stored.last_profile == result.settings.to_dict() and stored.last_engine == result.engine
    saved = load_saved_profile()
    assert saved is not None and saved.engine == result.engine and saved.settings.target == result.settings.target
    assert dict(done)["save"] == f"settings saved; profile saved to {profile_path()}"


def test_a_pick_fetches_its_target_and_draft_from_the_hub_once(tmp_path: Path) -> None:
    target = mg.tiny_model(tmp_path / "t.gguf", "qwen35", 1000, "", 8, 64).read_bytes()
    draft = mg.dflash_draft(tmp_path / "d.gguf", "dflash", 64, (1, 3, 6), 1000, n_layer=2, n_head=4, n_kv=2, hd=16,
                            n_ff=128, qtype=mg.Q.F32).read_bytes()
    with FakeHub() as hub:
        hub.add_repo("org/target-GGUF", {"target-Q4_K_M.gguf": target})
        hub.add_repo("org/draft-GGUF", {"draft-Q4_K_M.gguf": draft})
        setup = Setup(SetupChoices(detect_rtx4090(), _pick()), _services(endpoint=hub.endpoint))
        progress: list[tuple[int, int | None]] = []
        lines: list[str] = []
        kw = {"on_progress": lambda d, t: progress.append((d, t)), "on_line": lines.append,
              "cancel_event": threading.Event()}
        assert STEP["target"].run(setup, **kw).startswith("downloaded to ")
        assert STEP["draft"].run(setup, **kw).startswith("downloaded to ")
        assert Path(setup.paths["target"]).read_bytes() == target and Path(setup.paths["draft"]).read_bytes() == draft
        assert progress[-1] == (len(draft), len(draft)) and (len(target), len(target)) in progress
        assert lines == ["downloading org/target-GGUF/target-Q4_K_M.gguf", "downloading org/draft-GGUF/draft-Q4_K_M.gguf"]
        fetched = len(hub.cdn_gets())
        again = Setup(SetupChoices(detect_rtx4090(), _pick()), _services(endpoint=hub.endpoint))
        assert STEP["target"].run(again, **_quiet()) == f"found {setup.paths['target']}"  # on disk: not again
        assert len(hub.cdn_gets()) == fetched
    s = setup.launch_settings()
    assert (s.target, s.draft, s.spec_mode) == (setup.paths["target"], setup.paths["draft"], Mode.DFLASH)


def test_a_missing_repo_fails_with_the_hubs_words_and_the_steps_remedy() -> None:
    with FakeHub() as hub:
        setup = Setup(SetupChoices(detect_rtx4090(), _pick()), _services(endpoint=hub.endpoint))
        with pytest.raises(StepFailed) as failed:
            STEP["target"].run(setup, **_quiet())
    f = failed.value.failure
    assert failed.value.step == "target" and f.code == "setup_target"
    assert "org/target-GGUF" in f.message and f.remedy == "Try again: a download resumes where it stopped."
    assert str(failed.value) == f"{f.message} {f.remedy}"  # what the wizard's row shows


def test_a_file_on_disk_that_went_away_since_the_recommendation_is_named(tmp_path: Path) -> None:
    pick = _pick()
    pick.target_path, pick.draft_path = tmp_path / "t.gguf", tmp_path / "d.gguf"
    pick.target_path.write_bytes(b"GGUF")
    setup = Setup(SetupChoices(detect_rtx4090(), pick), _services())
    assert STEP["target"].run(setup, **_quiet()) == f"on disk: {pick.target_path}"
    with pytest.raises(StepFailed) as failed:
        STEP["draft"].run(setup, **_quiet())
    assert failed.value.failure.code == "model_missing"
    assert failed.value.failure.message == f"{pick.draft_path} is gone since the recommendation."
    assert "Get a new recommendation" in failed.value.failure.remedy


def test_a_cancelled_download_is_a_cancel_that_keeps_its_part_file_and_resumes() -> None:
    data = random.Random(3).randbytes(3 * MiB)
    with FakeHub() as hub:
        hub.add_repo("org/target-GGUF", {"target-Q4_K_M.gguf": data})
        hub.cdn.throttle_bps = 1 * MiB
        setup = Setup(SetupChoices(detect_rtx4090(), _pick()), _services(endpoint=hub.endpoint))
        cancel = threading.Event()

        def progress(done: int, total: int | None) -> None:
            if done > 0:
                cancel.set()  # the user's Cancel (the wizard) or Ctrl-C (the command), mid-download

        with pytest.raises(StepCancelled) as cancelled:
            STEP["target"].run(setup, on_progress=progress, on_line=lambda _l: None, cancel_event=cancel)
        assert cancelled.value.step == "target" and "target" not in setup.paths
        parts = list(paths.models_dir().rglob("*.part"))
        assert parts and 0 < parts[0].stat().st_size < len(data)
        hub.cdn.throttle_bps = 0
        assert STEP["target"].run(setup, **_quiet()).startswith("downloaded to ")
        assert any(r.headers.get("range", "").startswith("bytes=") for r in hub.cdn_gets()[1:])  # resumed
    assert Path(setup.paths["target"]).read_bytes() == data


@pytest.mark.engine
def test_the_smoke_test_refuses_a_cpu_engine_on_a_gpu_machine(starter_engine_path: Path,
                                                               starter_model_path: Path) -> None:
    services = _services()
    record = services.registry.add_existing(starter_engine_path)
    setup = Setup(SetupChoices(detect_rtx4090(), _pick(), engine_id=record.id), services)
    assert STEP["engine"].run(setup, **_quiet()).startswith(f"{record.name}: mainline")
    setup.paths = {"target": str(starter_model_path), "draft": str(starter_model_path)}
    with pytest.raises(StepFailed) as failed:
        STEP["smoke"].run(setup, **_quiet())
    f = failed.value.failure
    assert failed.value.step == "smoke" and f.code == "engine_smoke"
    assert "lists no GPU" in f.message and "silently run on the CPU" in f.message and "driver" in f.message


@pytest.mark.engine
def test_the_launch_check_refuses_what_this_machine_cannot_run_and_says_what_to_do(
        starter_engine_path: Path, starter_model_path: Path) -> None:
    """The context named outright (the command's --ctx) wins over the pick's; the launch's own preflight then
    judges it against this machine's RAM."""
    report = HardwareReport(reason="no GPU", system=SystemInfo(ram_total=300 * MiB))
    services = _services(locate_starter=lambda: starter_engine_path, starter_model=lambda: starter_model_path)
    setup = Setup(SetupChoices(report, None, engine_path=str(starter_engine_path),
                               overrides={"ctx_size": 262144}), services)
    for key in ("engine", "target"):
        STEP[key].run(setup, **_quiet())
    assert setup.launch_settings().ctx_size == 262144
    with pytest.raises(StepFailed) as failed:
        STEP["smoke"].run(setup, **_quiet())
    f = failed.value.failure
    assert f.code == "out_of_memory" and "of host memory (RAM)" in f.message and "0.3 GiB" in f.message
    assert f.remedy.startswith("Lower the context size")


@pytest.mark.engine
def test_the_download_way_fetches_the_release_the_offer_named(
        starter_engine_path: Path, starter_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU, a mainline pick: the offer names mainline's CPU archive of the recorded listing (it holds the real
    starter llama-server); the step downloads that, which is smoke-tested and registered ready."""
    import beedeck.core.engine.engine_offers as offers_mod
    import beedeck.core.engine.releases.download as releases_mod

    for mod in (offers_mod, releases_mod):
        monkeypatch.setattr(mod, "host_platform", lambda: ("linux", "x64"))
    files, links = server_bundle(starter_engine_path.parent)
    archive = make_tar_gz(tmp_path / "llama-b11434-bin-ubuntu-x64.tar.gz", {f"build/bin/{k}": v for k, v in files.items()},
                          {f"build/bin/{k}": v for k, v in links.items()})
    with FakeReleases() as releases:
        releases.add_listing(FIXTURES / "releases" / "mainline.json", {archive.name: archive})
        monkeypatch.setenv("BEEDECK_RELEASES_API", releases.url)
        services = _services(locate_starter=lambda: starter_engine_path, starter_model=lambda: starter_model_path)
        choices = SetupChoices(detect_no_gpu(), _pick(), engine=DOWNLOAD)
        _records, choices.offers = find_engines(choices, services)
        offer = choices.offers[DOWNLOAD]
        assert offer.enabled and offer.choice is not None and offer.choice.asset.name == archive.name
        setup = Setup(choices, services)
        progress: list[tuple[int, int]] = []
        line = STEP["engine"].run(setup, on_progress=lambda d, t, *_: progress.append((d, t)), on_line=lambda _l: None,
                                  cancel_event=threading.Event())
    assert setup.engine is not None and setup.engine.ready and setup.engine.id.endswith("b11434-cpu")
    assert line.endswith("mainline 0.6.0-dev") and progress and progress[-1][0] == progress[-1][1]
    assert any(p.endswith(archive.name) for p, _ in releases.requests)


def test_a_build_that_ends_without_a_ready_engine_fails_with_the_builders_words() -> None:
    """The builder is the one core call replaced here (a real build takes most of an hour): it gets the build's
    arguments for this machine and the pick, and its not-ready result is the step's failure."""
    from beedeck.core.engine.building.builder import BuildResult
    from beedeck.core.engine.registry import SmokeResult

    calls: list[dict[str, Any]] = []

    def build_engine(**kw: Any) -> BuildResult:
        calls.append(kw)
        kw["on_progress"](3, 10, 42.0)  # the builder's (done, total, seconds left)
        return BuildResult("bee-b-cuda", Path("/x/llama-server"), [], Path("/x/build.log"), 1.0,
                           smoke=SmokeResult(False, "llama-server lists no GPU."))

    services = _services(build_engine=build_engine)
    setup = Setup(SetupChoices(detect_rtx4090(), _pick(), engine="build", overrides={"cache_type_v": "q4_0"}),
                  services)
    seen: list[tuple[Any, ...]] = []
    with pytest.raises(StepFailed) as failed:
        STEP["engine"].run(setup, on_progress=lambda *a: seen.append(a), on_line=lambda _l: None,
                           cancel_event=threading.Event())
    assert failed.value.failure.message == "llama-server lists no GPU." and seen == [(3, 10, 42.0)]
    kw = calls[0]
    assert kw["gpus"] == [(8, 9)] and kw["cpu_only"] is False and kw["driver_cuda"] == "13.0"
    assert kw["cache_pairs"] == [("q8_0", "q4_0")] and kw["registry"] is services.registry  # the named V type


def test_the_save_step_writes_the_callers_settings_and_a_profile_it_cannot_replace_is_a_failure(
        tmp_path: Path) -> None:
    app = settings.AppSettings(theme="dark")
    problems: list[settings.AppSettings] = []

    def save_settings(s: settings.AppSettings) -> str | None:
        problems.append(s)
        return "disk full"

    services = _services(settings=app, save_settings=save_settings, save_profile=save_profile)
    setup = Setup(SetupChoices(None, None, goal="context"), services)
    setup.engine = services.registry.save(_record(tmp_path))
    setup.paths["target"] = str(tmp_path / "m.gguf")
    lines: list[str] = []
    said = STEP["save"].run(setup, on_progress=lambda *_a: None, on_line=lines.append, cancel_event=threading.Event())
    assert problems == [app] and app.first_run_done and app.goal == "context" and app.theme == "dark"
    assert app.default_engine_id == "mine" and app.last_profile is not None
    assert said.startswith("settings not saved; profile saved to ") and "could not be saved (disk full)" in lines[0]
    profile_path().write_text(json.dumps({"schema_version": 99, "engine": "x", "settings": {}}))  # a newer BeeDeck's
    with pytest.raises(StepFailed) as failed:
        STEP["save"].run(setup, **_quiet())
    assert failed.value.step == "save" and "newer" in failed.value.failure.message.lower()
    assert json.loads(profile_path().read_text())["schema_version"] == 99  # left as it was


def _record(tmp_path: Path) -> Any:
    from beedeck.core.engine.registry import EngineRecord, Origin

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    return EngineRecord(id="mine", origin=Origin.EXISTING, binary=str(binary), name="my engine")


def test_run_all_stops_at_a_cancel_and_a_bug_is_not_called_a_failure() -> None:
    setup = Setup(SetupChoices(detect_rtx4090(), _pick()), _services())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(StepCancelled):
        run_all(setup, on_progress=lambda *_a: None, on_line=lambda _l: None, cancel_event=cancel)

    def broken(_setup: Setup, *_a: Any) -> str:
        raise TypeError("a bug")

    with pytest.raises(TypeError, match="a bug"):  # surfaces as the bug it is, not as "the download failed"
        Step("x", "X", broken).run(setup, **_quiet())
    with pytest.raises(StepFailed) as failed:  # no engine yet: said, not an AttributeError
        STEP["smoke"].run(setup, **_quiet())
    assert failed.value.failure.code == "no_engine"
