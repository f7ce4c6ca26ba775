"""code_runs: a code block lexed a few lines at a time from restart lines gives the same tokens as
lexed whole, a string or comment over several lines included; CodeFrame: the lines typed into a frame
restyled in place."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor, QTextDocument
from pytestqt.qtbot import QtBot

from beedeck.ui.chat.code_stream import MAX_LOOKBACK, CodeFrame, code_runs
from beedeck.ui.chat.markdown_render import code_colours, known_lexer

CODE = '''def parse(text: str) -> list[str]:
    """Split the text.

    Lines that are blank are dropped.
    """
    out = []  # the result
    /* not C */
    for line in text.splitlines():
        if line.strip():
            out.append(line)
    return out
'''


def whole(code: str) -> list[tuple[object, str]]:
    lexer = known_lexer("python")
    assert lexer is not None
    return [(t, v) for t, v in lexer.get_tokens(code)]


def per_char(runs: list[tuple[object, str]]) -> list[object]:
    return [t for t, v in runs for _ in v]


def test_lexed_a_line_at_a_time_from_restarts_it_matches_the_whole(qtbot: QtBot) -> None:
    lexer = known_lexer("python")
    lines = CODE.splitlines(keepends=True)
    types: list[object] = []
    restart, done = 0, 0
    for line in lines:
        end = done + len(line)
        runs, next_restart = code_runs(lexer, CODE, restart, end)
        chars = per_char(runs)
        types = types[: restart] + chars  # what was restyled from the restart line on
        restart, done = next_restart, end
        assert restart <= done
    assert types == per_char(whole(CODE))


def test_a_docstring_is_no_restart_line(qtbot: QtBot) -> None:
    lexer = known_lexer("python")
    head = CODE[: CODE.index("    Lines")]  # the docstring still open
    _, restart = code_runs(lexer, CODE, 0, len(head))
    assert restart == CODE.index('    """Split')  # the line it began on: it is lexed again when it ends
    assert MAX_LOOKBACK > len(CODE)


def test_without_a_lexer_the_code_is_plain(qtbot: QtBot) -> None:
    runs, restart = code_runs(None, "x\ny\n", 0, 4)
    assert runs == [(None, "x\ny\n")] and restart == 4


def test_a_frame_is_restyled_in_place(qtbot: QtBot) -> None:
    doc = QTextDocument()
    cursor = QTextCursor(doc)
    cursor.insertText("Before")
    src = "```python\n" + CODE
    frame = CodeFrame(doc, False, "python", "```", len("```python\n"))
    frame.open(cursor, "1", 0)
    typed = QTextCursor(doc)
    typed.setPosition(frame.text_end())
    typed.insertText(CODE, frame.base)
    assert CODE in doc.toPlainText()
    styled = frame.advance(src, len(src))
    assert styled == len(CODE.rstrip("\n"))
    assert frame.debt == 1  # the last newline: a finished block's frame does not show it
    probe = QTextCursor(doc)
    probe.setPosition(doc.find("def").selectionStart() + 1)
    assert probe.charFormat().foreground().color().name() != code_colours(False)[1]
    frame.close()
    assert doc.toPlainText().endswith("    return out\n")  # the frame's last line, then the block after it
