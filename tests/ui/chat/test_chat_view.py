"""The transcript on its own: single newlines are line breaks (finished and streaming replies, code
blocks, lists and tables unharmed), and copy links say "Copied"."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QToolTip
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.store import ChatStore
from beedeck.ui.chat import chat_view
from beedeck.ui.chat.chat_view import ChatView
from beedeck.ui.chat.message_html import MessageView
from tests.ui.chat.test_chat_pane import make_pane

POEM = "Roses are red\nViolets are blue\n\nNext paragraph"
MIXED = (
    "Steps:\n- first\n- second\n  still second\n\n"
    "```python\nx = 1\ny = 2\n```\n\n"
    "| a | b |\n|---|---|\n| 1 | 2 |\n"
)


def make_view(qtbot: QtBot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    return view


def test_single_newlines_in_a_reply_are_line_breaks(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.set_messages([MessageView(1, "assistant", POEM)])
    text = view.toPlainText()
    assert "Roses are red\nViolets are blue\nNext paragraph" in text
    assert "red Violets" not in text


def test_line_breaks_leave_code_lists_and_tables_alone(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.set_messages([MessageView(1, "assistant", MIXED)])
    text = view.toPlainText()
    assert "x = 1\ny = 2\n" in text and "x = 1\n\ny" not in text  # the code block's own lines, no extras
    assert "first\nsecond\nstill second" in text
    doc_html = view.toHtml()
    assert doc_html.count("<table") == 2  # the code block's frame and the Markdown table
    assert "<li" in doc_html and ">a<" in doc_html.replace(" ", "") and ">2<" in doc_html.replace(" ", "")


def test_a_streaming_reply_shows_single_newlines_as_line_breaks_before_it_ends(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(7, "assistant", "", complete=False))
    view.append_delta("Roses are **red**\nViolets are blue")
    # The live Markdown render (throttled) replaces the raw text: "**" is gone once it ran.
    qtbot.waitUntil(lambda: "**" not in view.toPlainText() and "red" in view.toPlainText(), timeout=3000)
    assert "Roses are red\nViolets are blue" in view.toPlainText()
    view.end_reply(facts=ReplyFacts())
    assert "Roses are red\nViolets are blue" in view.toPlainText()


def test_copying_a_code_block_says_copied(qtbot: QtBot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chat_view, "COPIED_MS", 300)
    view = make_view(qtbot)
    clipboard: list[str] = []
    view.copy_text = clipboard.append
    view.set_messages([MessageView(1, "assistant", MIXED)])
    with qtbot.waitSignal(view.copied) as blocker:
        view.anchorClicked.emit(QUrl("copy:1:0"))
    assert clipboard == ["x = 1\ny = 2\n"]
    assert blocker.args == ["Copied the code to the clipboard (2 lines)."]
    assert QToolTip.isVisible() and QToolTip.text() == "Copied"
    qtbot.waitUntil(lambda: not QToolTip.isVisible(), timeout=3000)  # transient


def test_copying_a_message_says_copied_through_the_pane(qtbot: QtBot, store: ChatStore) -> None:
    pane = make_pane(qtbot, store, None)
    assert pane.conversation_id is not None
    msg = store.add_message(pane.conversation_id, "user", "copy me")
    pane.load_conversation(pane.conversation_id)
    clipboard: list[str] = []
    pane.view.copy_text = clipboard.append
    with qtbot.waitSignal(pane.copied) as blocker:
        pane.view.anchorClicked.emit(QUrl(f"copy-msg:{msg.id}"))
    assert clipboard == ["copy me"] and blocker.args == ["Copied the message to the clipboard (1 line)."]
    assert QToolTip.isVisible() and QToolTip.text() == "Copied"


PASTED = "class Point:\n    def __str__(self):\n        return f'({self.x}, {self.y})'\n\n\n    x  =  1  # two spaces"


def test_a_users_message_keeps_its_text_as_typed(qtbot: QtBot) -> None:
    """Issue 37: code pasted without a fence lost its indentation (and, read as Markdown, ``__str__`` is a bold
    "str"). A message the user wrote is shown as typed: every space and line, no markup."""
    view = make_view(qtbot)
    view.set_messages([MessageView(1, "user", PASTED)])
    assert PASTED in view.toPlainText()
    view.append_message(MessageView(2, "user", PASTED))  # as sent, without the conversation laid out again
    assert view.toPlainText().count(PASTED) == 2
    doc = view.document()
    block = doc.begin()
    while block.isValid():
        if "__str__" in block.text():
            for fragment in (it.fragment() for it in block):  # no part of the message is bold
                assert fragment.charFormat().fontWeight() <= 400, fragment.text()
        block = block.next()
    assert view.horizontalScrollBar().maximum() == 0


LONG_LINE = "values = [" + ", ".join(str(i) for i in range(400)) + "]"
UNBROKEN = "token = '" + "x" * 600 + "'"


def test_a_long_code_line_wraps_in_its_frame_and_the_transcript_never_scrolls_sideways(qtbot: QtBot) -> None:
    """Issue 37: one long code line scrolled the whole transcript sideways, finished or streaming."""
    view = make_view(qtbot)
    reply = f"Here:\n\n```python\n{LONG_LINE}\n{UNBROKEN}\n    y = 1\n```\n\nDone."
    view.set_messages([MessageView(1, "user", UNBROKEN), MessageView(2, "assistant", reply)])
    assert view.horizontalScrollBar().maximum() == 0
    assert f"{LONG_LINE}\n{UNBROKEN}\n    y = 1\n" in view.toPlainText()  # wrapped on screen, the text whole
    view.set_messages([])
    view.begin_reply(MessageView(3, "assistant", "", complete=False))
    view.append_delta(f"Here:\n\n```python\n{LONG_LINE}\n")
    qtbot.waitUntil(lambda: LONG_LINE in view.toPlainText(), timeout=3000)
    view.append_delta(f"{UNBROKEN}\n    y")
    qtbot.waitUntil(lambda: "    y" in view.toPlainText(), timeout=3000)
    assert view.horizontalScrollBar().maximum() == 0  # while it streams into its frame
    view.end_reply(reply, ReplyFacts())
    assert view.horizontalScrollBar().maximum() == 0
