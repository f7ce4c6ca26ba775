"""Faults: a Hugging Face hub and a release server that cut, stall, lie about sizes and checksums.

The hub is tests/fakes/fake_hub.py (the Hub's HTTP protocol, on 127.0.0.1) driven through the real
``beedeck models get`` as a child process; the release server is tests/fakes/fake_releases.py,
driven through the engine downloader. Each checks the message, that a good file already on disk is
never replaced by a bad one, and that a broken transfer resumes instead of starting over.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from beedeck.core.download import download_file
from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.engine.releases import MAINLINE_REPO, ReleaseError, download_engine
from tests.core.engine.releases.test_download import starter_archives  # noqa: F401  (a fixture)
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fakes.fake_releases import FakeReleases

from .conftest import Beedeck

REPO_ID, NAME = "org/tiny-GGUF", "tiny-Q4_K_M.gguf"
DATA = random.Random(7).randbytes(3_000_000)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as h:
        yield h


def get(bd: Beedeck, hub: FakeHub, dest: Path) -> tuple[int, str, str]:
    done = bd.run("models", "get", REPO_ID, NAME, "--dest", str(dest), HF_ENDPOINT=hub.endpoint,
                  HF_HOME=str(bd.workdir / "hf"))
    return done.returncode, done.stdout, done.stderr


def test_a_connection_cut_three_times_resumes_each_time_and_verifies(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: DATA})
    hub.cdn.cut_after, hub.cdn.cut_times = 700_000, 3
    code, _, err = get(beedeck, hub, beedeck.workdir / "models")
    assert code == 0, err
    assert (beedeck.workdir / "models" / NAME).read_bytes() == DATA
    ranges = [r.headers.get("range") for r in hub.cdn_gets()]
    assert ranges == [None, "bytes=700000-", "bytes=1400000-", "bytes=2100000-"]  # nothing fetched twice
    assert not list((beedeck.workdir / "models").glob("*.part*"))


def test_a_stalled_transfer_times_out_and_resumes_where_it_stopped(hub: FakeHub, tmp_path: Path) -> None:
    f = FakeFile(DATA)
    hub.add_repo(REPO_ID, {NAME: f})
    hub.cdn.stall_after = 1_000_000  # the server goes silent, the connection stays open
    client = httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(5.0, read=1.0))
    dest = tmp_path / NAME
    download_file(f"{hub.cdn_url}/blobs/{f.sha256}", dest, expected_sha256=f.sha256, expected_size=len(DATA),
                  client=client, sleep=lambda s: None, disk_margin=0)
    client.close()
    assert dest.read_bytes() == DATA
    assert [r.headers.get("range") for r in hub.cdn_gets()] == [None, "bytes=1000000-"]


def test_a_hub_that_lies_about_the_size_never_replaces_the_good_copy(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: FakeFile(DATA, claimed_size=len(DATA) + 4096)})
    dest = beedeck.workdir / "models"
    dest.mkdir()
    (dest / NAME).write_bytes(b"the good copy")
    code, _, err = get(beedeck, hub, dest)
    assert code == 1
    assert f"The downloaded {NAME} is corrupt: its size is {len(DATA)} bytes instead of {len(DATA) + 4096}" in err
    assert "The previous copy was left unchanged." in err and "Retry the download" in err
    assert (dest / NAME).read_bytes() == b"the good copy"
    assert not list(dest.glob("*.part*"))  # the bad bytes are not resumed next time


def test_a_hub_that_lies_about_the_checksum_never_replaces_the_good_copy(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: FakeFile(DATA, claimed_sha256="ab" * 32)})
    dest = beedeck.workdir / "models"
    dest.mkdir()
    (dest / NAME).write_bytes(b"the good copy")
    code, _, err = get(beedeck, hub, dest)
    assert code == 1 and f"its sha256 is {FakeFile(DATA).sha256} instead of {'ab' * 32}" in err
    assert (dest / NAME).read_bytes() == b"the good copy"


def test_a_hub_that_answers_5xx_is_retried_until_it_answers(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: DATA})
    hub.cdn.fail_statuses = [503, 502]  # two transient failures, then the file
    code, _, err = get(beedeck, hub, beedeck.workdir / "models")
    assert code == 0, err
    assert (beedeck.workdir / "models" / NAME).read_bytes() == DATA


def test_no_network_fails_fast_and_says_so(beedeck: Beedeck) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    done = beedeck.run("models", "get", REPO_ID, NAME, "--dest", str(beedeck.workdir), timeout=60,
                       HF_ENDPOINT=f"http://127.0.0.1:{port}", HF_HOME=str(beedeck.workdir / "hf"))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "Cannot reach the Hugging Face Hub" in done.stderr, done.stderr
    assert "Check the network connection or proxy, then retry" in done.stderr


# --------------------------------------------------------------------------- the release server


@pytest.fixture
def releases() -> Iterator[FakeReleases]:
    with FakeReleases() as server:
        yield server


@pytest.mark.engine
def test_an_engine_download_cut_half_way_resumes(releases: FakeReleases,
                                                 starter_archives: dict[str, Path]) -> None:  # noqa: F811
    archive = starter_archives["ml"]
    releases.add_release(MAINLINE_REPO, "b11434", [archive])
    releases.cut_after[archive.name] = archive.stat().st_size // 2
    rec = download_engine(repo=MAINLINE_REPO, backend="cpu", os_name="linux", arch="x64", api_url=releases.url,
                          registry=EngineRegistry())
    assert rec.ready
    ranges = [r for p, r in releases.requests if p.startswith("/download/")]
    assert ranges == [None, f"bytes={archive.stat().st_size // 2}-"]


@pytest.mark.parametrize("lie", ["digest", "size"])
def test_a_release_that_lies_about_its_asset_registers_nothing(releases: FakeReleases, tmp_path: Path,
                                                               lie: str) -> None:
    from tests.fakes.fake_releases import make_tar_gz

    archive = make_tar_gz(tmp_path / "llama-b1-bin-ubuntu-x64.tar.gz", {"llama-server": b"#!/bin/sh\n"})
    releases.add_release(MAINLINE_REPO, "b1", [archive])
    asset = releases.releases[(MAINLINE_REPO, "b1")][0]
    if lie == "digest":
        asset["digest"] = "sha256:" + "00" * 32
    else:
        asset["size"] += 1000
    reg = EngineRegistry()
    with pytest.raises(ReleaseError) as err:
        download_engine(repo=MAINLINE_REPO, tag="b1", os_name="linux", arch="x64", api_url=releases.url, registry=reg)
    assert "Downloading llama-b1-bin-ubuntu-x64.tar.gz failed" in str(err.value)
    assert ("sha256" if lie == "digest" else "size") in str(err.value)
    assert reg.list() == []
