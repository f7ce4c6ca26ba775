"""The streaming reply's render: the work per frame does not grow with the reply (issue 22: 10,000
tokens/s for replies of 160,000 characters), code is highlighted while it streams and never shown plain
again once highlighted, and the streamed transcript looks like the same reply loaded afterwards.

The frames are driven by hand (``render`` / ``flush`` as the view's frame timer calls them), so the
counts are exact: no timing is asserted anywhere (the speed goals are benchmarks/ui_stream.py's)."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor, QPalette, QTextCursor
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.mode import Mode
from beedeck.ui.chat.chat_view import ChatView
from beedeck.ui.chat.live_reply import LIVE_BUDGET, LIVE_LIMIT, LiveReply, doc_len
from beedeck.ui.chat.markdown_render import code_colours
from beedeck.ui.chat.message_html import MessageView

PARAGRAPH = (
    "Speculative decoding lets a small **draft** propose several tokens that the target model checks "
    "in one pass, so the output is identical but arrives faster. Here is how to use it:\n\n"
    "1. Start the server with the draft.\n2. Compare against the baseline.\n3. Keep the faster one.\n\n"
    "```python\ndef fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
    "    return a\n```\n\n"
)

SAMPLE = '''Here is the **plan** 🙂 (café):

1. Read the file.
2. Parse it
   with care.
3. Write it back.

```python
def parse(text: str) -> list[str]:
    """Split the text.

    Lines that are blank are dropped.
    """
    out = []  # the résult 🙂
    for line in text.splitlines():
        if line.strip():
            out.append(line)
    return out
```

> A quote
> on two lines.

| name | value |
|------|-------|
| a    | 1     |

```
#include <stdio.h>
int main(void) {
    printf("hello\\n");
    return 0;
}
```

---

Done.'''


def make_view(qtbot: QtBot, height: int = 500) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, height)
    view.show()
    return view


def live_of(view: ChatView) -> LiveReply:
    live = view._live
    assert live is not None
    return live


def stream(view: ChatView, text: str, piece: int = 4, per_frame: int = 40, render_every: int = 2) -> None:
    """Feed ``text`` in ``piece``-character deltas, ``per_frame`` deltas a frame; every
    ``render_every``-th frame renders (as the throttle allows), the others append plain text."""
    live = live_of(view)
    frame = 0
    for i in range(0, len(text), piece):
        view.append_delta(text[i : i + piece])
        if (i // piece + 1) % per_frame == 0:
            frame += 1
            live.render() if frame % render_every == 0 else live.flush()
    live.render()


def reply_of(length: int) -> str:
    return (PARAGRAPH * (length // len(PARAGRAPH) + 1))[:length]


def streamed_reply(qtbot: QtBot, text: str, **kwargs: int) -> tuple[ChatView, LiveReply]:
    view = make_view(qtbot)
    view.begin_reply(MessageView(1, "assistant", "", complete=False))
    live = live_of(view)
    stream(view, text, **kwargs)
    return view, live


def test_work_per_frame_is_bounded_for_a_160000_character_reply(qtbot: QtBot) -> None:
    reply = reply_of(160_000)
    view, live = streamed_reply(qtbot, reply)
    work, parsed = list(live.work), list(live.parsed)
    tenth = len(work) // 10
    # What one frame hands the document stays within the budget, at the reply's end as at its start:
    assert max(work) <= LIVE_BUDGET + 320, max(work)  # a render's budget and the frame's new pieces
    assert max(work[-tenth:]) <= 2 * max(work[:tenth]) + 400, (max(work[:tenth]), max(work[-tenth:]))
    assert max(parsed) <= LIVE_BUDGET + LIVE_LIMIT, max(parsed)  # Markdown parsed per render
    # ...and in all, each character is parsed and rendered a small number of times (not once per frame).
    assert sum(parsed) < 3 * len(reply), sum(parsed) / len(reply)
    assert sum(work) < 4 * len(reply), sum(work) / len(reply)
    assert live.frozen_chars > len(reply) - 2 * len(PARAGRAPH)  # nearly all of it frozen as it went
    view.end_reply(reply, ReplyFacts())
    streamed = view.toPlainText()
    loaded = make_view(qtbot)
    loaded.set_messages([MessageView(1, "assistant", reply)])
    assert streamed == loaded.toPlainText()


def test_the_work_per_render_does_not_grow_with_the_replys_length(qtbot: QtBot) -> None:
    """The same stream, 10,000 then 160,000 characters: each render parses and renders about as many
    characters in the long reply's last tenth as in the short one's (counted, not timed)."""
    _, short = streamed_reply(qtbot, reply_of(10_000))
    _, long = streamed_reply(qtbot, reply_of(160_000))
    late = long.parsed[-len(long.parsed) // 10 :]
    assert max(late) <= max(short.parsed) + len(PARAGRAPH), (max(short.parsed), max(late))
    assert sum(late) / len(late) <= 1.5 * sum(short.parsed) / len(short.parsed)
    late_work = long.work[-len(long.work) // 10 :]
    assert sum(late_work) / len(late_work) <= 1.5 * sum(short.work) / len(short.work)


def test_falling_behind_catches_up_in_bounded_steps(qtbot: QtBot) -> None:
    """A backlog (the GUI thread was busy): each render parses at most a budget's worth, oldest first,
    and the newest text shows as plain text meanwhile, so nothing that arrived is ever missing."""
    view = make_view(qtbot)
    view.begin_reply(MessageView(2, "assistant", "", complete=False))
    live = live_of(view)
    backlog = PARAGRAPH * 60  # ~20,000 characters at once
    view.append_delta(backlog)
    steps = 0
    while live.needs_render():
        before = len(live.parsed)
        live.render()
        assert max(live.parsed[before:]) <= LIVE_BUDGET + LIVE_LIMIT
        assert live.shown == len(live.src)  # all of it is in the document, rendered or not
        assert view.toPlainText().count("return a") == 60
        steps += 1
        assert steps < 60
    assert steps >= len(backlog) // LIVE_BUDGET  # several bounded steps, not one big one
    view.end_reply(backlog, ReplyFacts())
    loaded = make_view(qtbot)
    loaded.set_messages([MessageView(2, "assistant", backlog)])
    assert view.toPlainText() == loaded.toPlainText()


def test_code_is_highlighted_while_it_streams_and_new_lines_go_into_its_frame(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(3, "assistant", "", complete=False))
    live = live_of(view)
    view.append_delta("Here:\n\n```python\ndef fib(n):\n")
    live.render()
    html = view.toHtml()
    assert "Copy code" in html and "python" in view.toPlainText()  # the code frame, before the fence closes
    assert "#008000" in html  # Pygments' colour for `def` (default style), while streaming
    at = QTextCursor(view.document())
    at.setPosition(live.append_at)
    assert at.currentFrame() is not view.document().rootFrame()  # what comes next is typed inside the frame
    before = view.document().size().height()
    view.append_delta("    return n")
    live.flush()
    lines = view.toPlainText().splitlines()
    assert lines.index("def fib(n):") + 1 == lines.index("    return n")  # on its own line, right below
    assert view.document().size().height() >= before
    view.append_delta("\n```\n\nDone.")
    live.render()
    view.end_reply(None, ReplyFacts())
    assert view.toPlainText().count("Copy code") == 1 and "```" not in view.toPlainText()


def keyword_colour(view: ChatView, word: str, after: int = 0) -> list[str]:
    """The colour of each occurrence of ``word`` in the document from position ``after``."""
    doc = view.document()
    found, cursor = [], doc.find(word, after)
    while not cursor.isNull():
        probe = QTextCursor(doc)
        probe.setPosition(cursor.selectionStart() + 1)
        found.append(probe.charFormat().foreground().color().name())
        cursor = doc.find(word, cursor.selectionEnd())
    return found


def test_a_long_code_block_is_highlighted_while_it_streams_and_never_plain_again(qtbot: QtBot) -> None:
    """A code block many budgets long: each render highlights the lines that came since (no jump into a
    highlighted frame at the end), a highlighted line is never shown plain again, and the closing line
    costs no render of the whole block."""
    view = make_view(qtbot)
    view.begin_reply(MessageView(4, "assistant", "", complete=False))
    live = live_of(view)
    lines = "".join(f"    value_{i} = compute({i})  # step {i}\n" for i in range(600))  # ~25,000 chars
    text = f"Intro.\n\n```python\ndef big():\n{lines}    return value_1\n```\n\nAfter the code."
    plain = code_colours(False)[1]
    highlighted_before = 0
    for i in range(0, len(text), 640):  # 10,000 tokens/s: 640 characters a frame
        view.append_delta(text[i : i + 640])
        before = len(live.work)
        live.render()
        assert max(live.work[before:]) <= LIVE_BUDGET + 640
        colours = keyword_colour(view, "# step")
        highlighted = sum(c != plain for c in colours)
        assert all(c != plain for c in colours[:highlighted])  # highlighted from the top, no holes
        assert highlighted >= highlighted_before  # never plain again
        if live.code is not None:
            assert highlighted >= len(colours) - 1  # all but the line still arriving
        highlighted_before = highlighted
    assert highlighted_before == 600 and live.code is None
    assert keyword_colour(view, "def")[0] == QColor("#008000").name()
    view.end_reply(None, ReplyFacts())
    assert view.toPlainText().count("Copy code") == 1 and "```" not in view.toPlainText()


@pytest.mark.parametrize("piece", [1, 3, 11, 64, 900])
@pytest.mark.parametrize("dark", [False, True])
def test_the_streamed_reply_looks_like_the_same_reply_loaded(qtbot: QtBot, piece: int, dark: bool) -> None:
    """Pixel for pixel: fragments rendered as they finish, code typed into its frame and highlighted a
    line at a time (a docstring recoloured when it closes, an unlabelled block guessed), in both themes."""
    messages = [MessageView(1, "user", "go"), MessageView(2, "assistant", SAMPLE, ReplyFacts(tokens=200))]
    streamed, loaded = make_view(qtbot, height=1100), make_view(qtbot, height=1100)
    for view in (streamed, loaded):
        palette = view.palette()
        palette.setColor(QPalette.ColorRole.Base, QColor("#1e1e1e" if dark else "#ffffff"))
        palette.setColor(QPalette.ColorRole.Text, QColor("#eeeeee" if dark else "#000000"))
        view.setPalette(palette)
    streamed.set_messages(messages[:1])
    streamed.begin_reply(MessageView(2, "assistant", "", complete=False))
    live = live_of(streamed)
    assert live.dark == dark
    for n, i in enumerate(range(0, len(SAMPLE), piece)):
        streamed.append_delta(SAMPLE[i : i + piece])
        live.render() if n % 3 == 0 else live.flush()
    streamed.end_reply(SAMPLE, ReplyFacts(tokens=200))
    loaded.set_messages(messages)
    assert streamed.toPlainText() == loaded.toPlainText()
    assert streamed.grab().toImage() == loaded.grab().toImage()


def test_document_positions_count_utf16_units() -> None:
    assert doc_len("abc") == 3 and doc_len("é") == 1 and doc_len("🙂") == 2


LONG_BLOCKS = {
    "numbered": "".join(f"{i}. Item number {i} of the long list\n" for i in range(1, 301)),
    "bullets": "".join(f"- Item number {i} of the long list\n" for i in range(1, 301)),
    "paragraph": "".join(f"Line number {i} of one long paragraph with breaks\n" for i in range(1, 200)),
    "quote": "".join(f"> Line {i} of a long quote\n>\n" for i in range(1, 150)),
    "loose": "".join(f"- Item number {i} of a loose list\n\n" for i in range(1, 200)),
}


@pytest.mark.parametrize("kind", LONG_BLOCKS)
def test_a_long_block_is_frozen_a_piece_at_a_time_and_reads_as_one(qtbot: QtBot, kind: str) -> None:
    """One Markdown block longer than the live limit (a 300-item list, a 200-line paragraph): its finished
    part is frozen in pieces, so a render never parses the whole block again, and the pieces join without
    a seam: the same pixels as the reply loaded (the numbering carries on)."""
    reply = "Intro.\n\n" + LONG_BLOCKS[kind] + "\nEnd."
    view = make_view(qtbot, height=300)
    view.begin_reply(MessageView(1, "assistant", "", complete=False))
    live = live_of(view)
    stream(view, reply, piece=8, per_frame=20, render_every=1)
    # The live part of the block and a frame's new text, though the block is 4,000-11,000 characters long:
    assert max(live.parsed) <= LIVE_LIMIT + 160 < len(LONG_BLOCKS[kind]) / 3
    view.end_reply(None, ReplyFacts())
    loaded = make_view(qtbot, height=300)
    loaded.set_messages([MessageView(1, "assistant", reply)])
    assert view.toPlainText() == loaded.toPlainText()
    assert view.document().size() == loaded.document().size()
    for at in (0.0, 0.5, 1.0):  # top, middle and end of the transcript, pixel for pixel
        for v in (view, loaded):
            v.verticalScrollBar().setValue(int(at * v.verticalScrollBar().maximum()))
        QApplication.processEvents()  # the scroll's repaint
        assert view.verticalScrollBar().value() == loaded.verticalScrollBar().value()
        assert view.grab().toImage() == loaded.grab().toImage(), at


def test_a_long_table_stays_one_table(qtbot: QtBot) -> None:
    """A table longer than the live limit is not cut (its rows need its header): it renders whole."""
    table = "| n | square |\n|---|---|\n" + "".join(f"| {i} | {i * i} |\n" for i in range(120)) + "\nAfter."
    view, live = streamed_reply(qtbot, table, piece=6, per_frame=10, render_every=1)
    view.end_reply(None, ReplyFacts())
    loaded = make_view(qtbot)
    loaded.set_messages([MessageView(1, "assistant", table)])
    assert view.toPlainText() == loaded.toPlainText() and "|" not in view.toPlainText()


def test_a_reply_that_ends_behind_is_finished_in_bounded_steps_then_gets_its_stats(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(5, "assistant", "", complete=False))
    live = live_of(view)
    reply = PARAGRAPH * 40  # ~13,000 characters arrive at once, just before the end
    view.append_delta(reply)
    before = len(live.parsed)
    view.end_reply(reply, ReplyFacts(mode=Mode.BASELINE, tokens=3200))
    assert not view.is_streaming() and view._finishing is not None  # the rest renders over the next frames
    assert view.toPlainText().count("return a") == 40  # all of it shows at once, partly as plain text
    qtbot.waitUntil(lambda: view._finishing is None, timeout=10_000)
    assert max(live.parsed[before:]) <= LIVE_BUDGET + LIVE_LIMIT  # bounded steps
    text = view.toPlainText()
    assert text.rstrip().endswith("3200 tokens · Baseline") and "```" not in text
    loaded = make_view(qtbot)
    loaded.set_messages([MessageView(5, "assistant", reply, ReplyFacts(mode=Mode.BASELINE, tokens=3200))])
    assert text == loaded.toPlainText()


def test_a_new_message_completes_a_reply_still_finishing(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(6, "assistant", "", complete=False))
    reply = PARAGRAPH * 40
    view.append_delta(reply)
    view.end_reply(reply, ReplyFacts(tokens=3200))
    assert view._finishing is not None
    view.append_message(MessageView(7, "user", "Thanks"))
    assert view._finishing is None
    text = view.toPlainText()
    assert text.index("3200 tokens") < text.index("Thanks") and "```" not in text
