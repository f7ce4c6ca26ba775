"""Markdown to the HTML subset QTextDocument understands, with Pygments-coloured code blocks.

A finished reply is rendered once (:func:`render_html`); a streaming one a block at a time by
:class:`~beedeck.ui.chat.live_reply.LiveReply`, from one parse per render (:func:`parse`, then
:func:`render_tokens` on slices of its tokens). Each fenced block gets a "Copy code" link
``copy:<message key>:<block index>``; the chat view answers it with the raw code from :func:`code_blocks`.

A single newline in a reply is a line break, as in every chat app (markdown-it's ``breaks``): models
write lists of lines, addresses and poems without Markdown's two trailing spaces.

Lexers are looked up once per name (cached). A fence without a known language is guessed once, from
its first :data:`GUESS_CHARS` characters (the guess is cached by that text): Pygments' ``guess_lexer``
tries every lexer (~8 ms), so it must not run on every render; a streaming block is guessed once it
has that many characters, from the same text a reload guesses from, so both show the same colours.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token
    from pygments.formatters import HtmlFormatter
    from pygments.lexer import Lexer

# markdown-it and Pygments are imported on first use (warm_up, off the GUI thread after the window
# shows): importing them cost the cold start about 60 ms (benchmarks/app_start.py).

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
GUESS_MIN = 40  # an unlabelled fence shorter than this stays plain (a guess on so little is noise)
GUESS_CHARS = 600  # ...longer ones are guessed from their first this many characters


@lru_cache(maxsize=2)
def _formatter(dark: bool) -> HtmlFormatter:
    from pygments.formatters import HtmlFormatter

    # Inline styles: QTextDocument ignores CSS classes from a stylesheet it was not given.
    return HtmlFormatter(noclasses=True, nowrap=True, style="monokai" if dark else "default")


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return (
        MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True})
        .enable("table")
        .enable("strikethrough")
    )


def parse(text: str) -> list[Token]:
    """markdown-it's block tokens of ``text`` (the one parse a render makes)."""
    return _md().parse(text)


def top_blocks(tokens: Sequence[Token]) -> list[int]:
    """Indices of the tokens that open a top-level block (paragraph, list, fence, table...)."""
    return [i for i, tok in enumerate(tokens)
            if tok.level == 0 and tok.nesting in (0, 1) and tok.map is not None and tok.type != "inline"]


def line_offsets(text: str) -> list[int]:
    """Where each line of ``text`` begins (one more entry: the end), for markdown-it's line maps."""
    offsets = [0]
    at = text.find("\n")
    while at >= 0:
        offsets.append(at + 1)
        at = text.find("\n", at + 1)
    if offsets[-1] != len(text):
        offsets.append(len(text))
    return offsets


def fence_closes(line: str, opener: str) -> bool:
    """Whether ``line`` closes a fence opened by ``opener`` (``` or ~~~, at least as long)."""
    m = _FENCE.match(line)
    return (m is not None and m.group(1)[0] == opener[0] and len(m.group(1)) >= len(opener)
            and not line[m.end():].strip())


def fence_opener(line: str) -> str:
    """The fence characters that open a code block on ``line`` (``` or ~~~...), or ""."""
    m = _FENCE.match(line)
    return m.group(1) if m else ""


def code_colours(dark: bool) -> tuple[str, str]:
    """(background, text) of a code frame."""
    return ("#272822", "#f8f8f2") if dark else ("#f6f8fa", "#24292e")


def hard_breaks(text: str) -> str:
    """``text`` with each single newline outside code fences made a Markdown hard break (two spaces).

    For md4c (``QTextCursor.insertMarkdown``), which has no ``breaks`` option. Two trailing spaces are
    ignored where a break cannot be (the end of a heading, list item or table row), unlike a backslash.
    """
    lines = text.split("\n")
    fence = ""
    for i, line in enumerate(lines[:-1]):
        if fence:
            if fence_closes(line, fence):
                fence = ""
            continue
        fence = fence_opener(line)
        if fence:
            continue
        if line.strip() and lines[i + 1].strip() and not line.endswith("  "):
            lines[i] = line + "  "
    return "\n".join(lines)


def code_blocks(text: str) -> list[str]:
    """The raw content of each fenced code block, in order."""
    return [tok.content for tok in parse(text) if tok.type == "fence"]


def fence_lang(info: str) -> str:
    """The language word of a fence's info string ("python" in "python title=x")."""
    return (info or "").strip().split(" ")[0]


@lru_cache(maxsize=64)
def _lexer_by_name(lang: str) -> Lexer | None:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        return get_lexer_by_name(lang, stripnl=False)
    except ClassNotFound:
        return None


@lru_cache(maxsize=256)
def _guessed(prefix: str) -> Lexer | None:
    from pygments.lexers import guess_lexer
    from pygments.util import ClassNotFound

    try:
        return guess_lexer(prefix, stripnl=False)
    except ClassNotFound:
        return None


def known_lexer(lang: str) -> Lexer | None:
    """The lexer a fence's language names (cached), or None."""
    return _lexer_by_name(lang.lower()) if lang else None


def lexer_for(lang: str, code: str) -> Lexer | None:
    """The lexer for a fence: its language's, else a guess from the code's first :data:`GUESS_CHARS`
    characters (None: plain). A streaming block calls it once it has those characters (or has ended)."""
    lexer = known_lexer(lang)
    if lexer is None and len(code) >= GUESS_MIN:
        lexer = _guessed(code[:GUESS_CHARS])
    return lexer


def _highlight(code: str, lang: str, dark: bool) -> str:
    from pygments import highlight

    lexer = lexer_for(lang, code)
    if lexer is None:
        return html.escape(code)
    return highlight(code, lexer, _formatter(dark))


def frame_html(lang: str, key: str, block: int, dark: bool, code_html: str) -> str:
    """A code block's frame: the language and a copy link above the code (already HTML).

    Its lines wrap at the frame's edge (``pre-wrap``): a long line would make the whole transcript scroll
    sideways. A Qt text frame (``-qt-table-type: frame``), not a table: Qt lays out an edit inside a frame
    incrementally but a whole table again (a streaming block grows inside it). Its padding is a border
    in the background colour (Qt's HTML import leaves a frame's padding out).
    """
    bg, fg = code_colours(dark)
    link = "#8ab4f8" if dark else "#0969da"
    label = html.escape(lang) if lang else "code"
    return (
        f'<table width="100%" style="-qt-table-type: frame; background-color:{bg}; border: 6px solid {bg}; '
        f'margin:4px 0"><tr><td><p style="color:#888;font-size:small;margin:0 0 6px 0">{label}&nbsp;&nbsp;'
        f'<a href="copy:{key}:{block}" style="color:{link}">Copy code</a></p>'
        f'<pre style="color:{fg};font-family:monospace;margin:0;white-space:pre-wrap">{code_html}</pre></td></tr></table>'
    )


def render_tokens(tokens: Sequence[Token], key: str, dark: bool = False, first_block: int = 0) -> str:
    """HTML of a run of whole blocks from :func:`parse`; fences become highlighted frames numbered from
    ``first_block``."""
    md = _md()
    out: list[str] = []
    block = first_block
    start = 0
    for i, tok in enumerate(tokens):
        if tok.type != "fence":
            continue
        if i > start:
            out.append(md.renderer.render(list(tokens[start:i]), md.options, {}))
        lang = fence_lang(tok.info)
        out.append(frame_html(lang, key, block, dark, _highlight(tok.content.rstrip("\n"), lang, dark)))
        block += 1
        start = i + 1
    if start < len(tokens):
        out.append(md.renderer.render(list(tokens[start:]), md.options, {}))
    return "".join(out).rstrip()  # a trailing newline would end the last block with a space


def render_html(text: str, key: str, dark: bool = False, first_block: int = 0) -> str:
    """One message's Markdown as HTML; ``key`` names the message in the copy links.

    ``first_block`` numbers the code blocks when ``text`` is a later part of a message.
    """
    return render_tokens(parse(text), key, dark, first_block)


def token_styles(dark: bool) -> dict[Any, dict[str, Any]]:
    """Pygments token type -> the style the HTML formatter gives it inline (its own or the nearest
    ancestor's that has one): what a code frame typed in as it streams must look like."""
    return _token_styles(dark)


@lru_cache(maxsize=2)
def _token_styles(dark: bool) -> dict[Any, dict[str, Any]]:
    style = _formatter(dark).style
    keys = ("color", "bold", "italic", "underline", "bgcolor")
    return {ttype: ndef for ttype, ndef in style if any(ndef[k] for k in keys)}


def style_of(ttype: Any, styles: dict[Any, dict[str, Any]]) -> dict[str, Any] | None:
    """The inline style of ``ttype`` in ``styles`` (see :func:`token_styles`), or None (unstyled)."""
    while ttype is not None:
        found = styles.get(ttype)
        if found is not None:
            return found
        ttype = ttype.parent
    return None


def warm_up() -> None:
    """Import the parser, the lexers and the guesser once, ahead of the first reply (off the GUI thread:
    it is pure Python; the first guess imports every Pygments lexer, ~0.2 s)."""
    render_html("# w\n\n```python\nx = 1\n```\n\n```js\nlet y = 2;\n```\n\n| a |\n|---|\n| b |\n", "0")
    for dark in (False, True):
        _formatter(dark)
        token_styles(dark)
    _guessed("#include <stdio.h>\nint main(void) { return 0; }\n")
