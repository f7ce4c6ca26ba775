"""A coding agent's set-up from the real server (issue 33 items 2-4): `beedeck serve` on the starter, as a
user runs it, says the context the engine really gave; `beedeck agent write/show/key` read that server (its
free port, alias, capped context, key, template) from its record and its /props; a LAN server's key reaches
the agent through `agent key` and nowhere else; tool support is declared only where the template has it;
and what each engine does with a forced tool call is what the known-issue table says.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from beedeck.cli import main
from beedeck.core.agents.toolsafe import CHOICE_CHECK
from beedeck.core.engine.known_issues import load_table
from beedeck.core.engine.server import ServerProcess, free_port
from tests.conftest import FIXTURES, REPO
from tests.engine.conftest import RealEngine
from tests.engine.procs import pid_alive

from .conftest import StartServer

pytestmark = pytest.mark.engine

TEMPLATE = FIXTURES / "tools-chatml.jinja"  # Qwen 2.5's tool format: /props says supports_tools
KEY = "lan-key-9d2e"


@pytest.fixture
def home(agent_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # `beedeck agent key` as the agent's shell runs it: this checkout's CLI, not an installed one.
    monkeypatch.setenv("BEEDECK_AGENT_CLI_FROM_PYTHON", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "gui"), str(REPO)]))
    return agent_home


class Serve:
    """`beedeck serve` as a child process, its output in files; stopped (SIGINT, as Ctrl+C) on teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path, self.procs = tmp_path, []  # type: ignore[var-annotated]

    def start(self, engine: Path, model: Path, *args: str, env: dict[str, str] | None = None) -> tuple[Any, str]:
        out = self.tmp_path / f"serve{len(self.procs)}.out"
        with open(out, "wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "beedeck", "serve", "--engine", str(engine), "--model",
                                     str(model), "--threads", "1", *args], stdout=fh, stderr=subprocess.DEVNULL,
                                    stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        self.procs.append(proc)
        deadline = time.monotonic() + 180
        while "ready in" not in out.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        time.sleep(0.3)  # the lines after "ready"
        return proc, out.read_text()

    def stop(self, proc: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    s = Serve(tmp_path)
    yield s
    for proc in s.procs:
        s.stop(proc)


def _port(out: str) -> int:
    found = re.search(r"ready in [\d.]+ s at http://127\.0\.0\.1:(\d+)", out)
    assert found, out
    return int(found.group(1))


def test_serve_says_the_capped_context_and_agent_write_uses_the_running_server(
        serve: Serve, home: Path, starter_engine_path: Path, starter_model_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    proc, out = serve.start(starter_engine_path, starter_model_path, "--ctx", "32768")
    # Before: "ready" alone, and `agent show` said 32,768 while the engine had capped the slot at 8,192.
    assert "context: 8,192 tokens per slot (asked 32,768: the engine capped it at the model's training context, " \
           "8,192)" in out
    port = _port(out)
    assert port != 8477  # `serve` took a free port: the saved profile's 8477 would be wrong
    assert main(["agent", "write", "opencode", "--yes"]) == 0
    said = capsys.readouterr().out
    assert "server: BeeDeck's running server (pid " in said and f"at http://127.0.0.1:{port}" in said
    assert "tools: the model's chat template has no tool syntax" in said
    data = json.loads((home / ".config/opencode/opencode.json").read_text())
    model = data["provider"]["beedeck"]["models"]["smollm2-135m-instruct.q4_1"]
    assert data["provider"]["beedeck"]["options"]["baseURL"] == f"http://127.0.0.1:{port}/v1"
    assert model["limit"]["context"] == 8192 and model["tool_call"] is False
    assert main(["agent", "write", "claude-code", "--yes"]) == 0
    env = json.loads((home / ".claude/settings.json").read_text())["env"]
    assert (env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"], env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"]) == ("8192", "1024")
    assert env["ANTHROPIC_BASE_URL"] == f"http://127.0.0.1:{port}"
    serve.stop(proc)
    assert main(["agent", "show", "aider"]) == 0
    assert "none of BeeDeck's runs, so these come from the starter's settings" in capsys.readouterr().out


def _status(url: str, key: str | None) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_a_lan_servers_key_reaches_the_agent_through_agent_key_only(
        serve: Serve, home: Path, starter_engine_path: Path, starter_model_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEEDECK_API_KEY", raising=False)
    # The tester's machine: no keyring backend, the key only in the environment `serve` started with.
    proc, out = serve.start(starter_engine_path, starter_model_path, "--host", "0.0.0.0",
                            env={"BEEDECK_API_KEY": KEY, "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"})
    port = _port(out.replace("0.0.0.0", "127.0.0.1"))
    assert main(["agent", "key"]) == 0
    key = capsys.readouterr().out.strip()
    assert key == KEY  # before: "beedeck-local" with exit status 0, and every agent got 401
    url = f"http://127.0.0.1:{port}/v1/models"
    assert (_status(url, key), _status(url, "beedeck-local")) == (200, 401)
    assert main(["agent", "write", "continue", "--yes"]) == 0
    said = capsys.readouterr().out
    assert KEY not in said and KEY not in (home / ".continue/config.yaml").read_text()
    (item,) = yaml.safe_load((home / ".continue/config.yaml").read_text())["models"]
    assert item["apiKey"] == "${{ secrets.BEEDECK_API_KEY }}" and item["apiBase"] == f"http://127.0.0.1:{port}/v1"
    run = re.search(r"run: (.*) cn( --allow Write)?$", said, re.M)
    assert run, said
    shell = [run.group(1) + " printenv BEEDECK_API_KEY"]
    clean = {k: v for k, v in os.environ.items() if k != "BEEDECK_API_KEY"}
    got = subprocess.run(["bash", "-c", *shell], env=clean, capture_output=True, text=True, timeout=60)
    assert got.stdout.strip() == KEY, got.stderr
    mine = subprocess.run(["bash", "-c", *shell], env={**clean, "BEEDECK_API_KEY": "users-own"},
                          capture_output=True, text=True, timeout=60)
    assert mine.stdout.strip() == "users-own"  # a key the user exported is never overwritten
    serve.stop(proc)
    assert main(["agent", "key"]) == 1
    err = capsys.readouterr().err
    assert "No API key is known for BeeDeck's server: no BeeDeck server runs" in err and KEY not in err


def test_tool_support_is_declared_only_where_the_template_renders_tools(
        start_server: StartServer, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proc = start_server(extra_args=["--chat-template-file", str(TEMPLATE)])
    proc.wait_ready(120)
    assert main(["agent", "write", "opencode", "--yes"]) == 0
    assert main(["agent", "write", "continue", "--yes"]) == 0
    assert "tools: the model's chat template renders tool calls (/props chat_template_caps)" in capsys.readouterr().out
    data = json.loads((home / ".config/opencode/opencode.json").read_text())
    assert data["provider"]["beedeck"]["models"]["smollm2-135m-instruct.q4_1"]["tool_call"] is True
    (item,) = yaml.safe_load((home / ".continue/config.yaml").read_text())["models"]
    assert item["capabilities"] == ["tool_use"]


FORCED = {
    "required": ("/v1/chat/completions", {"tool_choice": "required"}),
    "named": ("/v1/chat/completions", {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    "any": ("/v1/messages", {"tool_choice": {"type": "any"}}),
    "tool": ("/v1/messages", {"tool_choice": {"type": "tool", "name": "get_weather"}}),
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _forced(base: str, form: str) -> bool:
    """Whether the engine answered the forced form with a tool call."""
    path, extra = FORCED[form]
    body: dict[str, Any] = {"model": "m", "max_tokens": 48, "temperature": 0.0, "seed": 1,
                            "messages": [{"role": "user", "content": "Hello, how are you?"}], **extra}
    if path == "/v1/messages":
        body["tools"] = [{"name": "get_weather", "description": "The weather in a city.", "input_schema": SCHEMA}]
    else:
        body["tools"] = [{"type": "function", "function": {"name": "get_weather", "description": "The weather.",
                                                           "parameters": SCHEMA}}]
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=180) as resp:
        answer = json.loads(resp.read())
    if path == "/v1/messages":
        return any(part.get("type") == "tool_use" for part in answer["content"])
    return bool(answer["choices"][0]["message"].get("tool_calls"))


def test_what_each_engine_does_with_a_forced_tool_call_is_the_tables(
        real_engine: RealEngine, starter_model_path: Path, tmp_path: Path) -> None:
    (row,) = [r for r in load_table() if r.check == CHOICE_CHECK and r.applies_to(real_engine.caps) is not False]
    argv = ["-m", str(starter_model_path), "--port", str(free_port()), "-t", "1", "-np", "1", "-c", "4096",
            "--jinja", "--chat-template-file", str(TEMPLATE)]
    proc = ServerProcess(real_engine.path, argv, pid_file=tmp_path / "tools.pid").start()
    try:
        proc.wait_ready(180)
        seen = {form for form in FORCED if _forced(proc.base_url, form)}
    finally:
        proc.stop(timeout=5.0)
    assert not pid_alive(proc.pid)
    assert seen == set(row.params["enforced"]), f"{real_engine.kind}: update the row {row.id} ({sorted(seen)})"
