"""The window's menu bar: File (incl. export the chat, Connect), Server (incl. Tune, follow the advice, keep the other mode loaded,
Use with…), Chat (regenerate, stop, next mode), View (docks, theme), Help (docs, shortcuts, about). Every
action with a key shows it in its menu: Start F5, Stop Shift+F5, Regenerate Ctrl+R, the next speculation
mode Ctrl+M, export the chat Ctrl+E. Keys the window answers through its own shortcuts (Ctrl+N, Esc) are shown after a tab in the
action's text, so they are not registered twice (an ambiguous shortcut fires neither).

Built from the toolbar's actions, the session (the choices it saves, the mode switch) and the window's
commands (:class:`MenuCommands`): the menus never see the window itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction, QActionGroup, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu

from beedeck.core import paths
from beedeck.core.agents.clients import CLIENTS
from beedeck.core.settings import THEMES
from beedeck.ui.session import Session

DOCS_URL = "https://github.com/beedeck/beedeck#readme"
THEME_LABELS = {"system": "Follow the system", "light": "Light", "dark": "Dark"}


@dataclass(frozen=True)
class ToolbarActions:
    """The toolbar's actions, also in the Server and File menus."""

    start: QAction
    stop: QAction
    bench: QAction
    tune: QAction
    settings: QAction


@dataclass(frozen=True)
class MenuCommands:
    """What the window does for a menu entry (its dialogs and its chat)."""

    new_chat: Callable[[], None]
    export_chat: Callable[[str], None]  # "markdown" or "json"
    open_wizard: Callable[[], None]
    open_connect: Callable[[], None]
    open_agent: Callable[[str], None]
    regenerate: Callable[[], None]
    stop_reply: Callable[[], None]
    show_shortcuts: Callable[[], None]
    show_about: Callable[[], None]
    set_theme: Callable[[str], None]


def _setting_action(menu: QMenu, text: str, checked: bool, tip: str, toggled: Callable[[bool], None]) -> QAction:
    """A checkable menu entry for one AppSettings switch, saved at once through ``toggled``."""
    action = menu.addAction(text)
    action.setCheckable(True)
    action.setChecked(checked)
    action.setToolTip(tip)
    action.toggled.connect(toggled)
    return action


def standby_action(menu: QMenu, session: Session) -> QAction:
    """Server → "Keep the other mode loaded": AppSettings.standby (core/engine/speculation/standby.py), saved at once;
    the server controller follows."""
    return _setting_action(
        menu, "Keep the other mode loaded when memory allows", session.app_settings.standby,
        "A Baseline | DFlash switch loads the other mode beside the running server when the GPU and the host have "
        "room for both, so switching back loads nothing. Off: every switch restarts the server.",
        session.set_standby)


def follow_action(menu: QMenu, session: Session) -> QAction:
    """Server → "Follow the fastest mode per prompt kind": AppSettings.follow_advice, saved at once."""
    return _setting_action(
        menu, "Follow the fastest mode per prompt kind", session.app_settings.follow_advice,
        "Before each message, switch to the speculation mode this setup measured fastest for that kind of prompt "
        "(code, prose, structured). Learnt from Tune and Benchmark runs; until then nothing changes.",
        session.set_follow_advice)


def docs_url() -> QUrl:
    """The README of this checkout (a source install), else the project's page."""
    readme = paths.resource_path().parent / "README.md"
    return QUrl.fromLocalFile(str(readme)) if readme.is_file() else QUrl(DOCS_URL)


def next_mode(session: Session) -> bool:
    """Switch to the next mode the switch can run (wrapping to Baseline), as a click would."""
    switch = session.switch
    shown = {o.key for o in switch.shown()}
    usable = [o.key for o in switch.options if o.available and o.key in shown]
    if len(usable) < 2 or not switch.enabled:
        return False
    current = switch.mode
    following = usable[(usable.index(current) + 1) % len(usable)] if current in usable else usable[0]
    return session.request_mode(following)


def build_menus(window: QMainWindow, session: Session, toolbar: ToolbarActions, commands: MenuCommands,
                docks: list[QDockWidget], open_url: Callable[[QUrl], object] | None = None) -> dict[str, QAction]:
    """Fill ``window``'s menu bar; returns the actions tests and the window need, by name."""
    bar = window.menuBar()
    out: dict[str, QAction] = {}
    file_menu = bar.addMenu("&File")
    out["new_chat"] = file_menu.addAction("New chat\tCtrl+N", commands.new_chat)  # the window's own shortcut
    out["new_chat"].setToolTip("Start a new chat")
    out["export_markdown"] = file_menu.addAction("Export this chat as Markdown…", lambda: commands.export_chat("markdown"))
    out["export_markdown"].setShortcut(QKeySequence("Ctrl+E"))
    out["export_markdown"].setToolTip("Save the chat shown as a Markdown file (the chat list's menu exports any chat)")
    out["export_json"] = file_menu.addAction("Export this chat as JSON…", lambda: commands.export_chat("json"))
    out["export_json"].setToolTip("Save the chat shown as JSON: every message with its speed figures")
    file_menu.addSeparator()
    toolbar.settings.setShortcut(QKeySequence("Ctrl+,"))
    file_menu.addAction(toolbar.settings)
    out["wizard"] = file_menu.addAction("Setup wizard…", commands.open_wizard)
    out["wizard"].setToolTip("Detect the GPU, pick a model pair that fits, get an engine and the models")
    out["connect"] = file_menu.addAction("Connect to a running server…", commands.open_connect)
    out["connect"].setToolTip("Chat with a llama-server that is already running (a GPU pod, another machine)")
    file_menu.addSeparator()
    out["quit"] = file_menu.addAction("Quit", window.close)
    out["quit"].setShortcut(QKeySequence(QKeySequence.StandardKey.Quit))

    server_menu = bar.addMenu("&Server")
    toolbar.start.setShortcut(QKeySequence("F5"))
    toolbar.stop.setShortcut(QKeySequence("Shift+F5"))
    for action in (toolbar.start, toolbar.stop, toolbar.bench, toolbar.tune):
        server_menu.addAction(action)
    server_menu.addSeparator()
    out["follow"] = follow_action(server_menu, session)
    out["standby"] = standby_action(server_menu, session)
    agents = server_menu.addMenu("Use with…")  # a coding agent on this server (core.agents)
    for agent in CLIENTS:
        action = agents.addAction(f"{agent.label}…")
        action.triggered.connect(lambda _checked=False, a=agent.id: commands.open_agent(a))
        out[f"agent_{agent.id}"] = action

    chat_menu = bar.addMenu("&Chat")
    out["regenerate"] = chat_menu.addAction("Regenerate the last reply", commands.regenerate)
    out["regenerate"].setShortcut(QKeySequence("Ctrl+R"))
    out["stop_reply"] = chat_menu.addAction("Stop the reply\tEsc", commands.stop_reply)  # Esc: the window's shortcut
    out["stop_reply"].setToolTip("Stop the reply; what it wrote so far is kept")
    out["next_mode"] = chat_menu.addAction("Next speculation mode", lambda: next_mode(session))
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
        action.setChecked(name == session.app_settings.theme)
        action.triggered.connect(lambda _checked=False, n=name: commands.set_theme(n))
        group.addAction(action)
        out[f"theme_{name}"] = action

    help_menu = bar.addMenu("&Help")
    out["docs"] = help_menu.addAction("Documentation", lambda: (open_url or QDesktopServices.openUrl)(docs_url()))
    out["shortcuts"] = help_menu.addAction("Keyboard shortcuts", commands.show_shortcuts)
    out["shortcuts"].setShortcut(QKeySequence("F1"))
    help_menu.addSeparator()
    out["about"] = help_menu.addAction("About BeeDeck", commands.show_about)
    return out
