"""Use with…: a submenu entry per agent opens a dialog that reads the server off the GUI thread, shows the
diff, writes (backup first), undoes, refuses an agent that cannot run before writing, and offers tool-safe
only where the known-issue table says the speculation mode breaks tool calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMainWindow
from pytestqt.qtbot import QtBot

from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.profile import Profile
from beedeck.core.settings import AppSettings
from beedeck.ui.session import Session
from beedeck.ui.window.agent_dialog import AgentDialog, open_agent_dialog
from beedeck.ui.window.menus import MenuCommands, ToolbarActions, build_menus
from tests.fixtures.engines import MAINLINE, help_stdout


@pytest.fixture
def home(agent_home: Path) -> Path:
    return agent_home  # tests/conftest.py: a HOME of the test's own

CAPS = caps_from_texts("ml", "", help_stdout(MAINLINE))
SETTINGS = LaunchSettings(target="/home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf", port=1, ctx_size=32768)


def sync(fn: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[BaseException], None]) -> None:
    done(fn())




def test_the_server_menu_has_use_with_each_agent(qtbot: QtBot) -> None:
    window = QMainWindow()
    qtbot.addWidget(window)
    agents: list[str] = []
    toolbar = ToolbarActions(QAction("Start"), QAction("Stop"), QAction("B"), QAction("T"), QAction("S"))
    nothing: Callable[[], None] = lambda: None  # noqa: E731
    commands = MenuCommands(new_chat=nothing, export_chat=lambda fmt: None, open_wizard=nothing, open_connect=nothing, open_agent=agents.append,
                            regenerate=nothing, stop_reply=nothing, show_shortcuts=nothing, show_about=nothing,
                            set_theme=lambda theme: None)
    actions = build_menus(window, Session(AppSettings(), saver=lambda s: None), toolbar, commands, [])
    server = window.menuBar().actions()[1].menu()
    use_with = next(a.menu() for a in server.actions() if a.text() == "Use with…")
    assert [a.text() for a in use_with.actions()][:5] == ["OpenCode…", "Aider…", "Codex CLI…",
                                                          "Continue (CLI and IDE)…", "Claude Code…"]
    actions["agent_opencode"].trigger()
    assert agents == ["opencode"]


def test_the_dialog_shows_the_diff_writes_and_undoes(qtbot: QtBot, home: Path) -> None:
    dialog = AgentDialog("opencode", SETTINGS, CAPS, runner=sync)
    qtbot.addWidget(dialog)
    path = home / ".config" / "opencode" / "opencode.json"
    assert "smollm2-135m-instruct.q4_1" in dialog.summary.text() and "http://127.0.0.1:1/v1" in dialog.summary.text()
    assert "nothing answers at http://127.0.0.1:1" in dialog.summary.text()
    assert dialog.diff_view.toPlainText().startswith("--- /dev/null") and not path.exists()
    assert dialog.write_button.isEnabled() and not dialog.undo_button.isEnabled()
    assert not dialog.tool_safe_button.isVisibleTo(dialog)
    dialog.write_button.click()
    assert json.loads(path.read_text())["model"] == "beedeck/smollm2-135m-instruct.q4_1"
    assert "Wrote" in dialog.status.text() and not dialog.write_button.isEnabled() and dialog.undo_button.isEnabled()
    dialog.undo_button.click()
    assert not path.exists() and "Removed" in dialog.status.text()


def test_tool_safe_is_offered_for_mainline_mtp_and_relaunches_without_it(qtbot: QtBot, home: Path) -> None:
    mtp = LaunchSettings(target=SETTINGS.target, spec_mode=Mode.MTP, ctx_size=32768)
    applied: list[Profile] = []
    profile = Profile("/e/llama-server", mtp, "mine")
    dialog = open_agent_dialog(None, "claude-code", profile, mtp, CAPS, applied.append)  # type: ignore[arg-type]
    assert dialog is not None
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.view is not None)  # the server is asked off the GUI thread
    assert dialog.tool_safe_button.isVisibleTo(dialog) and "#27296" in dialog.summary.text()
    dialog.tool_safe_button.click()
    assert applied and applied[0].settings.spec_mode == Mode.BASELINE and applied[0].engine == "/e/llama-server"
    dialog.close()


def test_a_generic_client_shows_its_environment(qtbot: QtBot, home: Path) -> None:
    dialog = AgentDialog("openai", SETTINGS, None, runner=sync)
    qtbot.addWidget(dialog)
    assert 'export OPENAI_BASE_URL="http://127.0.0.1:1/v1"' in dialog.diff_view.toPlainText()
    assert not dialog.write_button.isEnabled()


def test_an_agent_that_cannot_run_is_refused_before_writing_and_tools_are_checked(
        qtbot: QtBot, home: Path, starter_model_path: Path) -> None:
    small = LaunchSettings(target=str(starter_model_path), port=1, ctx_size=4096)
    dialog = AgentDialog("claude-code", small, CAPS, runner=sync)
    qtbot.addWidget(dialog)
    assert dialog.diff_view.toPlainText().startswith("Not written: Claude Code cannot run on this server: it has 4,096")
    assert not dialog.write_button.isEnabled() and not (home / ".claude").exists()
    text = dialog.summary.text()
    assert "no tool syntax" in text and "Claude Code acts through tool calls" in text
    assert "nothing forces a tool call" in text
