"""The window's menu bar: File (incl. Connect), Server (incl. Tune, follow the advice, keep the other mode loaded,
Use with…), Chat (regenerate,
stop, next mode), View (docks, theme), Help (docs, shortcuts, about). Every action with a key shows
it in its menu: Start F5, Stop Shift+F5, Regenerate Ctrl+R, the next speculation mode Ctrl+M. Keys the
window answers through its own shortcuts (Ctrl+N, Esc) are shown after a tab in the action's text,
so they are not registered twice (an ambiguous shortcut fires neither).

Built from the window's actions and slots; the window stays composition only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu

from beedeck.core import paths
from beedeck.core.agents.clients import CLIENTS
from beedeck.core.settings import THEMES
from beedeck.ui.chat.chat_pane import ChatPane
from beedeck.ui.session import Session
from beedeck.ui.speculation.mode_toggle import ModeToggle

DOCS_URL = "https://github.com/beedeck/beedeck#readme"
THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


class MenuHost(Protocol):
    start_action: QAction
    stop_action: QAction
    bench_action: QAction
    tune_action: QAction
    settings_action: QAction
    mode: ModeToggle
    chat: ChatPane
    session: Session

    @property
    def follow_advice_action(self) -> QAction: ...

    def new_chat(self) -> None: ...

    def open_wizard(self) -> None: ...
    def open_connect(self) -> None: ...
    def open_agent(self, client_id: str) -> None: ...
    def show_shortcuts(self) -> None: ...
    def show_about(self) -> None: ...
    def set_theme(self, theme: str) -> None: ...


def standby_action(menu: QMenu, session: Session) -> QAction:
    """Server → "Keep the other mode loaded": AppSettings.standby (core/engine/speculation/standby.py), saved at once."""
    action = menu.addAction("Keep the other mode loaded when memory allows")
    action.setCheckable(True)
    action.setChecked(session.app_settings.standby)
    action.setToolTip("A Baseline | DFlash switch loads the other mode beside the running server when the GPU "
                      "and the host have room for both, so switching back loads nothing. Off: every switch "
                      "restarts the server.")

    def toggled(on: bool) -> None:
        session.app_settings.standby = on
        session.save_settings()  # also tells the server controller

    action.toggled.connect(toggled)
    return action


def docs_url() -> QUrl:
    """The README of this checkout (a source install), else the project's page."""
    readme = paths.resource_path().parent / "README.md"
    return QUrl.fromLocalFile(str(readme)) if readme.is_file() else QUrl(DOCS_URL)


def next_mode(toggle: ModeToggle) -> bool:
    """Switch the toggle to the next mode it can run (wrapping to Baseline), as a click would."""
    usable = [o.key for o in toggle.options() if o.available and o.key in toggle.offered()]
    if len(usable) < 2 or not toggle.isEnabled():
        return False
    current = toggle.mode()
    following = usable[(usable.index(current) + 1) % len(usable)] if current in usable else usable[0]
    return toggle.request_mode(following)


def build_menus(window: QMainWindow, host: MenuHost, docks: list[QDockWidget], theme: str,
                open_url: Callable[[QUrl], object] | None = None) -> dict[str, QAction]:
    """Fill ``window``'s menu bar; returns the actions tests and the window need, by name."""
    bar = window.menuBar()
    out: dict[str, QAction] = {}
    file_menu = bar.addMenu("&File")
    out["new_chat"] = file_menu.addAction("New chat\tCtrl+N", host.new_chat)  # the window's own shortcut
    out["new_chat"].setToolTip("Start a new chat")
    host.settings_action.setShortcut(QKeySequence("Ctrl+,"))
    file_menu.addAction(host.settings_action)
    out["wizard"] = file_menu.addAction("Setup wizard…", host.open_wizard)
    out["wizard"].setToolTip("Detect the GPU, pick a model pair that fits, get an engine and the models")
    out["connect"] = file_menu.addAction("Connect to a running server…", host.open_connect)
    out["connect"].setToolTip("Chat with a llama-server that is already running (a GPU pod, another machine)")
    file_menu.addSeparator()
    out["quit"] = file_menu.addAction("Quit", window.close)
    out["quit"].setShortcut(QKeySequence(QKeySequence.StandardKey.Quit))

    server_menu = bar.addMenu("&Server")
    host.start_action.setShortcut(QKeySequence("F5"))
    host.stop_action.setShortcut(QKeySequence("Shift+F5"))
    for action in (host.start_action, host.stop_action, host.bench_action, host.tune_action):
        server_menu.addAction(action)
    server_menu.addSeparator()
    server_menu.addAction(host.follow_advice_action)
    out["standby"] = standby_action(server_menu, host.session)
    agents = server_menu.addMenu("Use with…")  # a coding agent on this server (core.agents)
    for agent in CLIENTS:
        action = agents.addAction(f"{agent.label}…")
        action.triggered.connect(lambda _checked=False, a=agent.id: host.open_agent(a))
        out[f"agent_{agent.id}"] = action

    chat_menu = bar.addMenu("&Chat")
    out["regenerate"] = chat_menu.addAction("Regenerate the last reply", lambda: host.chat.regenerate())
    out["regenerate"].setShortcut(QKeySequence("Ctrl+R"))
    out["stop_reply"] = chat_menu.addAction("Stop the reply\tEsc", lambda: host.chat.stop())  # Esc: the window's shortcut
    out["stop_reply"].setToolTip("Stop the reply; what it wrote so far is kept")
    out["next_mode"] = chat_menu.addAction("Next speculation mode", lambda: next_mode(host.mode))
    out["next_mode"].setShortcut(QKeySequence("Ctrl+M"))
    out["next_mode"].setToolTip("Baseline → each mode this setup can run → Baseline (the toggle in the toolbar)")

    view = bar.addMenu("&View")
    for dock in docks:
        view.addAction(dock.toggleViewAction())
    view.addSeparator()
    theme_menu = view.addMenu("Theme")
    group = QActionGroup(window)
    group.setExclusive(True)
    for name in THEMES:
        action = theme_menu.addAction(THEME_LABELS[name])
        action.setCheckable(True)
        action.setChecked(name == theme)
        action.triggered.connect(lambda _checked=False, n=name: host.set_theme(n))
        group.addAction(action)
        out[f"theme_{name}"] = action

    help_menu = bar.addMenu("&Help")
    out["docs"] = help_menu.addAction("Documentation", lambda: (open_url or QDesktopServices.openUrl)(docs_url()))
    out["shortcuts"] = help_menu.addAction("Keyboard shortcuts", host.show_shortcuts)
    out["shortcuts"].setShortcut(QKeySequence("F1"))
    help_menu.addSeparator()
    out["about"] = help_menu.addAction("About BeeDeck", host.show_about)
    return out
