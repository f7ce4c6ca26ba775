"""A reasoning model's thinking in the chat pane, over the fake server speaking llama-server's
``reasoning_content`` deltas: streamed dimmed, folded when the answer starts, expanded by a click,
persisted and restored, exported, and never sent back to the server."""

from __future__ import annotations

import json

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QTextCursor
from pytestqt.qtbot import QtBot

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from beedeck.ui.chat.chat_view import ChatView
from beedeck.ui.chat.message_html import DIM
from tests.fakes.sse_server import FakeLlamaServer, SSEScript
from tests.ui.chat.test_chat_pane import make_pane, send

THOUGHT = ["The user", " wants", " a greeting.", "\n\nKeep it", " short", " and friendly."]
THOUGHT_TEXT = "".join(THOUGHT)
ANSWER = ["Hello", ",", " world", "!"]


def click_text(qtbot: QtBot, view: ChatView, text: str) -> None:
    """A real mouse click on the first place ``text`` shows in the transcript."""
    found = view.document().find(text)
    assert not found.isNull(), f"{text!r} is not in the transcript"
    cursor = QTextCursor(view.document())
    cursor.setPosition(found.selectionStart() + 1)
    view.setTextCursor(cursor)
    view.ensureCursorVisible()
    rect = view.cursorRect(cursor)
    pos = QPoint(rect.center().x(), rect.center().y())
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=pos)


def test_thinking_streams_dimmed_and_folds_when_the_answer_starts(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(reasoning_tokens=THOUGHT, tokens=ANSWER, stall_after=len(THOUGHT))
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("Say hello")
    pane.send_button.click()
    cid = pane.conversation_id
    assert cid is not None
    qtbot.waitUntil(lambda: THOUGHT_TEXT in pane.view.toPlainText(), timeout=10_000)
    assert "Thinking…" in pane.view.toPlainText() and pane.is_generating()
    found = pane.view.document().find("wants")
    assert found.charFormat().foreground().color() == QColor(DIM)  # the thinking is dimmed

    def thinking_saved() -> bool:  # the throttled writes persist the thinking while it streams
        msgs = store.messages(cid)
        return len(msgs) == 2 and msgs[1].reasoning == THOUGHT_TEXT and not msgs[1].complete

    qtbot.waitUntil(thinking_saved, timeout=5000)

    with qtbot.waitSignal(pane.reply_finished, timeout=10_000) as blocker:
        fake_server.release_stall()
    stats = blocker.args[0]
    text = pane.view.toPlainText()
    assert "Hello, world!" in text
    assert "wants a greeting" not in text  # folded away...
    assert f"Thinking · Thought for {stats.reasoning_s:.1f} s · {len(THOUGHT_TEXT)} chars — show" in text
    assert stats.reasoning_s >= 0
    reply = store.messages(cid)[1]
    assert (reply.content, reply.reasoning, reply.complete) == ("Hello, world!", THOUGHT_TEXT, True)
    assert reply.stats["reasoning_s"] == stats.reasoning_s


def test_thinking_folds_as_soon_as_the_answer_starts_streaming(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(reasoning_tokens=THOUGHT, tokens=ANSWER, stall_after=len(THOUGHT) + 2)
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("go")
    pane.send_button.click()
    qtbot.waitUntil(lambda: "Hello," in pane.view.toPlainText(), timeout=10_000)
    assert pane.is_generating()
    text = pane.view.toPlainText()
    assert "wants a greeting" not in text and "Thinking · Thought for" in text and "— show" in text
    assert text.index("Thinking · Thought for") < text.index("Hello,")  # above the answer
    with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
        fake_server.release_stall()


def test_click_expands_and_folds_the_thinking_and_reload_restores_it(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(reasoning_tokens=THOUGHT, tokens=ANSWER)
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "Say hello")
    reply_id = store.messages(pane.conversation_id)[1].id  # type: ignore[arg-type]
    with qtbot.waitSignal(pane.view.thinking_toggled, timeout=3000) as blocker:
        click_text(qtbot, pane.view, "Thought for")
    assert blocker.args == [reply_id, True]
    text = pane.view.toPlainText()
    assert "The user wants a greeting." in text and "Keep it short and friendly." in text and "— hide" in text
    assert text.index("wants a greeting") < text.index("Hello, world!")  # above the answer, once
    assert text.count("Hello, world!") == 1
    with qtbot.waitSignal(pane.view.thinking_toggled, timeout=3000) as blocker:
        click_text(qtbot, pane.view, "Thought for")
    assert blocker.args == [reply_id, False]
    assert "wants a greeting" not in pane.view.toPlainText()

    cid = pane.conversation_id
    assert cid is not None
    pane.new_conversation()
    assert "Thought for" not in pane.view.toPlainText()
    pane.load_conversation(cid)  # from the store: the thinking and its duration come back
    text = pane.view.toPlainText()
    assert "Thinking · Thought for" in text and f"{len(THOUGHT_TEXT)} chars — show" in text
    click_text(qtbot, pane.view, "Thought for")
    assert "The user wants a greeting." in pane.view.toPlainText()

    reopened = ChatStore(store.path)  # a fresh connection, as after a restart
    try:
        assert reopened.messages(cid)[1].reasoning == THOUGHT_TEXT
    finally:
        reopened.close()


def test_expanding_while_the_answer_streams_keeps_streaming(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(
        reasoning_tokens=THOUGHT, tokens=["Intro\n\n", "```python\n", "x = 1\n", "```\n\n", "More", " text"],
        stall_after=len(THOUGHT) + 5,
    )
    pane = make_pane(qtbot, store, client)
    pane.input.setPlainText("go")
    pane.send_button.click()
    qtbot.waitUntil(lambda: fake_server.stalled.is_set(), timeout=10_000)
    qtbot.waitUntil(lambda: "More" in pane.view.toPlainText(), timeout=5000)
    click_text(qtbot, pane.view, "Thought for")
    assert pane.is_generating()
    text = pane.view.toPlainText()
    assert "The user wants a greeting." in text and text.count("x = 1") == 1 and "— hide" in text
    with qtbot.waitSignal(pane.reply_finished, timeout=10_000):
        fake_server.release_stall()
    text = pane.view.toPlainText()
    assert text.count("The user wants a greeting.") == 1 and text.count("x = 1") == 1 and "More text" in text
    assert text.index("wants a greeting") < text.index("Intro") and text.count("Copy code") == 1


def test_thinking_is_never_sent_back_and_is_exported(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(reasoning_tokens=THOUGHT, tokens=ANSWER)
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "Say hello")
    fake_server.script = SSEScript(reasoning_tokens=["Again."], tokens=["Hi", " again"])
    send(qtbot, pane, "Once more")
    body = fake_server.requests[-1].body
    assert body["messages"] == [
        {"role": "user", "content": "Say hello"},
        {"role": "assistant", "content": "Hello, world!"},
        {"role": "user", "content": "Once more"},
    ]
    assert "wants a greeting" not in json.dumps(body) and "reasoning" not in json.dumps(body)

    cid = pane.conversation_id
    assert cid is not None
    md = store.export_markdown(cid)
    assert "<details><summary>Thinking (" in md
    assert "> The user wants a greeting.\n>\n> Keep it short and friendly." in md
    assert md.index("> The user wants") < md.index("Hello, world!")
    assert "> Again." in md
    data = json.loads(store.export_json(cid))
    assert [m["reasoning"] for m in data["messages"]] == ["", THOUGHT_TEXT, "", "Again."]


def test_a_reply_that_only_thought_folds_when_it_ends(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    fake_server.script = SSEScript(reasoning_tokens=THOUGHT, tokens=[], finish_reason="length")
    pane = make_pane(qtbot, store, client)
    send(qtbot, pane, "think hard")
    text = pane.view.toPlainText()
    assert "Thinking · Thought for" in text and "wants a greeting" not in text and "Thinking…" not in text
    reply = store.messages(pane.conversation_id)[1]  # type: ignore[arg-type]
    assert reply.content == "" and reply.reasoning == THOUGHT_TEXT


def test_fast_thinking_goes_through_the_append_throttle_not_per_token(
    qtbot: QtBot, store: ChatStore, fake_server: FakeLlamaServer, client: LlamaClient
) -> None:
    """1,000 tokens/s of thinking: the document changes a few dozen times, not once per token."""
    pieces = [f"step {i}, " for i in range(600)]
    fake_server.script = SSEScript(reasoning_tokens=pieces, tokens=["Done."], rate=1000)
    pane = make_pane(qtbot, store, client)
    changes: list[int] = []
    pane.view.document().contentsChange.connect(lambda pos, removed, added: changes.append(added))
    send(qtbot, pane, "count")
    assert len(changes) < 120, f"{len(changes)} document edits for {len(pieces)} thinking pieces"
    reply = store.messages(pane.conversation_id)[1]  # type: ignore[arg-type]
    assert reply.reasoning == "".join(pieces) and reply.content == "Done."
