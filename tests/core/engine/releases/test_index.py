"""Which release and archive the downloader takes, against the recorded release listings of BeeLlama and
mainline (tests/fixtures/releases/*.json, written from their documented asset lists) served by the local
GitHub-releases fake; and the end-to-end download (sha256 check, unpack, probe) of archives that hold the
real starter llama-server, through a mirror base given by the environment or the setting."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck.core import settings
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.engine_offers import repo_for
from beedeck.core.engine.probe import release_of
from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.engine.releases.download import (
    BEE_REPO,
    MAINLINE_REPO,
    RELEASES_API_ENV,
    ReleaseError,
    download_engine,
    fetch_release,
    pick_asset,
    releases_api_base,
    resolve_release,
)
from tests.conftest import FIXTURES
from tests.fakes.fake_releases import FakeReleases, make_tar_gz, server_bundle

LISTINGS = FIXTURES / "releases"


@pytest.fixture
def fake() -> Iterator[FakeReleases]:
    with FakeReleases() as server:
        server.add_listing(LISTINGS / "mainline.json")
        server.add_listing(LISTINGS / "beellama.json")
        yield server


def _resolve(fake: FakeReleases, repo: str, os_name: str, backend: str, driver: str | None,
             tag: str | None = None, arch: str = "x64", generation: str = "") -> tuple[str, list[str], list[str]]:
    accept = repo_for(generation)[1] if generation else None
    c = resolve_release(repo, tag, os_name=os_name, arch=arch, backend=backend, cuda_driver_version=driver,
                        api_url=fake.url, accept=accept)
    return c.tag, [a.name for a in [c.asset, *c.extra]], c.notes


def test_mainline_latest_is_a_semver_release_without_binaries_that_names_its_build(fake: FakeReleases) -> None:
    assert fetch_release(MAINLINE_REPO, api_url=fake.url)["tag_name"] == "b11434"
    tag, names, notes = _resolve(fake, MAINLINE_REPO, "linux", "cuda", "13.0")
    assert tag == "b11434"
    # The driver runs CUDA 13.0: the 12.8 build with its tagged runtime tarball, not the 13.4 one.
    assert names == ["llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz", "cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"]
    assert "v0.6.0 carries no binaries; its nightly-tag.txt names b11434" in notes[0]
    assert _resolve(fake, MAINLINE_REPO, "linux", "cuda", "13.4")[1] == [
        "llama-b11434-bin-ubuntu-cuda-13.4-x64.tar.gz", "cudart-llama-b11434-bin-ubuntu-cuda-13.4-x64.tar.gz"]
    assert _resolve(fake, MAINLINE_REPO, "linux", "cuda", "13.4", arch="arm64")[1] == [
        "llama-b11434-bin-ubuntu-cuda-13.4-arm64.tar.gz"]  # no arm64 runtime tarball is published
    # Windows: the runtime zip has no tag in its name.
    assert _resolve(fake, MAINLINE_REPO, "windows", "cuda", "12.8")[1] == [
        "llama-b11434-bin-win-cuda-12.4-x64.zip", "cudart-llama-bin-win-cuda-12.4-x64.zip"]
    assert _resolve(fake, MAINLINE_REPO, "linux", "cpu", None)[1] == ["llama-b11434-bin-ubuntu-x64.tar.gz"]
    # A semver tag asked for by name is followed to its build too (v0.4.1 = b10978).
    assert _resolve(fake, MAINLINE_REPO, "linux", "cuda", "12.8", tag="v0.4.1")[:2] == (
        "b10978", ["llama-b10978-bin-ubuntu-cuda-12.8-x64.tar.gz", "cudart-llama-b10978-bin-ubuntu-cuda-12.8-x64.tar.gz"])


def test_a_driver_older_than_every_cuda_build_is_told_which_driver_it_needs(fake: FakeReleases) -> None:
    # Linux driver 550 runs CUDA 12.4; mainline's Linux builds are 12.8 and 13.4, in every release.
    with pytest.raises(ReleaseError) as info:
        _resolve(fake, MAINLINE_REPO, "linux", "cuda", "12.4")
    text = str(info.value)
    assert "supports CUDA 12.4" in text and "needs CUDA 12.8" in text and "Update the driver (>= 570)" in text
    assert "No older release among the last 30 has one either" in text
    assert not any(p.startswith("/repos/ggml-org/llama.cpp/releases/tags/b10356") for p, _ in fake.requests)


def test_beellama_latest_by_driver_with_runtime_companions_and_digests(fake: FakeReleases) -> None:
    tag, names, _ = _resolve(fake, BEE_REPO, "linux", "cuda", "13.0")
    assert (tag, names) == ("v0.4.7", ["beellama-v0.4.7-bin-ubuntu-cuda-12.4-x64.tar.gz"])
    assert _resolve(fake, BEE_REPO, "linux", "cuda", "13.3")[1] == ["beellama-v0.4.7-bin-ubuntu-cuda-13.3-x64.tar.gz"]
    assert _resolve(fake, BEE_REPO, "windows", "cuda", "13.4")[1] == [
        "beellama-v0.4.7-bin-win-cuda-13.3-x64.zip", "beellama-v0.4.7-cudart-win-cuda-13.3-x64.zip"]
    c = resolve_release(BEE_REPO, os_name="linux", arch="x64", backend="cuda", cuda_driver_version="12.8",
                        api_url=fake.url)
    listed = next(a for a in fake.releases[(BEE_REPO, "v0.4.7")] if a["name"] == c.asset.name)
    assert c.asset.sha256 is not None and listed["digest"] == "sha256:" + c.asset.sha256
    assert c.asset.size == listed["size"] and c.repo == BEE_REPO


def test_a_windows_cuda_build_without_its_runtime_is_passed_over(fake: FakeReleases) -> None:
    # v0.4.6 publishes a 13.3 zip but only the 12.4 cudart: the 12.4 build runs as it comes.
    tag, names, notes = _resolve(fake, BEE_REPO, "windows", "cuda", "13.4", tag="v0.4.6")
    assert names == ["beellama-v0.4.6-bin-win-cuda-12.4-x64.zip", "beellama-v0.4.6-cudart-win-cuda-12.4-x64.zip"]
    assert any("Skipped the CUDA 13.3 build" in n and "no cudart" in n for n in notes)


def test_a_gen_a_pair_walks_back_to_the_newest_beellama_before_0_4(fake: FakeReleases) -> None:
    # Windows driver on CUDA 12.8: v0.3.1 has only a 13.1 build, so v0.2.0's 12.4 build with its runtime.
    tag, names, notes = _resolve(fake, BEE_REPO, "windows", "cuda", "12.8", generation="bee-a")
    assert tag == "v0.2.0" and names == ["beellama-v0.2.0-bin-win-cuda-12.4-x64.zip",
                                         "cudart-llama-bin-win-cuda-12.4-x64.zip"]
    assert "newest release of the engine this pair needs" in notes[0]
    assert _resolve(fake, BEE_REPO, "windows", "cuda", "13.1", generation="bee-a")[0] == "v0.3.1"
    # The rolling preview (a prerelease) is never taken without being asked for.
    assert _resolve(fake, BEE_REPO, "linux", "cuda", "13.4", generation="bee-b")[0] == "v0.4.7"
    with pytest.raises(ReleaseError, match=r"Linux CUDA builds only from v0\.4\.1"):
        _resolve(fake, BEE_REPO, "linux", "cuda", "13.0", generation="bee-a")


def test_cuda_13_2_builds_are_never_picked(tmp_path: Path) -> None:
    def archive(name: str) -> Path:
        return make_tar_gz(tmp_path / name, {"llama-server": b"#!/bin/sh\n"})

    with FakeReleases() as fake:
        fake.add_release(MAINLINE_REPO, "b100", [archive("llama-b100-bin-ubuntu-cuda-12.8-x64.tar.gz")],
                         prerelease=True)
        fake.add_release(MAINLINE_REPO, "b101", [archive("llama-b101-bin-ubuntu-cuda-12.8-x64.tar.gz"),
                                                 archive("llama-b101-bin-ubuntu-cuda-13.2-x64.tar.gz")], prerelease=True)
        fake.add_release(MAINLINE_REPO, "b102", [archive("llama-b102-bin-ubuntu-cuda-13.2-x64.tar.gz")], prerelease=True)
        rel = fetch_release(MAINLINE_REPO, "b101", api_url=fake.url)
        c = pick_asset(rel, "linux", "x64", "cuda", "13.4")
        assert c.asset.name == "llama-b101-bin-ubuntu-cuda-12.8-x64.tar.gz"
        assert any("Skipped the CUDA 13.2 build" in n and "miscompile low-bit quants" in n for n in c.notes)
        with pytest.raises(ReleaseError, match="only CUDA 13.2 builds"):
            pick_asset(fetch_release(MAINLINE_REPO, "b102", api_url=fake.url), "linux", "x64", "cuda", "13.4")
        # The newest build (b102, "latest" here) has only a 13.2 build: the walk takes b101's 12.8 one.
        c = resolve_release(MAINLINE_REPO, os_name="linux", arch="x64", backend="cuda", cuda_driver_version="13.4",
                            api_url=fake.url)
        assert (c.tag, c.asset.name) == ("b101", "llama-b101-bin-ubuntu-cuda-12.8-x64.tar.gz")
        assert "only CUDA 13.2 builds" in c.notes[0] and "b101 is the newest release that has one" in c.notes[0]


def test_a_repository_of_prereleases_only_still_offers_its_newest_build(tmp_path: Path) -> None:
    # /releases/latest answers 404 when no stable release exists; mainline's bNNNN builds are prereleases.
    with FakeReleases() as fake:
        for tag in ("b200", "b201"):
            fake.add_release(MAINLINE_REPO, tag, [make_tar_gz(tmp_path / f"llama-{tag}-bin-ubuntu-x64.tar.gz",
                                                              {"llama-server": b"#!/bin/sh\n"})],
                             latest=False, prerelease=True)
        c = resolve_release(MAINLINE_REPO, os_name="linux", arch="x64", backend="cpu", api_url=fake.url)
    assert (c.tag, c.asset.name) == ("b201", "llama-b201-bin-ubuntu-x64.tar.gz")


def test_a_missing_digest_comes_from_sha256sums(tmp_path: Path) -> None:
    a = make_tar_gz(tmp_path / "beellama-v0.4.7-bin-ubuntu-x64.tar.gz", {"llama-server": b"#!/bin/sh\n"})
    b = make_tar_gz(tmp_path / "beellama-v0.4.7-bin-win-cpu-x64.tar.gz", {"x": b"y"})
    sums = tmp_path / "SHA256SUMS.txt"
    sums.write_text(f"{hashlib.sha256(a.read_bytes()).hexdigest()}  {a.name}\n")
    with FakeReleases() as fake:
        fake.with_digest = False
        fake.add_release(BEE_REPO, "v0.4.7", [a, b, sums])
        c = resolve_release(BEE_REPO, os_name="linux", arch="x64", backend="cpu", api_url=fake.url)
        assert c.asset.sha256 == hashlib.sha256(a.read_bytes()).hexdigest() and not c.notes
        sums.write_text("")
        c = resolve_release(BEE_REPO, os_name="linux", arch="x64", backend="cpu", api_url=fake.url)
        assert c.asset.sha256 is None and "checked by its size only" in c.notes[0]


def test_the_api_base_comes_from_the_environment_then_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RELEASES_API_ENV, raising=False)
    assert releases_api_base(settings.AppSettings()) == "https://api.github.com"
    app = settings.AppSettings(releases_api="https://github.example.com/api/v3/")
    assert releases_api_base(app) == "https://github.example.com/api/v3"
    settings.save_settings(app)
    assert releases_api_base() == "https://github.example.com/api/v3"  # read from settings.json
    monkeypatch.setenv(RELEASES_API_ENV, "http://cache.internal:8080/gh")
    assert releases_api_base(app) == "http://cache.internal:8080/gh"
    monkeypatch.setenv(RELEASES_API_ENV, "cache.internal")
    with pytest.raises(ReleaseError, match=f"{RELEASES_API_ENV} is 'cache.internal', which is not an http"):
        releases_api_base(app)
    monkeypatch.setenv(RELEASES_API_ENV, "https://me:hunter2@cache.internal/gh")
    with pytest.raises(ReleaseError, match="holds a user name or password") as info:
        releases_api_base(app)
    assert "hunter2" not in str(info.value)


def test_a_token_goes_to_the_api_only_and_a_github_token_never_to_a_mirror(fake: FakeReleases,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from beedeck.core.engine.releases.index import RELEASES_TOKEN_ENV, release_token

    monkeypatch.delenv(RELEASES_TOKEN_ENV, raising=False)
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_personal")
    assert release_token("https://api.github.com") == "ghp_personal" and release_token(fake.url) is None
    _resolve(fake, MAINLINE_REPO, "linux", "cpu", None)
    assert {auth for _, auth in fake.authorization} == {None}  # the mirror never saw the GitHub token
    fake.authorization.clear()
    monkeypatch.setenv(RELEASES_TOKEN_ENV, "mirror-secret")
    _resolve(fake, MAINLINE_REPO, "linux", "cpu", None)
    api = {auth for path, auth in fake.authorization if path.startswith("/repos/")}
    assert api == {"Bearer mirror-secret"}
    assert {auth for path, auth in fake.authorization if path.startswith("/download/")} == {None}


@pytest.fixture(scope="module")
def starter_cuda_archives(tmp_path_factory: pytest.TempPathFactory, starter_engine_path: Path) -> dict[str, Path]:
    """mainline's Linux CUDA archive and its runtime tarball, under their published names: the archive holds
    the REAL starter llama-server (a CPU build), the runtime tarball stand-in libraries."""
    root = tmp_path_factory.mktemp("cuda-assets")
    files, links = server_bundle(starter_engine_path.parent)
    main = make_tar_gz(root / "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
                       {f"build/bin/{k}": v for k, v in files.items()}, {f"build/bin/{k}": v for k, v in links.items()})
    runtime = make_tar_gz(root / "cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
                          {"libcudart.so.12": b"stand-in runtime", "libcublas.so.12": b"stand-in cuBLAS"})
    cpu = make_tar_gz(root / "llama-b11434-bin-ubuntu-x64.tar.gz",
                      {f"build/bin/{k}": v for k, v in files.items()}, {f"build/bin/{k}": v for k, v in links.items()})
    return {a.name: a for a in (main, runtime, cpu)}


@pytest.mark.engine
def test_mainline_cuda_download_end_to_end_from_the_listing(starter_cuda_archives: dict[str, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeReleases(prefix="/api/v3") as fake:  # a GitHub Enterprise base
        fake.add_listing(LISTINGS / "mainline.json", starter_cuda_archives)
        monkeypatch.setenv(RELEASES_API_ENV, fake.url)
        lines: list[str] = []
        seen: list[tuple[int, int | None]] = []
        rec = download_engine(repo=MAINLINE_REPO, backend="cuda", cuda_driver_version="13.0", os_name="linux",
                              arch="x64", registry=EngineRegistry(), on_line=lines.append,
                              on_progress=lambda d, t: seen.append((d, t)))
        fetched = [p.rsplit("/", 1)[-1] for p, _ in fake.requests if p.startswith("/api/v3/download/")]
    assert fetched == ["nightly-tag.txt", "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
                       "cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"]
    assert any("checked by sha256" in x and "cuda-12.8" in x for x in lines)
    total = sum(starter_cuda_archives[n].stat().st_size for n in fetched[1:])
    assert seen[-1] == (total, total)  # one bar over both archives
    binary = Path(rec.binary)
    assert binary.parent.name == "bin" and (binary.parent / "libcudart.so.12").read_bytes() == b"stand-in runtime"
    assert release_of(binary) == "b11434" and rec.generation == Generation.MAINLINE.value
    # The starter is a CPU build: named CUDA, it must not pass as ready (the silent CPU fallback).
    assert not rec.ready and rec.smoke is not None and "silently run on the CPU" in rec.smoke.message


@pytest.mark.engine
def test_mainline_cpu_download_through_the_setting_is_ready(starter_cuda_archives: dict[str, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RELEASES_API_ENV, raising=False)
    with FakeReleases(prefix="cache/github") as fake:  # a company cache
        fake.add_listing(LISTINGS / "mainline.json", starter_cuda_archives)
        settings.save_settings(settings.AppSettings(releases_api=fake.url))
        rec = download_engine(repo=MAINLINE_REPO, backend="cpu", os_name="linux", arch="x64", registry=EngineRegistry())
    assert rec.ready and rec.source.endswith("/b11434/llama-b11434-bin-ubuntu-x64.tar.gz")
    assert os.access(rec.binary, os.X_OK) and rec.build_options == ["llama-b11434-bin-ubuntu-x64.tar.gz"]


@pytest.mark.engine
def test_the_cli_download_takes_the_mirror_from_the_environment(starter_cuda_archives: dict[str, Path],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.cli import main

    monkeypatch.setattr("beedeck.core.engine.releases.download.host_platform", lambda: ("linux", "x64"))
    with FakeReleases(prefix="/api/v3") as fake:
        fake.add_listing(LISTINGS / "mainline.json", starter_cuda_archives)
        monkeypatch.setenv(RELEASES_API_ENV, fake.url)
        rc = main(["engine", "download", "--repo", "mainline", "--backend", "cpu", "--default"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "v0.6.0 carries no binaries; its nightly-tag.txt names b11434" in out.err
    assert "registered llama.cpp-b11434-cpu" in out.out
    with FakeReleases() as empty:
        rc = main(["engine", "download", "--repo", "mainline", "--backend", "cpu", "--api-url", empty.url])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert f"error: ggml-org/llama.cpp has no published release at {empty.url}: check the repository name" in err
