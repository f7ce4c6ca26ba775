"""Hub metadata, auth errors and cache-layout downloads against the fake Hub (huggingface_hub 2.4.0 unchanged)."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backends.fail
import pytest

from beedeck import cli
from beedeck.core.models.hub import client as hubmod
from beedeck.core.models.hub.client import (
    AccessDeniedError,
    EntryMissingError,
    GatedRepoError,
    OfflineError,
    RepoMissingError,
    TokenRequiredError,
    download_model,
    get_model_files,
    repo_info,
    resolve_token,
    save_token,
)
from tests.fakes.fake_hub import FakeFile, FakeHub

TOKEN = "hf_SECRETtoken1234567890"


@pytest.fixture
def isolated_hf(tmp_path: Path) -> Path:
    """The test's HF_HOME: tests/conftest.py points it here, clears the Hub's other variables and
    gives each test its own in-memory keyring."""
    return tmp_path / "hf-home"


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as h:
        yield h


def _data(n: int, seed: int = 3) -> bytes:
    return random.Random(seed).randbytes(n)


def test_repo_info_gives_sizes_sha256_and_gated(hub: FakeHub) -> None:
    data = _data(10_000)
    hub.add_repo("org/model-GGUF", {"m-Q4_K_M.gguf": data, "README.md": hub_small(b"# hi")}, gated="manual")
    info = repo_info("org/model-GGUF", endpoint=hub.endpoint)
    f = info.file("m-Q4_K_M.gguf")
    assert f is not None and f.size == len(data) and f.sha256 == hashlib.sha256(data).hexdigest()
    readme = info.file("README.md")
    assert readme is not None and readme.sha256 is None and readme.size == 4
    assert info.gated == "manual" and info.commit == hub.repos["org/model-GGUF"].commit


def hub_small(data: bytes) -> FakeFile:
    return FakeFile(data, lfs=False)


def test_download_into_hub_cache_layout_readable_by_huggingface_hub(hub: FakeHub, isolated_hf: Path) -> None:
    from huggingface_hub import scan_cache_dir, try_to_load_from_cache

    data = _data(1_200_000)
    repo = hub.add_repo("org/model-GGUF", {"sub/m-Q8_0.gguf": data})
    progress: list[tuple[int, int | None]] = []
    (path,) = download_model("org/model-GGUF", "sub/m-Q8_0.gguf", endpoint=hub.endpoint,
                             on_progress=lambda d, t: progress.append((d, t)))
    cache = isolated_hf / "hub"
    storage = cache / "models--org--model-GGUF"
    sha = hashlib.sha256(data).hexdigest()
    assert path == storage / "snapshots" / repo.commit / "sub" / "m-Q8_0.gguf"
    assert path.is_symlink() and path.resolve() == (storage / "blobs" / sha).resolve()
    assert (storage / "refs" / "main").read_text() == repo.commit
    assert path.read_bytes() == data
    assert progress[-1] == (len(data), len(data))
    assert try_to_load_from_cache("org/model-GGUF", "sub/m-Q8_0.gguf", cache_dir=cache) == str(path)
    info = scan_cache_dir(cache)
    assert info.warnings == []
    (cached_repo,) = info.repos
    assert cached_repo.repo_id == "org/model-GGUF" and cached_repo.size_on_disk == len(data)
    # A second call finds the blob and fetches nothing.
    gets = len(hub.cdn_gets())
    assert download_model("org/model-GGUF", "sub/m-Q8_0.gguf", endpoint=hub.endpoint) == [path]
    assert len(hub.cdn_gets()) == gets


def test_download_to_a_user_folder(hub: FakeHub, tmp_path: Path) -> None:
    data = _data(50_000)
    hub.add_repo("org/m", {"m.gguf": data})
    (path,) = download_model("org/m", "m.gguf", endpoint=hub.endpoint, dest_dir=tmp_path / "mine")
    assert path == tmp_path / "mine" / "m.gguf" and path.read_bytes() == data


def test_split_set_downloads_as_a_set(hub: FakeHub) -> None:
    shards = {f"q/big-Q4_K_M-{i:05d}-of-00003.gguf": _data(40_000 + i, i) for i in range(1, 4)}
    hub.add_repo("org/big", {**shards, "q/other.gguf": _data(10)})
    files = get_model_files("org/big", "q/big-Q4_K_M-00001-of-00003.gguf", endpoint=hub.endpoint)
    assert [f.filename for f in files] == sorted(shards)
    progress: list[tuple[int, int | None]] = []
    paths = download_model("org/big", "q/big-Q4_K_M-00001-of-00003.gguf", endpoint=hub.endpoint,
                           on_progress=lambda d, t: progress.append((d, t)))
    assert [p.read_bytes() for p in paths] == [shards[n] for n in sorted(shards)]
    total = sum(len(d) for d in shards.values())
    assert progress[-1] == (total, total)
    assert all(t == total for _d, t in progress) and [d for d, _ in progress] == sorted(d for d, _ in progress)


def test_incomplete_split_set_is_refused(hub: FakeHub) -> None:
    hub.add_repo("org/big", {"big-00001-of-00002.gguf": _data(10)})
    with pytest.raises(EntryMissingError, match="missing big-00002-of-00002.gguf"):
        get_model_files("org/big", "big-00001-of-00002.gguf", endpoint=hub.endpoint)


def test_gated_without_token(hub: FakeHub) -> None:
    hub.add_repo("org/gated", {"m.gguf": _data(100)}, gated="manual", accepted_tokens={TOKEN})
    with pytest.raises(TokenRequiredError, match="gated.*access token.*accept the licence"):
        download_model("org/gated", "m.gguf", endpoint=hub.endpoint)
    head = [r for r in hub.requests if r.method == "HEAD"][-1]
    assert "authorization" not in head.headers


def test_gated_licence_not_accepted(hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_repo("org/gated", {"m.gguf": _data(100)}, gated="manual", accepted_tokens={"hf_other"})
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with pytest.raises(GatedRepoError) as exc:
        download_model("org/gated", "m.gguf", endpoint=hub.endpoint)
    assert "open https://huggingface.co/org/gated, accept the licence, then retry" in str(exc.value)


def test_gated_with_accepted_token_sends_it_to_the_hub_only(hub: FakeHub, caplog: pytest.LogCaptureFixture) -> None:
    data = _data(100_000)
    hub.add_repo("org/gated", {"m.gguf": data}, gated="auto", accepted_tokens={TOKEN})
    assert save_token(TOKEN)
    caplog.set_level(logging.DEBUG)
    (path,) = download_model("org/gated", "m.gguf", endpoint=hub.endpoint)
    assert path.read_bytes() == data
    hub_heads = [r for r in hub.requests if r.server == "hub" and r.method == "HEAD"]
    assert hub_heads[-1].headers["authorization"] == f"Bearer {TOKEN}"
    assert all("authorization" not in r.headers for r in hub.cdn_gets())
    assert TOKEN not in caplog.text


def test_denied_token_is_access_denied_and_never_leaks(hub: FakeHub, caplog: pytest.LogCaptureFixture,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    hub.add_repo("org/m", {"m.gguf": _data(100)}, denied_tokens={TOKEN})
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AccessDeniedError, match="HTTP 403.*fine-grained token") as exc:
        download_model("org/m", "m.gguf", endpoint=hub.endpoint, token=TOKEN)
    out = capsys.readouterr()
    assert TOKEN not in str(exc.value) and TOKEN not in caplog.text and TOKEN not in out.out + out.err


def test_private_repo_without_token_is_401_not_found(hub: FakeHub) -> None:
    hub.add_repo("org/private", {"m.gguf": _data(100)}, private=True, accepted_tokens={TOKEN})
    with pytest.raises(RepoMissingError, match="private repo, add a Hugging Face access token"):
        download_model("org/private", "m.gguf", endpoint=hub.endpoint)
    assert any(r.path.startswith("/api/models/org/private") for r in hub.requests)
    (path,) = download_model("org/private", "m.gguf", endpoint=hub.endpoint, token=TOKEN)
    assert path.exists()


def test_missing_repo_and_missing_file(hub: FakeHub) -> None:
    hub.add_repo("org/m", {"m.gguf": _data(100)})
    with pytest.raises(RepoMissingError, match="org/nope was not found"):
        download_model("org/nope", "m.gguf", endpoint=hub.endpoint)
    with pytest.raises(EntryMissingError, match="org/m/x.gguf does not exist"):
        download_model("org/m", "x.gguf", endpoint=hub.endpoint)


def test_file_missing_at_resolve_time_maps_entry_not_found(hub: FakeHub) -> None:
    """The listing showed the file but /resolve answers 404 EntryNotFound (deleted in between)."""
    hub.add_repo("org/m", {"m.gguf": _data(100)})
    assert repo_info("org/m", endpoint=hub.endpoint).file("m.gguf") is not None
    del hub.repos["org/m"].files["m.gguf"]
    with pytest.raises(EntryMissingError, match="org/m/m.gguf does not exist"):
        hubmod.file_metadata("org/m", "m.gguf", endpoint=hub.endpoint)
    with pytest.raises(EntryMissingError, match="no such revision"):
        hubmod.file_metadata("org/m", "m.gguf", revision="nope", endpoint=hub.endpoint)


def test_offline_is_fast_and_clear() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(OfflineError, match="Cannot reach the Hugging Face Hub.*Check the network") as caught:
        download_model("org/m", "m.gguf", endpoint=f"http://127.0.0.1:{port}")
    assert time.monotonic() - t0 < 3
    # Issue 37: it said "(ConnectError)", an exception's class name. It says what happened, and where.
    said = str(caught.value)
    assert f"the connection was refused (nothing listens at 127.0.0.1:{port}" in said and "Error" not in said


def test_token_sources(isolated_hf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_token() is None
    isolated_hf.mkdir(parents=True, exist_ok=True)
    (isolated_hf / "token").write_text("hf_from_file\n")
    assert resolve_token() == "hf_from_file"
    assert save_token("hf_from_keyring")
    assert resolve_token() == "hf_from_keyring"
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    assert resolve_token() == "hf_from_env"
    assert resolve_token("hf_explicit") == "hf_explicit"


def test_no_keyring_backend_is_handled(isolated_hf: Path) -> None:
    keyring.set_keyring(keyring.backends.fail.Keyring())
    assert save_token("hf_x") is False
    assert resolve_token() is None


def test_cancel_mid_download_then_resume(hub: FakeHub) -> None:
    data = _data(3_000_000)
    hub.add_repo("org/m", {"m.gguf": data})
    hub.cdn.throttle_bps = 1_000_000
    cancel = threading.Event()

    def progress(done: int, total: int | None) -> None:
        if done > 500_000:
            cancel.set()

    with pytest.raises(hubmod.DownloadCancelled):
        download_model("org/m", "m.gguf", endpoint=hub.endpoint, on_progress=progress, cancel_event=cancel)
    hub.cdn.throttle_bps = 0
    before = len(hub.cdn_gets())
    (path,) = download_model("org/m", "m.gguf", endpoint=hub.endpoint)
    assert path.read_bytes() == data
    (resume,) = hub.cdn_gets()[before:]
    assert resume.headers["range"].startswith("bytes=") and int(resume.headers["range"][6:-1]) > 500_000


def test_cli_models_get_and_list_json(hub: FakeHub, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from tests.core.models.test_library import make_gguf

    data = make_gguf("llama", 15, name="Tiny")
    hub.add_repo("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": data}, gated="manual", accepted_tokens={TOKEN})
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cli.main(["models", "get", "org/tiny-GGUF", "tiny-Q4_K_M.gguf"]) == 1
    err = capsys.readouterr().err
    assert "accept the licence" in err
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert cli.main(["models", "get", "org/tiny-GGUF", "tiny-Q4_K_M.gguf", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert Path(result["paths"][0]).read_bytes() == data
    assert TOKEN not in out + err
    assert cli.main(["models", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(m["repo"], m["filename"], m["architecture"], m["file_type"]) for m in listed] == [
        ("org/tiny-GGUF", "tiny-Q4_K_M.gguf", "llama", "Q4_K_M")]


def test_expired_cdn_link_is_renewed_and_the_download_resumes(hub: FakeHub) -> None:
    data = _data(800_000)
    hub.add_repo("org/m", {"m.gguf": data})
    hub.cdn.cut_after = 300_000  # first GET breaks off ...
    hub.cdn.fail_statuses = []
    sleeps: list[float] = []

    def expire_link(seconds: float) -> None:  # ... and by the retry the signed link has expired
        sleeps.append(seconds)
        hub.cdn.fail_statuses = [403]

    (path,) = download_model("org/m", "m.gguf", endpoint=hub.endpoint, sleep=expire_link)
    assert path.read_bytes() == data
    heads = [r for r in hub.requests if r.server == "hub" and r.method == "HEAD"]
    assert len(heads) == 2
    assert [r.headers.get("range") for r in hub.cdn_gets()] == [None, "bytes=300000-", "bytes=300000-"]
