"""The main window: composition only. Toolbar (Start/Stop, Baseline | <modes>, Benchmark, Settings,
endpoint), conversations on the left, the speculation-guard banner and the chat in the middle, the
speed gauge on the right, the server log below, a status bar. The widgets hold the behaviour; this
module wires their signals. The Settings, Benchmark and Setup-wizard dialogs plug into factory slots
(``app.build_window`` fills them) and report back through :meth:`MainWindow.apply_profile`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QDockWidget,
    QLabel,
    QMainWindow,
    QSizePolicy,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from beedeck import APP_DISPLAY_NAME
from beedeck.core import paths
from beedeck.core.chat.store import ChatStore, ChatStoreError
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.spec_guard import SpecGuard
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile, engine_display_name, save_profile
from beedeck.core.settings import AppSettings
from beedeck.core.starter import is_starter
from beedeck.ui.chat.chat_pane import ChatPane
from beedeck.ui.chat.conversation_list import ConversationList
from beedeck.ui.chat.guard_banner import GuardBanner, GuardMonitor
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.failure_panel import FailurePanel
from beedeck.ui.engine.log_dock import LogDock
from beedeck.ui.engine.mode_toggle import ModeToggle
from beedeck.ui.engine.remote_binding import RemoteBinding
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.engine.switch_checker import SwitchChecker
from beedeck.ui.gauge.speed_gauge import SpeedPanel
from beedeck.ui.host import DialogFactory
from beedeck.ui.session import Session, default_client, default_detect, default_probe
from beedeck.ui.window.about_dialog import AboutDialog, session_facts
from beedeck.ui.window.advice_glue import AdviceGlue
from beedeck.ui.window.connect_dialog import open_connect_dialog
from beedeck.ui.window.menus import build_menus
from beedeck.ui.window.mode_glue import ModeGlue, pair_text
from beedeck.ui.window.placeholder_dialog import PlaceholderDialog
from beedeck.ui.window.shortcuts_dialog import ShortcutsDialog
from beedeck.ui.window.starter_banner import StarterBanner
from beedeck.ui.window.theme import apply_theme


def ui_settings() -> QSettings:
    """Window geometry and view state, in BeeDeck's config folder (BEEDECK_HOME-aware)."""
    return QSettings(str(paths.config_dir() / "ui.ini"), QSettings.Format.IniFormat)


class MainWindow(QMainWindow):
    """BeeDeck's window. ``settings_factory`` / ``bench_factory`` / ``wizard_factory`` are the slots
    the settings dialog, benchmark view and setup wizard plug into.

    ``probe`` (engine path -> EngineCaps), ``detect_hardware`` and ``profile_saver`` are the core
    calls the dialogs and :meth:`apply_profile` make; tests replace the ones that need a GPU.
    ``known_caps`` maps engine paths to their probed capabilities.
    """

    def __init__(self, store: ChatStore, controller: ServerController | None = None,
                 app_settings: AppSettings | None = None, session: Session | None = None) -> None:
        super().__init__()
        self.setWindowTitle(APP_DISPLAY_NAME)
        self.store = store
        # build_window passes what it loaded (and checked); a bare window reads them itself
        self.session = session or Session(app_settings, controller, self)
        self.settings_factory: DialogFactory | None = None
        self.bench_factory: DialogFactory | None = None
        self.wizard_factory: DialogFactory | None = None
        self.tune_factory: DialogFactory | None = None
        self.client_factory: Callable[[str, str | None], Any] = default_client
        self.probe: Callable[[str], EngineCaps] = default_probe
        self.detect_hardware: Callable[[], HardwareReport] = default_detect
        self.profile_saver: Callable[[Profile], object] = save_profile
        self.close_hooks: list[Callable[[], None]] = []  # e.g. the GPU sampler's stop()
        self.closing = False  # set in closeEvent: dialogs closing with the window start nothing
        self._served = False  # the current server became ready once (a later failure is a crash, not a start)

        self.chat = ChatPane(store, enter_sends=self.app_settings.enter_sends)
        self.failure = FailurePanel()
        self.conversations = ConversationList(store)
        self.speed = SpeedPanel()
        self.log = LogDock(self)
        self.mode = ModeToggle(switch=self.session.switch)  # the view of the session's switch
        self.switching = SwitchChecker(self.mode, self, memory=self.session.per_request_memory)
        self.endpoint = EndpointLabel()
        self.guard_monitor = GuardMonitor(self.guard, store, self)
        self.banner = GuardBanner()
        self.starter_banner = StarterBanner()
        self.hardware: HardwareReport | None = None
        self.advice_glue = AdviceGlue.for_host(self)  # learnt fastest mode per prompt kind, opt-in follow
        self._build_toolbar()
        self._build_layout()
        self._build_status_bar()
        self._build_shortcuts()
        self._wire()
        self.remote = RemoteBinding.for_host(self)  # Start/Stop read Connect/Disconnect for a running server
        self._restore_view()
        self._on_controller_state("stopped")

    # The session's state, read and written where the window and the dialogs always did.
    @property
    def profile(self) -> Profile | None:
        return self.session.profile

    @property
    def last_local_profile(self) -> Profile | None:
        return self.session.last_local_profile

    @property
    def known_caps(self) -> dict[str, EngineCaps]:
        return self.session.known_caps

    @property
    def app_settings(self) -> AppSettings:
        return self.session.app_settings

    @property
    def controller(self) -> ServerController:
        return self.session.controller

    @property
    def guard(self) -> SpecGuard:
        return self.session.guard

    # -- building --------------------------------------------------------------------------
    def _build_toolbar(self) -> None:
        bar = QToolBar("Main")
        bar.setObjectName("main-toolbar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.start_action = QAction("Start", self, toolTip="Start the server with the current profile")
        self.stop_action = QAction("Stop", self, toolTip="Stop the server")
        self.bench_action = QAction("Benchmark", self, toolTip="Baseline vs speculation modes on a fixed prompt set")
        self.tune_action = QAction("Tune", self, toolTip="Search for the fastest settings of this profile on your prompts")
        self.settings_action = QAction("Settings", self, toolTip="Engine, models, launch options")
        bar.addAction(self.start_action)
        bar.addAction(self.stop_action)
        bar.addSeparator()
        bar.addWidget(self.mode)
        bar.addSeparator()
        bar.addAction(self.bench_action)
        bar.addAction(self.tune_action)
        bar.addAction(self.settings_action)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        bar.addWidget(spacer)
        bar.addWidget(self.endpoint)
        self.addToolBar(bar)
        self.toolbar = bar

    def _build_layout(self) -> None:
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(self.failure)
        layout.addWidget(self.starter_banner)
        layout.addWidget(self.banner)
        layout.addWidget(self.chat, 1)
        self.setCentralWidget(central)
        left = QDockWidget("Chats", self)
        left.setObjectName("chats-dock")
        left.setWidget(self.conversations)
        left.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, left)
        right = QDockWidget("Speed", self)
        right.setObjectName("speed-dock")
        right.setWidget(self.speed)
        right.setFeatures(left.features())
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, right)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.log)
        self.chats_dock, self.speed_dock = left, right
        self.resizeDocks([left, right], [220, 270], Qt.Orientation.Horizontal)
        self.resizeDocks([self.log], [160], Qt.Orientation.Vertical)
        self.menu_actions = build_menus(self, self, [left, right, self.log], self.app_settings.theme)
        self.wizard_action = self.menu_actions["wizard"]
        # A small window squeezes the side panels, never the chat below a readable width.
        central.setMinimumWidth(CHAT_MIN_WIDTH)
        self.conversations.setMinimumWidth(150)
        self.speed.setMinimumWidth(170)
        self.setMinimumSize(CHAT_MIN_WIDTH + 120, 520)

    def _build_status_bar(self) -> None:
        self.engine_label = QLabel("engine: —")
        self.pair_label = QLabel("model: —")
        self.vram_label = QLabel("VRAM: —")
        self.state_label = QLabel("server: stopped")
        sb = self.statusBar()
        for w in (self.engine_label, self.pair_label, self.vram_label):
            sb.addWidget(w)
        sb.addPermanentWidget(self.state_label)

    def _build_shortcuts(self) -> None:
        def sc(keys: str | QKeySequence, fn: Callable[[], None]) -> QShortcut:
            s = QShortcut(QKeySequence(keys), self)
            s.setContext(Qt.ShortcutContext.WindowShortcut)
            s.activated.connect(fn)
            return s

        self.shortcuts = [
            sc("Ctrl+Return", self.chat.send),
            sc("Ctrl+Enter", self.chat.send),
            sc(QKeySequence(Qt.Key.Key_Escape), self.chat.escape),  # stop the reply, else leave edit mode
            sc("Ctrl+N", self.new_chat),
            sc("Ctrl+L", self.chat.focus_input),
        ]

    def _wire(self) -> None:
        c = self.controller
        c.state_changed.connect(self._on_controller_state)
        c.line_received.connect(self.log.append_line)
        c.ready.connect(self._on_controller_ready)
        c.failed.connect(self._on_controller_failed)
        c.refused.connect(lambda why: self.failure.show_failure(why, "Not launched: the running server keeps serving"))
        c.caps_known.connect(self._on_controller_caps)
        self.chat.copied.connect(lambda text: self.statusBar().showMessage(text, 2000))
        c.port_fallback_used.connect(lambda _wanted, _used, message: self.statusBar().showMessage(message, 20000))
        self.start_action.triggered.connect(self.start_server)
        self.stop_action.triggered.connect(self.stop_server)
        self.settings_action.triggered.connect(lambda: self._open(self.settings_factory, "Settings"))
        self.bench_action.triggered.connect(lambda: self._open(self.bench_factory, "Benchmark"))
        self.tune_action.triggered.connect(lambda: self._open(self.tune_factory, "Auto-tune"))
        self.chat.reply_started.connect(self.guard_monitor.reply_started)
        self.chat.reply_finished.connect(self.guard_monitor.reply_finished)
        self.chat.conversation_changed.connect(self.guard_monitor.conversation_changed)
        self.guard_monitor.conversation_switched.connect(self.banner.hide)
        self.starter_banner.wizard_requested.connect(self.open_wizard)
        self.starter_banner.settings_requested.connect(self.settings_action.trigger)
        self.starter_banner.prompt_chosen.connect(self.chat.input.setPlainText)  # a prompt chip: typed, then sent
        self.starter_banner.prompt_chosen.connect(lambda _text: self.chat.send())
        self.failure.retry_requested.connect(self.start_server)
        self.failure.local_requested.connect(self.use_local_server)
        self.failure.log_requested.connect(self._show_log)
        self.chat.reply_started.connect(self.speed.reply_started)
        self.chat.pieces_arrived.connect(self.speed.pieces_arrived)  # thinking pieces are generated tokens too
        self.chat.reply_finished.connect(self.speed.reply_finished)
        # The speed figures belong to one server: a remote one by its address, the local one by its model.
        c.ready.connect(lambda url: self.speed.server_ready(f"{url if c.is_remote() else 'local'} {self.pair_label.text()}"))
        self.chat.conversations_edited.connect(self.conversations.refresh)
        self.chat.conversation_changed.connect(self.conversations.set_current)
        self.conversations.conversation_selected.connect(self.chat.load_conversation)
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.conversation_deleted.connect(self._on_conversation_deleted)
        self.mode_glue = ModeGlue(self.session, self.mode, self.chat, self.switching, self.banner, self.guard_monitor,
                                  self)  # the toggle's chat, restart, checker and banner wiring
        # The ? popover's actions: what gets a mode that cannot run here.
        self.mode.popover.action_requested.connect(
            lambda action: self.open_wizard() if action == "wizard" else self.settings_action.trigger())

    def _show_log(self) -> None:
        self.log.show()
        self.log.raise_()

    # -- profile and server ----------------------------------------------------------------
    def set_profile(self, profile: Profile) -> None:
        self.session.set_profile(profile)
        s = profile.settings
        self.pair_label.setText(pair_text(s))
        caps = self.known_caps.get(profile.engine)
        self.engine_label.setText(f"engine: {engine_display_name(profile, caps)}")
        self.starter_banner.show_for_starter(is_starter(profile.settings))
        self.mode.configure(s, caps, self.session.per_request_memory.get(caps))
        self.remote.profile_set(profile)
        self.advice_glue.refresh()
        self._on_controller_state(self.controller.state)

    def save_profile(self, profile: Profile, caps: EngineCaps | None = None) -> None:
        """Settings' Save: show and save the profile (profile.json, without the API key) for the next
        start; a running server keeps its settings until it is restarted."""
        self._store_profile(profile, caps)
        if self.controller.is_running():
            self.statusBar().showMessage("Saved: the new settings apply when the server next starts.", 15000)

    def _store_profile(self, profile: Profile, caps: EngineCaps | None) -> None:
        if caps is not None:
            self.known_caps[profile.engine] = caps
        self.set_profile(profile)
        try:
            self.profile_saver(profile)
        except OSError as exc:
            self.failure.show_failure(OSError(f"The profile could not be saved ({exc}): check that BeeDeck's "
                                              "config folder is writable. It is used for this session only."),
                                      title="The profile could not be saved")

    def apply_profile(self, profile: Profile, caps: EngineCaps | None = None, start: bool = False) -> None:
        """A new profile from Settings or the wizard: show it, save it (profile.json, without the API
        key), and restart the server if it runs (``start``: start it even if it was stopped)."""
        self._store_profile(profile, caps)
        self.failure.hide()  # an old failure panel is stale now
        if self.controller.is_running() or self.controller.is_busy():
            self.chat.stop()  # the preflight runs before the working server is stopped (controller.replace)
            self.controller.replace(profile.engine, self._launch_settings(), self.known_caps.get(profile.engine))
        elif start:
            self.start_server()

    def use_local_server(self) -> None:
        """Back from a server BeeDeck did not start (disconnected, or gone) to the last local profile."""
        local = self.last_local_profile
        if local is not None:
            self.apply_profile(local, self.known_caps.get(local.engine), start=True)
        else:
            self.settings_action.trigger()  # Settings opens on the starter profile

    def start_server(self) -> None:
        if self.profile is None:
            self._open(self.wizard_factory or self.settings_factory, "Set up BeeDeck")
            return
        if self.controller.is_running() or self.controller.is_busy():
            return
        self.failure.hide()
        self.controller.start(self.profile.engine, self._launch_settings(), self.known_caps.get(self.profile.engine))

    def _launch_settings(self) -> LaunchSettings:
        assert self.profile is not None
        return self.mode_glue.launch_settings(self.profile.settings)  # in the mode the toggle shows

    def stop_server(self) -> None:
        self.chat.stop()
        self.controller.stop()

    def _on_controller_state(self, state: str) -> None:
        if state == "starting":
            self._served = False
        self.state_label.setText(f"server: {state}")
        running = state in ("starting", "loading", "ready")
        self.start_action.setEnabled(not running and not self.mode.is_switching())
        self.stop_action.setEnabled(running)
        if state != "ready":
            self.chat.set_client(None)
            self.endpoint.set_base_url("")
            if state in ("starting", "loading"):
                self.chat.set_notice("Starting the server and loading the model…")
            elif state == "stopped" and not self.mode.is_switching():
                self.chat.set_notice("The server is stopped. Press Start to chat." if self.profile else
                                     "No engine or model is set up yet: open Settings.")
                if self.profile is not None and self.profile.is_remote and self._served:  # after Disconnect
                    self.failure.show_notice("Disconnected", f"The server at {self.profile.engine} keeps running "
                                             "where it is.", "Connect again, or go back to BeeDeck's own server.", local=True)

    def _on_controller_caps(self, caps: object) -> None:
        # The session has learnt them already (it is connected first).
        if self.profile is not None and isinstance(caps, EngineCaps):
            self.mode.configure(self.profile.settings, caps, self.session.per_request_memory.get(caps))
            self.engine_label.setText(f"engine: {engine_display_name(self.profile, caps)}")

    def _on_controller_ready(self, base_url: str) -> None:
        self._served = True
        api_key = self.controller.settings.api_key if self.controller.settings else None
        self.chat.set_client(self.client_factory(base_url, api_key))
        self.chat.set_notice("")
        self.endpoint.set_base_url(base_url, self.controller.port_note)
        self.failure.hide()
        self.mode.restart_finished(self.controller.last_switch)
        self.switching.server_ready(self.controller.caps, self.client_factory(base_url, api_key))

    def _on_controller_failed(self, failure: object) -> None:
        was_serving = self._served
        self.mode.restart_failed()
        self._on_controller_state(self.controller.state)  # Start was held off while switching
        self.failure.show_failure(failure, "The server stopped while running" if was_serving
                                  else "The server could not start", local=bool(self.profile and self.profile.is_remote))
        self.chat.set_notice("")

    # -- chats -----------------------------------------------------------------------------
    def new_chat(self) -> None:
        self.chat.new_conversation()
        self.chat.focus_input()

    def open_latest_chat(self) -> None:
        try:
            convs = self.store.list_conversations()
        except ChatStoreError as exc:
            self.chat.set_notice(str(exc))
            return
        if convs:
            self.chat.load_conversation(convs[0].id)
        else:
            self.chat.new_conversation()

    def _on_conversation_deleted(self, conversation_id: int) -> None:
        if self.chat.conversation_id == conversation_id:
            self.chat.conversation_id = None
            self.open_latest_chat()

    # -- dialogs ---------------------------------------------------------------------------
    def open_wizard(self) -> None:
        self._open(self.wizard_factory, "Set up BeeDeck")

    @property
    def follow_advice_action(self) -> QAction:
        return self.advice_glue.follow_action

    def open_connect(self) -> None:
        open_connect_dialog(self, lambda p: self.apply_profile(p, start=True), self.profile)

    def open_agent(self, client_id: str) -> None:
        from beedeck.ui.window.agent_dialog import open_agent_dialog  # not on the start path (~20 ms)

        running = self.controller.settings if self.controller.is_running() else None
        open_agent_dialog(self, client_id, self.profile, running or (self._launch_settings() if self.profile else None),
                          self.controller.caps, lambda p: self.apply_profile(p, start=True))

    def dialog_parent(self) -> QWidget:
        return self

    def _open(self, factory: DialogFactory | None, title: str) -> None:
        if factory is not None:
            dialog = factory(self)
        else:
            dialog = PlaceholderDialog(
                title, f"{title} is not available in this build yet. The starter profile is used meanwhile.", self
            )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    # -- help, theme -------------------------------------------------------------------------
    def show_shortcuts(self) -> None:
        dialog = ShortcutsDialog(self.app_settings.enter_sends, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def about_facts(self) -> list[tuple[str, str]]:
        return session_facts(self.session, self.hardware)

    def show_about(self) -> None:
        dialog = AboutDialog(self.about_facts(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def set_theme(self, theme: str) -> None:
        """Apply a theme now and remember it (View → Theme)."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
        self.app_settings.theme = theme
        problem = self.session.save_settings()
        if problem:
            self.statusBar().showMessage(f"The theme could not be saved ({problem}); it applies to this session.")

    def set_hardware(self, report: HardwareReport) -> None:
        """What detection found: the starter banner says why there is no GPU."""
        self.hardware = report
        self.starter_banner.set_no_gpu_reason("" if report.has_gpu else report.reason or "none was found.")

    # -- GPU -------------------------------------------------------------------------------
    def on_gpu_sample(self, used: int | None, total: int | None, util: int | None) -> None:
        self.speed.set_gpu(used, total, util)
        if total:
            self.vram_label.setText(f"VRAM: {(used or 0) / 2**30:.1f} / {total / 2**30:.1f} GiB")
        else:
            self.vram_label.setText("VRAM: no GPU")

    # -- view state and shutdown -----------------------------------------------------------
    def _restore_view(self) -> None:
        s = ui_settings()
        geometry = s.value("window/geometry")
        state = s.value("window/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        else:
            self.resize(1280, 800)
        if isinstance(state, QByteArray):
            self.restoreState(state)
        else:
            self.log.hide()  # the transcript gets the height; View → Server log (or a failure) shows it

    def save_view(self) -> None:
        s = ui_settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_view()
        self.closing = True
        for dialog in self.findChildren(QDialog):
            dialog.close()  # their reject/done stop their own workers (benchmark, wizard downloads)
        self.chat.wait_idle()
        self.controller.shutdown()  # nothing is left running after the window closes
        while self.close_hooks:
            self.close_hooks.pop()()
        event.accept()


CHAT_MIN_WIDTH = 420
