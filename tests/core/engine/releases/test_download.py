"""releases: asset choice (real asset names), safe unpacking, and the download flow against a local
GitHub-releases server serving archives that hold the real starter llama-server."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.registry import EngineRegistry, Origin
from beedeck.core.engine.releases.download import (
    BEE_REPO,
    MAINLINE_REPO,
    ReleaseError,
    download_engine,
    fetch_release,
    pick_asset,
    safe_extract,
)
from tests.fakes.crashing_engine import crashing_engine
from tests.fakes.fake_releases import FakeReleases, make_tar_gz, make_zip, server_bundle


def _release(tag: str, names: list[str]) -> dict[str, object]:
    return {"tag_name": tag, "assets": [
        {"name": n, "size": 1000 + i, "browser_download_url": f"https://example.invalid/{n}",
         "digest": "sha256:" + "ab" * 32} for i, n in enumerate(names)]}


# Asset lists as published (docs/reference/engine-facts.md §6.2/§6.3).
BEE_046 = _release("v0.4.6", [f"beellama-v0.4.6-{s}" for s in (
    "bin-macos-arm64.tar.gz", "bin-ubuntu-arm64.tar.gz", "bin-ubuntu-cuda-12.4-x64.tar.gz", "bin-ubuntu-x64.tar.gz",
    "bin-win-cpu-x64.zip", "bin-win-cuda-12.4-x64.zip", "bin-win-cuda-13.3-x64.zip", "bin-win-hip-radeon-x64.zip",
    "bin-win-sycl-x64.zip", "bin-win-vulkan-x64.zip", "cudart-win-cuda-12.4-x64.zip")] + ["SHA256SUMS.txt"])
BEE_031 = _release("v0.3.1", ["beellama-v0.3.1-bin-win-cuda-13.1-x64.zip", "beellama-v0.3.1-cudart-win-cuda-13.1-x64.zip",
                              "beellama-v0.3.1-bin-win-hip-radeon-x64.zip", "beellama-v0.3.1-bin-macos-arm64.tar.gz"])
ML = _release("b11434", [
    "llama-b11434-bin-ubuntu-x64.tar.gz", "llama-b11434-bin-ubuntu-vulkan-x64.tar.gz",
    "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz", "cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz",
    "llama-b11434-bin-ubuntu-cuda-13.4-x64.tar.gz", "cudart-llama-b11434-bin-ubuntu-cuda-13.4-x64.tar.gz",
    "llama-b11434-bin-win-cpu-x64.zip", "llama-b11434-bin-win-cuda-12.4-x64.zip", "cudart-llama-bin-win-cuda-12.4-x64.zip",
    "llama-b11434-bin-win-cuda-13.4-x64.zip", "cudart-llama-bin-win-cuda-13.4-x64.zip",
    "llama-b11434-bin-macos-arm64.tar.gz", "llama-b11434-xcframework.zip"])


def test_pick_bee_cpu_and_cuda() -> None:
    assert pick_asset(BEE_046, "linux", "x64", "cpu").asset.name == "beellama-v0.4.6-bin-ubuntu-x64.tar.gz"
    assert pick_asset(BEE_046, "linux", "arm64", "cpu").asset.name == "beellama-v0.4.6-bin-ubuntu-arm64.tar.gz"
    assert pick_asset(BEE_046, "windows", "x64", "cpu").asset.name == "beellama-v0.4.6-bin-win-cpu-x64.zip"
    c = pick_asset(BEE_046, "linux", "x64", "cuda", "12.8")
    assert c.asset.name == "beellama-v0.4.6-bin-ubuntu-cuda-12.4-x64.tar.gz" and c.extra == []
    w = pick_asset(BEE_046, "windows", "x64", "cuda", "12.8")  # 13.3 is too new for this driver
    assert w.asset.name == "beellama-v0.4.6-bin-win-cuda-12.4-x64.zip"
    assert [a.name for a in w.extra] == ["beellama-v0.4.6-cudart-win-cuda-12.4-x64.zip"]
    # v0.4.6 has no cudart for its 13.3 zip: the 12.4 build, which comes with its runtime, is taken.
    n = pick_asset(BEE_046, "windows", "x64", "cuda", "13.4")
    assert n.asset.name == "beellama-v0.4.6-bin-win-cuda-12.4-x64.zip"
    assert [a.name for a in n.extra] == ["beellama-v0.4.6-cudart-win-cuda-12.4-x64.zip"]
    assert any("Skipped the CUDA 13.3 build" in note for note in n.notes)
    only = _release("v0.4.6", ["beellama-v0.4.6-bin-win-cpu-x64.zip", "beellama-v0.4.6-bin-win-cuda-13.3-x64.zip"])
    alone = pick_asset(only, "windows", "x64", "cuda", "13.4")  # without a choice, the 13.3 zip and a note
    assert alone.asset.name == "beellama-v0.4.6-bin-win-cuda-13.3-x64.zip" and alone.extra == []
    assert any("must come from an installed CUDA Toolkit" in note for note in alone.notes)
    assert w.asset.sha256 == "ab" * 32


def test_bee_before_041_has_no_linux_cuda_and_says_build() -> None:
    with pytest.raises(ReleaseError, match=r"only from v0\.4\.1.*beedeck engine build --ref v0\.3\.1"):
        pick_asset(BEE_031, "linux", "x64", "cuda", "12.8")
    with pytest.raises(ReleaseError, match="no cpu build for linux/x64"):
        pick_asset(BEE_031, "linux", "x64", "cpu")


def test_pick_mainline_cuda_with_cudart() -> None:
    lin = pick_asset(ML, "linux", "x64", "cuda", "13.0")
    assert lin.asset.name == "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"
    assert [a.name for a in lin.extra] == ["cudart-llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz"]
    win = pick_asset(ML, "windows", "x64", "cuda", "13.4")
    assert win.asset.name == "llama-b11434-bin-win-cuda-13.4-x64.zip"
    assert [a.name for a in win.extra] == ["cudart-llama-bin-win-cuda-13.4-x64.zip"]
    assert pick_asset(ML, "macos", "arm64", "cpu").asset.name == "llama-b11434-bin-macos-arm64.tar.gz"
    assert pick_asset(ML, "linux", "x64", "vulkan").asset.name == "llama-b11434-bin-ubuntu-vulkan-x64.tar.gz"


def test_cuda_driver_too_old_or_unknown() -> None:
    with pytest.raises(ReleaseError, match="supports CUDA 12.2.*needs CUDA 12.4.*Update the driver"):
        pick_asset(ML, "windows", "x64", "cuda", "12.2")
    unknown = pick_asset(ML, "linux", "x64", "cuda", None)
    assert unknown.asset.name == "llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz" and unknown.notes


def test_safe_extract_refuses_escapes_and_keeps_exec_bits(tmp_path: Path) -> None:
    for name in ("../evil", "/abs/evil", "a/../../evil"):
        with pytest.raises(ReleaseError, match="absolute|outside"):
            safe_extract(make_tar_gz(tmp_path / "t.tar.gz", {name: b"x"}), tmp_path / "out")
        with pytest.raises(ReleaseError, match="absolute|outside"):
            safe_extract(make_zip(tmp_path / "z.zip", {name: b"x"}), tmp_path / "out")
    with pytest.raises(ReleaseError, match="outside"):
        safe_extract(make_tar_gz(tmp_path / "l.tar.gz", {}, symlinks={"lib.so": "/etc/passwd"}), tmp_path / "out")
    with pytest.raises(ReleaseError, match="outside"):
        safe_extract(make_tar_gz(tmp_path / "l2.tar.gz", {}, symlinks={"d/lib.so": "../../x"}), tmp_path / "out")
    assert not (tmp_path / "evil").exists() and not (tmp_path / "abs").exists()

    files = {"bin/tool": b"#!/bin/sh\n", "bin/readme.txt": b"hi"}
    modes = {"bin/tool": 0o755, "bin/readme.txt": 0o644}
    for archive in (make_tar_gz(tmp_path / "ok.tar.gz", files, {"bin/tool.link": "tool"}, modes),
                    make_zip(tmp_path / "ok.zip", files, modes)):
        out = tmp_path / archive.name.replace(".", "_")
        safe_extract(archive, out)
        assert os.access(out / "bin" / "tool", os.X_OK)
        assert not (out / "bin" / "readme.txt").stat().st_mode & stat.S_IXUSR
    assert (tmp_path / "ok_tar_gz" / "bin" / "tool.link").is_symlink()


@pytest.fixture(scope="session")
def starter_archives(tmp_path_factory: pytest.TempPathFactory, starter_engine_path: Path) -> dict[str, Path]:
    """Release archives holding the REAL starter llama-server and its libraries (built once)."""
    root = tmp_path_factory.mktemp("assets")
    files, links = server_bundle(starter_engine_path.parent)
    return {
        # mainline's Linux archives put everything under build/bin/ and keep the .so symlink chains
        "ml": make_tar_gz(root / "llama-b11434-bin-ubuntu-x64.tar.gz",
                          {f"build/bin/{k}": v for k, v in files.items()},
                          {f"build/bin/{k}": v for k, v in links.items()}),
        # a zip has no symlinks: the libraries go in under their soname
        "bee_zip": make_zip(root / "beellama-v0.4.6-bin-ubuntu-x64.zip",
                            {**files, **{k: starter_engine_path.parent / k for k in links if k.endswith(".so.0")}}),
        "bee_cuda": make_tar_gz(root / "beellama-v0.4.6-bin-ubuntu-cuda-12.4-x64.tar.gz", files, links),
    }


@pytest.fixture
def fake() -> Iterator[FakeReleases]:
    with FakeReleases() as server:
        yield server


@pytest.mark.engine
def test_download_mainline_with_resume_verify_probe_register(fake: FakeReleases,
                                                             starter_archives: dict[str, Path]) -> None:
    archive = starter_archives["ml"]
    fake.add_release(MAINLINE_REPO, "b11434", [archive])
    fake.cut_after[archive.name] = archive.stat().st_size // 3  # the first transfer drops a third in
    seen: list[tuple[int, int | None]] = []
    reg = EngineRegistry()
    rec = download_engine(repo=MAINLINE_REPO, backend="cpu", os_name="linux", arch="x64", api_url=fake.url,
                          registry=reg, on_progress=lambda d, t: seen.append((d, t)))
    assert rec.origin is Origin.DOWNLOADED and rec.ready and rec.generation == Generation.MAINLINE.value
    assert Path(rec.binary).name == "llama-server" and Path(rec.binary).parent.name == "bin"
    assert rec.smoke is not None and rec.smoke.backend == "cpu"
    ranges = [r for p, r in fake.requests if p.startswith("/download/")]
    assert ranges[0] is None and ranges[-1] is not None and ranges[-1].startswith("bytes=")  # resumed
    assert seen and seen[-1][0] == archive.stat().st_size
    assert reg.get(rec.id).caps is not None
    folder = reg.engine_dir(rec.id)
    reg.remove(rec.id)
    assert not folder.exists()


@pytest.mark.engine
def test_download_bee_zip_latest_without_digest(fake: FakeReleases, starter_archives: dict[str, Path]) -> None:
    fake.with_digest = False
    fake.add_release(BEE_REPO, "v0.4.6", [starter_archives["bee_zip"]])
    rec = download_engine(backend="cpu", os_name="linux", arch="x64", api_url=fake.url, registry=EngineRegistry())
    assert rec.ready and rec.source.endswith("beellama-v0.4.6-bin-ubuntu-x64.zip")
    assert os.access(rec.binary, os.X_OK)  # the zip's exec bit survived


def test_corrupt_download_is_refused_and_nothing_registered(fake: FakeReleases, tmp_path: Path) -> None:
    archive = make_tar_gz(tmp_path / "llama-b1-bin-ubuntu-x64.tar.gz", {"llama-server": b"#!/bin/sh\n"})
    fake.add_release(MAINLINE_REPO, "b1", [archive])
    fake.releases[(MAINLINE_REPO, "b1")][0]["digest"] = "sha256:" + "00" * 32
    reg = EngineRegistry()
    with pytest.raises(ReleaseError, match="Downloading llama-b1-bin-ubuntu-x64.tar.gz failed"):
        download_engine(repo=MAINLINE_REPO, tag="b1", os_name="linux", arch="x64", api_url=fake.url, registry=reg)
    assert reg.list() == []


@pytest.mark.engine
def test_cuda_download_that_lists_no_gpu_is_not_ready(fake: FakeReleases, starter_archives: dict[str, Path]) -> None:
    # An archive named CUDA whose binary has no working GPU backend: exactly the silent CPU fallback.
    fake.add_release(BEE_REPO, "v0.4.6", [starter_archives["bee_cuda"]])
    rec = download_engine(tag="v0.4.6", backend="cuda", cuda_driver_version="12.8", os_name="linux", arch="x64",
                          api_url=fake.url, registry=EngineRegistry())
    assert not rec.ready and rec.smoke is not None and "silently run on the CPU" in rec.smoke.message


def test_fetch_release_errors(fake: FakeReleases) -> None:
    with pytest.raises(ReleaseError, match="no release v9.9.9"):
        fetch_release(BEE_REPO, "v9.9.9", api_url=fake.url)
    with pytest.raises(ReleaseError, match="Could not reach"):
        fetch_release(BEE_REPO, api_url="http://127.0.0.1:9")


@pytest.mark.engine
def test_a_download_generates_before_it_is_registered(fake: FakeReleases, starter_archives: dict[str, Path],
                                                      starter_model_path: Path) -> None:
    fake.add_release(MAINLINE_REPO, "b11434", [starter_archives["ml"]])
    rec = download_engine(repo=MAINLINE_REPO, backend="cpu", os_name="linux", arch="x64", api_url=fake.url,
                          registry=EngineRegistry(smoke_model=lambda: starter_model_path))
    assert rec.ready and rec.smoke is not None
    assert f"generated 8 tokens from {starter_model_path.name}" in rec.smoke.message


def test_a_download_whose_cpu_code_cannot_run_here_is_refused_with_the_reason(
        fake: FakeReleases, tmp_path: Path, starter_engine_path: Path, starter_model_path: Path) -> None:
    """A prebuilt CPU build that dies by SIGILL in its first generation: not registered, its files gone."""
    engine = crashing_engine(tmp_path / "crashing", starter_engine_path)
    archive = make_tar_gz(tmp_path / "beellama-v0.4.6-bin-ubuntu-x64.tar.gz", {"llama-server": engine})
    fake.add_release(BEE_REPO, "v0.4.6", [archive])
    reg = EngineRegistry(smoke_model=lambda: starter_model_path)
    said: list[str] = []
    with pytest.raises(ReleaseError) as err:
        download_engine(backend="cpu", os_name="linux", arch="x64", api_url=fake.url, registry=reg, on_line=said.append)
    assert str(err.value).startswith(
        "beellama.cpp v0.4.6 (beellama-v0.4.6-bin-ubuntu-x64.tar.gz) was downloaded but cannot run on this machine: "
        "in its first generation llama-server crashed with SIGILL: this build uses CPU instructions this machine "
        "does not run. BeeDeck did not register it and removed its files.")
    assert "`beedeck engine build --cpu`" in str(err.value)
    assert any(line.startswith("smoke test: llama-server answers --help but failed") for line in said)
    assert reg.list() == [] and not any(reg.root.glob("beellama*"))
