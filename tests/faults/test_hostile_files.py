"""Faults, round two: hostile files and state. Crafted GGUF headers, FIFOs and devices where a file
belongs, links that loop, names too long, config files that never end, a history another process
holds locked or a folder that cannot be written, odd characters in the data path, hosts the port
finder could not bind, a full disk under the starter copy, a stopped server whose BeeDeck dies, and
files a user may not read (root with CAP_DAC_OVERRIDE dropped, as ``setpriv`` allows).

Each drives what a user drives (the CLI as a child process, the window offscreen) and asserts the
message, that nothing the user had was moved or lost, and that no process is left.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core import paths
from beedeck.core.chat.recovery import open_store
from beedeck.core.chat.store import ChatStore, default_path
from beedeck.ui.window import app as app_mod
from tests.fakes.fake_nvml import detect_no_gpu
from tests.fixtures import hostile_gguf as hg

from .conftest import Beedeck, Tmpfs, alive, place_starter, wait_for

pytestmark = pytest.mark.engine

CHILD_AS = 3 << 30  # address space for a CLI child: Python and BeeDeck fit; 2.6 GB of layer lists do not


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_AS, CHILD_AS))


def run_limited(bd: Beedeck, *args: str, preexec: Callable[[], Any] = _limited, timeout: float = 90,
                prefix: list[str] | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """``beedeck ARGS`` with its address space capped: a header that sizes an allocation from a
    crafted field shows as a MemoryError (or a kill) instead of eating the machine; the timeout turns a
    hang into a failure."""
    done = subprocess.run([*(prefix or []), sys.executable, "-m", "beedeck", *args], env=bd.env(**env),
                          capture_output=True, timeout=timeout, cwd=bd.workdir,
                          preexec_fn=preexec)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))


def refused(done: subprocess.CompletedProcess[str], says: str, code: int = 1) -> None:
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == code, (done.returncode, done.stderr[-3000:])
    assert says in done.stderr, done.stderr[-3000:]


# ---------------------------------------------------------------------------- crafted GGUF headers

@pytest.mark.parametrize("name", list(hg.CRAFTED))
def test_a_crafted_gguf_header_is_refused_with_a_message_within_bounds(beedeck: Beedeck, name: str) -> None:
    path = hg.write(beedeck.workdir / f"{name}.gguf", name)
    done = run_limited(beedeck, "inspect", str(path))
    refused(done, hg.CRAFTED[name][2])
    assert "download it again" in done.stderr or "convert it again" in done.stderr


def test_a_sparse_file_claiming_millions_of_tokens_is_walked_not_read_whole(beedeck: Beedeck) -> None:
    path = hg.write(beedeck.workdir / "sparse.gguf", "sparse-tokens")  # 64 GB, 4M empty strings
    done = run_limited(beedeck, "inspect", str(path), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["vocab_size"] == 1 << 22  # read as what it claims, within the 3 GB cap


@pytest.mark.parametrize("command", ["inspect", "plan", "serve", "models-scan"])
def test_a_fifo_named_gguf_is_refused_without_blocking(beedeck: Beedeck, command: str) -> None:
    fifo = beedeck.workdir / "models" / "model.gguf"
    fifo.parent.mkdir()
    os.mkfifo(fifo)  # no writer: before, every command below blocked for ever in open()
    says = "is a FIFO (named pipe), not a model file"
    if command == "models-scan":
        (fifo.parent / "good.gguf").symlink_to(beedeck.model)
        done = run_limited(beedeck, "models", "scan", str(fifo.parent), "--json")
        assert done.returncode == 0, done.stderr
        found = {Path(m["path"]).name: m for m in json.loads(done.stdout)}
        assert found["good.gguf"]["error"] is None and says in found["model.gguf"]["error"]
    else:
        args = {"inspect": ["inspect", str(fifo)], "plan": ["plan", "--target", str(fifo), "--vram", "8"],
                "serve": ["serve", "--engine", str(beedeck.engine), "--model", str(fifo), "--exit-when-ready"]}
        done = run_limited(beedeck, *args[command])
        assert "Traceback" not in done.stderr and done.returncode in (1, 2) and says in done.stderr, done.stderr
        assert "running:" not in done.stdout
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # left as it was


def _loop(folder: Path) -> Path:
    loop = folder / "loop.gguf"
    loop.symlink_to(loop.name)
    return loop


def _long(folder: Path) -> Path:
    return folder / ("m" * 295 + ".gguf")


@pytest.mark.parametrize(("make", "command", "says"), [
    (_loop, "inspect", "is a symbolic link that loops"),
    (_loop, "plan", "is a symbolic link that loops"),
    (_long, "inspect", "too long for this file system (a name of 300 bytes"),
    (_long, "plan", "too long for this file system (a name of 300 bytes"),
], ids=["loop-inspect", "loop-plan", "300-chars-inspect", "300-chars-plan"])
def test_a_symlink_loop_or_a_300_character_name_is_a_message_not_oserror(beedeck: Beedeck, make: object,
                                                                          command: str, says: str) -> None:
    path = make(beedeck.workdir)  # type: ignore[operator]
    args = ["plan", "--target", str(path), "--vram", "8"] if command == "plan" else ["inspect", str(path)]
    refused(run_limited(beedeck, *args), says)


@pytest.mark.parametrize("command", ["scan", "list", "get"])
def test_one_bad_gguf_in_a_library_folder_hides_no_good_model(beedeck: Beedeck, command: str) -> None:
    folder = beedeck.home / "data" / "models"  # BeeDeck's own models folder: scanned by list and get too
    folder.mkdir(parents=True)
    (folder / "good.gguf").symlink_to(beedeck.model)
    hg.write(folder / "nested.gguf", "nested-5000")
    hg.write(folder / "huge-array.gguf", "array-2^62-scalars")
    hg.write(folder / "sparse-tokens.gguf", "array-2^40-strings-sparse")
    os.mkfifo(folder / "fifo.gguf")
    (folder / "loop.gguf").symlink_to("loop.gguf")  # before: RuntimeError from Path.resolve() ended the scan
    args = {"scan": ["models", "scan", str(folder), "--json"], "list": ["models", "list", "--json"],
            "get": ["models", "get", "someone/any-repo", "good.gguf", "--json"]}[command]
    done = run_limited(beedeck, *args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    if command == "get":  # found on disk: no download, nothing asked of the network
        assert json.loads(done.stdout)["downloaded"] is False
        return
    found = {Path(m["path"]).name: m["error"] for m in json.loads(done.stdout)}
    assert found["good.gguf"] is None
    assert "nests arrays more than" in found["nested.gguf"] and "claims" in found["huge-array.gguf"]
    assert "claims 1,099,511,627,776" in found["sparse-tokens.gguf"] and "FIFO" in found["fifo.gguf"]
    assert "is a symbolic link that loops" in found["loop.gguf"]


# ------------------------------------------------------------------------- config files

def _window(qtbot: QtBot) -> app_mod.MainWindow:
    window = app_mod.build_window(no_autostart=True, detect=detect_no_gpu)
    qtbot.addWidget(window)
    return window


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    path.write_text('{"engine": "/x", "label": "' + "x" * 1000)
    os.truncate(path, 300 * 1000 * 1000)  # 300 MB (sparse: the size is what is refused)


@pytest.mark.parametrize(("name", "make", "says"), [
    ("profile.json", _fifo, "is a FIFO (named pipe), not a regular file"),
    ("settings.json", _fifo, "is a FIFO (named pipe), not a regular file"),
    ("profile.json", _dev_zero, "is a character device, not a regular file"),
    ("settings.json", _dev_zero, "is a character device, not a regular file"),
    ("profile.json", _huge, "is 300,000,000 bytes, more than the 1,048,576"),
], ids=["profile-fifo", "settings-fifo", "profile-dev-zero", "settings-dev-zero", "profile-300mb"])
def test_a_config_file_that_is_a_fifo_a_device_or_huge_is_kept_aside_and_the_window_opens(
        qtbot: QtBot, beedeck_home: Path, starter_model_path: Path, name: str, make: object, says: str) -> None:
    place_starter(beedeck_home, starter_model_path)
    path = paths.config_dir() / name
    make(path)  # type: ignore[operator]
    before = os.lstat(path)
    window = _window(qtbot)  # before: blocked for ever on the FIFO, or read /dev/zero into 7 GB
    notice = window.notices.text()
    assert says in notice and "kept as" in notice, notice
    (kept,) = path.parent.glob(f"{name}.corrupt-*")
    assert (os.lstat(kept).st_mode, os.lstat(kept).st_size) == (before.st_mode, before.st_size)  # the same thing
    window.close()


# ------------------------------------------------------------------------- the chat history

LOCKER = ("import sqlite3, sys, time\n"
          "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
          "c.execute('PRAGMA locking_mode=EXCLUSIVE'); c.execute('BEGIN EXCLUSIVE')\n"
          "print('locked', flush=True); time.sleep(600)\n")


def _history(path: Path) -> None:
    store = ChatStore(path)
    conv = store.create_conversation("kept chat")
    store.add_message(conv.id, "user", "a message to keep")
    store.close()
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def test_a_chat_history_locked_by_another_process_is_in_use_not_damaged(qtbot: QtBot, beedeck_home: Path) -> None:
    db = default_path()
    _history(db)
    original = db.read_bytes()
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db)], stdout=subprocess.PIPE)
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == b"locked"
        window = _window(qtbot)
        notice = window.notices.text()
        assert "in use by another BeeDeck" in notice and "damaged" not in notice, notice
        assert list(db.parent.glob("chats.sqlite3.*")) == []  # nothing moved aside (the -wal is the locker's)
        window.close()
    finally:
        locker.kill()
        locker.wait(10)
    assert db.read_bytes() == original
    store, recovery = open_store()  # the other BeeDeck gone: the history as it was
    assert recovery is None and [c.title for c in store.list_conversations()] == ["kept chat"]
    store.close()


@pytest.mark.parametrize("folder", ["percent%41here", "hash#here"], ids=["percent41", "hash"])
def test_odd_characters_in_the_data_path_leave_a_healthy_history_healthy(tmp_path: Path, folder: str) -> None:
    data = tmp_path / folder
    db = data / "chats.sqlite3"
    _history(db)
    before = set(tmp_path.rglob("*"))
    for _start in range(2):
        store, recovery = open_store(db)
        assert recovery is None  # before: "damaged" at every start ('%41'), or never checked ('#')
        assert [m.content for m in store.messages(store.list_conversations()[0].id)] == ["a message to keep"]
        store.close()
    stray = {p for p in set(tmp_path.rglob("*")) - before if not p.name.startswith("chats.sqlite3")}
    assert stray == set()  # before ('#'): a database at tmp_path / "hash"


# ------------------------------------------------------------------------- permissions

NO_DAC = ["setpriv", "--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]


def as_user() -> list[str]:
    """The prefix that makes a child obey file permissions: root drops the capabilities that bypass them
    (permissions would not apply otherwise, and such a test could not fail); anyone else obeys them."""
    if os.geteuid() != 0:
        return []
    assert shutil.which("setpriv"), "setpriv (util-linux) is needed to test permissions as root"
    return NO_DAC


def test_an_unreadable_model_says_permission_denied(beedeck: Beedeck) -> None:
    model = beedeck.workdir / "private.gguf"
    shutil.copy(beedeck.model, model)
    model.chmod(0)
    says = "cannot be read (permission denied): fix its permissions"
    refused(run_limited(beedeck, "inspect", str(model), prefix=as_user()), says)
    done = run_limited(beedeck, "models", "scan", str(model.parent), "--json", prefix=as_user())
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)
    assert says in entry["error"]


READ_HISTORY = ("import json, sys\nfrom pathlib import Path\nfrom beedeck.core.chat.recovery import open_store\n"
                "from beedeck.core.chat.store import ChatStoreError\n"
                "store, rec = open_store(Path(sys.argv[1]))\n"
                "out = {'notice': store.notice, 'recovery': rec is not None,\n"
                "       'chats': [c.title for c in store.list_conversations()]}\n"
                "try:\n    store.create_conversation('new')\nexcept ChatStoreError as exc:\n    out['write'] = str(exc)\n"
                "print(json.dumps(out))\n")


def test_a_read_only_data_folder_opens_the_history_read_only_with_a_notice(beedeck: Beedeck, tmp_path: Path) -> None:
    data = tmp_path / "read-only-data"
    db = data / "chats.sqlite3"
    _history(db)
    original = db.read_bytes()
    data.chmod(0o555)
    db.chmod(0o444)
    try:
        done = subprocess.run([*as_user(), sys.executable, "-c", READ_HISTORY, str(db)], env=beedeck.env(),
                              capture_output=True, text=True, timeout=60)
    finally:
        data.chmod(0o755)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["chats"] == ["kept chat"] and not out["recovery"]  # read, not taken for damaged
    assert "is read-only for BeeDeck" in out["notice"] and "chmod u+w" in out["notice"]
    assert "write" in out  # a new chat is refused with a message, not a crash
    assert sorted(p.name for p in data.iterdir()) == ["chats.sqlite3"] and db.read_bytes() == original


def test_an_unwritable_data_folder_at_the_first_start_says_so(beedeck: Beedeck) -> None:
    """The starter copy into a data folder that cannot be written: the reason, no traceback."""
    data = beedeck.home / "data"
    data.mkdir(parents=True)
    data.chmod(0o555)
    try:
        done = run_limited(beedeck, "chat", "hi", "--max-tokens", "4", prefix=as_user())
    finally:
        data.chmod(0o755)
    assert "Traceback" not in done.stderr and done.returncode in (1, 2), done.stderr[-3000:]
    assert "Permission denied" in done.stderr or "permission denied" in done.stderr, done.stderr[-3000:]
    assert list(data.rglob("*.part*")) == []


# ------------------------------------------------------------------------- hosts, numbers, the disk

def test_serve_on_ipv6_any_without_a_port_asks_for_the_key_first(beedeck: Beedeck) -> None:
    done = run_limited(beedeck, "serve", *beedeck.starter_args(), "--host", "::", "--exit-when-ready")
    refused(done, "Exposing on the LAN needs an API key", code=2)


def test_serve_on_ipv6_loopback_without_a_port_starts(beedeck: Beedeck) -> None:
    done = run_limited(beedeck, "serve", *beedeck.starter_args(), "--host", "::1", "--exit-when-ready", "--json",
                       timeout=180)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1])["base_url"].startswith("http://[::1]:")


def test_serve_on_a_host_name_that_does_not_resolve_says_so(beedeck: Beedeck) -> None:
    done = run_limited(beedeck, "serve", *beedeck.starter_args(), "--host", "no-such-host.invalid",
                       "--exit-when-ready", BEEDECK_API_KEY="bd-fault-key-20b")
    refused(done, "The host 'no-such-host.invalid' cannot be resolved", code=2)


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_chat_temperature_that_is_not_a_number_in_range_is_refused(beedeck: Beedeck, value: str) -> None:
    done = run_limited(beedeck, "chat", "hi", "--temperature", value, *beedeck.starter_args())
    refused(done, "give a number from 0 to 5", code=2)
    assert "starting" not in done.stderr


def _no_big_files() -> None:
    """Where no tmpfs can be mounted: a file size limit makes the copy fail the way a full disk does."""
    _limited()
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of a kill
    resource.setrlimit(resource.RLIMIT_FSIZE, (20 << 20, 20 << 20))


def test_a_full_disk_during_the_first_start_starter_copy_says_so_and_leaves_nothing(
        beedeck: Beedeck, small_disk: Tmpfs) -> None:
    home = small_disk.path / "home"
    done = run_limited(beedeck, "chat", "hi", "--max-tokens", "4", preexec=_limited if small_disk.real else _no_big_files,
                       BEEDECK_HOME=str(home))
    refused(done, "The starter model could not be written to", code=2)
    assert "free some space" in done.stderr and "Nothing half-written was left behind" in done.stderr
    assert [p for p in home.rglob("*") if p.is_file() and ".part" in p.name] == []
    assert not (home / "data" / "models" / "starter" / "SmolLM2-135M-Instruct.Q4_1.gguf").exists()


def test_a_stopped_server_dies_when_its_serve_is_killed(beedeck: Beedeck) -> None:
    child = beedeck.spawn("serve", *beedeck.starter_args(), "--json")
    child.wait_text('"state": "ready"', 120, "out")
    (server,) = wait_for(child.servers, 30, "the server")
    os.kill(server, signal.SIGSTOP)  # stopped: a pending SIGTERM would wait for a SIGCONT that never comes
    wait_for(lambda: _state(server) == "T", 10, "the server to stop")
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(10)
    wait_for(lambda: not alive(server), 10, "the stopped server to die with its serve")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""
