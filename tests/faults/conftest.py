"""Fault injection against real BeeDeck processes (docs/reliability.md holds the matrix).

Every fault test drives what a user drives: the ``beedeck`` CLI as a child process, the window
offscreen (in-process through qtbot, or as a child process for signals), the real starter
llama-server, real files on a real (tmpfs) disk. Each asserts the message the user sees, that no data
was lost, and that no process was orphaned: the autouse ``no_orphans`` fixture fails any test after
which a llama-server it started (or any child of a BeeDeck process it spawned) is still alive.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import REPO

CHILD_TIMEOUT_S = 180.0


def llama_servers(home: str | None = None) -> set[int]:
    """Live llama-servers; with ``home``, only those started under that BEEDECK_HOME (a test's own:
    servers of other test runs on the same machine are not this test's orphans)."""
    out = set()
    for p in psutil.process_iter(["name", "status"]):
        with contextlib.suppress(psutil.Error):
            if p.info["name"] == "llama-server" and p.info["status"] != psutil.STATUS_ZOMBIE:
                if home is None or p.environ().get("BEEDECK_HOME") == home:
                    out.add(p.pid)
    return out


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something truthy (returned) or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def no_orphans(beedeck_home: Path) -> Iterator[None]:
    home = str(beedeck_home)
    before = llama_servers(home)
    yield
    deadline = time.monotonic() + 10.0
    left = llama_servers(home) - before
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = llama_servers(home) - before
    for pid in left:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    assert not left, f"orphaned llama-server process(es) {sorted(left)} outlived the fault"


def _hangup_as_from_a_terminal() -> None:
    """A child started from a terminal gets SIGHUP's default action. Under `nohup` (or a CI runner
    that ignores SIGHUP) it would inherit "ignore", and BeeDeck rightly leaves an ignored SIGHUP
    alone, so the hang-up tests would test the runner instead of BeeDeck."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@dataclass
class Child:
    """A BeeDeck process started by a fault test; its output goes to files so nothing blocks on a pipe."""

    proc: subprocess.Popen[bytes]
    out: Path
    err: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stdout(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def wait_text(self, text: str, timeout: float = 60.0, stream: str = "both") -> str:
        def seen() -> str:
            got = {"out": self.stdout(), "err": self.stderr(), "both": self.stdout() + self.stderr()}[stream]
            if text in got:
                return got
            if self.proc.poll() is not None:
                raise AssertionError(f"exited {self.proc.returncode} before printing {text!r}:\n{got[-3000:]}")
            return ""

        return str(wait_for(seen, timeout, f"{text!r} from pid {self.pid}"))

    def wait(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout)

    def servers(self) -> set[int]:
        """llama-servers serving for this BeeDeck process (not its short --help/--version probes)."""
        try:
            kids = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return set()
        return {k.pid for k in kids if _name(k) == "llama-server" and "--port" in _cmdline(k)}


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return ""


@dataclass
class Beedeck:
    """Runs BeeDeck commands as a user would, all sharing one BeeDeck home (so they are sessions of
    one user) and the real starter engine and model."""

    home: Path
    engine: Path
    model: Path
    workdir: Path
    children: list[Child] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BEEDECK_API")}
        env.update(BEEDECK_HOME=str(self.home), PYTHONUNBUFFERED="1", QT_QPA_PLATFORM="offscreen",
                   PYTHONPATH=os.pathsep.join([str(REPO / "gui"), str(REPO)]))
        env.update(extra)
        return env

    def starter_args(self) -> list[str]:
        return ["--engine", str(self.engine), "--model", str(self.model), "--threads", "1"]

    def run(self, *args: str | bytes, timeout: float = CHILD_TIMEOUT_S, input: bytes | None = None,
            **env: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "beedeck", *args], env=self.env(**env), input=input,
                              capture_output=True, timeout=timeout, cwd=self.workdir)
        return subprocess.CompletedProcess(done.args, done.returncode,
                                           done.stdout.decode("utf-8", "replace"),
                                           done.stderr.decode("utf-8", "replace"))

    def spawn(self, *args: str, module: str = "beedeck", **env: str) -> Child:
        n = len(self.children)
        out, err = self.workdir / f"child{n}.out", self.workdir / f"child{n}.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            proc = subprocess.Popen([sys.executable, "-m", module, *args], env=self.env(**env), stdout=o,
                                    stderr=e, stdin=subprocess.DEVNULL, cwd=self.workdir,
                                    start_new_session=True,  # its own session, as from its own terminal
                                    preexec_fn=_hangup_as_from_a_terminal)
        child = Child(proc, out, err)
        self.children.append(child)
        return child

    def close(self) -> None:
        for child in self.children:
            if child.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.proc.wait(10)


@pytest.fixture
def beedeck(beedeck_home: Path, tmp_path: Path, starter_engine_path: Path,
            starter_model_path: Path) -> Iterator[Beedeck]:
    work = tmp_path / "work"
    work.mkdir()
    bd = Beedeck(beedeck_home, starter_engine_path, starter_model_path, work)
    yield bd
    bd.close()


def place_starter(home: Path, model: Path) -> None:
    """The starter model where BeeDeck assembles it, without a 250 MB copy: a link and its stamp."""
    folder = home / "data" / "models" / "starter"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / model.name).symlink_to(model)
    stamp = model.with_name(model.name + ".verified.json")
    shutil.copy(stamp, folder / stamp.name)
    assert json.loads(stamp.read_text())["size"] == model.stat().st_size


@dataclass
class Tmpfs:
    path: Path
    real: bool  # a mounted tmpfs; False: a plain folder, and the disk-full faults inject ENOSPC

    def free(self) -> int:
        return shutil.disk_usage(self.path).free

    def fill(self, leave: int = 0) -> Path:
        """Take all free space but ``leave`` bytes with a ballast file (returned, to delete later)."""
        ballast = self.path / f"ballast-{time.monotonic_ns()}"
        with open(ballast, "wb") as fh:
            chunk = b"\0" * (1 << 16)
            with contextlib.suppress(OSError):
                while self.free() > leave + len(chunk):
                    fh.write(chunk)
                    fh.flush()
                while self.free() > leave:
                    fh.write(b"\0" * max(1, min(4096, self.free() - leave)))
                    fh.flush()
        return ballast


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Tmpfs]:
    """A 24 MB tmpfs: a real full disk. Where mounting is not allowed (no root), a plain folder."""
    path = tmp_path / "small-disk"
    path.mkdir()
    mounted = False
    # BEEDECK_FAULTS_NO_MOUNT=1 exercises the injected-ENOSPC path a machine without mount rights takes.
    if sys.platform == "linux" and os.geteuid() == 0 and not os.environ.get("BEEDECK_FAULTS_NO_MOUNT"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(path)],
                                 capture_output=True).returncode == 0
    try:
        yield Tmpfs(path, mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def starter_window(qtbot: Any, starter_engine_path: Path, starter_model_path: Path) -> Iterator[Any]:
    """The real main window on the starter profile, its server started and ready; closed (server
    stopped) afterwards. The chat store is the default one under BEEDECK_HOME unless the test set
    ``BEEDECK_CHAT_DB`` through the ``chat_db`` marker."""
    from beedeck.core.chat.store import ChatStore
    from beedeck.core.profile import Profile
    from beedeck.core.starter import StarterProfile
    from beedeck.ui.window.main_window import MainWindow

    made: list[Any] = []

    def make(store: ChatStore | None = None, extra_args: list[str] | None = None) -> Any:
        store = store or ChatStore()
        window = MainWindow(store)
        qtbot.addWidget(window)
        window.open_latest_chat()
        window.show()
        settings = StarterProfile(starter_engine_path, starter_model_path).settings(threads=1,
                                                                                   extra_args=extra_args or [])
        window.session.set_profile(Profile(str(starter_engine_path), settings, "starter (CPU)"))
        with qtbot.waitSignal(window.session.controller.ready, timeout=120_000):
            window.start_action.trigger()
        made.append((window, store))
        return window

    yield make
    for window, store in made:
        window.close()
        store.close()
