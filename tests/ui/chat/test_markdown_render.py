"""hard_breaks: the line breaks md4c gets, never inside code fences; lexers cached and guessed once; one
parse renders any run of whole blocks."""

from __future__ import annotations

import pytest

from beedeck.ui.chat import markdown_render
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


def test_lexers_are_looked_up_once_and_unlabelled_code_is_guessed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pygments' guess tries every lexer (~8 ms): a block is guessed once, from its first GUESS_CHARS
    characters, however often it is rendered (a streaming block is rendered again and again)."""
    import pygments.lexers

    calls: list[int] = []
    real = pygments.lexers.guess_lexer

    def counting(text: str, **options: object) -> object:
        calls.append(len(text))
        return real(text, **options)

    monkeypatch.setattr(pygments.lexers, "guess_lexer", counting)
    markdown_render._guessed.cache_clear()
    assert markdown_render.known_lexer("python") is markdown_render.known_lexer("Python")
    code = "#include <stdio.h>\n" + "int f(int x) { return x * 2; }\n" * 40
    for end in range(markdown_render.GUESS_CHARS, len(code), 50):  # the block, longer and longer
        markdown_render.render_html(f"```\n{code[:end]}", "1")
    assert calls == [markdown_render.GUESS_CHARS]
    render_html(f"```\n{code}```\n", "1")
    assert len(calls) == 1
    assert render_html("```\nx = 1\n```", "1").count("<span") == 0  # too short to guess: plain


def test_one_parse_renders_any_run_of_whole_blocks() -> None:
    text = "# Title\n\nSome *text*.\n\n```python\nx = 1\n```\n\n- a\n- b\n"
    tokens = markdown_render.parse(text)
    tops = markdown_render.top_blocks(tokens)
    assert [tokens[i].type for i in tops] == ["heading_open", "paragraph_open", "fence", "bullet_list_open"]
    pieces = markdown_render.render_tokens(tokens[: tops[2]], "1") + markdown_render.render_tokens(tokens[tops[2] :], "1")
    assert pieces.replace("\n", "") == render_html(text, "1").replace("\n", "")
