"""The main window: it lays out views and renders the session. Toolbar (Start/Stop, Baseline | <modes>,
Benchmark, Settings, endpoint), conversations on the left, the speculation-guard banner and the chat in
the middle, the speed gauge on the right, the server log below, a status bar.

What happens (a profile applied, a server started or replaced, a mode switched, the advice followed) is
the :class:`~beedeck.ui.session.Session`'s: the window forwards clicks to it and updates its views from
its signals (and the server controller's, for the views that show the server). The Settings, Benchmark,
Tune and Setup-wizard dialogs plug into factory slots (``app.build_window`` fills them) and get the session
and the window as their parent.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QByteArray, QRect, QSettings, QSize, Qt
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
from beedeck.core.engine.logparse import ServerFailure
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.spec_guard import Advice
from beedeck.core.machine.report import HardwareReport
from beedeck.core.profile import Profile, engine_display_name, pair_name
from beedeck.core.settings import THEMES, AppSettings
from beedeck.core.starter import is_starter
from beedeck.ui.chat.chat_pane import ChatPane
from beedeck.ui.chat.conversation_list import ConversationList
from beedeck.ui.engine.endpoint_label import EndpointLabel
from beedeck.ui.engine.failure_panel import FailurePanel
from beedeck.ui.engine.log_dock import LogDock
from beedeck.ui.engine.remote_binding import RemoteBinding
from beedeck.ui.engine.server_controller import ServerController
from beedeck.ui.gauge.speed_gauge import SpeedPanel
from beedeck.ui.screen_fit import FRAME_H, FRAME_W, available_area, fit_to
from beedeck.ui.session import Session
from beedeck.ui.speculation.guard_banner import GuardBanner, GuardMonitor
from beedeck.ui.speculation.mode_toggle import ModeToggle
from beedeck.ui.window.about_dialog import AboutDialog, session_facts
from beedeck.ui.window.connect_dialog import open_connect_dialog
from beedeck.ui.window.menus import MenuCommands, ToolbarActions, build_menus
from beedeck.ui.window.notice_bar import NoticeBar
from beedeck.ui.window.placeholder_dialog import PlaceholderDialog
from beedeck.ui.window.shortcuts_dialog import ShortcutsDialog
from beedeck.ui.window.starter_banner import StarterBanner
from beedeck.ui.window.theme import apply_theme

DialogFactory = Callable[[Session, QWidget], QDialog]
"""A dialog slot: the dialog made for the session, with the window as its parent."""


def ui_settings() -> QSettings:
    """Window geometry and view state, in BeeDeck's config folder (BEEDECK_HOME-aware)."""
    return QSettings(str(paths.config_dir() / "ui.ini"), QSettings.Format.IniFormat)


class MainWindow(QMainWindow):
    """BeeDeck's window over a :class:`Session`. ``settings_factory`` / ``bench_factory`` / ``wizard_factory``
    / ``tune_factory`` are the slots the settings dialog, benchmark view, setup wizard and tuner plug into."""

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
        self.close_hooks: list[Callable[[], None]] = []  # e.g. the GPU sampler's stop()

        self.chat = ChatPane(store, enter_sends=self.session.app_settings.enter_sends)
        self.failure = FailurePanel()
        self.notices = NoticeBar()  # lasting: BeeDeck's own files, a port another process holds
        self.conversations = ConversationList(store)
        self.speed = SpeedPanel(figures=self.session.figures)
        self.log = LogDock(self)
        self.mode = ModeToggle(self.session.switch)  # the view of the session's switch
        self.endpoint = EndpointLabel()
        self.guard_monitor = GuardMonitor(self.session.guard, store, self)
        self.banner = GuardBanner()
        self.starter_banner = StarterBanner()
        self._build_toolbar()
        self._build_layout()
        self._build_status_bar()
        self._build_shortcuts()
        self.remote = RemoteBinding(self.session.controller, self.start_action, self.stop_action, self.engine_label,
                                    self.pair_label, self.endpoint, self)  # Start/Stop read Connect/Disconnect
        self._wire_session()
        self._wire_views()
        self._restore_view()
        self._on_state(self.session.server.state)
        self.chat.set_notice(self.session.notice)

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
        layout.addWidget(self.notices)
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
        toolbar = ToolbarActions(self.start_action, self.stop_action, self.bench_action, self.tune_action,
                                 self.settings_action)
        commands = MenuCommands(new_chat=self.new_chat, export_chat=self.export_chat, open_wizard=self.open_wizard,
                                open_connect=self.open_connect, open_agent=self.open_agent,
                                regenerate=lambda: self.chat.regenerate(), stop_reply=lambda: self.chat.stop(),
                                show_shortcuts=self.show_shortcuts,
                                show_about=self.show_about, set_theme=self.set_theme)
        self.menu_actions = build_menus(self, self.session, toolbar, commands, [left, right, self.log])
        self.wizard_action = self.menu_actions["wizard"]
        self.follow_advice_action = self.menu_actions["follow"]
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

    def _wire_session(self) -> None:
        """The session says what happened; the window shows it."""
        s, c = self.session, self.session.controller
        s.profile_changed.connect(self._show_profile)
        s.caps_known.connect(lambda _caps: self._show_engine())
        s.hardware_known.connect(self._show_hardware)
        s.settings_saved.connect(self._show_settings)
        s.said.connect(lambda text, ms: self.statusBar().showMessage(text, ms))
        s.notice_changed.connect(self.chat.set_notice)
        s.failure_shown.connect(self._show_failure)
        s.notice_shown.connect(lambda title, what, remedy, local: self.failure.show_notice(title, what, remedy, local))
        s.lasting_notice.connect(self.notices.show_notice)
        s.failure_cleared.connect(self.failure.hide)
        s.serving_interrupted.connect(self.chat.stop)
        s.setup_wanted.connect(lambda: self._open(self.wizard_factory or self.settings_factory, "Set up BeeDeck"))
        s.settings_wanted.connect(self.settings_action.trigger)
        s.figures_changed.connect(self.speed.show_figures)
        s.switching.changed.connect(self._show_switch)
        s.advice_follower.held_released.connect(self._send_held)
        self.chat.mode_provider = s.switching.provider
        self.chat.before_send = s.advice_follower.before_send
        c.state_changed.connect(self._on_state)
        c.line_received.connect(self.log.append_line)
        s.serving.connect(self._on_ready)  # the controller's ready, through the session: before the switch hears it
        # Wrapped and lasting: in the status bar the line was cut, and a menu hover took it away.
        c.port_fallback_used.connect(lambda _wanted, _used, message: self.notices.show_notice(
            "port", "The server listens on another port this time", message))
        # The speed figures belong to one server: a remote one by its address, the local one by its model.
        s.serving.connect(lambda url: self.speed.server_ready(
            f"{url if s.server.is_remote() else 'local'} {self.pair_label.text()}"))

    def _wire_views(self) -> None:
        s = self.session
        self.mode.mode_clicked.connect(s.request_mode)
        # The ? popover's actions: what gets a mode that cannot run here.
        self.mode.popover.action_requested.connect(
            lambda action: self.open_wizard() if action == "wizard" else self.settings_action.trigger())
        self.start_action.triggered.connect(s.start_server)
        self.stop_action.triggered.connect(s.stop_server)
        self.settings_action.triggered.connect(lambda: self._open(self.settings_factory, "Settings"))
        self.bench_action.triggered.connect(lambda: self._open(self.bench_factory, "Benchmark"))
        self.tune_action.triggered.connect(lambda: self._open(self.tune_factory, "Auto-tune"))
        self.chat.copied.connect(lambda text: self.statusBar().showMessage(text, 2000))
        self.chat.reply_started.connect(self.guard_monitor.reply_started)
        self.chat.reply_finished.connect(self.guard_monitor.reply_finished)
        self.chat.conversation_changed.connect(self.guard_monitor.conversation_changed)
        self.guard_monitor.conversation_switched.connect(self.banner.hide)
        self.guard_monitor.advice_given.connect(self._on_guard_advice)
        self.banner.switch_requested.connect(s.request_mode)  # the same path as a click: per request or by restart
        self.starter_banner.wizard_requested.connect(self.open_wizard)
        self.starter_banner.settings_requested.connect(self.settings_action.trigger)
        self.starter_banner.prompt_chosen.connect(self.chat.input.setPlainText)  # a prompt chip: typed, then sent
        self.starter_banner.prompt_chosen.connect(lambda _text: self.chat.send())
        self.failure.retry_requested.connect(s.start_server)
        self.failure.local_requested.connect(s.use_local_server)
        self.failure.log_requested.connect(self._show_log)
        self.chat.reply_started.connect(self.speed.reply_started)
        self.chat.pieces_arrived.connect(self.speed.pieces_arrived)  # thinking pieces are generated tokens too
        self.chat.prompt_reading.connect(self.speed.prompt_reading)
        self.chat.reply_finished.connect(self.speed.reply_finished)
        # a failed reply makes the controller check an attached server now (a dead remote noticed within 2 s)
        self.chat.reply_failed.connect(s.server.request_failed)
        self.chat.conversations_edited.connect(self.conversations.refresh)
        self.chat.conversation_changed.connect(self.conversations.set_current)
        self.conversations.conversation_selected.connect(self.chat.load_conversation)
        self.conversations.new_requested.connect(self.new_chat)
        self.conversations.conversation_deleted.connect(self._on_conversation_deleted)
        self.conversations.held_elsewhere = self.chat.leases.holder  # a chat another window has open stays
        self.chat.reply_finished.connect(s.switching.reply_finished)  # a "baseline" reply that drafted: restart

    def _show_log(self) -> None:
        self.log.show()
        self.log.raise_()

    # -- rendering the session -------------------------------------------------------------
    def _show_profile(self, profile: Profile) -> None:
        self.pair_label.setText(f"model: {pair_name(profile.settings)}")
        self._show_engine()
        self.starter_banner.show_for_starter(is_starter(profile.settings))
        self.remote.profile_set(profile)
        self._on_state(self.session.server.state)

    def _show_engine(self) -> None:
        profile = self.session.profile
        if profile is not None:
            self.engine_label.setText(f"engine: {engine_display_name(profile, self.session.caps())}")

    def _show_switch(self) -> None:
        self.mode.show_switch()
        self._show_actions(self.session.server.state)

    def _show_actions(self, state: ServerState) -> None:
        self.start_action.setEnabled(not state.running and self.session.switch.pending is None)
        self.stop_action.setEnabled(state.running)

    def _show_failure(self, failure: ServerFailure, title: str, local: bool) -> None:
        self._show_actions(self.session.server.state)  # Start was held off while switching
        self.failure.show_failure(failure, title, local)

    def _show_settings(self, settings: AppSettings) -> None:
        """The one AppSettings copy was saved (by a menu, the wizard, a dialog): the views follow it."""
        self.chat.set_enter_sends(settings.enter_sends)
        for key, on in (("follow", settings.follow_advice), ("standby", settings.standby),
                        *((f"theme_{name}", name == settings.theme) for name in THEMES)):
            action = self.menu_actions[key]
            if action.isChecked() != on:
                blocked = action.blockSignals(True)  # showing the saved choice is no new choice
                action.setChecked(on)
                action.blockSignals(blocked)

    def _show_hardware(self, report: HardwareReport) -> None:
        """What detection found: the starter banner says why there is no GPU."""
        self.starter_banner.set_no_gpu_reason("" if report.has_gpu else report.reason or "none was found.")

    def _on_state(self, state: ServerState) -> None:
        self.state_label.setText(f"server: {state}")
        self._show_actions(state)
        if state != ServerState.READY:
            self.chat.set_client(None)
            self.endpoint.set_base_url("")

    def _on_ready(self, base_url: str) -> None:
        self.chat.set_client(self.session.client(base_url))
        self.endpoint.set_base_url(base_url, self.session.server.port_note)
        if not self.session.server.port_note:
            self.notices.dismiss("port")  # on the port asked for again: that notice is over

    def _on_guard_advice(self, advice: Advice) -> None:
        if self.session.switching.offers(advice.suggested_mode):
            self.banner.show_advice(advice)

    def _send_held(self, text: str) -> None:
        """The advice's held message, sent now the server is ready, if the box still holds it."""
        if self.chat.input.toPlainText().strip() == text:
            self.chat.send()

    # -- chats -----------------------------------------------------------------------------
    def new_chat(self) -> None:
        self.chat.new_conversation()
        self.chat.focus_input()

    def export_chat(self, fmt: str) -> None:
        """File → Export this chat (``fmt``: "markdown" or "json"): the chat list's export of the chat shown."""
        if self.chat.conversation_id is None:
            self.statusBar().showMessage("No chat to export yet: send a message first.", 5000)
            return
        out = self.conversations.export(self.chat.conversation_id, fmt)
        if out is not None:
            self.statusBar().showMessage(f"Exported the chat to {out}", 8000)

    def open_latest_chat(self) -> None:
        """The newest chat no other BeeDeck window has open, else a new one: two windows never share a chat."""
        try:
            convs = self.store.list_conversations()
        except ChatStoreError as exc:
            self.chat.set_notice(str(exc))
            return
        if not any(self.chat.load_conversation(conv.id, quiet=True) for conv in convs):
            self.chat.new_conversation()

    def _on_conversation_deleted(self, conversation_id: int) -> None:
        if self.chat.conversation_id == conversation_id:
            self.chat.conversation_id = None
            self.open_latest_chat()

    # -- dialogs ---------------------------------------------------------------------------
    def open_wizard(self) -> None:
        self._open(self.wizard_factory, "Set up BeeDeck")

    def open_connect(self) -> None:
        open_connect_dialog(self, lambda p: self.session.apply_profile(p, start=True), self.session.profile,
                            self.session.last_remote())

    def open_agent(self, client_id: str) -> None:
        from beedeck.ui.window.agent_dialog import open_agent_dialog  # not on the start path (~20 ms)

        s, c = self.session, self.session.server
        running = c.settings if c.is_running() else None
        open_agent_dialog(self, client_id, s.profile, running or (s.launch_settings() if s.profile else None),
                          c.caps, lambda p: s.apply_profile(p, start=True))

    def _open(self, factory: DialogFactory | None, title: str) -> None:
        if factory is not None:
            dialog = factory(self.session, self)
        else:
            dialog = PlaceholderDialog(
                title, f"{title} is not available in this build yet. The starter profile is used meanwhile.", self
            )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    # -- help, theme -------------------------------------------------------------------------
    def show_shortcuts(self) -> None:
        dialog = ShortcutsDialog(self.session.app_settings.enter_sends, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def show_about(self) -> None:
        dialog = AboutDialog(session_facts(self.session), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.open()

    def set_theme(self, theme: str) -> None:
        """Apply a theme now; the session remembers it (View → Theme)."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
        self.session.set_theme(theme)

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
            self.restoreGeometry(geometry)  # Qt moves and shrinks it into a screen smaller than the one it was saved on
        else:
            self.fit_screen(available_area(self))
        if isinstance(state, QByteArray):
            self.restoreState(state)
        else:
            self.log.hide()  # the transcript gets the height; View → Server log (or a failure) shows it

    def fit_screen(self, available: QRect) -> None:
        """A first run's geometry: :data:`PREFERRED_SIZE`, capped so that the window, its title bar and borders
        fit the screen's free area (a 1366x768 laptop with a panel leaves 728 px: at 800 px Send, Stop and the
        status bar were below its edge), centred in it."""
        fit_to(self, PREFERRED_SIZE, available)
        outer = self.size() + QSize(FRAME_W, FRAME_H)
        self.move(available.x() + (available.width() - outer.width()) // 2,
                  available.y() + (available.height() - outer.height()) // 2)

    def save_view(self) -> None:
        s = ui_settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        self.save_view()
        self.session.closing = True  # dialogs closing with the window start nothing
        for dialog in self.findChildren(QDialog):
            dialog.close()  # their reject/done stop their own workers (benchmark, wizard downloads)
        self.chat.wait_idle()
        self.chat.leases.release()  # its chat is free for another window now
        self.session.shutdown()  # nothing is left running after the window closes
        while self.close_hooks:
            self.close_hooks.pop()()
        event.accept()


CHAT_MIN_WIDTH = 420
PREFERRED_SIZE = (1280, 800)  # a first run's window where the screen has room for it
