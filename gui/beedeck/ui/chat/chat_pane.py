"""The chat pane: transcript, system prompt, input, Send / Stop / Regenerate, and the glue between
the chat store (persistence as the reply streams), the chat worker and the speed gauge.

A reasoning model's thinking is shown (folded once the answer starts), stored with its message and
exported, but never sent back: the next request carries only the answers (llama-server's templates
drop or re-derive reasoning, and resending it would only eat context).

Nothing is deleted by regenerate or edit-and-resend: the replaced messages stay in the store as an
earlier version of their turn, and "◀ 1/2 ▶" on the message brings them back. Edit mode shows its own
bar with Cancel (and Esc in the message box), and ends when the conversation changes.

Each window holds a lease on the chat it shows (core/chat/leases.py): a chat another live window has open
is not opened here, and every message is stored after the last one this pane shows, so two windows on one
history never write one chat's turns into each other's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from beedeck.core.chat.leases import ChatLeases
from beedeck.core.chat.prompt_read import prompt_chars
from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store import ChatStore, ChatStoreError, Message, auto_title
from beedeck.core.engine.client import ChatResult, InvalidText, check_text
from beedeck.core.engine.mode import Mode
from beedeck.ui.chat.chat_view import ChatView
from beedeck.ui.chat.chat_worker import ChatRun
from beedeck.ui.chat.composer import ChatInput
from beedeck.ui.chat.edit_bar import EditBar
from beedeck.ui.chat.message_html import MessageView
from beedeck.ui.chat.prompt_wait import PromptWait
from beedeck.ui.chat.reply_saver import ReplySaver

PERSIST_MS = 250  # the streaming reply is written to SQLite at most 4 times a second
MAX_TOKENS = 2048

# mode_provider() -> (the mode, or None without a toggle; extra request fields)
ModeProvider = Callable[[], tuple[Mode | None, dict[str, Any]]]


class ChatPane(QWidget):
    """Chat with the running server, one conversation at a time.

    Signals: ``reply_started(Mode)`` its mode (None: sent without a toggle); ``delta_received(str)`` answer text (a run of pieces);
    ``reasoning_received(str)`` thinking text; ``pieces_arrived(int)`` how many pieces (about one token
    each) a batch brought; ``prompt_reading(str)`` how far the server has read the prompt (in short); ``reply_finished(ReplyFacts)``; ``reply_failed(str)``;
    ``store_failed(str)`` the chat store refused a write or read (the text stays on screen);
    ``conversation_changed(int)``; ``conversations_edited()`` (titles/order);
    ``copied(str)`` a copy link put text on the clipboard (a sentence for the status bar).
    """

    reply_started = Signal(Mode)
    delta_received = Signal(str)
    reasoning_received = Signal(str)
    pieces_arrived = Signal(int)
    prompt_reading = Signal(str)
    reply_finished = Signal(ReplyFacts)
    reply_failed = Signal(str)
    store_failed = Signal(str)
    conversation_changed = Signal(int)
    conversations_edited = Signal()
    copied = Signal(str)

    def __init__(self, store: ChatStore, parent: QWidget | None = None, *, enter_sends: bool = True) -> None:
        super().__init__(parent)
        self.store = store
        self.leases = ChatLeases(store.path)  # the chat shown here, held against other windows
        self.client: Any = None
        self.mode_provider: ModeProvider = lambda: (None, {})
        # Called with the text before a message goes out; False holds it (it stays in the input box),
        # e.g. while the server restarts into the mode the learnt advice picked for this kind of prompt.
        self.before_send: Callable[[str], bool] | None = None
        self.max_tokens = MAX_TOKENS
        self.conversation_id: int | None = None
        self._run: ChatRun | None = None
        self._reply_id: int | None = None
        self._reply_mode: Mode | None = None
        self._edit_from: int | None = None  # the message being edited (edit mode), else None
        self._draft: str = ""  # what the message box held before edit mode, given back on Cancel

        self.system_prompt = QLineEdit(placeholderText="System prompt (optional): how the assistant should behave")
        self.system_prompt.editingFinished.connect(self._on_system_prompt_edited)
        self.view = ChatView()
        self.view.action_triggered.connect(self._on_view_action)
        self.view.copied.connect(self.copied)
        self.input = ChatInput()
        self.input.send_requested.connect(self.send)
        self.input.cancel_requested.connect(self.cancel_edit)
        self.edit_bar = EditBar()
        self.edit_bar.cancel_requested.connect(self.cancel_edit)
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.send_button.clicked.connect(self.send)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop)  # calls ChatRun.cancel directly on this thread
        self.regen_button = QPushButton("Regenerate")
        self.regen_button.clicked.connect(lambda: self.regenerate())  # not clicked(bool) as the id
        self.notice = QLabel()
        self.notice.setWordWrap(True)
        self.notice.setStyleSheet("color: palette(mid);")

        # Buttons in a row beside the box (bottom-aligned): a column of three would keep an empty box
        # three buttons tall, and the box grows with its text (ChatInput).
        row = QHBoxLayout()
        row.addWidget(self.input, 1)
        for b in (self.send_button, self.stop_button, self.regen_button):
            row.addWidget(b, 0, Qt.AlignmentFlag.AlignBottom)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.system_prompt)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.notice)
        layout.addWidget(self.edit_bar)
        layout.addLayout(row)

        self._persist_timer = QTimer(self, singleShot=True, interval=PERSIST_MS)
        self._persist_timer.timeout.connect(self._persist_reply)
        # A reply the store could not take (a full disk): kept there and retried until it is saved.
        self._saver = ReplySaver(store, self)
        self._saver.failed.connect(self._store_failed)
        self._saver.saved_late.connect(lambda: self.set_notice("The reply that could not be saved is saved now."))
        self._wait = PromptWait(self.set_notice, self.notice.text, self)  # the wait for the first token, said
        self._wait.reading.connect(self.prompt_reading)
        self.set_enter_sends(enter_sends)

    def set_enter_sends(self, enter_sends: bool) -> None:
        """The send key (settings' ``enter_sends``): Enter (Shift+Enter: new line), or Ctrl+Enter only."""
        self.input.set_enter_sends(enter_sends)
        self.view.send_keys = self.input.send_keys()
        if not self.view.messages():
            self.view.set_messages([])  # the empty conversation's hint names the key
        self._update_buttons()

    # -- state -----------------------------------------------------------------------------
    def set_client(self, client: Any) -> None:
        """The LlamaClient of the ready server, or None when no server is ready."""
        self.client = client
        self._update_buttons()

    def set_notice(self, text: str) -> None:
        self.notice.setText(text)
        self.notice.setVisible(bool(text))

    # -- the store may fail (a full disk, a damaged file): nothing on screen is lost ------------
    def _store_failed(self, exc: ChatStoreError) -> None:
        self.set_notice(str(exc))
        self.store_failed.emit(str(exc))

    def has_unsaved(self) -> bool:
        return self._saver.has_unsaved()

    def is_generating(self) -> bool:
        return self._run is not None

    def _update_buttons(self) -> None:
        busy = self._run is not None
        self.send_button.setEnabled(self.client is not None and not busy)
        self.stop_button.setEnabled(busy)
        has_reply = any(m.role == "assistant" for m in self.view.messages())
        self.regen_button.setEnabled(self.client is not None and not busy and has_reply)
        if self.client is None and not busy:
            self.send_button.setToolTip("Start the server first (toolbar: Start).")
        else:
            self.send_button.setToolTip(f"Send ({self.input.send_keys()})")

    # -- conversations ---------------------------------------------------------------------
    def new_conversation(self) -> int | None:
        if self._run is not None:
            self.stop()
        try:
            conv = self.store.create_conversation(system_prompt=self.system_prompt.text())
        except ChatStoreError as exc:
            self._store_failed(exc)
            return None
        self.load_conversation(conv.id, quiet=True)  # a new chat: no other window has it
        self.conversations_edited.emit()
        return conv.id

    def load_conversation(self, conversation_id: int, quiet: bool = False) -> bool:
        """Show a conversation; False (and, unless ``quiet``, a notice saying where it is open) when another
        BeeDeck window has it open, or it cannot be read."""
        if conversation_id != self.conversation_id and (holder := self.leases.holder(conversation_id)):
            if not quiet:
                self.set_notice(f"That chat is open in {holder}: it stays there, so that two windows never write "
                                "one chat. Switch to that window, or pick another chat.")
            if self.conversation_id is not None:
                self.conversation_changed.emit(self.conversation_id)  # the list shows this pane's chat again
            return False
        if self._run is not None:
            self.stop()
        try:
            conv = self.store.conversation(conversation_id)
            messages = self.store.messages(conversation_id) if conv is not None else []
        except ChatStoreError as exc:
            self._store_failed(exc)
            return False
        if conv is None or self.leases.take(conversation_id) is not None:
            return False  # gone, or another window took it in the meantime
        self.cancel_edit()  # an edit belongs to the conversation it started in
        self.conversation_id = conversation_id
        self.system_prompt.setText(conv.system_prompt)
        self._show(messages)
        self._update_buttons()
        self.conversation_changed.emit(conversation_id)
        return True

    def _show(self, messages: list[Message] | None = None, keep_scroll: bool = False) -> None:
        """Lay the current conversation out again, with each turn's "◀ 1/2 ▶" (raises ChatStoreError)."""
        assert self.conversation_id is not None
        if messages is None:
            messages = self.store.messages(self.conversation_id)
        positions = self.store.version_positions(self.conversation_id)
        self.view.set_messages([self._view_of(m, positions) for m in messages], keep_scroll)

    @staticmethod
    def _view_of(m: Message, positions: dict[int, tuple[int, int]] | None = None) -> MessageView:
        version = (positions or {}).get(m.id)
        return MessageView(m.id, m.role, m.content, m.facts, m.complete, m.reasoning, version)

    def _on_system_prompt_edited(self) -> None:
        if self.conversation_id is not None:
            try:
                self.store.set_system_prompt(self.conversation_id, self.system_prompt.text())
            except ChatStoreError as exc:
                self._store_failed(exc)

    # -- sending ---------------------------------------------------------------------------
    def focus_input(self) -> None:
        self.input.setFocus(Qt.FocusReason.ShortcutFocusReason)

    def send(self) -> None:
        text = self.input.toPlainText().strip()
        if not text or self.client is None or self._run is not None:
            return
        try:
            check_text(text, "The message")  # a paste from another encoding: say so, send nothing
        except InvalidText as exc:
            self.set_notice(str(exc))
            return
        if self.before_send is not None and not self.before_send(text):
            return
        try:
            self._send(text)
        except ChatStoreError as exc:
            self._store_failed(exc)  # the text stays in the input box: nothing typed is lost

    def _send(self, text: str) -> None:
        if self.conversation_id is None and self.new_conversation() is None:
            return
        assert self.conversation_id is not None
        edited, draft, retitle = self._edit_from is not None, "", False
        parent = self._last_shown()  # what this window shows last: another window's turns are not this one's
        if self._edit_from is not None:
            retitle = self._titled_after(self._edit_from)
            parent = self._last_shown(self._edit_from)  # the new version follows what the edited one followed
            # Edit-and-resend: the edited prompt takes that message's place; it and the replies after
            # it stay in the store as the earlier version of the turn.
            self.store.supersede_from(self.conversation_id, self._edit_from)
            self._leave_edit()
            draft, self._draft = self._draft, ""  # what was typed before the edit comes back
        conv = self.store.conversation(self.conversation_id)
        if conv is not None and (conv.title == "New chat" or retitle):
            self.store.rename(self.conversation_id, auto_title(text))
        msg = self.store.add_message(self.conversation_id, "user", text, parent_id=parent)
        if edited:
            self._show()
        else:
            self.view.append_message(self._view_of(msg))
        self.input.setPlainText(draft)
        self.conversations_edited.emit()
        self._start_reply()
        if edited:
            self.set_notice("The earlier version is kept: ◀ on your message shows it again.")

    def _last_shown(self, before: int | None = None) -> int:
        """The id of the last message this pane shows (before message ``before``, when given): what a new one
        follows. 0 when there is none (the first message)."""
        ids = [m.id for m in self.view.messages() if before is None or m.id < before]
        return ids[-1] if ids else 0

    def _titled_after(self, message_id: int) -> bool:
        """Whether ``message_id`` is the first message and the title was taken from it (not typed by the
        user): then an edit of it retitles the conversation."""
        assert self.conversation_id is not None
        conv = self.store.conversation(self.conversation_id)
        first = next((m for m in self.store.messages(self.conversation_id) if m.role == "user"), None)
        return conv is not None and first is not None and first.id == message_id and conv.title == auto_title(first.content)

    def regenerate(self, message_id: int | None = None) -> None:
        """Ask again for a reply (the last one by default); the replaced reply, and anything after it,
        is kept as the earlier version of that turn."""
        if self.conversation_id is None or self._run is not None or self.client is None:
            return
        self.cancel_edit()
        try:
            self._regenerate(message_id)
        except ChatStoreError as exc:
            self._store_failed(exc)

    def _regenerate(self, message_id: int | None) -> None:
        assert self.conversation_id is not None
        msgs = self.store.messages(self.conversation_id)
        target = next((m for m in reversed(msgs) if m.role == "assistant" and message_id in (None, m.id)), None)
        if target is None:
            return
        self.store.supersede_from(self.conversation_id, target.id)
        self._show()
        self._start_reply()
        self.set_notice("The earlier reply is kept: ◀ on the reply shows it again.")

    # -- edit mode and versions ------------------------------------------------------------
    def is_editing(self) -> bool:
        return self._edit_from is not None

    def begin_edit(self, message_id: int) -> None:
        """Put an earlier prompt in the message box; Send replaces it (and keeps the old version)."""
        if self._run is not None or self.conversation_id is None:
            return
        try:
            m = next((m for m in self.store.messages(self.conversation_id) if m.id == message_id), None)
        except ChatStoreError as exc:
            self._store_failed(exc)
            return
        if m is None or m.role != "user":
            return
        if self._edit_from is None:
            self._draft = self.input.toPlainText()  # a second Edit keeps the first draft
        self._edit_from = m.id
        self.input.editing = True
        self.input.setPlainText(m.content)
        self.edit_bar.show()
        self.focus_input()

    def cancel_edit(self) -> None:
        """Leave edit mode (Cancel, Esc, another conversation) and give the earlier draft back."""
        if self._edit_from is None:
            return
        self._leave_edit()
        self.input.setPlainText(self._draft)
        self.input.moveCursor(QTextCursor.MoveOperation.End)
        self._draft = ""

    def _leave_edit(self) -> None:
        self._edit_from = None
        self.input.editing = False
        self.edit_bar.hide()

    def escape(self) -> None:
        """Esc anywhere in the window: stop the reply, or else leave edit mode."""
        if self._run is not None:
            self.stop()
        else:
            self.cancel_edit()

    def show_version(self, message_id: int, step: int) -> None:
        """Show the earlier (``step`` -1) or later (+1) version of a message's turn."""
        if self._run is not None or self.conversation_id is None:
            return
        self.cancel_edit()  # the message being edited may leave the screen
        try:
            ids = self.store.versions(message_id)
            if message_id not in ids or not 0 <= ids.index(message_id) + step < len(ids):
                return
            self.store.show_version(ids[ids.index(message_id) + step])
            self._show(keep_scroll=True)
        except ChatStoreError as exc:
            self._store_failed(exc)
        self._update_buttons()

    def _history(self) -> list[dict[str, str]]:
        """The request's messages: role and answer text only, never the stored thinking."""
        assert self.conversation_id is not None
        out: list[dict[str, str]] = []
        prompt = self.system_prompt.text().strip()
        if prompt:
            out.append({"role": "system", "content": prompt})
        for m in self.store.messages(self.conversation_id):
            if m.role in ("user", "assistant") and m.content:
                out.append({"role": m.role, "content": m.content})
        return out

    def _start_reply(self) -> None:
        assert self.conversation_id is not None
        asked, extra = self.mode_provider()
        mode = Mode.parse(asked)  # a Mode (the toggle's), or a stored word
        # Timings on every chunk (a stopped reply keeps the server's figures), the prompt's progress while the
        # server reads it (a long chat takes seconds before the first token). Others ignore the fields.
        extra = {"timings_per_token": True, "return_progress": True, **(extra or {})}
        history = self._history()
        stream = self.client.stream_chat(history, max_tokens=self.max_tokens, extra=extra)
        reply = self.store.add_message(self.conversation_id, "assistant", "", ReplyFacts(mode=mode).to_json(),
                                       complete=False, parent_id=self._last_shown())
        self._reply_id, self._reply_mode = reply.id, mode
        self.view.begin_reply(self._view_of(reply, self.store.version_positions(self.conversation_id)))
        run = ChatRun(stream, self)
        run.pieces_received.connect(self._on_run_pieces)
        run.progress_received.connect(self._wait.progress)
        run.finished.connect(self._on_run_finished)
        run.failed.connect(self._on_run_failed)
        run.ended.connect(run.deleteLater)
        self._run = run
        self._t_sent = time.perf_counter()
        self.set_notice("")
        self._update_buttons()
        self.reply_started.emit(mode)
        self._wait.start(prompt_chars(history))
        run.start()

    def stop(self) -> None:
        """Stop the current reply (Esc). The partial reply is kept and marked stopped."""
        if self._run is not None:
            self._run.cancel()

    def wait_idle(self, ms: int = 5000) -> None:
        """Cancel and wait for the worker (app shutdown), then save what it streamed.

        The worker's last pieces and its ``finished`` are queued events the closing app would never
        deliver: handing them over here stores the whole partial reply, marked stopped, instead of
        the text of the last throttled write.
        """
        run = self._run
        if run is not None:
            run.cancel()
            if run.wait(ms):
                # PySide routes a Python slot through a hidden receiver, not ``run``: deliver every
                # queued call of this thread (the worker's are the ones that can still be pending).
                QCoreApplication.sendPostedEvents(None, QEvent.Type.MetaCall)

    # -- worker events ---------------------------------------------------------------------
    def _on_run_pieces(self, pieces: list[tuple[bool, str]]) -> None:
        """A batch from the worker: the view takes each run of answer or thinking text at once, the text
        signals fire once per run, and ``pieces_arrived`` once per batch with its piece count (the gauge
        counts pieces: one emit per piece cost a second of GUI time per reply at 10,000 tokens/s)."""
        self._wait.end()  # the first token came
        run: list[str] = []
        for i, (thinking, text) in enumerate(pieces):
            run.append(text)
            if i + 1 == len(pieces) or pieces[i + 1][0] != thinking:
                joined = "".join(run)
                (self.view.append_reasoning if thinking else self.view.append_delta)(joined)
                (self.reasoning_received if thinking else self.delta_received).emit(joined)
                run.clear()
        self.pieces_arrived.emit(len(pieces))
        if not self._persist_timer.isActive():
            self._persist_timer.start()

    def _persist_reply(self) -> None:
        reply = self.view.current_reply()
        if reply is not None and self._reply_id is not None:
            self._saver.save(self._reply_id, reply.content, reasoning=reply.reasoning)

    def _with_thinking_time(self, facts: ReplyFacts, reasoning: str) -> ReplyFacts:
        return facts.with_reasoning(self.view.thinking_seconds() if reasoning else None)

    def _finish(self) -> None:
        self._wait.end()
        self._persist_timer.stop()
        self._run = None
        self._reply_id = None
        self._update_buttons()

    def _on_run_finished(self, result: ChatResult) -> None:
        content, reasoning = result.text, result.reasoning
        facts = self._with_thinking_time(ReplyFacts.from_result(result, self._reply_mode), reasoning)
        stats = facts.to_json()
        if self._reply_id is not None:
            self._saver.save(self._reply_id, content, stats, complete=True, reasoning=reasoning)
        self.view.end_reply(content, facts, complete=True, reasoning=reasoning)
        self._finish()
        self.reply_finished.emit(facts)

    def _on_run_failed(self, message: str) -> None:
        current = self.view.current_reply()
        content = current.content if current else ""
        reasoning = current.reasoning if current else ""
        facts = self._with_thinking_time(ReplyFacts(mode=self._reply_mode, error=message), reasoning)
        if self._reply_id is not None:
            self._saver.save(self._reply_id, content, facts.to_json(), complete=False, reasoning=reasoning)
        self.view.end_reply(content, facts, complete=False)
        self._finish()
        self.set_notice(f"The reply failed: {message}")
        self.reply_failed.emit(message)

    def _on_view_action(self, action: str, message_id: int) -> None:
        if self._run is not None or self.conversation_id is None:
            return
        if action == "regenerate":
            self.regenerate(message_id)
        elif action == "edit":
            self.begin_edit(message_id)
        elif action in ("older", "newer"):
            self.show_version(message_id, -1 if action == "older" else 1)
