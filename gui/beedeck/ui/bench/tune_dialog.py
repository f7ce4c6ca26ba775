"""The main window's Tune dialog: a :class:`TuneView` set up from the session's profile.

The search starts its own servers, one per point, so the chat server must not hold the model (and the
CPU) meanwhile: with it running, "Stop the chat server and tune" stops it first, and it is started
again when the dialog closes. The result's "Save as profile" is re-emitted as
``profile_chosen(LaunchSettings)`` (the best :class:`LaunchSettings`) for the session to save; the figures
of a finished search teach the speed panel (:meth:`Session.record_figure`) and, once read, the speculation
guard's advice (``guard.advice``).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QPushButton, QWidget

from beedeck.core.bench.advice_feed import tune_advice_samples
from beedeck.core.bench.tune import TuneResult
from beedeck.core.chat.store import ChatStore, ChatStoreError
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import setup_key
from beedeck.core.profile import Profile
from beedeck.ui.bench.server_dialog import ChatServerDialog
from beedeck.ui.bench.tune_view import TuneView
from beedeck.ui.session import Session

REMOTE_NOTE = ("This profile is a server BeeDeck did not start. Tuning starts the engine once per point, so it "
               "needs a local profile: pick an engine and a model in Settings (or the setup wizard), then Tune.")

class TuneDialog(ChatServerDialog):
    """Auto-tune the session's profile. Signal: ``profile_chosen(LaunchSettings)``, the best settings.

    ``store``: the chat history to offer prompts from (the window's; None opens the default one when
    the dialog opens and closes it with the dialog). ``view``: a prepared view (tests pass one with a
    fake search).
    """

    profile_chosen = Signal(LaunchSettings)
    view: TuneView

    def __init__(self, session: Session, parent: QWidget | None = None, store: ChatStore | None = None,
                 view: TuneView | None = None) -> None:
        super().__init__(session, parent, "Auto-tune")
        self._own_store: ChatStore | None = None
        self.view = view or TuneView(self)
        self.view.setParent(self)
        self.stop_button = QPushButton("Stop the chat server and tune")
        self.stop_button.clicked.connect(self._on_stop_clicked)
        self._lay_out(self.stop_button, 760)
        self.view.save_requested.connect(self.profile_chosen.emit)
        self.view.run_finished.connect(self._on_run_finished)
        self._offer_chats(store)
        if session.profile is not None and session.profile.is_remote:
            self.note.setText(REMOTE_NOTE)
            self.view.start_button.setEnabled(False)
        elif session.server.is_running():
            self.note.setText("The chat server holds the model and the CPU: stop it to tune (each point of the "
                              "search starts its own server). It starts again when this dialog closes.")
            self.view.set_waiting("Stop the chat server first (the button above): every point of the search "
                                  "starts its own server with this profile.")
            self.stop_button.show()
        else:
            self.configure()

    def _offer_chats(self, store: ChatStore | None) -> None:
        if store is None:
            try:
                store = self._own_store = ChatStore()
            except ChatStoreError as exc:
                error = exc
                self.view.set_chat_source(lambda: _raise(error), lambda cid: [])
                return
        chats = store

        def conversations() -> list[tuple[int, str]]:
            return [(c.id, c.title) for c in chats.list_conversations()]

        self.view.set_chat_source(conversations, lambda cid: list(chats.messages(cid)))

    def configure(self) -> None:
        """Set the view up from the session's profile, probing the engine first if needed."""
        profile = self.session.profile
        self.stop_button.hide()
        if profile is None:
            self.note.setText("No engine or model is set up yet: open Settings or the setup wizard first.")
            return
        self.view.set_waiting("Probing the engine…")
        self._with_caps(profile.engine)

    def _use_caps(self, caps: EngineCaps) -> None:
        profile = self.session.profile
        assert profile is not None
        fig = self.session.figures.get(profile.settings.spec_mode)
        self.view.set_launch(Path(profile.engine), caps, profile.settings, tokens_per_s=fig.tps if fig else None)
        self.note.setText(f"BeeDeck tunes the current profile on {Path(profile.engine).name}: it starts the engine "
                          "once per point and stops it afterwards.")

    def _on_stop_clicked(self) -> None:
        self._stop_chat_server(self.stop_button)

    def _on_run_finished(self, result: TuneResult | None) -> None:
        """Teach the guard's advice what this search measured (off the GUI thread: it writes a file), and
        the speed panel the best point's figure."""
        best = result.best if result is not None else None
        if result is not None and best is not None and best.gen_tps is not None:
            # A mode's speed-up only where the best differs from the baseline in the mode alone (the start's
            # settings): a tuned knob on top would make it no like-for-like comparison of the mode.
            mode_only = best.vs_baseline if not best.changes and result.mode != Mode.BASELINE else None
            self.session.record_figure(result.mode, best.gen_tps.median, "tune", mode_only)
        advice = self.session.guard.advice
        profile = self.session.profile
        caps = self.session.known_caps.get(profile.engine) if profile is not None else None
        if result is None or advice is None or profile is None or caps is None:
            return
        self._learn(advice, setup_key(caps, profile.settings), tune_advice_samples(result), "search")

    def _closed(self) -> None:
        if self._own_store is not None:
            self._own_store.close()
            self._own_store = None


def _raise(exc: Exception) -> list[tuple[int, str]]:
    raise exc


def open_dialog(session: Session, parent: QWidget, store: ChatStore | None = None) -> TuneDialog:
    """The main window's Tune slot: the tuner on ``store``'s chats (the window's), its choice saved as the
    profile (the dialog restarts the chat server it stopped, on the new profile)."""
    dialog = TuneDialog(session, parent, store=store)

    def chosen(settings: LaunchSettings) -> None:
        profile = session.profile
        if profile is not None:
            session.save_profile(Profile(profile.engine, settings, label=profile.label))
            session.say("The tuned settings are the profile now.", 15000)

    dialog.profile_chosen.connect(chosen)
    return dialog
