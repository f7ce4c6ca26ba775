"""Faults, round two: a hostile Hub, hostile servers on 127.0.0.1, and the secrets a child could see.

The Hub is tests/fakes/fake_hub.py made hostile (ETags and commits with ``../``, every revision
accepted, an API that never answers, a CDN that trickles or redirects for ever); the llama-servers
that misbehave are :class:`HostileServer` below, raw sockets on 127.0.0.1 that answer as no real
server would. Everything is driven through the real ``beedeck`` CLI as a child process, except the
low-speed limit (its window is a parameter of the download loop) and a disk that cannot be filled
where no tmpfs can be mounted. For every path fault the whole test folder is walked before and after:
nothing may change outside the folder the file belongs in.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import psutil
import pytest

from beedeck.core.download import TooSlowError, download_file
from tests.fakes.fake_hub import FakeFile, FakeHub

from .conftest import Beedeck, Tmpfs, alive, wait_for

REPO_ID, NAME = "org/tiny-GGUF", "tiny-Q4_K_M.gguf"
DATA = random.Random(20).randbytes(2_000_000)
SECRET = "s3cret-key-of-the-test"
HF_SECRET = "hf_the-tests-own-token"


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as h:
        yield h


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every entry under ``root``: kind, size, mtime and a link's target (links are not followed)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            link = os.readlink(p) if p.is_symlink() else None
            out[str(p.relative_to(root))] = (st.st_mode, st.st_size if not p.is_dir() else 0, st.st_mtime_ns, link)
    return out


def changes_outside(before: dict[str, tuple[Any, ...]], after: dict[str, tuple[Any, ...]],
                    allowed: list[str]) -> set[str]:
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    return {k for k in changed if not any(k == a or k.startswith(a + "/") for a in allowed)}


# --------------------------------------------------------------------------- paths from the Hub and the user

# (hostile knob, extra arguments, expected words). The cache is <tmp>/hf/hub; the values aim at
# <tmp>/hf (outside the cache) and <tmp> itself.
TRAVERSALS: dict[str, tuple[str, list[str], str]] = {
    "etag": ("etag", [], "The Hub answered the ETag"),
    "commit": ("commit", [], "The Hub answered the commit"),
    "file-dotdot": ("file", ["FILE=../../../../planted.gguf"], "The file name"),
    "file-absolute": ("file", ["FILE={tmp}/planted-abs.gguf", "--dest", "{tmp}/work/models"], "The file name"),
    "dest-dotdot": ("file", ["FILE=../planted.gguf", "--dest", "{tmp}/work/models"], "The file name"),
    "revision": ("revision", ["--revision", "../../../planted-ref"], "The revision"),
}


@pytest.mark.parametrize("case", list(TRAVERSALS))
def test_a_hostile_name_from_the_hub_or_the_command_line_writes_nothing_outside_its_folder(
        beedeck: Beedeck, hub: FakeHub, tmp_path: Path, case: str) -> None:
    knob, extra, words = TRAVERSALS[case]
    args = [a.format(tmp=tmp_path) for a in extra]
    filename = next((a[5:] for a in args if a.startswith("FILE=")), NAME)
    args = [a for a in args if not a.startswith("FILE=")]
    f = FakeFile(DATA, claimed_etag="../../../victim" if knob == "etag" else None)
    # The hostile hub lists the hostile name too, and answers any path (a ../ is normalised away by
    # the client before the request leaves), so the old code wrote where the name pointed.
    repo = hub.add_repo(REPO_ID, {NAME: f, filename: f},
                        commit="../../../planted" if knob == "commit" else None,
                        any_revision=knob == "revision")
    hub.answer_any = (REPO_ID, NAME)
    hf = tmp_path / "hf"
    (hf / "hub").mkdir(parents=True)
    (hf / "victim").write_bytes(b"precious")
    (tmp_path / "victim").write_bytes(b"precious")
    before = tree(tmp_path)
    done = beedeck.run("models", "get", REPO_ID, filename, *args, HF_ENDPOINT=hub.endpoint, HF_HOME=str(hf))
    after = tree(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert words in done.stderr and "outside" in done.stderr, done.stderr
    dest = "work/models" if "--dest" in args else "hf/hub"
    assert changes_outside(before, after, [dest, "beedeck-home"]) == set()
    assert (hf / "victim").read_bytes() == (tmp_path / "victim").read_bytes() == b"precious"
    assert not [p for p in tmp_path.rglob("planted*")], "a planted file or folder exists"
    if knob in ("file", "revision"):  # the user's own words: refused before anything is asked
        assert hub.requests == [], [r.path for r in hub.requests]
    assert repo.commit  # the repo was served as configured


def test_a_release_asset_name_that_climbs_out_writes_nothing_outside_the_engine_folder(tmp_path: Path) -> None:
    from beedeck.core.engine.registry import EngineRegistry
    from beedeck.core.engine.releases import MAINLINE_REPO, ReleaseError, download_engine
    from tests.fakes.fake_releases import FakeReleases, make_tar_gz

    archive = make_tar_gz(tmp_path / "llama-b1-bin-ubuntu-x64.tar.gz", {"llama-server": b"#!/bin/sh\n"})
    hostile = "llama-" + "../" * 7 + "planted-bin-ubuntu-x64.tar.gz"  # GitHub's JSON names it; the bytes are served
    with FakeReleases() as releases:
        releases.add_release(MAINLINE_REPO, "b1", [archive])
        releases.releases[(MAINLINE_REPO, "b1")][0]["name"] = hostile
        before = tree(tmp_path)
        reg = EngineRegistry()
        with pytest.raises(ReleaseError) as err:
            download_engine(repo=MAINLINE_REPO, tag="b1", os_name="linux", arch="x64", api_url=releases.url,
                            registry=reg)
        assert not [p for p, _ in releases.requests if p.startswith("/download/")]  # refused before a byte
    assert "would be written outside" in str(err.value) and "refused it and wrote nothing" in str(err.value)
    assert changes_outside(before, tree(tmp_path), ["beedeck-home"]) == set()
    assert not list(tmp_path.rglob("planted*")) and reg.list() == []


# --------------------------------------------------------------------------- secrets


def _key_files(bd: Beedeck) -> list[Path]:
    return sorted((bd.home / "state").glob("api-key-*.key"))


def test_llama_server_never_sees_a_secret_in_its_environment(beedeck: Beedeck) -> None:
    child = beedeck.spawn("serve", *beedeck.starter_args(), BEEDECK_API_KEY=SECRET, HF_TOKEN=HF_SECRET)
    child.wait_text("ready in", timeout=120)
    servers = child.servers()
    assert len(servers) == 1
    env = psutil.Process(next(iter(servers))).environ()
    assert env.get("BEEDECK_HOME") == str(beedeck.home)  # the environment was read, and is BeeDeck's
    assert "BEEDECK_API_KEY" not in env and "HF_TOKEN" not in env
    assert not any(SECRET in v or HF_SECRET in v for v in env.values())
    assert psutil.Process(child.pid).environ().get("BEEDECK_API_KEY") == SECRET  # the parent had both
    child.proc.send_signal(signal.SIGINT)
    assert child.wait(30) == 0


def test_a_key_file_left_by_a_killed_serve_is_removed_by_the_next_start(beedeck: Beedeck) -> None:
    child = beedeck.spawn("serve", *beedeck.starter_args(), BEEDECK_API_KEY=SECRET)
    child.wait_text("ready in", timeout=120)
    server = next(iter(child.servers()))
    assert len(_key_files(beedeck)) == 1
    os.killpg(child.pid, signal.SIGKILL)  # no handler runs: the key file cannot be removed by its owner
    child.wait(10)
    wait_for(lambda: not alive(server), 10, "the killed serve's server to go")
    left = _key_files(beedeck)
    assert len(left) == 1 and left[0].read_text().strip() == SECRET
    done = beedeck.run("serve", *beedeck.starter_args(), "--exit-when-ready", BEEDECK_API_KEY=SECRET)
    assert done.returncode == 0, done.stderr
    assert _key_files(beedeck) == []  # the orphan removed at the start, the new one at the stop


def test_a_full_disk_when_the_key_is_written_leaves_nothing_and_says_so(
        beedeck: Beedeck, small_disk: Tmpfs, monkeypatch: pytest.MonkeyPatch) -> None:
    state = beedeck.home / "state"
    if small_disk.real:
        beedeck.home.mkdir(parents=True, exist_ok=True)
        state.symlink_to(small_disk.path, target_is_directory=True)
        ballast = small_disk.fill()
        done = beedeck.run("serve", *beedeck.starter_args(), "--exit-when-ready", BEEDECK_API_KEY=SECRET)
        ballast.unlink()
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        message = done.stderr
    else:  # no tmpfs here: ENOSPC where the disk would raise it, in the same code, in-process
        import errno

        from beedeck.core.engine import keyfile
        from beedeck.core.engine.argv import build_argv
        from beedeck.core.engine.probe import probe_engine
        from beedeck.core.engine.server import ServerFailed, start_server
        from beedeck.core.starter import settings_for_model

        def full(fd: int, data: bytes) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(keyfile, "_write_all", full)
        settings = settings_for_model(beedeck.engine, beedeck.model)
        settings.api_key = SECRET
        caps = probe_engine(str(beedeck.engine))
        with pytest.raises(ServerFailed) as err:
            start_server(beedeck.engine, caps, build_argv(settings, caps))
        message = str(err.value.failure)
    assert "The server's API key could not be written to" in message and "the disk is full" in message, message
    assert "Free some space on that disk, then start again." in message
    assert [p.name for p in state.iterdir() if "key" in p.name] == []  # no empty .key, no temporary file


# --------------------------------------------------------------------------- model text on a terminal

EVIL_NAME = "\x1b[2J\x1b[31mEVIL\x07\x08\nerror: a forged line\r"
EVIL_TENSOR = "blk.0\x1b[5m.attn\nerror: another forged line"


def _evil_gguf(path: Path, tensor_type: gguf.GGMLQuantizationType | None = None) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(EVIL_NAME)
    w.add_block_count(1)
    if tensor_type is None:
        w.add_tensor(EVIL_TENSOR, np.zeros(8, dtype=np.float32))
    else:  # a row length (100) that does not fit the type's 256-wide blocks: an error quoting the name
        w.add_tensor_info(EVIL_TENSOR, [100], np.dtype(np.float32), 64, raw_dtype=tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()
    with open(path, "ab") as fh:
        fh.write(b"\0" * 4096)
    return path


def _assert_inert(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\x08"), repr(text)
    assert not any(line.startswith(("error: a forged", "error: another forged")) for line in text.splitlines())


def test_model_text_with_escapes_and_newlines_is_shown_escaped_never_acted_on(beedeck: Beedeck) -> None:
    folder = beedeck.workdir / "lib"
    folder.mkdir()
    good = _evil_gguf(folder / "evil.gguf")
    bad = _evil_gguf(folder / "evil-bad.gguf", gguf.GGMLQuantizationType.Q4_K)
    shown = []
    for args in (("inspect", str(good)), ("inspect", str(bad)), ("models", "scan", str(folder))):
        done = beedeck.run(*args)
        assert "Traceback" not in done.stderr, done.stderr
        _assert_inert(done.stdout + done.stderr)
        shown.append(done.stdout + done.stderr)
    assert "\\x1b[31mEVIL\\x07" in shown[0]  # recognisable, and inert
    assert "blk.0\\x1b[5m.attn\\nerror: another forged line" in shown[1]
    assert "evil-bad.gguf" in shown[2]


# --------------------------------------------------------------------------- servers that misbehave


class HostileServer:
    """A raw-socket 'llama-server' on 127.0.0.1 whose answers are ``respond(path, conn)``'s to write."""

    def __init__(self, respond: Callable[[str, socket.socket, threading.Event], None]) -> None:
        self.respond = respond
        self.stop = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                request += chunk
            path = request.split(b" ", 2)[1].decode()
            try:
                self.respond(path, conn, self.stop)
            except OSError:
                pass  # the client hung up: what the faults below expect

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def _json(conn: socket.socket, status: int, body: Any) -> None:
    data = json.dumps(body).encode()
    conn.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                 % (status, len(data)) + data)


def _endless_health(path: str, conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"status\":\"ok\"")
    block = b" " * 65536
    while not stop.is_set():
        conn.sendall(block)  # a body that never ends


def _slow_headers(path: str, conn: socket.socket, stop: threading.Event) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
        conn.sendall(bytes([byte]))  # a byte at a time: every read is quick, the answer never whole
        if stop.wait(0.3):
            return


def _wrong_types(path: str, conn: socket.socket, stop: threading.Event) -> None:
    answers: dict[str, tuple[int, Any]] = {
        "/health": (200, {"status": "ok"}),
        "/props": (200, {"default_generation_settings": {"params": "not an object", "n_ctx": "4096"},
                         "model_alias": ["a", "list"], "build_info": {"b": 1}, "total_slots": "two",
                         "is_sleeping": "no"}),
        "/v1/models": (200, {"data": ["not an object"]}),
        "/slots": (200, "a string"),
        "/metrics": (404, {"error": "not an object either"}),
    }
    status, body = answers.get(path, (404, []))
    _json(conn, status, body)


@pytest.fixture
def hostile() -> Iterator[Callable[..., HostileServer]]:
    made: list[HostileServer] = []

    def make(respond: Callable[[str, socket.socket, threading.Event], None]) -> HostileServer:
        made.append(HostileServer(respond))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_connect_to_a_health_body_that_never_ends_reads_64_kb_and_stops(beedeck: Beedeck, hostile: Any) -> None:
    server = hostile(_endless_health)
    child = beedeck.spawn("connect", server.url)
    peak = 0
    while child.proc.poll() is None:  # the child's memory, sampled while it runs (before: 6 GB in 18 s)
        try:
            peak = max(peak, psutil.Process(child.pid).memory_info().rss)
            child.proc.wait(0.05)
        except (psutil.Error, subprocess.TimeoutExpired):
            continue
    assert child.wait(60) == 1 and "Traceback" not in child.stderr(), child.stderr()
    assert "answers, but not as llama.cpp's llama-server (/health answered more than 64 KB)" in child.stderr()
    assert peak < 1 << 30, f"peak RSS {peak / 2**20:.0f} MiB"


def test_connect_to_a_server_that_sends_its_headers_a_byte_at_a_time_gives_up_at_the_deadline(
        beedeck: Beedeck, hostile: Any) -> None:
    server = hostile(_slow_headers)
    done = beedeck.run("connect", server.url, "--timeout", "2", timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{server.url} did not answer within 2 s." in done.stderr


def test_connect_to_a_server_with_wrong_json_types_reports_what_it_can(beedeck: Beedeck, hostile: Any) -> None:
    server = hostile(_wrong_types)
    done = beedeck.run("connect", server.url, "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    out = json.loads(done.stdout)
    assert out["ok"] is True and out["n_ctx"] is None and out["engine"] == "llama.cpp"
    assert out["model"] == "['a', 'list']" and out["metrics"] is False


@pytest.mark.parametrize(("url", "words"), [
    ("http://[::1", "is not a valid address"),
    ("http://127.0.0.1:8080/\x1b[31mred", "contains a space or a control character"),
], ids=["unclosed-ipv6", "control-char"])
def test_connect_to_a_malformed_url_says_what_is_wrong(beedeck: Beedeck, url: str, words: str) -> None:
    done = beedeck.run("connect", url)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert words in done.stderr and "\x1b" not in done.stderr


# --------------------------------------------------------------------------- the Hub and its CDN misbehave


def get(bd: Beedeck, hub: FakeHub, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return bd.run("models", "get", REPO_ID, NAME, *args, timeout=timeout, HF_ENDPOINT=hub.endpoint,
                  HF_HOME=str(bd.workdir / "hf"), **env)


def test_a_hub_api_that_accepts_and_never_answers_is_given_up(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: DATA})
    hub.api_silent = True
    done = get(beedeck, hub, "--dest", str(beedeck.workdir / "m"), timeout=60, HF_HUB_ETAG_TIMEOUT="1")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert ("did not answer in time. Retry in a moment." in done.stderr
            or "The Hugging Face Hub did not answer about org/tiny-GGUF within 3 s" in done.stderr), done.stderr
    assert [r.path.split("?")[0] for r in hub.requests] and hub.cdn_gets() == []


def test_a_download_that_trickles_is_given_up_as_too_slow_and_resumes_later(hub: FakeHub, tmp_path: Path) -> None:
    f = FakeFile(DATA)
    hub.add_repo(REPO_ID, {NAME: f})
    hub.cdn.trickle_after = 500_000  # then a byte every 0.1 s: each read is prompt, the whole for ever
    dest = tmp_path / NAME
    url = f"{hub.cdn_url}/blobs/{f.sha256}"
    with pytest.raises(TooSlowError) as err:
        download_file(url, dest, expected_sha256=f.sha256, expected_size=len(DATA), sleep=lambda s: None,
                      disk_margin=0, low_speed=(1000, 1.0))
    assert str(err.value).startswith(f"The transfer is too slow: {NAME} arrived at ")
    assert "run the same command again: the download resumes where it stopped" in str(err.value)
    part = dest.with_name(NAME + ".part")
    assert part.stat().st_size >= 500_000 and not dest.exists()
    download_file(url, dest, expected_sha256=f.sha256, expected_size=len(DATA), sleep=lambda s: None, disk_margin=0)
    assert dest.read_bytes() == DATA
    assert hub.cdn_gets()[-1].headers.get("range", "").startswith("bytes=")  # resumed, not restarted


def test_a_download_without_a_terminal_prints_its_progress(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: DATA})
    hub.cdn.throttle_bps = 1_000_000  # two seconds: several progress calls
    done = get(beedeck, hub, "--dest", str(beedeck.workdir / "m"))
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("downloaded ")]
    assert len(lines) >= 2 and lines[-1].startswith("downloaded 2.0 MB of 2.0 MB (100%) at "), done.stderr
    assert "\r" not in done.stderr  # no bar redraws in a log


def test_a_cdn_that_redirects_in_a_loop_is_said_as_such(beedeck: Beedeck, hub: FakeHub) -> None:
    hub.add_repo(REPO_ID, {NAME: DATA})
    hub.cdn.redirect_loop = True
    done = get(beedeck, hub, "--dest", str(beedeck.workdir / "m"))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "redirects in a loop (too many redirects)" in done.stderr


# --------------------------------------------------------------------------- copies on disk


def _real_gguf(tmp: Path) -> bytes:
    """A real GGUF of 2 MB (its weights zeros): the library lists it, so `models get` finds it on disk."""
    path = tmp / "real.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_tensor("token_embd.weight", np.zeros(500_000, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path.read_bytes()


def test_a_model_damaged_without_changing_its_size_is_fetched_again(beedeck: Beedeck, hub: FakeHub,
                                                                     tmp_path: Path) -> None:
    data = _real_gguf(tmp_path)
    hub.add_repo(REPO_ID, {NAME: data})
    assert get(beedeck, hub).returncode == 0
    again = get(beedeck, hub)
    assert again.returncode == 0 and "Already on disk:" in again.stdout, again.stdout + again.stderr
    assert len(hub.cdn_gets()) == 1  # the good copy, hashed once, is trusted by size + mtime + sha256
    blob = next((beedeck.workdir / "hf" / "hub").rglob("blobs/*"))
    with open(blob, "r+b") as fh:  # one byte of the weights flipped in place: same size, header intact
        fh.seek(len(data) - 1000)
        byte = fh.read(1)
        fh.seek(len(data) - 1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    third = get(beedeck, hub)
    assert third.returncode == 0, third.stderr
    assert f"note: {NAME} on disk" in third.stderr and "does not have the Hub's sha256" in third.stderr
    assert "Already on disk" not in third.stdout
    assert len(hub.cdn_gets()) == 2 and blob.read_bytes() == data


def test_a_starter_copy_left_by_a_killed_first_start_is_removed(beedeck: Beedeck) -> None:
    from beedeck.core.starter import STARTER_MODEL_NAME

    from .conftest import place_starter

    place_starter(beedeck.home, beedeck.model)  # the starter in place (a link): no 250 MB copy
    folder = beedeck.home / "data" / "models" / "starter"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is no process any more, as a killed first start's
    dead = folder / f"{STARTER_MODEL_NAME}.part-{gone.pid}"
    dead.write_bytes(b"\0" * 1_000_000)
    dead_thread = folder / f"{STARTER_MODEL_NAME}.part-{gone.pid}-140000000000"  # a thread's copy (one name each)
    dead_thread.write_bytes(b"\0" * 1000)
    live = folder / f"{STARTER_MODEL_NAME}.part-{os.getpid()}-140000000000"  # in progress, by a live process
    live.write_bytes(b"\0" * 1000)
    done = beedeck.run("serve", "--engine", str(beedeck.engine), "--print-argv")
    assert done.returncode == 0, done.stderr
    assert not dead.exists() and not dead_thread.exists() and live.exists()
    assert (folder / STARTER_MODEL_NAME).is_file()
