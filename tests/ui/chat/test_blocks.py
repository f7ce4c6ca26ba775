"""insert_blocks: HTML inserted piece by piece lays out block for block as the same HTML set at once
(each piece's first block keeps its own format instead of joining the block before it)."""

from __future__ import annotations

from PySide6.QtGui import QTextBlockFormat, QTextCursor, QTextDocument, QTextFormat
from pytestqt.qtbot import QtBot

from beedeck.ui.chat.blocks import MARKER, insert_blocks
from beedeck.ui.chat.markdown_render import render_html

CHUNKS = ["Intro para\nline two", "1. one\n2. two", "# Head", "> quote\n> more", "```python\nx = 1\n```",
          "After code", "| a | b |\n|---|---|\n| 1 | 2 |", "- x\n- y", "---", "```\nlast\n```", "End."]
HEADER = "<p><b>Assistant</b></p>"


def layout(doc: QTextDocument) -> list[tuple[str, bool, bool, float, float, int]]:
    """Each block: its text, in a list, in a frame, its margins and its list number."""
    out, block = [], doc.begin()
    while block.isValid():
        fmt, lst = block.blockFormat(), block.textList()
        out.append((block.text(), lst is not None, QTextCursor(block).currentFrame() is not doc.rootFrame(),
                    fmt.topMargin(), fmt.bottomMargin(),
                    fmt.hasProperty(QTextFormat.Property.BlockTrailingHorizontalRulerWidth)))
        block = block.next()
    return out


def test_pieces_lay_out_as_the_whole(qtbot: QtBot) -> None:
    whole = QTextDocument()
    whole.setHtml(HEADER + render_html("\n\n".join(CHUNKS), "1"))
    pieces = QTextDocument()
    cursor = QTextCursor(pieces)
    cursor.insertHtml(HEADER)
    cursor.beginEditBlock()  # as a streaming render does: one edit block, frames built at its end
    for chunk in CHUNKS:
        insert_blocks(pieces, cursor, render_html(chunk, "1"))
    cursor.endEditBlock()
    assert layout(pieces) == layout(whole)
    assert MARKER not in pieces.toPlainText()


def test_a_plain_insert_would_lose_the_format(qtbot: QtBot) -> None:
    """What insert_blocks is for: Qt's own insertHtml merges the first paragraph into the block before."""
    doc = QTextDocument()
    cursor = QTextCursor(doc)
    cursor.insertHtml("<p>a</p>")
    cursor.insertHtml('<p style="margin-top:30px">b</p>')
    assert doc.blockCount() == 1 and doc.toPlainText() == "ab"
    doc = QTextDocument()
    cursor = QTextCursor(doc)
    cursor.insertHtml("<p>a</p>")
    insert_blocks(doc, cursor, '<p style="margin-top:30px">b</p>')
    assert doc.toPlainText() == "a\nb" and doc.lastBlock().blockFormat().topMargin() == 30


def test_an_empty_document_keeps_no_empty_first_block(qtbot: QtBot) -> None:
    doc = QTextDocument()
    insert_blocks(doc, QTextCursor(doc), "<p>a</p><p>b</p>")
    assert doc.toPlainText() == "a\nb" and doc.firstBlock().blockFormat() != QTextBlockFormat()
    insert_blocks(doc, QTextCursor(doc), "  \n")  # nothing but whitespace: nothing inserted
    assert doc.toPlainText() == "a\nb"
