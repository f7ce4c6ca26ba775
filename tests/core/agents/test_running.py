"""core.agents.running: which server an agent will talk to (BeeDeck's running one, found from its record and
its command line; else the profile with the model's own header, said as such), and the key `agent key` gives.
What a real server's /props says is tests/engine/test_agents_setup_real.py's."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beedeck.core import secrets
from beedeck.core.agents.clients import client
from beedeck.core.agents.endpoint import NO_KEY
from beedeck.core.agents.running import (
    agent_key,
    asked_per_slot,
    context_line,
    describe,
    server_view,
    spec_of_argv,
    template_tools,
    view_profile,
)
from beedeck.core.engine import pidfile
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode

Spawn = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[Spawn]:
    """A live process with a llama-server's command line and BeeDeck's record of it (nothing listens on its
    port, as for a server still loading), so discovery is tested on a real record and a real /proc."""
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(port: int, *argv: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "/m/Qwen3-8B-Q4_K_M.gguf",
                                 "--port", str(port), *argv])
        procs.append(proc)
        pidfile.write_record(pidfile.record_path(proc.pid), proc.pid, "/opt/llama-server", port, "h")
        time.sleep(0.05)  # records are ordered by their start time
        return proc

    yield spawn
    for proc in procs:
        proc.kill()
        proc.wait()


def test_the_newest_running_server_is_read_from_its_record_and_command_line(fake_server: Spawn, tmp_path: Path) -> None:
    key_file = tmp_path / "api-key.key"
    key_file.write_text("k-from-the-key-file\n")
    key_file.chmod(0o600)
    fake_server(1, "--alias", "old", "--ctx-size", "4096")
    newest = fake_server(2, "--host", "0.0.0.0", "--alias", "qwen3-8b-q4_k_m", "--ctx-size", "65536", "-np", "2",
                         "--api-key-file", str(key_file), "--spec-type", "draft-mtp")
    view = server_view(LaunchSettings(target="/m/profile.gguf", port=8477))
    ep = view.endpoint
    assert (view.source, view.pid, ep.port, ep.model, ep.ctx_size) == ("running", newest.pid, 2, "qwen3-8b-q4_k_m", 32768)
    assert ep.key_required and ep.base_url == "http://127.0.0.1:2" and view.spec == Mode.MTP
    assert view.engine == "/opt/llama-server"
    said = "\n".join(view.lines)
    assert f"BeeDeck's running server (pid {newest.pid})" in said and "did not answer /props" in said
    assert "other BeeDeck servers run too (port 1)" in said and "k-from-the-key-file" not in said
    assert server_view(LaunchSettings(target="/m/p.gguf"), port=1).endpoint.model == "old"
    assert agent_key().key == "k-from-the-key-file"


def test_a_server_without_a_key_gives_the_no_key_word_and_none_running_needs_a_known_key(
        fake_server: Spawn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEEDECK_API_KEY", raising=False)
    found = agent_key()
    assert found.key is None and found.source == "no BeeDeck server runs"  # never a placeholder
    monkeypatch.setenv("BEEDECK_API_KEY", "k-env")
    assert agent_key().key == "k-env"
    secrets.set_secret(secrets.SERVER_API_KEY, "k-keyring")
    assert agent_key().key == "k-keyring"
    proc = fake_server(3)
    assert agent_key().key == NO_KEY and "needs no key" in agent_key().source
    proc.kill()
    proc.wait()
    assert agent_key().key == "k-keyring"


def test_without_a_server_the_profile_and_the_models_header_are_said_as_such(starter_model_path: Path) -> None:
    view = view_profile(LaunchSettings(target=str(starter_model_path), ctx_size=32768))
    ep = view.endpoint
    assert (view.source, ep.ctx_size, ep.tools, ep.port) == ("profile", 8192, False, 8477)
    said = "\n".join(view.lines)
    assert "none of BeeDeck's runs, so these come from the saved profile" in said
    assert "context: 8,192 tokens per slot (the profile asks 32,768: the engine capped it at the model's training " \
           "context, 8,192)" in said
    assert "no tool syntax (read from the model's own template; no server runs to ask)" in said
    lines = describe(client("opencode"), view, None)
    assert any("OpenCode acts through tool calls" in x for x in lines)
    missing = view_profile(LaunchSettings(target="/nowhere/model.gguf", ctx_size=8192))
    assert missing.endpoint.tools is None and "the model file could not be read" in "\n".join(missing.lines)


def test_the_command_line_facts() -> None:
    assert spec_of_argv(["--spec-type", "draft-dflash"]) == Mode.DFLASH
    assert spec_of_argv(["-md", "/m/d.gguf"]) == Mode.DFLASH
    assert spec_of_argv(["--spec-type", "ngram-mod"]) == Mode.MODEL_FREE
    assert spec_of_argv([]) == Mode.BASELINE
    assert asked_per_slot(["--ctx-size", "16384", "-np", "4"]) == 4096
    assert asked_per_slot(["--ctx-size", "16384", "-np", "4", "--kv-unified"]) == 16384
    assert asked_per_slot(["--ctx-size", "x"]) is None
    assert context_line(32768, 8192, 8192, running=True) == \
        "context: 8,192 tokens per slot (asked 32,768: the engine capped it at the model's training context, 8,192)"
    assert context_line(8192, 8192, 8192, running=True) == "context: 8,192 tokens per slot"
    assert template_tools("{% if tools %}{{ tools | tojson }}{% endif %}")
    assert not template_tools("{{ message['content'] }} tooling")
