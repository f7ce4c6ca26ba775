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


def test_key_comes_from_the_keyring(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "key"]) == 0
    assert capsys.readouterr().out.strip() == NO_KEY
    secrets.set_secret(secrets.SERVER_API_KEY, "k-123")
    assert main(["agent", "key"]) == 0
    assert capsys.readouterr().out.strip() == "k-123"


def test_a_broken_config_is_named_not_replaced(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True)
    path.write_text("{oops")
    assert main(["agent", "write", "opencode", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "not valid JSON" in err and "Traceback" not in err and path.read_text() == "{oops"
