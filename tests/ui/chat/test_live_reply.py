"""The streaming reply's render: the work per frame does not grow with the reply (issue 22: 10,000
tokens/s for replies of 160,000 characters), code is highlighted while it streams, and the streamed
transcript reads like the same reply loaded afterwards.

The frames are driven by hand (``render`` / ``flush`` as the view's frame timer calls them), so the
counts are exact: no timing is asserted anywhere (the speed goals are benchmarks/ui_stream.py's)."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor
from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.speculation.modes import Mode
from beedeck.ui.chat.chat_view import ChatView
from beedeck.ui.chat.live_reply import LIVE_BUDGET, doc_len
from beedeck.ui.chat.message_html import MessageView

PARAGRAPH = (
    "Speculative decoding lets a small **draft** propose several tokens that the target model checks "
    "in one pass, so the output is identical but arrives faster. Here is how to use it:\n\n"
    "1. Start the server with the draft.\n2. Compare against the baseline.\n3. Keep the faster one.\n\n"
    "```python\ndef fib(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
    "    return a\n```\n\n"
)


def make_view(qtbot: QtBot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(700, 500)
    view.show()
    return view


def stream(view: ChatView, text: str, piece: int = 4, per_frame: int = 40, render_every: int = 2) -> None:
    """Feed ``text`` in ``piece``-character deltas, ``per_frame`` deltas a frame; every
    ``render_every``-th frame renders (as the throttle allows), the others append plain text."""
    live = view._live
    assert live is not None
    frame = 0
    for i in range(0, len(text), piece):
        view.append_delta(text[i : i + piece])
        if (i // piece + 1) % per_frame == 0:
            frame += 1
            live.render() if frame % render_every == 0 else live.flush()
    live.render()


def test_work_per_frame_is_bounded_for_a_160000_character_reply(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    reply = (PARAGRAPH * (160_000 // len(PARAGRAPH) + 1))[:160_000]
    view.begin_reply(MessageView(1, "assistant", "", complete=False))
    live = view._live
    assert live is not None
    stream(view, reply)
    work = list(live.work)
    tenth = len(work) // 10
    early, late = max(work[:tenth]), max(work[-tenth:])
    # What one frame hands the document stays within the budget, at the reply's end as at its start:
    assert max(work) <= LIVE_BUDGET, max(work)
    assert late <= 2 * early + 400, (early, late)  # no growth with the reply's length
    # ...and in all, each character is rendered a small number of times (not once per frame).
    assert sum(work) < 4 * len(reply), sum(work) / len(reply)
    assert live.frozen_chars > len(reply) - 2 * len(PARAGRAPH)  # nearly all of it frozen as it went
    view.end_reply(reply, ReplyFacts())
    streamed = view.toPlainText()
    loaded = make_view(qtbot)
    loaded.set_messages([MessageView(1, "assistant", reply)])
    assert streamed.split() == loaded.toPlainText().split()  # the same words in the same order


def test_falling_behind_catches_up_in_bounded_steps(qtbot: QtBot) -> None:
    """A backlog (the GUI thread was busy): each render freezes at most the budget, oldest first, and
    the newest text shows as plain text meanwhile, so nothing that arrived is ever missing."""
    view = make_view(qtbot)
    view.begin_reply(MessageView(2, "assistant", "", complete=False))
    live = view._live
    assert live is not None
    backlog = PARAGRAPH * 60  # ~20,000 characters at once
    view.append_delta(backlog)
    steps = 0
    while live.needs_render() or live.frozen_chars + LIVE_BUDGET < len(live.src):
        before = len(live.work)
        live.render()
        assert all(w <= len(backlog) for w in live.work[before:])
        assert live.shown == len(live.src)  # all of it is in the document, rendered or not
        steps += 1
        assert steps < 40
    assert steps > len(backlog) // LIVE_BUDGET - 1  # it took several bounded steps, not one big one
    assert max(live.work[1:]) <= LIVE_BUDGET  # after the one plain insert of the backlog


def test_code_is_highlighted_while_it_streams_and_new_lines_go_into_its_frame(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(3, "assistant", "", complete=False))
    live = view._live
    assert live is not None
    view.append_delta("Here:\n\n```python\ndef fib(n):\n")
    live.render()
    html = view.toHtml()
    assert "Copy code" in html and "python" in view.toPlainText()  # the code frame, before the fence closes
    assert "#008000" in html  # Pygments' colour for `def` (default style), while streaming
    at = QTextCursor(view.document())
    at.setPosition(live.append_at)
    assert at.currentTable() is not None  # what comes next is typed inside the frame
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


def test_document_positions_count_utf16_units() -> None:
    assert doc_len("abc") == 3 and doc_len("é") == 1 and doc_len("🙂") == 2


def test_a_code_block_longer_than_the_budget_is_frozen_whole_once_it_closes(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(4, "assistant", "", complete=False))
    live = view._live
    assert live is not None
    code = "".join(f"    value_{i} = compute({i})\n" for i in range(LIVE_BUDGET // 20))
    block = f"```python\ndef big():\n{code}```\n\n"
    stream(view, "Intro.\n\n" + block)
    assert live.frozen_chars <= len("Intro.\n\n")  # still open as far as it knows: not frozen yet
    assert "value_3 = compute(3)" in view.toPlainText()  # but all of it shows, as plain text
    stream(view, "After the code.")
    assert live.frozen_chars == len("Intro.\n\n" + block)
    assert "Copy code" in view.toHtml() and "After the code." in view.toPlainText()
    view.end_reply(None, ReplyFacts())
    assert view.toPlainText().count("Copy code") == 1


def test_a_reply_that_ends_behind_is_finished_in_bounded_steps_then_gets_its_stats(qtbot: QtBot) -> None:
    view = make_view(qtbot)
    view.begin_reply(MessageView(5, "assistant", "", complete=False))
    live = view._live
    assert live is not None
    reply = PARAGRAPH * 40  # ~13,000 characters arrive at once, just before the end
    view.append_delta(reply)
    before = len(live.work)
    view.end_reply(reply, ReplyFacts(mode=Mode.BASELINE, tokens=3200))
    assert not view.is_streaming() and view._finishing is not None  # the rest renders over the next frames
    assert view.toPlainText().count("return a") == 40  # all of it shows at once, partly as plain text
    qtbot.waitUntil(lambda: view._finishing is None, timeout=10_000)
    assert max(live.work[before:]) <= max(LIVE_BUDGET, len(reply))  # the one plain insert, then bounded steps
    assert max(live.work[before + 1 :]) <= LIVE_BUDGET
    text = view.toPlainText()
    assert text.rstrip().endswith("3200 tokens · Baseline") and "```" not in text
    loaded = make_view(qtbot)
    loaded.set_messages([MessageView(5, "assistant", reply, ReplyFacts(mode=Mode.BASELINE, tokens=3200))])
    assert text.split() == loaded.toPlainText().split()


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
