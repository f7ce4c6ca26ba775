"""The coding agents, for real: each client is installed from its package registry (tests/agents/clients.py,
cached by name and version outside the checkout), BeeDeck writes its config through core.agents, and the
client runs non-interactively against BeeDeck's own starter server. A relay that copies bytes unchanged
shows the client's real request reached the server, and that the server's reply reached the client's output.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from beedeck.core.agents import configfile
from beedeck.core.agents.clients import client
from beedeck.core.agents.endpoint import Endpoint, endpoint_from_settings
from tests.agents.clients import cache_root, ensure_client
from tests.agents.relay import relay

from .conftest import StartServer

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # 15-190 s a client: its own system prompt is prefilled on the CPU

PROMPT = "Answer in one short sentence: what colour is the sky on a clear day?"


@dataclass(frozen=True)
class Run:
    """How one client runs once, headless: its arguments, extra environment, the endpoint it must hit."""

    args: list[str]
    endpoint: str  # the path of the request that carries the chat
    ctx: int = 8192  # the server context this client's system prompt and tools need
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 480.0  # a headless run on a busy 2-core CPU: codex took 183 s


def runs(ep: Endpoint, home: Path) -> dict[str, Run]:
    model = ep.model
    return {
        "opencode": Run(["run", "--model", f"beedeck/{model}", PROMPT], "/v1/chat/completions", 16384,
                        {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                         "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                         "OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_SHARE": "1"}),
        "aider": Run(["--message", PROMPT, "--yes-always", "--no-git", "--no-pretty", "--no-show-model-warnings",
                      "--no-check-update", "--analytics-disable"], "/v1/chat/completions", 8192,
                     {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}),
        "codex": Run(["exec", "--skip-git-repo-check", "--profile", "beedeck", PROMPT], "/v1/responses", 16384,
                     {"CODEX_HOME": str(home / ".codex")}),
        "continue": Run(["-p", PROMPT, "--config", str(home / ".continue" / "config.yaml")], "/v1/chat/completions",
                        8192),
        # No update check, telemetry or error reports: with only the package registries reachable, a first
        # run that waits on them can take minutes (63 s without, one CI run over 480 s with).
        "claude-code": Run(["-p", PROMPT, "--max-turns", "1"], "/v1/messages", 40960,
                           {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
                            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}),
    }


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]{3,}", text.lower())


def shows(output: str, reply: str) -> bool:
    """True when the reply's first words appear in ``output`` in order (clients wrap and restyle text)."""
    want, have = _words(reply)[:6], _words(output)
    if not want:
        return reply.strip() in output
    it = iter(have)
    return all(w in it for w in want)


KEY = "agent-test-key-4f1c"


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("client_id", "keyed"), [
    ("opencode", False), ("aider", False), ("codex", False), ("continue", False), ("claude-code", False),
    # A server that needs its key (as a LAN one does): the config names a variable, the command fills it.
    ("continue", True), ("aider", True),
])
def test_real_client_talks_to_beedecks_server(client_id: str, keyed: bool, start_server: StartServer,
                                              starter_settings: object, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    installed = ensure_client(client_id)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "CONTINUE_GLOBAL_DIR"):
        monkeypatch.delenv(var, raising=False)
    probe = runs(Endpoint("127.0.0.1", 1, "m", 1), home)[client_id]
    proc = start_server(ctx_size=probe.ctx, temp=0.0, api_key=KEY if keyed else None)
    proc.wait_ready(180)
    with relay(proc.port) as (port, rec):
        settings = starter_settings(ctx_size=probe.ctx, api_key=KEY if keyed else None)  # type: ignore[operator]
        ep = endpoint_from_settings(settings, port)
        assert ep.model == "smollm2-135m-instruct.q4_1"
        agent = client(client_id)
        assert not agent.needs(ep), agent.needs(ep)
        plan = configfile.plan(agent, ep)
        configfile.write(plan)  # the config BeeDeck writes is the one the client reads
        assert KEY not in plan.path.read_text()
        run = runs(ep, home)[client_id]
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb", "NO_COLOR": "1", "LANG": "C.UTF-8",
               "XDG_CACHE_HOME": str(cache_root() / "xdg-cache"), **run.env}
        if keyed:  # what the shown command's NAME="$(beedeck agent key)" gives the client
            found = re.match(r'(\w+)="\$\{\1:-\$\(', agent.command(ep))  # NAME="${NAME:-$(beedeck agent key)}"
            assert found, agent.command(ep)
            env[found.group(1)] = KEY
        t0 = time.monotonic()
        done = subprocess.run([str(installed.executable), *run.args], env=env, cwd=home, capture_output=True,
                              text=True, timeout=run.timeout, stdin=subprocess.DEVNULL, check=False)
        took = time.monotonic() - t0
    output = done.stdout + done.stderr
    requests = rec.requests()
    print(f"{client_id} {installed.version}{' (keyed)' if keyed else ''}: rc {done.returncode}, {took:.1f} s, "
          f"requests {requests}")
    assert any(r.split("?")[0] == f"POST {run.endpoint}" for r in requests), (requests, output[-3000:])
    replies = [t for t in rec.reply_texts() if _words(t)]
    assert replies, f"the server sent no text: {output[-3000:]}"
    assert any(shows(done.stdout, r) for r in replies), (replies, output[-3000:])
