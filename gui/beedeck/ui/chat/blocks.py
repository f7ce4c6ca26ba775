"""Rendered HTML inserted as whole blocks, so that a reply rendered in pieces lays out as it does
rendered at once.

Qt merges the first block of inserted HTML into the block at the cursor, with that block's format:
a paragraph inserted after another one would lose its margins (or join a list item before it). So the
HTML goes in behind a marker paragraph: the marker is what merges, the real first block is a block of
its own with its own format, and the marker is removed.

So a streaming reply's region begins at the end of the block before it (its header), never in an empty
placeholder block: a frame (a code block's) that begins the reply then follows the header directly, as
it does in a document rendered at once.
"""

from __future__ import annotations

from PySide6.QtGui import QTextCursor, QTextDocument

_SEPARATOR = "\u2029"  # the end of a block
MARKER = "\ufeff"  # zero width: never seen even for the instant it is there
_MARKER_HTML = f"<p>{MARKER}</p>"


def insert_blocks(doc: QTextDocument, cursor: QTextCursor, html: str) -> None:
    """Insert ``html`` (whole blocks) at ``cursor``: at the end of a block (its first block begins a
    block of its own), at the start of the block Qt keeps after a frame, or in an empty document."""
    html = html.rstrip()  # a trailing newline would end the last block with a space
    if not html:
        return
    at = cursor.position()
    cursor.insertHtml(_MARKER_HTML + html)
    marker = QTextCursor(doc)
    marker.setPosition(at)
    # At the start of an empty document the marker's block goes too, unless a frame follows (a frame's
    # start is a block's separator, and the document's first block stays).
    first = at == 0 and doc.characterAt(1) == _SEPARATOR
    marker.setPosition(at + 2 if first else at + 1, QTextCursor.MoveMode.KeepAnchor)
    marker.removeSelectedText()


def doc_len(text: str) -> int:
    """Document positions ``text`` (shown text) takes once inserted: its UTF-16 units."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2
