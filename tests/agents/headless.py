"""What a user types, run by the agent tests: BeeDeck's own CLI in a subprocess (``beedeck serve``,
``beedeck agent write``) and each agent's headless run, built from the command BeeDeck prints.

An agent's headless run is BeeDeck's printed command (``Run: ...`` after ``agent write``, the same words
``agent show`` gives) with the agent's own non-interactive words added (:data:`HEADLESS`): the flags that
let it write (Codex's sandbox, Claude Code's and Continue's permission) are in what BeeDeck prints or
writes, none is added here. :data:`QUIET` only keeps the agents from phoning home (update checks,
telemetry, model price lists): the test machine reaches nothing but the package registries.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TASK = "Create hello.py."
# The agent's own switch to run one task and exit, after BeeDeck's printed command.
HEADLESS = {
    "opencode": ["run", TASK],
    "aider": ["--message", TASK],
    "codex": ["exec", TASK],
    "continue": ["-p", TASK],
    "claude-code": ["-p", TASK],
}
ENDPOINTS = {"opencode": "/v1/chat/completions", "aider": "/v1/chat/completions", "codex": "/v1/responses",
             "continue": "/v1/chat/completions", "claude-code": "/v1/messages"}
QUIET = {
    "opencode": {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                 "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                 "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_SHARE": "1"},
    "aider": {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false",
              "AIDER_ANALYTICS_DISABLE": "true", "AIDER_SHOW_RELEASE_NOTES": "false"},
    "codex": {},
    "continue": {},
    # A first run that waits on update checks, telemetry or error reports took minutes here.
    "claude-code": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                    "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"},
}


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a BeeDeck CLI subprocess: this checkout's code, a HOME of the test's own."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join([str(REPO / "gui"), str(REPO)]), **extra}


def beedeck(*args: str) -> list[str]:
    return [sys.executable, "-m", "beedeck", *args]


def agent_write(agent: str, home: Path, *, port: int, ctx: int, model: str, host: str | None = None) -> str:
    """``beedeck agent write AGENT --yes``, as a user runs it: returns the command it prints after ``Run:``.
    (--port, --ctx and --model describe the server until ``agent write`` reads the running one.)"""
    argv = beedeck("agent", "write", agent, "--yes", "--port", str(port), "--ctx", str(ctx), "--model", model)
    if host:
        argv += ["--host", host]
    done = subprocess.run(argv, env=cli_env(home), capture_output=True, text=True, timeout=120, check=False)
    if done.returncode:
        raise AssertionError(f"agent write {agent} failed ({done.returncode}): {done.stdout}{done.stderr}")
    found = re.search(r"^Run: (.+)$", done.stdout, re.MULTILINE)
    if not found:
        raise AssertionError(f"agent write {agent} printed no command to run: {done.stdout}")
    return found.group(1)


def headless_argv(printed: str, executable: Path, agent: str) -> tuple[list[str], list[str]]:
    """(the variables the printed command fills from ``$(beedeck agent key)``, the argv to run): the
    printed words with the installed executable for the program and the agent's headless words added."""
    words = shlex.split(printed)
    filled = []
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, value = words.pop(0).split("=", 1)
        assert "agent key" in value, f"the printed command sets {name} to something else: {printed}"
        filled.append(name)
    if not words:
        raise AssertionError(f"no program in the printed command: {printed!r}")
    return filled, [str(executable), *words[1:], *HEADLESS[agent]]


@dataclass(frozen=True)
class Served:
    """A ``beedeck serve`` subprocess that is ready: its llama-server's port and pid."""

    port: int
    pid: int
    log: Path


@contextmanager
def serve(args: list[str], home: Path, log: Path, env: dict[str, str] | None = None,
          timeout: float = 180.0) -> Iterator[Served]:
    """``beedeck serve ARGS --json`` until the block ends; stopped with Ctrl+C (SIGINT), as a user does,
    killed with its process group if it will not stop. Its stderr (the engine's log) goes to ``log``."""
    with log.open("w") as err:
        proc = subprocess.Popen(beedeck("serve", *args, "--json"), env=cli_env(home, **(env or {})),
                                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
    try:
        line = _first_line(proc, timeout)
        if not line.startswith("{"):
            raise AssertionError(f"beedeck serve {' '.join(args)} did not start (rc {proc.poll()}): "
                                 f"{line}{log.read_text()[-3000:]}")
        ready = json.loads(line)
        yield Served(int(ready["base_url"].rsplit(":", 1)[1]), int(ready["pid"]), log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        if proc.stdout:
            proc.stdout.close()


def _first_line(proc: subprocess.Popen[str], timeout: float) -> str:
    """serve's first stdout line (its JSON when ready), or "" when it exits or ``timeout`` passes."""
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            return ""
    return proc.stdout.readline()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a live process has used so far (/proc/PID/stat), 0 when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


@dataclass(frozen=True)
class Finished:
    """A headless run that ended: exit status (None: killed at the timeout), output, wall and CPU seconds
    (the agent and every child it waited for)."""

    rc: int | None
    output: str
    seconds: float
    cpu_s: float


def run_agent(argv: list[str], env: dict[str, str], cwd: Path, log: Path, timeout: float) -> Finished:
    """Run ``argv`` in a process group of its own, output (stdout and stderr) into ``log``; past ``timeout``
    the group is killed, and whatever of it is left when the agent exits goes too (no orphan survives)."""
    import threading
    import time

    with log.open("w") as out:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            _killpg(proc.pid)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        _killpg(proc.pid)
        took = time.monotonic() - t0
    rc = None if killed.is_set() else proc.returncode
    return Finished(rc, log.read_text(errors="replace"), took, usage.ru_utime + usage.ru_stime)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


_DRAFTS = re.compile(r"\(\s*(\d+) accepted /\s*(\d+) generated\)")


def speculation(log_text: str) -> tuple[int, int]:
    """(drafted, accepted) tokens over every reply in an engine's log: the line each engine family
    writes per reply with speculation on ("draft acceptance ... (A accepted / D generated)")."""
    pairs = [(int(d), int(a)) for a, d in _DRAFTS.findall(log_text)]
    return sum(d for d, _ in pairs), sum(a for _, a in pairs)
