"""The streaming reply's answer in the transcript's document, rendered so that the work per frame does
not grow with the reply (issue 22: 10,000 tokens/s, replies of 160,000 characters).

The answer's part of the document is, in order:

- **frozen**: finished Markdown blocks, rendered once with markdown-it + Pygments and never touched
  again (from ``start`` to ``tail_start``);
- **live**: the last block, still growing, rendered the same way; or, when it is a fenced code block,
  its frame with the code highlighted a line at a time (:class:`~beedeck.ui.chat.code_stream.CodeFrame`);
- **verbatim**: what arrived since, as plain text where it will be once rendered: at the end of the
  live block, or at the end of the code frame.

Between renders the view only types the new pieces in (:meth:`LiveReply.flush`). A render
(:meth:`LiveReply.render`, throttled by the view) parses the text from ``frozen_chars`` once, freezes
every block but the last, and renders the last one again; a code frame restyles only the lines that
completed. So a render costs about the new text plus the live block, whatever the reply's length: a
block longer than :data:`LIVE_LIMIT` has its finished part frozen (whole list items, quoted paragraphs,
a paragraph's lines), and a render takes about ``budget`` characters from the frozen part on, oldest
first, at least half a budget of new text (the rest shows as plain text meanwhile; nothing is ever shown
rendered, then plain again). A table is not cut (its rows need its header): a long one is rendered
again whole while it grows, its cost the table's length. The budget follows
the measured cost per character so that a render takes about :data:`RENDER_TARGET_S`, within
[:data:`MIN_BUDGET`, :data:`LIVE_BUDGET`].

``work`` counts the characters each render and flush handed to the document (rendered, restyled or
inserted), ``parsed`` the characters each render gave the Markdown parser: the tests of the bounded work
per delta read them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtGui import QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument

from beedeck.ui.chat.blocks import doc_len, insert_blocks
from beedeck.ui.chat.code_stream import CodeFrame
from beedeck.ui.chat.markdown_render import (
    fence_lang,
    fence_opener,
    line_offsets,
    parse,
    render_tokens,
    top_blocks,
)

if TYPE_CHECKING:
    from markdown_it.token import Token

LIVE_BUDGET = 4000  # characters of new text one render takes at most
MIN_BUDGET = 1000  # ...and at least (rendered every frame when behind: 60,000 chars/s, above 10,000 tokens/s)
LIVE_LIMIT = 1000  # a live block longer than this has its finished part frozen (a list's items...)
RENDER_TARGET_S = 0.0035  # the budget adapts so that one render takes about this long (a frame is 16 ms)


def display_text(text: str) -> str:
    """The text as the document holds it: Qt turns "\\r\\n" and a lone "\\r" into a block separator, so
    they are dropped here to keep one document position per UTF-16 unit of the text."""
    return text.replace("\r", "")


def split_point(tokens: list[Token], text: str, lines: list[int], first_line: int) -> tuple[int, bool]:
    """Where a live block longer than :data:`LIVE_LIMIT` can be cut so that its head renders on its own
    as it does inside the block: the latest child start (a list item, a quoted block) or, in a top-level
    paragraph or indented code, line start, that leaves about half the limit live; 0: nowhere (a table:
    its rows need its header, so a long table is rendered again whole while it grows). And whether the
    two pieces join without a margin between them (lines of one paragraph, items of a tight list)."""
    first = tokens[0].type
    if first == "table_open":
        return 0, False
    want = len(text) - LIVE_LIMIT // 2
    base = lines[first_line]
    if first in ("paragraph_open", "code_block"):
        cuts = [lines[i] - base for i in range(first_line + 1, len(lines) - 1)]
        joins = True
    else:
        cuts = [lines[t.map[0]] - base for t in tokens
                if t.level == 1 and t.nesting in (0, 1) and t.map is not None and t.type != "inline"]
        joins = first in ("bullet_list_open", "ordered_list_open") and all(
            t.hidden for t in tokens if t.type == "paragraph_open")  # tight: no margins between items
    cuts = [c for c in cuts if 0 < c <= want]
    return (max(cuts) if cuts else 0), joins


class LiveReply:
    """One streaming answer from document position ``start`` to the document's end (see the module).

    ``key`` names the message in the copy links; ``dark`` picks the code colours.
    """

    def __init__(self, doc: QTextDocument, key: str, dark: bool, start: int, budget: int = LIVE_BUDGET) -> None:
        self.doc, self.key, self.dark, self.budget = doc, key, dark, budget
        self.src = ""  # the answer so far (display_text), including what is still pending
        self.pending: list[str] = []  # pieces not in the document yet
        self.work: list[int] = []  # characters handed to the document, per render or flush
        self.parsed: list[int] = []  # characters given to the Markdown parser, per render
        self.reset(start)

    def reset(self, start: int) -> None:
        """The answer's region begins at ``start``, to the document's end, and is emptied; what arrived so
        far goes in again from scratch (a new reply, a fold, a rebuild)."""
        cursor = QTextCursor(self.doc)
        cursor.setPosition(start)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        self.tail_start = self.append_at = self.verbatim_at = start
        self.frozen_chars = self.frozen_blocks = self.rendered_to = self.shown = self.seen = 0
        self.pending[:] = [self.src] if self.src else []
        self.code: CodeFrame | None = None  # the open fenced block being typed into its frame
        self._seam = False  # the text at frozen_chars continues a block whose head is frozen (split_point)
        self._fmt = QTextCharFormat()

    def add(self, text: str) -> None:
        text = display_text(text)
        if text:
            self.src += text
            self.pending.append(text)

    def needs_render(self) -> bool:
        """Text arrived that no render has looked at yet."""
        return self.seen < len(self.src)

    def backlog(self) -> int:
        """Characters no render has looked at yet (what the view finishes a reply with, a budget a frame)."""
        return len(self.src) - self.seen

    # -- the two edits a frame can make ------------------------------------------------------
    def flush(self) -> None:
        """Insert the pending pieces as plain text at the append point (cheap: no Markdown)."""
        if not self.pending:
            return
        cursor = QTextCursor(self.doc)
        self.work.append(self._flush_at(cursor))

    def render(self, budget: int | None = -1) -> None:
        """Freeze what has finished and re-render the live block; ``budget`` None: all of it at once
        (a rebuild), -1: this reply's budget."""
        limit = self.budget if budget == -1 else budget
        t0 = time.thread_time()  # CPU time: a busy machine's waits are not its cost
        cursor = QTextCursor(self.doc)
        cursor.beginEditBlock()
        flushed = self._flush_at(cursor)
        done = self._step(cursor, limit)
        cursor.endEditBlock()
        self.work.append(done + flushed)
        if budget == -1 and done > 200:
            per_char = (time.thread_time() - t0) / done
            self.budget = max(MIN_BUDGET, min(LIVE_BUDGET, int(RENDER_TARGET_S / max(per_char, 1e-9))))

    def finish(self, trailer_html: str) -> None:
        """The reply ended: render the rest for good, followed by ``trailer_html`` (the stats line)."""
        cursor = QTextCursor(self.doc)
        cursor.beginEditBlock()
        flushed = self._flush_at(cursor)
        done = self._step(cursor, None, final=True)
        cursor.movePosition(QTextCursor.MoveOperation.End)
        insert_blocks(self.doc, cursor, trailer_html)
        cursor.endEditBlock()
        self.frozen_chars = self.rendered_to = self.shown = self.seen = len(self.src)
        self.work.append(done + flushed)

    # -- a render --------------------------------------------------------------------------
    def _step(self, cursor: QTextCursor, limit: int | None, final: bool = False) -> int:
        """One render of at most ``limit`` characters of new text (None: all of it); returns the characters
        rendered. A code block that closes hands the rest of the budget to the blocks after it."""
        done = 0
        while limit is None or done < limit:
            left = None if limit is None else limit - done
            if self.code is not None:
                done += self._code_step(cursor, left, final)
                if self.code is not None:  # still open: all that came is in it, or the budget is spent
                    break
            else:
                done += self._blocks_step(cursor, left, final)
                if self.code is None:  # no code block began: everything up to the limit is rendered
                    break
        return done

    def _blocks_step(self, cursor: QTextCursor, limit: int | None, final: bool) -> int:
        start = self.frozen_chars
        # About ``limit`` characters from the frozen part on, and at least half of it that no render has
        # seen, so that a live block longer than the limit (a long table) still moves on.
        end = len(self.src) if limit is None else min(len(self.src), max(start + limit, self.rendered_to + limit // 2))
        text = self.src[start:end]
        tokens = parse(text)
        self.parsed.append(len(text))
        tops = top_blocks(tokens)
        lines = line_offsets(text)
        last = tops[-1] if tops else len(tokens)
        live_off = lines[tokens[last].map[0]] if tops else 0  # type: ignore[index]
        self._remove(cursor, self.tail_start, self._pos(end))
        if last > 0:
            self._freeze(cursor, tokens[:last], live_off)
            self._seam = False  # the live block is a block of its own
        self.seen = end
        if tops and tokens[last].type == "fence":
            return live_off + self._open_code(cursor, tokens[last], start + live_off, end, final)
        live = tokens[last:]
        if len(text) - live_off > LIVE_LIMIT and not final:
            cut, joins = split_point(live, text[live_off:], lines, tokens[last].map[0]) if tops else (0, False)  # type: ignore[index]
            if cut:
                head = parse(text[live_off : live_off + cut])
                self.parsed.append(cut)
                self._freeze(cursor, head, cut)
                self._seam = joins  # the rest continues the paragraph or the tight list just frozen
                live_off += cut
                live = parse(text[live_off:])
                self.parsed.append(len(text) - live_off)
        if final:
            self._freeze(cursor, live, len(text) - live_off)
        else:
            self._insert(cursor, render_tokens(live, self.key, self.dark, self.frozen_blocks))
        self.append_at = self.verbatim_at = cursor.position()
        self.rendered_to = end
        self._fmt = QTextCharFormat()
        return len(text)

    def _freeze(self, cursor: QTextCursor, tokens: list[Token], length: int) -> None:
        """Render whole blocks for good at the cursor (the text from ``frozen_chars``, ``length`` long)."""
        self._insert(cursor, render_tokens(tokens, self.key, self.dark, self.frozen_blocks))
        self.frozen_chars += length
        self.frozen_blocks += sum(tok.type == "fence" for tok in tokens)
        self.tail_start = cursor.position()

    def _insert(self, cursor: QTextCursor, html: str) -> None:
        """Rendered blocks at the cursor (the end of the frozen part). Where they continue a block whose
        head is frozen, the seam has no margins: the list, the quote or the paragraph reads as one."""
        at = cursor.position()
        insert_blocks(self.doc, cursor, html)
        if self._seam and cursor.position() > at:
            seam = QTextCursor(self.doc)
            seam.setPosition(at)  # the end of the head's last block
            head = seam.blockFormat()
            head.setBottomMargin(0)
            seam.setBlockFormat(head)
            seam.movePosition(QTextCursor.MoveOperation.NextBlock)
            rest = seam.blockFormat()
            rest.setTopMargin(0)
            seam.setBlockFormat(rest)

    # -- code frames -----------------------------------------------------------------------
    def _open_code(self, cursor: QTextCursor, fence: Token, at: int, end: int, final: bool) -> int:
        """The last block is a fenced code block: its frame, the code after the opening line typed in as
        plain text (everything shown so far: it all belongs to the block until its closing line), to be
        styled a budget's worth of lines at a time by :meth:`_code_step`."""
        opener_end = self.src.find("\n", at, end) + 1 or end
        if opener_end >= end and not final:  # the opening line is not complete: its language may grow
            insert_blocks(self.doc, cursor, render_tokens([fence], self.key, self.dark, self.frozen_blocks))
            self.append_at = self.verbatim_at = cursor.position()
            self.rendered_to = end
            return end - at
        code = CodeFrame(self.doc, self.dark, fence_lang(fence.info), fence_opener(self.src[at:opener_end]),
                         opener_end)
        # The verbatim text after ``end`` (at the cursor) goes into the frame too (once per block).
        rest = QTextCursor(self.doc)
        rest.setPosition(cursor.position())
        rest.setPosition(cursor.position() + doc_len(self.src[end : self.shown]), QTextCursor.MoveMode.KeepAnchor)
        rest.removeSelectedText()
        code.open(cursor, self.key, self.frozen_blocks)
        self.frozen_chars = at
        self.code = code
        typed = QTextCursor(self.doc)
        typed.setPosition(code.text_end())
        typed.insertText(self.src[opener_end : self.shown], code.base)
        self.verbatim_at, self.rendered_to = code.code_pos, opener_end
        self.append_at, self._fmt = code.text_end(), code.base
        return opener_end - at

    def _code_step(self, cursor: QTextCursor, limit: int | None, final: bool) -> int:
        code = self.code
        assert code is not None
        upto = len(self.src) if limit is None else min(len(self.src), code.done + limit)
        closing = code.closing_line(self.src, upto, final)
        if closing is None and not final:
            done = code.advance(self.src, upto)
            self.seen = max(self.seen, upto)
            self.verbatim_at, self.rendered_to = code.code_pos, code.done - code.debt
            self.append_at = code.text_end()
            return done
        code_end = closing[0] if closing else len(self.src)
        done = code.advance(self.src, code_end, final=True)
        code.close()
        after = closing[1] if closing else len(self.src)
        cursor.setPosition(code.end_position())
        self.tail_start = cursor.position()
        cursor.insertText(self.src[after : self.shown], QTextCharFormat())  # it was typed into the frame
        self.code = None
        self.frozen_chars = self.rendered_to = self.seen = after
        self.frozen_blocks += 1
        self.verbatim_at = self.tail_start
        self.append_at = cursor.position()
        self._fmt = QTextCharFormat()
        return done + (after - code_end)

    # -- helpers ---------------------------------------------------------------------------
    def _flush_at(self, cursor: QTextCursor) -> int:
        if not self.pending:
            return 0
        text = "".join(self.pending)
        self.pending.clear()
        cursor.setPosition(self.append_at)
        if self.append_at == self.tail_start and cursor.block().length() > 1:
            # Nothing shown after the frozen part (or the header) yet: the text begins a block of its own.
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            self.verbatim_at = cursor.position()
        cursor.insertText(text, self._fmt)
        self.append_at = cursor.position()
        self.shown += len(text)
        return len(text)

    def _pos(self, offset: int) -> int:
        """The document position of source offset ``offset`` in the verbatim text (>= rendered_to)."""
        return self.verbatim_at + doc_len(self.src[self.rendered_to : offset])

    def _remove(self, cursor: QTextCursor, start: int, end: int) -> None:
        """Remove the document's text from ``start`` (the end of the frozen part) to ``end``. When the last
        frozen block is empty (a rule), Qt would give it the format of the block removed after it."""
        cursor.setPosition(start)
        keep = cursor.blockFormat()
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        cursor.setBlockFormat(keep)


WARM_UP_TEXT = "Warm *up*:\n\n1. one\n2. two\n\n> quote\n\n```python\ndef f(x):\n    return x\n```\n\n| a |\n|---|\n| b |\n\nEnd."


def warm_up_render(dark: bool = False) -> None:
    """One small streamed reply into a scratch document, on the GUI thread: PySide builds its enum
    types and Qt its HTML import paths on first use (~20 ms), which would otherwise land in the first
    reply's frames. Call it after :func:`~beedeck.ui.chat.markdown_render.warm_up`."""
    doc = QTextDocument()
    live = LiveReply(doc, "0", dark, 0)
    for i in range(0, len(WARM_UP_TEXT), 16):
        live.add(WARM_UP_TEXT[i : i + 16])
        live.flush() if i % 32 else live.render()
    live.finish("<p>stats</p>")
    doc.documentLayout().documentSize()
