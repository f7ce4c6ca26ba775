"""The mode toggle's wiring in the main window: the chat asks it which mode the next reply uses, its
restart-path switches restart the server, a per-request baseline reply that drafted is reported back,
and the speculation guard's banner switches through it (:meth:`ModeToggle.request_mode`, the same
path as a click). Kept apart from ``main_window`` so the window stays composition only.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.modes import option, uses_draft
from beedeck.core.engine.speculation.spec_guard import Advice
from beedeck.ui.chat.chat_pane import ChatPane
from beedeck.ui.session import Session
from beedeck.ui.speculation.guard_banner import GuardBanner, GuardMonitor
from beedeck.ui.speculation.mode_toggle import ModeToggle
from beedeck.ui.speculation.switch_checker import SwitchChecker


def pair_text(settings: LaunchSettings) -> str:
    """The status bar's model label: the target, and the draft where the profile loads one."""
    pair = Path(settings.target).name if settings.target else "—"
    if uses_draft(settings):
        pair += " + " + Path(str(settings.draft)).name
    return f"model: {pair}"


class ModeGlue(QObject):
    """Connects the session's switch (its view, the toggle) to the chat, the session's server controller,
    the switch checker and the guard banner."""

    def __init__(self, session: Session, toggle: ModeToggle, chat: ChatPane, switching: SwitchChecker,
                 banner: GuardBanner, guard_monitor: GuardMonitor, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session, self.mode, self.chat, self.controller = session, toggle, chat, session.controller
        self.switching, self.banner = switching, banner
        self.chat.mode_provider = self.mode.provider
        toggle.expected_s = session.controller.expected_switch_s  # the switch's "of about N s" and bar
        self.mode.restart_requested.connect(self._on_restart_requested)
        self.mode.per_request_known.connect(self._keep_other_mode_loaded)
        self.controller.ready.connect(self._keep_other_mode_loaded)
        self.chat.reply_finished.connect(self._on_reply_finished)
        guard_monitor.advice_given.connect(self._on_guard_advice)
        self.banner.switch_requested.connect(self._on_banner_switch_requested)

    def launch_settings(self, settings: LaunchSettings) -> LaunchSettings:
        """The profile's settings in the toggle's mode: after a switch, a later Start (or a restart
        for new settings) must not bring back the mode the toggle and the reply stats no longer show."""
        return self.mode.launch_settings(settings)

    def _on_restart_requested(self, settings: LaunchSettings) -> None:
        self.chat.stop()
        self.chat.set_notice("Switching mode: restarting the server…")
        self.controller.restart(settings)

    def _keep_other_mode_loaded(self, _url: str = "") -> None:
        """Load the other mode beside the running server as soon as the restart path is known, when memory
        allows (the controller decides): the first switch then loads nothing either."""
        other = self.mode.switch.standby_settings()
        if other is not None and self.controller.standby:
            self.controller.preload(other)

    def _on_reply_finished(self, facts: ReplyFacts) -> None:
        self.switching.reply_finished(self.controller.caps, facts)

    def _on_guard_advice(self, advice: Advice) -> None:
        suggested = option(self.mode.options(), advice.suggested_mode)
        if self.mode.isEnabled() and self.mode.mode() != advice.suggested_mode and suggested and suggested.available:
            self.banner.show_advice(advice)

    def _on_banner_switch_requested(self, mode: str) -> None:
        self.mode.request_mode(mode)  # the same path as the user's click: per request or by restart
