"""The streaming reply's answer in the transcript's document, rendered so that the work per frame does
not grow with the reply (issue 22: 10,000 tokens/s, replies of 160,000 characters).

The answer's part of the document is, in order:

- **frozen**: finished Markdown blocks (a later block has begun), rendered once with markdown-it +
  Pygments (:func:`~beedeck.ui.chat.markdown_render.render_html`) and never touched again;
- **live**: the last, still growing block, rendered the same way (an open code fence is a highlighted
  code frame already, so nothing jumps when it closes or when the reply ends);
- **verbatim**: what arrived since the last render, inserted as plain text where it will be once
  rendered: at the end of the live block, or inside the open code frame.

A render (throttled by the view) re-renders only live + verbatim, and freezes what has finished. When
the reply arrives faster than that can keep up (the live part is longer than ``budget``), the part is
put back as verbatim text and frozen in steps of at most ``budget`` characters per render, oldest
first, so no single render is long: the newest text shows as plain text until its turn comes. The
budget follows the measured cost per character so that a render takes about
:data:`RENDER_TARGET_S` on this machine, within [:data:`MIN_BUDGET`, :data:`LIVE_BUDGET`].

``work`` counts the characters each render and flush handed to the document (rendered or inserted):
the test of the bounded work per delta reads it.
"""

from __future__ import annotations

import time

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument

from beedeck.ui.chat.markdown_render import (
    closed_fence_end,
    closed_fences,
    code_colours,
    open_fence_start,
    render_html,
    stable_prefix_len,
)

LIVE_BUDGET = 3000  # characters one render re-renders at most
MIN_BUDGET = 400  # ...and at least (a slow or busy machine still makes progress)
RENDER_TARGET_S = 0.006  # the budget adapts so that one render takes about this long (a frame is 16 ms)


def display_text(text: str) -> str:
    """The text as the document holds it: Qt turns "\\r\\n" and a lone "\\r" into a block separator, so
    they are dropped here to keep one document position per UTF-16 unit of the text."""
    return text.replace("\r", "")


def doc_len(text: str) -> int:
    """Document positions ``text`` (from :func:`display_text`) takes once inserted: its UTF-16 units."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


class LiveReply:
    """One streaming answer from document position ``start`` to the document's end (see the module).

    ``key`` names the message in the copy links; ``dark`` picks the code colours.
    """

    def __init__(self, doc: QTextDocument, key: str, dark: bool, start: int, budget: int = LIVE_BUDGET) -> None:
        self.doc, self.key, self.dark, self.budget = doc, key, dark, budget
        self.src = ""  # the answer so far (display_text), including what is still pending
        self.pending: list[str] = []  # pieces not in the document yet
        self.shown = 0  # characters of src in the document (rendered or verbatim)
        self.frozen_chars = 0
        self.frozen_blocks = 0  # closed code fences in the frozen part (numbering of the copy links)
        self.rendered_to = 0  # src[:rendered_to] is rendered (frozen or live); the rest shown is verbatim
        self.work: list[int] = []  # characters handed to the document, per render or flush
        self.reset(start)

    def reset(self, start: int) -> None:
        """The answer's region begins at ``start`` and holds nothing yet (a new reply, a fold, a rebuild)."""
        self.tail_start = self.append_at = start
        self.frozen_chars = self.frozen_blocks = self.rendered_to = self.shown = 0
        self.pending.clear()
        self._fmt = QTextCharFormat()
        self._verbatim_at = start  # where the verbatim text after the live block begins
        self._in_frame = False  # ...inside the live block's code frame

    def add(self, text: str) -> None:
        text = display_text(text)
        if text:
            self.src += text
            self.pending.append(text)

    def needs_render(self) -> bool:
        return self.rendered_to < len(self.src)

    # -- the two edits a frame can make ------------------------------------------------------
    def flush(self) -> None:
        """Insert the pending pieces as plain text at the append point (cheap: no Markdown)."""
        if not self.pending:
            return
        text = "".join(self.pending)
        self.pending.clear()
        cursor = QTextCursor(self.doc)
        cursor.setPosition(self.append_at)
        cursor.insertText(text, self._fmt)
        self.append_at = cursor.position()
        self.shown += len(text)
        self.work.append(len(text))

    def render(self, budget: int | None = -1) -> None:
        """Freeze what has finished and re-render the live block; ``budget`` None: all of it at once
        (a rebuild), -1: this reply's budget."""
        limit = self.budget if budget == -1 else budget
        live = self.src[self.frozen_chars :]
        t0, n = time.thread_time(), len(self.work)  # CPU time: a busy machine's waits are not its cost
        if limit is not None and len(live) > limit:
            self._catch_up(limit)
        else:
            self._render_all(live)
        done = sum(self.work[n:])
        if budget == -1 and done > 50:
            per_char = (time.thread_time() - t0) / done
            self.budget = max(MIN_BUDGET, min(LIVE_BUDGET, int(RENDER_TARGET_S / max(per_char, 1e-9))))

    def backlog(self) -> int:
        """Characters not rendered for good yet."""
        return len(self.src) - self.frozen_chars

    def _render_all(self, live: str) -> None:
        self.pending.clear()  # everything received so far goes in below
        cut = stable_prefix_len(live)
        cursor = self._cursor_to_end(self.tail_start)
        cursor.beginEditBlock()
        cursor.removeSelectedText()
        if cut:
            self._insert_frozen(cursor, live[:cut])
        newlines = self._insert_live(cursor, live[cut:])
        cursor.endEditBlock()
        self._in_frame = False
        if newlines is not None:  # the frame exists only once the edit block has ended
            self._into_code_frame(cursor)
            if newlines:
                at = QTextCursor(self.doc)
                at.setPosition(self.append_at)
                at.insertText(newlines, self._fmt)
                self.append_at = at.position()
        self._verbatim_at = self.append_at if not newlines else self._verbatim_at
        self.shown = len(self.src)
        self.work.append(len(live))

    def finish(self, trailer_html: str) -> None:
        """The reply ended: render the rest for good, followed by ``trailer_html`` (the stats line)."""
        self.pending.clear()
        rest = self.src[self.frozen_chars :]
        cursor = self._cursor_to_end(self.tail_start)
        cursor.beginEditBlock()
        cursor.removeSelectedText()
        cursor.insertHtml(render_html(rest, self.key, self.dark, self.frozen_blocks) + trailer_html)
        cursor.endEditBlock()
        self.frozen_chars = self.rendered_to = self.shown = len(self.src)
        self.work.append(len(rest))

    # -- helpers ---------------------------------------------------------------------------
    def _cursor_to_end(self, position: int) -> QTextCursor:
        cursor = QTextCursor(self.doc)
        cursor.setPosition(position)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        return cursor

    def _insert_frozen(self, cursor: QTextCursor, text: str) -> None:
        cursor.insertHtml(render_html(text, self.key, self.dark, self.frozen_blocks))
        cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
        self.frozen_chars += len(text)
        self.frozen_blocks += closed_fences(text)
        self.tail_start = cursor.position()

    def _insert_live(self, cursor: QTextCursor, text: str) -> str | None:
        """Render the live block. Returns None, or, when it ends in an open code fence, the newlines
        that end its code: they and what comes next are typed inside the frame (see :meth:`render`)."""
        fence = open_fence_start(text)
        newlines = ""
        if fence >= 0:
            # An open code fence: the frame shows its code without trailing newlines; they (and what
            # comes next) are typed inside the frame, on the lines they will have.
            opener_end = text.find("\n", fence) + 1 or len(text)
            code = text[opener_end:]
            newlines = code[len(code.rstrip("\n")) :]
            text = text[: len(text) - len(newlines)]
        if text:
            cursor.insertHtml(render_html(text, self.key, self.dark, self.frozen_blocks))
        self.append_at = cursor.position()
        self._fmt = QTextCharFormat()
        self.rendered_to = self.frozen_chars + len(text)
        return newlines if fence >= 0 else None

    def _into_code_frame(self, cursor: QTextCursor) -> None:
        """Move the append point into the last cell of the code frame just rendered, in code colours."""
        probe = QTextCursor(self.doc)
        probe.setPosition(cursor.position())
        table = probe.currentTable()
        for _ in range(3):  # the frame ends a block or two before the cursor (Qt adds a block after it)
            if table is not None or probe.position() <= self.tail_start:
                break
            probe.movePosition(QTextCursor.MoveOperation.PreviousBlock)
            table = probe.currentTable()
        if table is None:
            return
        cell = table.cellAt(table.rows() - 1, table.columns() - 1)
        end = cell.lastCursorPosition()
        fmt = end.charFormat()
        fmt.setForeground(QColor(code_colours(self.dark)[1]))
        fmt.setFontWeight(QFont.Weight.Normal)
        fmt.setFontItalic(False)
        fmt.clearProperty(QTextCharFormat.Property.AnchorHref)
        fmt.setAnchor(False)
        self._fmt = fmt
        self.append_at = self._verbatim_at = end.position()
        self._in_frame = True

    def _catch_up(self, limit: int) -> None:
        """Behind the stream: make the region verbatim (once), then freeze its oldest ``limit`` characters."""
        if self.rendered_to > self.frozen_chars and not self._in_frame:
            # The live block goes back to plain text (at most a budget's worth); what came after it
            # is plain text at the document's end already.
            cursor = QTextCursor(self.doc)
            cursor.beginEditBlock()
            cursor.setPosition(self.tail_start)
            cursor.setPosition(self._verbatim_at, QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
            block = self.src[self.frozen_chars : self.rendered_to]
            cursor.insertText(block, QTextCharFormat())
            cursor.endEditBlock()
            self.work.append(len(block))
            self.rendered_to = self.frozen_chars
            self.flush_into_verbatim()
        elif self.rendered_to > self.frozen_chars or self.append_at != self.doc.characterCount() - 1:
            cursor = self._cursor_to_end(self.tail_start)
            cursor.beginEditBlock()
            cursor.removeSelectedText()
            verbatim = self.src[self.frozen_chars :]
            cursor.insertText(verbatim, QTextCharFormat())
            cursor.endEditBlock()
            self.pending.clear()
            self.work.append(len(verbatim))
            self.rendered_to = self.frozen_chars
            self._fmt = QTextCharFormat()
            self._in_frame = False
        else:
            self.flush_into_verbatim()
        window = self.src[self.frozen_chars : self.frozen_chars + limit]
        cut = stable_prefix_len(window)
        if not cut:
            # One block longer than the budget: a long code block is frozen whole once it has closed
            # (once, like the reply's end would); until then it shows as plain text.
            window = self.src[self.frozen_chars :]
            cut = closed_fence_end(window)
        if cut:
            cursor = QTextCursor(self.doc)
            cursor.beginEditBlock()
            cursor.setPosition(self.tail_start)
            cursor.setPosition(self.tail_start + doc_len(window[:cut]), QTextCursor.MoveMode.KeepAnchor)
            cursor.removeSelectedText()
            self._insert_frozen(cursor, window[:cut])
            cursor.endEditBlock()
            self.rendered_to = self.frozen_chars
            self.work.append(cut)
        self.shown = len(self.src)
        self.append_at = self.doc.characterCount() - 1

    def flush_into_verbatim(self) -> None:
        """Catching up: the pending pieces go at the document's end like the rest of the verbatim text."""
        if self.pending:
            self.append_at = self.doc.characterCount() - 1
            self.flush()
