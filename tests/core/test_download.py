"""BeeDeck's resumable download loop against the fake Hub's CDN (a real local HTTP server)."""

from __future__ import annotations

import errno
import hashlib
import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beedeck.core import download as dl
from beedeck.core.download import (
    ChecksumMismatchError,
    DiskFullError,
    DownloadCancelled,
    HTTPStatusFailure,
    OfflineError,
    download_file,
    part_paths,
)
from tests.conftest import REPO
from tests.fakes.fake_hub import FakeHub


def _data(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as h:
        yield h


def _blob(hub: FakeHub, data: bytes) -> tuple[str, str]:
    hub.add_repo(f"org/m{len(hub.repos)}", {"m.gguf": data})
    sha = hashlib.sha256(data).hexdigest()
    return f"{hub.cdn_url}/blobs/{sha}?X-Amz-Signature=abc", sha


def test_full_download_verifies_sha256_and_reports_progress(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(3_000_000)
    url, sha = _blob(hub, data)
    seen: list[tuple[int, int | None]] = []
    dest = tmp_path / "m.gguf"
    assert download_file(url, dest, expected_sha256=sha, expected_size=len(data),
                         on_progress=lambda d, t: seen.append((d, t))) == dest
    assert dest.read_bytes() == data
    assert seen[-1] == (len(data), len(data))
    assert not any(p.exists() for p in part_paths(dest))
    assert hub.cdn_gets()[0].headers["accept-encoding"] == "identity"


def test_resume_after_cut_fetches_only_the_remainder(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(4_000_000)
    url, sha = _blob(hub, data)
    hub.cdn.cut_after = 1_500_000
    sleeps: list[float] = []
    dest = download_file(url, tmp_path / "m.gguf", expected_sha256=sha, expected_size=len(data), sleep=sleeps.append)
    assert dest.read_bytes() == data
    ranges = [r.headers.get("range") for r in hub.cdn_gets()]
    assert ranges == [None, "bytes=1500000-"]
    assert hub.bytes_sent == len(data)  # nothing fetched twice
    assert sleeps == [1.0]  # an attempt that made progress resets the backoff to its first step


def test_transient_5xx_is_retried_with_exponential_backoff(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(100_000)
    url, sha = _blob(hub, data)
    hub.cdn.fail_statuses = [503, 502, 500]
    sleeps: list[float] = []
    download_file(url, tmp_path / "m.gguf", expected_sha256=sha, sleep=sleeps.append)
    assert sleeps == [1.0, 2.0, 4.0]


def test_5xx_that_persists_gives_up_after_retries(hub: FakeHub, tmp_path: Path) -> None:
    url, sha = _blob(hub, _data(1000))
    hub.cdn.fail_statuses = [503] * 10
    sleeps: list[float] = []
    with pytest.raises(HTTPStatusFailure, match="HTTP 503.*try again later") as exc:
        download_file(url, tmp_path / "m.gguf", expected_sha256=sha, retries=2, sleep=sleeps.append)
    assert exc.value.status_code == 503 and len(sleeps) == 2


def test_404_is_not_retried(hub: FakeHub, tmp_path: Path) -> None:
    sleeps: list[float] = []
    with pytest.raises(HTTPStatusFailure, match="not found") as exc:
        download_file(f"{hub.cdn_url}/blobs/{'0' * 64}", tmp_path / "x", sleep=sleeps.append)
    assert exc.value.status_code == 404 and sleeps == []


def test_resume_after_app_restart(hub: FakeHub, tmp_path: Path) -> None:
    """A separate process downloads slowly and is killed; a fresh call resumes from its .part."""
    data = _data(2_000_000)
    url, sha = _blob(hub, data)
    hub.cdn.throttle_bps = 500_000
    dest = tmp_path / "m.gguf"
    part, _side = part_paths(dest)
    code = ("import sys; from pathlib import Path; from beedeck.core.download import download_file; "
            f"download_file({url!r}, Path({str(dest)!r}), expected_sha256={sha!r}, expected_size={len(data)})")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env={"PYTHONPATH": str(REPO / "gui")})
    try:
        deadline = time.monotonic() + 20
        while (not part.exists() or part.stat().st_size < 300_000) and time.monotonic() < deadline:
            time.sleep(0.02)  # polling a file another process writes: no event to wait on
    finally:
        proc.kill()
        proc.wait(timeout=10)
    have = part.stat().st_size
    assert 0 < have < len(data)
    hub.cdn.throttle_bps = 0
    before = len(hub.cdn_gets())
    download_file(url, dest, expected_sha256=sha, expected_size=len(data))
    assert dest.read_bytes() == data
    assert [r.headers.get("range") for r in hub.cdn_gets()[before:]] == [f"bytes={have}-"]


def test_stale_part_of_another_version_restarts_cleanly(hub: FakeHub, tmp_path: Path) -> None:
    old, new = _data(500_000, 1), _data(600_000, 2)
    url_old, sha_old = _blob(hub, old)
    url_new, sha_new = _blob(hub, new)
    dest = tmp_path / "m.gguf"
    hub.cdn.cut_after = 200_000
    with pytest.raises(OfflineError):
        download_file(url_old, dest, expected_sha256=sha_old, retries=0, sleep=lambda s: None)
    assert part_paths(dest)[0].stat().st_size == 200_000
    before = len(hub.cdn_gets())
    download_file(url_new, dest, expected_sha256=sha_new, expected_size=len(new))
    assert dest.read_bytes() == new
    assert [r.headers.get("range") for r in hub.cdn_gets()[before:]] == [None]


def test_if_range_restarts_when_the_server_file_changed(hub: FakeHub, tmp_path: Path) -> None:
    """Same URL, no checksum known: the stored ETag goes out as If-Range, the server sends the new file."""
    old = _data(300_000, 1)
    url, _sha = _blob(hub, old)
    dest = tmp_path / "m.gguf"
    part, side = part_paths(dest)
    hub.cdn.cut_after = 100_000
    with pytest.raises(OfflineError):
        download_file(url, dest, retries=0, sleep=lambda s: None)
    # The sidecar records the ETag the server gave; pretend the server's file has changed since.
    meta = json.loads(side.read_text())
    assert meta["etag"] == f'"{_sha}"'
    side.write_text(json.dumps({**meta, "etag": f'"{"f" * 64}"'}))
    download_file(url, dest)
    last = hub.cdn_gets()[-1].headers
    assert last["range"] == "bytes=100000-" and last["if-range"] == f'"{"f" * 64}"'
    assert dest.read_bytes() == old and not part.exists()


def test_cancel_stops_within_a_second_on_a_slow_server(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(5_000_000)
    url, sha = _blob(hub, data)
    hub.cdn.throttle_bps = 4_000  # ~a read every 0.25 s: cancel must not wait for the next chunk
    cancel, started = threading.Event(), threading.Event()
    result: dict[str, Any] = {}
    dest = tmp_path / "m.gguf"

    def run() -> None:
        try:
            download_file(url, dest, expected_sha256=sha, cancel_event=cancel,
                          on_progress=lambda d, t: started.set() if d > 0 else None)
        except Exception as exc:
            result["exc"] = exc
        result["t"] = time.monotonic()

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(10)
    t0 = time.monotonic()
    cancel.set()
    t.join(5)
    assert not t.is_alive()
    assert result["t"] - t0 < 1.0
    assert isinstance(result["exc"], DownloadCancelled) and "resume" in str(result["exc"])
    assert part_paths(dest)[0].stat().st_size > 0 and not dest.exists()


def test_checksum_failure_never_replaces_a_good_file(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(200_000)
    url, _sha = _blob(hub, data)
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"good old model")
    with pytest.raises(ChecksumMismatchError, match="corrupt.*sha256.*left unchanged.*Retry"):
        download_file(url, dest, expected_sha256="0" * 64)
    assert dest.read_bytes() == b"good old model"
    assert not any(p.exists() for p in part_paths(dest))


def test_offline_fails_fast_with_a_remedy(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    t0 = time.monotonic()
    with pytest.raises(OfflineError, match="Cannot reach 127.0.0.1.*Check the network") as caught:
        download_file(f"http://127.0.0.1:{port}/blobs/x", tmp_path / "x", sleep=sleeps.append)
    assert time.monotonic() - t0 < 2 and sleeps == []
    assert "the connection was refused" in str(caught.value) and "Error" not in str(caught.value)  # no class name


def test_slow_server_reports_progress_several_times_a_second(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(500_000)
    url, sha = _blob(hub, data)
    hub.cdn.throttle_bps = 250_000  # ~2 s
    stamps: list[float] = []
    download_file(url, tmp_path / "m.gguf", expected_sha256=sha, on_progress=lambda d, t: stamps.append(time.monotonic()))
    duration = stamps[-1] - stamps[0]
    assert duration > 1.5
    assert len(stamps) / duration >= 5
    assert max(b - a for a, b in zip(stamps, stamps[1:], strict=False)) < 0.5


def test_disk_full_before_start(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _data(100_000)
    url, sha = _blob(hub, data)
    monkeypatch.setattr(dl.shutil, "disk_usage", lambda p: type("U", (), {"free": 1_000_000, "total": 0, "used": 0})())
    with pytest.raises(DiskFullError, match="Not enough disk space.*free some space"):
        download_file(url, tmp_path / "m.gguf", expected_sha256=sha, expected_size=len(data))
    assert hub.cdn_gets() == []


def test_disk_full_mid_way_keeps_the_part(hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _data(1_000_000)
    url, sha = _blob(hub, data)
    real_open = open

    class Filling:
        def __init__(self, fh: Any) -> None:
            self.fh, self.n = fh, 0

        def write(self, b: bytes) -> int:
            if self.n + len(b) > 300_000:
                raise OSError(errno.ENOSPC, "No space left on device")
            self.n += len(b)
            return int(self.fh.write(b))

        def __enter__(self) -> Filling:
            return self

        def __exit__(self, *a: object) -> None:
            self.fh.close()

    def fake_open(path: Any, mode: str = "r", *a: Any, **kw: Any) -> Any:
        fh = real_open(path, mode, *a, **kw)
        return Filling(fh) if mode in ("wb", "ab") else fh

    monkeypatch.setattr(dl, "open", fake_open, raising=False)
    dest = tmp_path / "m.gguf"
    with pytest.raises(DiskFullError, match="disk filled up.*resumes"):
        download_file(url, dest, expected_sha256=sha, expected_size=len(data))
    assert 0 < part_paths(dest)[0].stat().st_size <= 300_000
    monkeypatch.delattr(dl, "open")
    download_file(url, dest, expected_sha256=sha, expected_size=len(data))
    assert dest.read_bytes() == data


def test_a_second_download_of_the_same_file_is_refused(hub: FakeHub, tmp_path: Path) -> None:
    import filelock

    url, sha = _blob(hub, _data(1000))
    dest = tmp_path / "m.gguf"
    with filelock.FileLock(str(dest) + ".lock"), pytest.raises(dl.DownloadError, match="already being downloaded"):
        download_file(url, dest, expected_sha256=sha)
    assert hub.cdn_gets() == []
    download_file(url, dest, expected_sha256=sha)
    assert dest.exists() and not Path(str(dest) + ".lock").exists()
