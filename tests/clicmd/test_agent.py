"""`beedeck agent`: list, show (the diff, nothing written), write (only after --yes), undo, key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beedeck.cli import main
from beedeck.core import secrets
from beedeck.core.agents.endpoint import NO_KEY


@pytest.fixture
def home(agent_home: Path) -> Path:
    return agent_home  # tests/conftest.py: a HOME of the test's own




def test_list_names_every_client_and_its_file(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("opencode", "aider", "codex", "continue", "claude-code", "openai", "anthropic"):
        assert name in out
    assert str(home / ".claude" / "settings.json") in out


def test_show_prints_the_diff_and_writes_nothing(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "show", "opencode", "--port", "9123"]) == 0
    out = capsys.readouterr().out
    assert "http://127.0.0.1:9123/v1" in out and "smollm2-135m-instruct.q4_1" in out
    assert "+++ " + str(home / ".config/opencode/opencode.json") in out
    assert not (home / ".config").exists()


def test_write_needs_a_yes_then_undo_puts_the_file_back(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"theme": "dark"}\n')
    assert main(["agent", "write", "claude-code"]) == 1  # stdin is not a terminal: no silent write
    assert "--yes" in capsys.readouterr().err and settings.read_text() == '{"theme": "dark"}\n'
    assert main(["agent", "write", "claude-code", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "ANTHROPIC_BASE_URL" in out and "beedeck agent undo claude-code" in out
    data = json.loads(settings.read_text())
    assert data["theme"] == "dark" and data["env"]["ANTHROPIC_MODEL"] == "smollm2-135m-instruct.q4_1"
    assert main(["agent", "write", "claude-code", "--yes"]) == 0
    assert "nothing to write" in capsys.readouterr().out
    assert main(["agent", "undo", "claude-code"]) == 0
    assert settings.read_text() == '{"theme": "dark"}\n'
    assert main(["agent", "undo", "claude-code"]) == 1
    assert "nothing to undo" in capsys.readouterr().err


def test_a_generic_client_prints_the_environment(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "show", "anthropic", "--host", "0.0.0.0", "--port", "8477"]) == 0
    out = capsys.readouterr().out
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8477" in out and "agent key" in out


def test_key_is_never_a_placeholder(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BEEDECK_API_KEY", raising=False)
    assert main(["agent", "key"]) == 1  # no server, no keyring entry: a message, not "beedeck-local"
    out = capsys.readouterr()
    assert out.out == "" and "No API key is known for BeeDeck's server: no BeeDeck server runs" in out.err
    assert NO_KEY not in out.err
    secrets.set_secret(secrets.SERVER_API_KEY, "k-123")
    assert main(["agent", "key"]) == 0
    assert capsys.readouterr().out.strip() == "k-123"


def test_show_says_no_server_runs_and_what_the_model_allows(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "show", "continue"]) == 0
    out = capsys.readouterr().out
    assert "server: none of BeeDeck's runs, so these come from the starter's settings" in out
    assert "context: 8,192 tokens per slot" in out


def test_claude_code_below_its_floor_is_refused_before_anything_is_written(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "write", "claude-code", "--ctx", "4096", "--yes"]) == 1
    out = capsys.readouterr()
    assert "Not written: Claude Code cannot run on this server: it has 4,096 tokens" in out.err
    assert "+++" not in out.out and not (home / ".claude").exists()


def test_a_host_or_model_that_could_add_a_key_is_refused_or_quoted(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "write", "codex", "--host", "10.0.0.1\nnotify = 1", "--yes"]) == 2
    assert "is not a host name or an address" in capsys.readouterr().err
    assert main(["agent", "write", "aider", "--model", "m\nlint-cmd: touch pwned", "--yes"]) == 0
    text = (home / ".aider.conf.yml").read_text()
    assert 'model: "openai/m\\nlint-cmd: touch pwned"' in text and "\nlint-cmd" not in text


def test_a_broken_config_is_named_not_replaced(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True)
    path.write_text("{oops")
    assert main(["agent", "write", "opencode", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "Traceback" not in err and path.read_text() == "{oops"
