"""The chat transcript: one QTextBrowser that stays smooth at any generation speed.

While a reply streams, pieces are buffered and go into the document once per frame (16 ms): as plain
text where they will be once rendered, or, on a slower adaptive throttle (33 ms or more), through a
render of the reply's live part (:class:`~beedeck.ui.chat.live_reply.LiveReply`): finished Markdown
blocks are rendered once with markdown-it + Pygments and frozen, the last block is rendered the same
way (code is highlighted while it streams), so nothing jumps and the cost of a frame does not grow
with the reply. Older messages are never touched (docs/reference/python-stack.md §6).

A reasoning model's thinking (``reasoning_content``) streams first, through the same per-frame append
throttle, as dimmed plain text under a "Thinking…" label (no Markdown render: it is read as it comes
and then folded away). When the answer starts, or the reply ends, the section folds to one line,
"Thinking · Thought for 12.3 s · 850 chars — show"; a click on it (``think:<id>``) expands or folds it.
A toggle rebuilds the document once (the current reply included), like loading the conversation.

A copy link answers with a "Copied" tooltip where it was clicked and the ``copied`` signal (for a
status line); "◀ 2/3 ▶" on a message with several versions emits ``action_triggered("older"|"newer")``.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QRect, QTimer, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QCursor,
    QFont,
    QGuiApplication,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextOption,
)
from PySide6.QtWidgets import QTextBrowser, QToolTip, QWidget

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.ui.chat.blocks import insert_blocks
from beedeck.ui.chat.markdown_render import code_blocks, render_html
from beedeck.ui.chat.message_html import (
    DIM,
    MessageView,
    empty_html,
    header_html,
    is_dark,
    stats_html,
    thinking_html,
)

if TYPE_CHECKING:
    from beedeck.ui.chat.live_reply import LiveReply

FRAME_MS = 16  # append throttle: one document edit per frame, however fast the pieces come
RENDER_MIN_MS = 33  # markdown re-render of the current reply's live part, at most 30 times a second
RENDER_COST_FACTOR = 4  # ...and never more than 1/4 of the GUI thread's time
RENDER_BEHIND_FACTOR = 2  # behind the stream: every frame, up to 1/2 of it
COPIED_MS = 1500  # how long the "Copied" tooltip stays


class ChatView(QTextBrowser):
    """Shows a conversation and streams the current reply into it.

    Signals: ``action_triggered(str, int)``: "edit" / "regenerate" / "older" / "newer" on a message id;
    ``flushed(int)``: streamed characters now in the document (for benchmarks and tests);
    ``thinking_toggled(int, bool)``: a message's thinking section was expanded (True) or folded;
    ``copied(str)``: a copy link put text on the clipboard; the argument says what, for a status line.
    """

    action_triggered = Signal(str, int)
    flushed = Signal(int)
    thinking_toggled = Signal(int, bool)
    copied = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setOpenExternalLinks(False)
        self.anchorClicked.connect(self._on_anchor_clicked)
        self.document().setDocumentMargin(12)
        # A line with no space to break at (a long token, a URL) breaks anywhere: nothing is wider than the view,
        # which never scrolls sideways (code frames wrap too: markdown_render.frame_html).
        self.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self._messages: list[MessageView] = []
        self._streamed_chars = 0  # characters of the current reply's answer in the document
        self._reply: MessageView | None = None
        self._live: LiveReply | None = None  # the current reply's answer in the document
        # A reply that ended with more unrendered text than one render's budget (10,000 tokens/s): its
        # rest is rendered over the next frames, in bounded steps, then its stats line goes in.
        self._finishing: tuple[LiveReply, str] | None = None
        self._body_start = 0
        self._next_render = 0.0  # perf_counter time of the next allowed render of the live part
        self._dark = is_dark(self.palette())  # the colours the document was rendered in
        self._pending_reasoning: list[str] = []
        self._think_start = 0  # document position of the current reply's thinking section
        self._thinking_live = False  # the thinking text is streaming at the document's end
        self._think_t0: float | None = None  # first thinking piece of the current reply (perf_counter)
        self._think_s: float | None = None  # how long the current reply thought, once its answer began
        self._thinking_stale = False  # thinking arrived after the answer began: redo the section at the end
        self._expanded: set[int] = set()  # ids of messages whose thinking is shown in full
        # (id, dark) -> (content, html) of finished replies: a fold toggle re-lays the document out
        # without running markdown-it + Pygments again (~80 % of a rebuild's cost).
        self._html_cache: dict[tuple[int, bool], tuple[str, str]] = {}
        self._flush_timer = QTimer(self, singleShot=True, interval=FRAME_MS)
        self._flush_timer.timeout.connect(self._flush)
        self.copy_text: Callable[[str], None] = lambda text: QGuiApplication.clipboard().setText(text)
        self.send_keys = "Enter"  # named in the empty conversation's hint

    def changeEvent(self, e: QEvent) -> None:
        """A theme switch: the transcript's code colours follow at once (the HTML holds them)."""
        super().changeEvent(e)
        if e.type() == QEvent.Type.PaletteChange and is_dark(self.palette()) != getattr(self, "_dark", None) \
                and hasattr(self, "_live"):
            self._dark = is_dark(self.palette())
            self._rebuild()

    # -- whole conversation ----------------------------------------------------------------
    def set_messages(self, messages: list[MessageView], keep_scroll: bool = False) -> None:
        """Show a conversation, at its end; ``keep_scroll``: where it was (another version of a turn)."""
        value = self.verticalScrollBar().value()
        self._stop_stream_timers()
        self._reply = None
        self._finishing = None  # the whole document is laid out anew
        self._messages = list(messages)
        ids = {m.id for m in self._messages}
        self._html_cache = {k: v for k, v in self._html_cache.items() if k[0] in ids}
        dark = self._dark = is_dark(self.palette())
        self.setHtml("".join(self._message_html(m, dark) for m in self._messages) or empty_html(self.send_keys))
        if keep_scroll:
            self.verticalScrollBar().setValue(value)
        else:
            self._scroll_to_end()

    def toggle_thinking(self, message_id: int) -> None:
        """Expand a message's folded thinking section, or fold it again."""
        m = self._message(message_id)
        if m is None or not m.reasoning or (m is self._reply and self._thinking_live):
            return  # a section still streaming has no fold yet: it folds itself when the answer starts
        expanded = message_id not in self._expanded
        (self._expanded.add if expanded else self._expanded.discard)(message_id)
        self._rebuild()
        self.thinking_toggled.emit(message_id, expanded)

    def _rebuild(self) -> None:
        """Lay the whole document out again where it was scrolled (a fold toggle; rare, like a load).

        A streaming reply is laid out in its current state and keeps streaming: its frozen part is
        re-rendered once, all of it (a rare, user-started stall).
        """
        bar = self.verticalScrollBar()
        at_end, value = self._at_end(), bar.value()
        reply = self._reply
        dark = self._dark = is_dark(self.palette())
        older = [m for m in self._messages if m is not reply]
        self._finishing = None  # the whole document is laid out anew
        self._flush_timer.stop()
        self._pending_reasoning.clear()
        if older:
            self.setHtml("".join(self._message_html(m, dark) for m in older))
        elif reply is None:
            self.setHtml(empty_html(self.send_keys))
        else:
            self.clear()
        if reply is not None:
            self._lay_out_reply_start(reply)
            if reply.reasoning and (reply.content or not self._thinking_live):
                self._body_start = self._replace_from(self._think_start, self._put_thinking(reply))
            elif reply.reasoning:
                self._start_live_thinking()
                self._insert_reasoning(reply.reasoning)
            live = self._live_reply()
            live.reset(self._body_start)
            if live.src:
                live.dark = dark
                live.render(budget=None)  # all at once: a rebuild is a rare, user-started stall
        if at_end:
            self._scroll_to_end()
        else:
            bar.setValue(value)

    def messages(self) -> list[MessageView]:
        return list(self._messages)

    def _thinking_seconds_of(self, m: MessageView) -> float | None:
        if m is self._reply and self._think_s is not None:
            return self._think_s
        return m.facts.reasoning_s

    def _thinking_html(self, m: MessageView) -> str:
        return thinking_html(m, self._thinking_seconds_of(m), m.id in self._expanded)

    def _put_thinking(self, m: MessageView) -> Callable[[QTextCursor], None]:
        html_text = self._thinking_html(m)

        def put(c: QTextCursor) -> None:
            insert_blocks(self.document(), c, html_text)

        return put

    def _body_html(self, m: MessageView, dark: bool) -> str:
        if m.role == "user":  # as typed: pasted code keeps its indentation, and nothing is read as Markdown
            return f'<p style="white-space:pre-wrap">{html.escape(m.content)}</p>'
        cached = self._html_cache.get((m.id, dark))
        if cached is not None and cached[0] == m.content:
            return cached[1]
        out = render_html(m.content, str(m.id), dark)
        self._html_cache[(m.id, dark)] = (m.content, out)
        return out

    def _message_html(self, m: MessageView, dark: bool) -> str:
        return header_html(m) + self._thinking_html(m) + self._body_html(m, dark) + stats_html(m)

    def append_message(self, m: MessageView) -> None:
        """Append one finished message (the user's prompt) without re-rendering the rest."""
        self._complete_finishing()
        if not self._messages:
            self.clear()
        self._messages.append(m)
        insert_blocks(self.document(), self._end_cursor(), self._message_html(m, is_dark(self.palette())))
        self._scroll_to_end()

    # -- streaming -------------------------------------------------------------------------
    def begin_reply(self, m: MessageView) -> None:
        self._complete_finishing()
        if not self._messages:
            self.clear()
        self._messages.append(m)
        self._reply = m
        self._pending_reasoning.clear()
        self._streamed_chars = 0
        self._next_render = 0.0
        self._thinking_live = self._thinking_stale = False
        self._think_t0 = self._think_s = None
        self._lay_out_reply_start(m)
        from beedeck.ui.chat.live_reply import LiveReply  # with the first reply, not the window's start

        self._live = LiveReply(self.document(), str(m.id), is_dark(self.palette()), self._body_start)
        self._scroll_to_end()

    def _live_reply(self) -> LiveReply:
        assert self._live is not None
        return self._live

    def _lay_out_reply_start(self, m: MessageView) -> None:
        """The streaming reply's header; its thinking, then its answer, go after it (from the end of its
        block: each begins with a block of its own)."""
        cursor = self._end_cursor()
        insert_blocks(self.document(), cursor, header_html(m))
        self._think_start = self._body_start = cursor.position()

    def append_reasoning(self, text: str) -> None:
        """Buffer a piece of the thinking; it shows, dimmed, on the same throttle as the answer."""
        m = self._reply
        if m is None or not text:
            return
        m.reasoning += text
        if self._think_t0 is None:
            self._think_t0 = time.perf_counter()
        if m.content:
            # Thinking after the answer began (not llama-server's order): keep it, redo the fold at the end.
            self._thinking_stale = True
            return
        if not self._thinking_live:
            self._start_live_thinking()
        self._pending_reasoning.append(text)
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def thinking_seconds(self) -> float | None:
        """How long the current reply has thought (until its answer began); None if it did not."""
        if self._think_s is not None:
            return self._think_s
        return time.perf_counter() - self._think_t0 if self._think_t0 is not None else None

    def _dim_format(self, bold: bool = False) -> QTextCharFormat:
        fmt = QTextCharFormat()
        fmt.setForeground(QColor(DIM))
        if bold:
            fmt.setFontWeight(QFont.Weight.Bold)
        return fmt

    def _start_live_thinking(self) -> None:
        """The "Thinking…" label, once, at the start of the reply's body; the text streams below it."""
        cursor = self._end_cursor()
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
        cursor.insertText("Thinking…", self._dim_format(bold=True))
        cursor.insertBlock(QTextBlockFormat(), self._dim_format())
        self._thinking_live = True

    def _insert_reasoning(self, text: str) -> None:
        at_end = self._at_end()
        self._end_cursor().insertText(text, self._dim_format())
        if at_end:
            self._scroll_to_end()

    def _fold_live_thinking(self) -> None:
        """The answer began (or the reply ended): the streamed thinking becomes its one-line fold."""
        assert self._reply is not None
        self._pending_reasoning.clear()
        self._thinking_live = False
        if self._think_t0 is not None and self._think_s is None:
            # Rounded as it is stored, so the fold reads the same now and after a reload.
            self._think_s = round(time.perf_counter() - self._think_t0, 2)
        self._body_start = self._replace_from(self._think_start, self._put_thinking(self._reply))
        self._live_reply().reset(self._body_start)

    def append_delta(self, text: str) -> None:
        """Buffer a piece of the reply; it shows on the next frame (<= 16 ms)."""
        if self._reply is None or not text:
            return
        if self._thinking_live:
            self._fold_live_thinking()
        self._reply.content += text
        self._live_reply().add(text)
        if not self._flush_timer.isActive():
            self._flush_timer.start(FRAME_MS)

    def _flush(self) -> None:
        """One frame's edit: the thinking's new text, then the answer's (rendered when a render is due)."""
        if self._pending_reasoning and self._thinking_live:
            text = "".join(self._pending_reasoning)
            self._pending_reasoning.clear()
            self._insert_reasoning(text)
        if self._finishing is not None:
            self._finish_step()
            return
        live = self._live
        if self._reply is None or live is None or not live.needs_render():
            return
        now = time.perf_counter()
        at_end = self._at_end()
        if now >= self._next_render:
            cpu = time.thread_time()
            live.render()
            cost = time.thread_time() - cpu  # the GUI thread's own time (not a busy machine's waits)
            if live.needs_render():  # behind: a budget's worth per frame, at up to half the thread's time
                self._next_render = now + max(FRAME_MS / 1000, cost * RENDER_BEHIND_FACTOR)
            else:
                self._next_render = now + max(RENDER_MIN_MS / 1000, cost * RENDER_COST_FACTOR)
        elif live.pending:
            live.flush()
        if at_end:
            self._scroll_to_end()
        if live.shown != self._streamed_chars:
            self._streamed_chars = live.shown
            self.flushed.emit(self._streamed_chars)
        if live.needs_render() and not self._flush_timer.isActive():
            wait_ms = (self._next_render - time.perf_counter()) * 1000
            self._flush_timer.start(FRAME_MS if live.pending else max(1, min(FRAME_MS, int(wait_ms) + 1)))

    def _finish_step(self) -> None:
        """One bounded step of a finished reply's rest (see ``_finishing``); the last one adds its stats."""
        assert self._finishing is not None
        live, trailer = self._finishing
        now = time.perf_counter()
        if now < self._next_render:
            self._flush_timer.start(max(1, int((self._next_render - now) * 1000) + 1))
            return
        at_end = self._at_end()
        if live.backlog() > live.budget:
            cpu = time.thread_time()
            live.render()
            self._next_render = now + max(RENDER_MIN_MS / 1000, (time.thread_time() - cpu) * RENDER_COST_FACTOR)
            self._flush_timer.start(FRAME_MS)
        else:
            live.finish(trailer)
            self._finishing = None
        if at_end:
            self._scroll_to_end()

    def _complete_finishing(self) -> None:
        """Render a finished reply's rest now (a new message goes below it)."""
        if self._finishing is not None:
            live, trailer = self._finishing
            self._finishing = None
            live.finish(trailer)

    def _replace_from(self, position: int, render: Callable[[QTextCursor], None]) -> int:
        """Replace the document from ``position`` to the end; returns the end position of the render."""
        at_end = self._at_end()
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()
        cursor.setPosition(position)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        render(cursor)
        cursor.endEditBlock()
        if at_end:
            self._scroll_to_end()
        return cursor.position()

    def end_reply(
        self,
        content: str | None = None,
        facts: ReplyFacts | None = None,
        complete: bool = True,
        reasoning: str | None = None,
    ) -> None:
        """Render the rest of the finished reply with Pygments colours, copy links and its stats line.

        ``reasoning`` is the whole thinking text as the stream's result has it (None: as streamed).
        """
        if self._reply is None:
            return
        self._stop_stream_timers()
        m = self._reply
        m.facts = facts or ReplyFacts()
        m.complete = complete
        if reasoning is not None and reasoning != m.reasoning:
            m.reasoning = reasoning
            self._thinking_stale = True
        if self._think_s is None and m.facts.reasoning_s is not None:
            self._think_s = m.facts.reasoning_s  # the fold shows what was stored
        if self._thinking_live:
            self._fold_live_thinking()
        if m.reasoning and self._think_s is not None and m.facts.reasoning_s is None:
            m.facts = m.facts.with_reasoning(self._think_s)
        live = self._live_reply()
        if content is not None and content != m.content:
            # The server's text differs from what streamed (should not happen): render it all anew.
            m.content = content
            live.src = ""
            live.reset(self._body_start)
            live.add(content)
        at_end = self._at_end()
        if live.backlog() > live.budget:
            live.flush()
            self._finishing = (live, stats_html(m))
            self._flush_timer.start(FRAME_MS)
        else:
            live.finish(stats_html(m))
        if at_end:
            self._scroll_to_end()
        self._reply = self._live = None
        if self._thinking_stale:
            self._thinking_stale = False
            self._rebuild()
        self._streamed_chars = len(m.content)
        self.flushed.emit(self._streamed_chars)

    def is_streaming(self) -> bool:
        return self._reply is not None

    def current_reply(self) -> MessageView | None:
        return self._reply

    def _stop_stream_timers(self) -> None:
        self._flush_timer.stop()
        self._pending_reasoning.clear()

    # -- helpers ---------------------------------------------------------------------------
    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - 8

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _message(self, message_id: int) -> MessageView | None:
        return next((m for m in self._messages if m.id == message_id), None)

    def _on_anchor_clicked(self, url: QUrl) -> None:
        scheme, _, rest = url.toString().partition(":")
        if scheme == "copy":
            key, _, index = rest.partition(":")
            m = self._message(int(key)) if key.lstrip("-").isdigit() else None
            blocks = code_blocks(m.content) if m else []
            if index.isdigit() and int(index) < len(blocks):
                self._copy(blocks[int(index)], "code")
        elif scheme == "copy-msg" and rest.lstrip("-").isdigit():
            m = self._message(int(rest))
            if m:
                self._copy(m.content, "message")
        elif scheme == "think" and rest.lstrip("-").isdigit():
            self.toggle_thinking(int(rest))
        elif scheme in ("edit", "regenerate") and rest.lstrip("-").isdigit():
            self.action_triggered.emit(scheme, int(rest))
        elif scheme == "version":
            key, _, step = rest.partition(":")
            if key.lstrip("-").isdigit() and step in ("-1", "1"):
                self.action_triggered.emit("older" if step == "-1" else "newer", int(key))

    def _copy(self, text: str, what: str) -> None:
        """Put ``text`` on the clipboard and say so where the link was clicked (keyboard: at the cursor)."""
        self.copy_text(text)
        pos = self.viewport().mapFromGlobal(QCursor.pos())
        if not self.viewport().rect().contains(pos):
            pos = self.cursorRect().center()
        QToolTip.showText(self.viewport().mapToGlobal(pos), "Copied", self, QRect(), COPIED_MS)
        lines = text.count("\n") + (not text.endswith("\n"))
        self.copied.emit(f"Copied the {what} to the clipboard ({lines} line{'s' if lines != 1 else ''}).")
