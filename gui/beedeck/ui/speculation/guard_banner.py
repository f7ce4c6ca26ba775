"""The "speculation is hurting" banner above the chat, and the glue that feeds core.spec_guard.

:class:`GuardMonitor` turns the chat pane's events into :meth:`SpecGuard.observe` calls (generation
tok/s, the reply's mode, and the kind of the user message that asked for it) and emits the guard's
one :class:`Advice`. :class:`GuardBanner` shows it, non-modal, with a one-click "Switch to baseline".
The guard itself decides when to speak (once per conversation and prompt kind): nothing here nags.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QPushButton, QToolButton, QWidget

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.spec_guard import Advice, SpecGuard, classify_prompt
from beedeck.ui.wrap_label import WrapLabel


class GuardMonitor(QObject):
    """Feeds finished replies into a :class:`SpecGuard`.

    Connect ``reply_started(str)``, ``reply_finished(ReplyFacts)`` and ``conversation_changed(int)`` of the
    chat pane. Signals: ``advice_given(Advice)``, ``conversation_switched()``.
    """

    advice_given = Signal(Advice)
    conversation_switched = Signal()

    def __init__(self, guard: SpecGuard, store: ChatStore, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.guard, self.store = guard, store
        self.conversation_id: int | None = None
        self._kind: str | None = None  # kind of the prompt the running reply answers

    def conversation_changed(self, conversation_id: int) -> None:
        # Reloading the same conversation (a re-render) must not reset the guard's figures.
        if conversation_id != self.conversation_id:
            self.conversation_id = conversation_id
            self.guard.new_conversation(str(conversation_id))
            self.conversation_switched.emit()

    def reply_started(self, _mode: Mode | None) -> None:
        # Read the prompt now: by the time the reply ends the user may have typed/edited more.
        prompt = self._last_user_message()
        self._kind = classify_prompt(prompt) if prompt is not None else None

    def reply_finished(self, facts: ReplyFacts) -> None:
        kind, self._kind = self._kind, None
        # A stopped reply's speed is a partial figure; replies without a mode (no toggle) say nothing.
        if kind is None or facts.mode is None or not facts.full_speed or facts.tps is None:
            return
        advice = self.guard.observe(facts.mode, facts.tps, kind, facts.draft_n)
        if advice is not None:
            self.advice_given.emit(advice)

    def _last_user_message(self) -> str | None:
        if self.conversation_id is None:
            return None
        msgs = self.store.messages(self.conversation_id)
        return next((m.content for m in reversed(msgs) if m.role == "user"), None)


class GuardBanner(QFrame):
    """A dismissable strip with the guard's message and "Switch to baseline".

    Signals: ``switch_requested(Mode)`` (the mode the advice suggests), ``dismissed()``.
    """

    switch_requested = Signal(Mode)
    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("guard-banner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#guard-banner { background: rgba(224, 161, 0, 0.16); border: 1px solid #c98a00;"
                           " border-radius: 4px; }")
        self.advice: Advice | None = None
        self.text = WrapLabel()
        self.text.setObjectName("guard-text")
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.switch_button = QPushButton("Switch to baseline")
        self.switch_button.clicked.connect(self._on_switch_clicked)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss: BeeDeck will not say this again in this conversation.")
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.switch_button, 0, Qt.AlignmentFlag.AlignVCenter)
        layout.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_advice(self, advice: Advice) -> None:
        self.advice = advice
        self.text.setText(advice.message)
        self.switch_button.setText(f"Switch to {advice.suggested_mode}")
        self.show()

    def dismiss(self) -> None:
        if self.isVisible():
            self.hide()
            self.dismissed.emit()

    def _on_switch_clicked(self) -> None:
        mode = self.advice.suggested_mode if self.advice else Mode.BASELINE
        self.hide()
        self.switch_requested.emit(mode)
