"""Use with <agent>…: what the agent needs from BeeDeck's server as that server really is (its /props:
context per slot after the engine's cap, alias, key, whether the chat template renders tools; the profile,
said as such, when nothing answers), the diff of its config file, and Write / Undo (core.agents.configfile:
a copy first, a history, never a silent overwrite). Where the known-issue table says this engine's
speculation mode corrupts tool calls, a "Tool-safe" button restarts the server with speculation off and
says why.

Asking the server and reading the model's header run off the GUI thread (``runner``); reading and writing
a config file are a few small local file operations, done on the GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from beedeck.core.agents import configfile
from beedeck.core.agents.clients import AgentConfigError, client, refusal
from beedeck.core.agents.endpoint import endpoint_from_settings
from beedeck.core.agents.running import ServerView, describe, view_at
from beedeck.core.agents.toolsafe import tool_safe
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import Profile
from beedeck.ui.background import Runner, run_in_background


class AgentDialog(QDialog):
    """One agent's set-up. ``on_tool_safe(settings)`` relaunches with the tool-safe settings; ``runner`` runs
    the server's questions off the GUI thread (tests pass a synchronous one)."""

    def __init__(self, client_id: str, settings: LaunchSettings, caps: EngineCaps | None,
                 on_tool_safe: Callable[[LaunchSettings], None] | None = None, parent: QWidget | None = None,
                 runner: Runner | None = None) -> None:
        super().__init__(parent)
        self.client = client(client_id)
        self.caps = caps
        self.endpoint = endpoint_from_settings(settings)
        self.view: ServerView | None = None
        self.setWindowTitle(f"Use with {self.client.label}")
        self.resize(760, 560)
        layout = QVBoxLayout(self)
        self.summary = QLabel(wordWrap=True)
        layout.addWidget(self.summary)
        self.diff_view = QPlainTextEdit(readOnly=True)
        self.diff_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        layout.addWidget(self.diff_view)
        self.status = QLabel(wordWrap=True)
        layout.addWidget(self.status)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        self.write_button = QPushButton("Write config")
        self.undo_button = QPushButton("Undo")
        self.tool_safe_button = QPushButton("Tool-safe: restart without speculation")
        for button in (self.write_button, self.undo_button, self.tool_safe_button):
            buttons.addButton(button, QDialogButtonBox.ButtonRole.ActionRole)
        layout.addWidget(buttons)
        self.write_button.clicked.connect(self.write)
        self.undo_button.clicked.connect(self.undo)
        safe = tool_safe(settings, caps) if caps is not None else None
        self._safe = safe if safe is not None and safe.why else None
        self._on_tool_safe = on_tool_safe
        self.tool_safe_button.setVisible(self._safe is not None and on_tool_safe is not None)
        self.tool_safe_button.clicked.connect(self._tool_safe)
        self._plan: configfile.ConfigPlan | None = None
        self.summary.setText(f"<b>{self.client.label}</b>: asking the server at {self.endpoint.base_url}…")
        self.write_button.setEnabled(False)
        self.undo_button.setEnabled(configfile.has_undo(self.client.id))
        (runner or run_in_background)(lambda: view_at(settings), self._on_view, self._on_view_failed)

    def _on_view(self, view: Any) -> None:
        self.view = view
        self.endpoint = view.endpoint
        self.refresh()

    def _on_view_failed(self, exc: BaseException) -> None:
        self.summary.setText(f"<b>{self.client.label}</b>: the server's facts could not be read ({exc}).")

    def refresh(self) -> None:
        """Show what the agent needs and the diff writing its config would make."""
        if self.view is None:
            return
        c, ep = self.client, self.endpoint
        lines = [x.strip() for x in describe(c, self.view, self.caps)]
        if self._safe is not None:
            lines.append(self._safe.why)
        self.summary.setText("<br>".join(_html(x) for x in lines))
        self._plan = None
        if c.config is None:
            self.diff_view.setPlainText("\n".join(f'export {k}="{v}"' for k, v in c.env(ep).items()))
            self.write_button.setEnabled(False)
            self.undo_button.setEnabled(False)
            return
        why_not = refusal(c, ep)
        try:
            self._plan = None if why_not else configfile.plan(c, ep)
        except AgentConfigError as exc:
            why_not = str(exc)
        if self._plan is None:
            self.diff_view.setPlainText(f"Not written: {why_not}")
            self.write_button.setEnabled(False)
            self.undo_button.setEnabled(configfile.has_undo(c.id))
            return
        self.diff_view.setPlainText(self._plan.diff() or f"{self._plan.path} already says this.")
        self.write_button.setEnabled(self._plan.changes)
        self.undo_button.setEnabled(configfile.has_undo(c.id))

    def write(self) -> None:
        if self._plan is None:
            return
        try:
            backup = configfile.write(self._plan)
        except configfile.AlreadyWritten as exc:
            self.status.setText(str(exc))
        except (AgentConfigError, OSError) as exc:
            self.status.setText(f"Not written: {exc}")
        else:
            kept = f" The old file is kept as {backup}." if backup else ""
            self.status.setText(f"Wrote {self._plan.path}.{kept}")
        self.refresh()

    def undo(self) -> None:
        try:
            said = configfile.undo(self.client.id)
            self.status.setText(said[:1].upper() + said[1:] + ".")
        except (AgentConfigError, OSError) as exc:
            self.status.setText(str(exc))
        self.refresh()

    def _tool_safe(self) -> None:
        if self._safe is not None and self._on_tool_safe is not None:
            self._on_tool_safe(self._safe.settings)
            self.status.setText("Restarting the server with speculation off (tool-safe).")
            self.tool_safe_button.setEnabled(False)


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def open_agent_dialog(parent: QWidget, client_id: str, profile: Profile | None, settings: LaunchSettings | None,
                      caps: EngineCaps | None, apply_profile: Callable[[Profile], None]) -> AgentDialog | None:
    """Open Use with <client_id> for the server ``settings`` describe (the running one's, else the
    profile's); Tool-safe hands ``apply_profile`` the profile with speculation off. None without a profile."""
    if profile is None or settings is None or profile.is_remote:
        return None
    dialog = AgentDialog(client_id, settings, caps,
                         lambda safe: apply_profile(replace(profile, settings=safe)), parent)
    dialog.open()
    return dialog
