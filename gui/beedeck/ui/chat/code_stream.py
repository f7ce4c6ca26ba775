"""A fenced code block typed into its frame while it streams, highlighted a line at a time.

The frame is the one :func:`~beedeck.ui.chat.markdown_render.frame_html` makes for a finished block (a
QTextFrame: Qt lays out an edit inside a frame incrementally, where an edit inside a table cell re-lays
the whole table out, ~20 ms for 1,000 lines). Text arrives as plain text at the end of the frame; each
:meth:`CodeFrame.advance` restyles the whole lines that completed since the last one, in place (the same
characters, now in the token colours the HTML formatter gives them), so the code is highlighted while
it streams, never re-rendered whole, and nothing jumps when the fence closes.

Each advance lexes from a restart line to the new end: the latest line start where the lexer was in no
string or comment (its state is fresh there, as at the block's start), so a docstring or a block
comment that spans several advances keeps its colour, and the work per advance is about the new lines
(at most :data:`MAX_LOOKBACK` characters more). A block whose language is not named is guessed once,
from its first :data:`~beedeck.ui.chat.markdown_render.GUESS_CHARS` characters, like a reload does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor, QTextDocument, QTextFrame

from beedeck.ui.chat.blocks import doc_len, insert_blocks
from beedeck.ui.chat.markdown_render import (
    GUESS_CHARS,
    fence_closes,
    frame_html,
    known_lexer,
    lexer_for,
    style_of,
    token_styles,
)

if TYPE_CHECKING:
    from pygments.lexer import Lexer

MAX_LOOKBACK = 1200  # characters an advance re-lexes and restyles before its new lines, at most
PLACEHOLDER = "\u00b7"  # what the frame holds until its first character comes (an empty <pre> vanishes)


def code_runs(lexer: Lexer | None, src: str, begin: int, end: int) -> tuple[list[tuple[Any, str]], int]:
    """The (token type, text) runs of ``src[begin:end]`` lexed from ``begin`` (where the lexer's state is
    fresh), and the next restart: the latest line start up to ``end`` that ends no string or comment
    token (the lexer's state is fresh there again). Token type None: plain text (no lexer)."""
    if lexer is None or begin >= end:
        return ([(None, src[begin:end])] if begin < end else []), end
    from pygments.token import Comment, String

    runs: list[tuple[Any, str]] = []
    at = best = begin
    for ttype, value in lexer.get_tokens(src[begin:end]):
        start, at = at, at + len(value)
        if at > end:  # the lexer's own final newline (ensurenl)
            value, at = value[: end - start], end
        if value:
            runs.append((ttype, value))
        if value.endswith("\n") and ttype not in String and ttype not in Comment:
            best = at
    return runs, best


class CodeFrame:
    """One open fenced block in the document, from its frame's creation to its closing line.

    Source offsets index the reply's text; ``done`` is where the highlighted code ends (a line start).
    The frame shows the code without its trailing newlines (as a finished block's frame does): they are
    ``debt``, and with the text after them they are the frame's provisional text from ``code_pos``.
    """

    def __init__(self, doc: QTextDocument, dark: bool, lang: str, opener: str, code_start: int) -> None:
        self.doc, self.dark, self.lang, self.opener = doc, dark, lang, opener
        self.code_start = self.done = self.restart = code_start
        self.debt = 0
        self.lexer = known_lexer(lang)
        self.decided = self.lexer is not None  # else guessed once it has GUESS_CHARS characters or ends
        self.frame: QTextFrame | None = None
        self.code_first = self.code_pos = 0  # document positions: where its code begins, where the styled part ends
        self.base = QTextCharFormat()
        self._formats: dict[Any, QTextCharFormat] = {}

    # -- the frame -------------------------------------------------------------------------
    def open(self, cursor: QTextCursor, key: str, block: int) -> None:
        """Insert the empty frame at ``cursor``, inside the caller's edit block (which this ends and
        begins again: Qt builds the frames an HTML import makes when the edit block ends)."""
        start = cursor.position()
        insert_blocks(self.doc, cursor, frame_html(self.lang, key, block, self.dark, PLACEHOLDER))
        cursor.endEditBlock()
        cursor.beginEditBlock()
        probe = QTextCursor(self.doc)
        probe.setPosition(cursor.position() - 1)  # the frame's end: the block Qt keeps after it follows
        frame = probe.currentFrame()
        assert frame is not None and frame is not self.doc.rootFrame() and frame.firstPosition() >= start
        end = QTextCursor(self.doc)
        end.setPosition(frame.lastPosition())
        end.movePosition(QTextCursor.MoveOperation.Left, QTextCursor.MoveMode.KeepAnchor)
        self.base = end.charFormat()  # the <pre>'s: monospace, the code colour
        self.base.setFontWeight(QFont.Weight.Normal)
        self.base.setFontItalic(False)
        self.base.clearProperty(QTextCharFormat.Property.AnchorHref)
        self.base.setAnchor(False)
        end.removeSelectedText()
        self.frame = frame
        self.code_first = self.code_pos = frame.lastPosition()

    def end_position(self) -> int:
        """The document position just after the frame (the block Qt keeps after it)."""
        assert self.frame is not None
        return self.frame.lastPosition() + 1

    def text_end(self) -> int:
        """Where text typed into the frame goes: its end."""
        assert self.frame is not None
        return self.frame.lastPosition()

    # -- streaming -------------------------------------------------------------------------
    def closing_line(self, src: str, end: int, final: bool = False) -> tuple[int, int] | None:
        """(start, end) of the line in ``src[done:end]`` that closes the fence, if it has come (with
        ``final``: the reply has ended, its last line may close it without a newline)."""
        at = self.done
        while at < end:
            nl = src.find("\n", at, end)
            if nl < 0:
                return (at, end) if final and fence_closes(src[at:end], self.opener) else None
            if fence_closes(src[at:nl], self.opener):
                return at, nl + 1
            at = nl + 1
        return None

    def advance(self, src: str, upto: int, final: bool = False) -> int:
        """Style the code lines that completed in ``src[done:upto]`` (with ``final``, the last partial
        line too); the characters are in the frame already. Returns the characters styled."""
        new_end = max(upto if final else src.rfind("\n", self.done, upto) + 1, self.done)
        if not self.decided and (final or new_end - self.code_start >= GUESS_CHARS):
            self.decided = True
            self.lexer = lexer_for(self.lang, src[self.code_start : new_end].rstrip("\n"))
            if self.lexer is not None:  # restyle what is there from the start (at most GUESS_CHARS)
                self.done, self.restart, self.debt, self.code_pos = self.code_start, self.code_start, 0, self.code_first
        if new_end <= self.done:
            return 0
        # Restyle from the restart line: a string or comment over several lines changes colour when it
        # ends (an unclosed docstring is lexed as a plain string). At most MAX_LOOKBACK before the new lines.
        styled_end = self.done - self.debt
        begin = min(self.restart, styled_end)
        if styled_end - begin > MAX_LOOKBACK:
            begin = src.find("\n", styled_end - MAX_LOOKBACK, styled_end) + 1 or styled_end
        begin_pos = self.code_pos - doc_len(src[begin:styled_end])
        body_end = new_end - _trailing_newlines(src, begin, new_end)
        runs, self.restart = code_runs(self.lexer if self.decided else None, src, begin, new_end)
        self.code_pos = self._replace(begin_pos, runs, body_end - begin)
        self.debt = new_end - body_end
        self.done = new_end
        return body_end - begin

    def close(self) -> None:
        """The fence ended: drop the provisional text (the trailing newlines, the closing line and what
        came after it) from the frame."""
        cursor = QTextCursor(self.doc)
        cursor.setPosition(self.code_pos)
        cursor.setPosition(self.text_end(), QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        self.debt = 0

    # -- helpers ---------------------------------------------------------------------------
    def _replace(self, at: int, runs: list[tuple[Any, str]], length: int) -> int:
        """Replace ``length`` characters from document position ``at`` by ``runs`` (the same characters) in
        their formats; returns the position after them."""
        cursor = QTextCursor(self.doc)
        cursor.setPosition(at)
        left = length
        merged: list[tuple[QTextCharFormat, str]] = []
        for ttype, value in runs:
            if left <= 0:
                break
            value = value[:left]
            left -= len(value)
            fmt = self._format(ttype)
            if merged and merged[-1][0] is fmt:
                merged[-1] = (fmt, merged[-1][1] + value)
            else:
                merged.append((fmt, value))
        text = "".join(v for _, v in merged)
        cursor.setPosition(at + doc_len(text), QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        for fmt, value in merged:
            cursor.insertText(value, fmt)
        return cursor.position()

    def _format(self, ttype: Any) -> QTextCharFormat:
        fmt = self._formats.get(ttype)
        if fmt is None:
            fmt = QTextCharFormat(self.base)
            style = style_of(ttype, token_styles(self.dark)) if ttype is not None else None
            if style:
                if style["color"]:
                    fmt.setForeground(QColor("#" + style["color"]))
                if style["bold"]:
                    fmt.setFontWeight(QFont.Weight.Bold)
                if style["italic"]:
                    fmt.setFontItalic(True)
                if style["underline"]:
                    fmt.setFontUnderline(True)
                if style["bgcolor"]:
                    fmt.setBackground(QColor("#" + style["bgcolor"]))
            self._formats[ttype] = fmt
        return fmt


def _trailing_newlines(src: str, begin: int, end: int) -> int:
    n = 0
    while end - n > begin and src[end - n - 1] == "\n":
        n += 1
    return n

