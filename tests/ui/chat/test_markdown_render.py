"""hard_breaks: the line breaks md4c gets for the streaming tail, never inside code fences."""

from __future__ import annotations

from beedeck.ui.chat.markdown_render import hard_breaks, render_html


def test_single_newlines_become_hard_breaks_outside_fences() -> None:
    text = "a\nb\n\nc\n```\ncode\nmore\n```\nd\ne"
    assert hard_breaks(text) == "a  \nb\n\nc  \n```\ncode\nmore\n```\nd  \ne"


def test_a_longer_or_other_fence_does_not_close_a_block() -> None:
    text = "````\nx\n```\ny\n````\nz\nw"  # ``` inside a ```` block is code
    assert hard_breaks(text) == "````\nx\n```\ny\n````\nz  \nw"
    text = "~~~\nx\n```\ny\n~~~\nz\nw"
    assert hard_breaks(text) == "~~~\nx\n```\ny\n~~~\nz  \nw"


def test_an_unclosed_fence_while_streaming_stays_code() -> None:
    assert hard_breaks("intro\n```python\nx = 1\ny = 2") == "intro  \n```python\nx = 1\ny = 2"


def test_finished_replies_render_single_newlines_as_br() -> None:
    out = render_html("one\ntwo", "1")
    assert "one<br" in out and "two" in out
    code = render_html("```\nx\ny\n```", "1")
    assert "<br" not in code
