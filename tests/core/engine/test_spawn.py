"""Children die with BeeDeck even when it is killed: PR_SET_PDEATHSIG, from a long-lived thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from beedeck.core.engine import spawn
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not spawn.binds_children(), reason="PR_SET_PDEATHSIG is Linux-only")

PARENT = textwrap.dedent("""
    import subprocess, sys, threading, time
    from beedeck.core.engine import spawn
    box = {}
    def start():  # a short-lived worker thread, like the GUI's server controller
        box["p"] = spawn.popen(["sleep", "600"], start_new_session=True)
    t = threading.Thread(target=start)
    t.start(); t.join()  # the thread that asked is gone; the child must live on
    print(box["p"].pid, flush=True)
    time.sleep(600)
""")


def _wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_child_outlives_the_thread_that_started_it_but_not_a_killed_parent(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "gui")}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.3)
        assert psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE
        parent.send_signal(signal.SIGKILL)  # no handler, no atexit: only the kernel can stop the child
        parent.wait(10)
        assert _wait_gone(child), "the child outlived a BeeDeck killed with SIGKILL"
    finally:
        parent.kill()
        parent.wait()
        if child and psutil.pid_exists(child):
            os.kill(child, signal.SIGKILL)


def test_popen_passes_its_arguments_through() -> None:
    proc = spawn.popen([sys.executable, "-c", "print('hi')"], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    assert out.strip() == "hi" and proc.returncode == 0
    with pytest.raises(FileNotFoundError):
        spawn.popen(["/nonexistent/llama-server"])


def test_a_child_never_inherits_beedecks_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEEDECK_API_KEY", "the-key")
    monkeypatch.setenv("HF_TOKEN", "hf_the-token")
    for env in (None, {**os.environ, "EXTRA": "1"}):
        proc = spawn.popen([sys.executable, "-c", "import os, json; print(json.dumps(dict(os.environ)))"],
                           stdout=subprocess.PIPE, env=env)
        out, _ = proc.communicate(timeout=30)
        seen = __import__("json").loads(out)
        assert "BEEDECK_API_KEY" not in seen and "HF_TOKEN" not in seen and seen["PATH"] == os.environ["PATH"]
