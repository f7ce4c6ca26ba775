"""Markdown to the HTML subset QTextDocument understands, with Pygments-coloured code blocks.

Used once per finished reply (and when a code fence closes), never per token: markdown-it +
Pygments costs ~40 ms for a 20k-character reply (docs/reference/python-stack.md §6).
Each fenced block gets a "Copy code" link ``copy:<message key>:<block index>``; the chat view
answers it with the raw code from :func:`code_blocks`.

A single newline in a reply is a line break, as in every chat app (markdown-it's ``breaks``): models
write lists of lines, addresses and poems without Markdown's two trailing spaces. The live tail that
Qt's md4c renders while a reply streams gets the same through :func:`hard_breaks`.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from pygments.formatters import HtmlFormatter

# markdown-it and Pygments are imported on first use (warm_up, at idle time after the window shows):
# importing them cost the cold start about 60 ms (benchmarks/app_start.py).

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)


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


def closed_fences(text: str) -> int:
    """How many fenced code blocks in ``text`` are complete (used to re-highlight when one closes)."""
    return len(_FENCE.findall(text)) // 2


def stable_prefix_len(text: str) -> int:
    """Characters of ``text`` made of finished top-level blocks: everything before the last block.

    While a reply streams only its last block can still change, so the blocks before it can be
    rendered once, for good; the re-render on each tick then costs O(last block), not O(reply).
    """
    starts = [
        tok.map[0]
        for tok in _md().parse(text)
        if tok.level == 0 and tok.nesting in (0, 1) and tok.map is not None and tok.type != "inline"
    ]
    if len(starts) < 2:
        return 0
    last_line = starts[-1]
    offset = 0
    for i, line in enumerate(text.splitlines(keepends=True)):
        if i == last_line:
            return offset
        offset += len(line)
    return 0


def _closes(line: str, fence: str) -> bool:
    m = _FENCE.match(line)
    return m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
        and not line[m.end():].strip()


def open_fence_start(text: str) -> int:
    """Where the fenced code block still open at the end of ``text`` begins (its opening line), or -1."""
    fence, start, offset = "", -1, 0
    for line in text.split("\n"):
        if fence:
            if _closes(line, fence):
                fence = ""
        else:
            m = _FENCE.match(line)
            if m:
                fence, start = m.group(1), offset
        offset += len(line) + 1
    return start if fence else -1


def closed_fence_end(text: str) -> int:
    """When ``text`` begins with a fenced code block that is closed, the end of its closing line (and
    of the blank lines after it); else 0. A scan of lines, no Markdown parse."""
    first = _FENCE.match(text)
    if not first:
        return 0
    fence = first.group(1)
    offset = text.find("\n") + 1
    if offset == 0:
        return 0
    while offset < len(text):
        end = text.find("\n", offset)
        if end < 0:
            return 0  # the closing line may still grow
        if _closes(text[offset:end], fence):
            end += 1
            while text.startswith("\n", end):
                end += 1
            return end if end < len(text) else 0  # the next block has begun
        offset = end + 1
    return 0


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
        m = _FENCE.match(line)
        if fence:
            if _closes(line, fence):
                fence = ""
            continue
        if m:
            fence = m.group(1)
            continue
        if line.strip() and lines[i + 1].strip() and not line.endswith("  "):
            lines[i] = line + "  "
    return "\n".join(lines)


def code_blocks(text: str) -> list[str]:
    """The raw content of each fenced code block, in order."""
    return [tok.content for tok in _md().parse(text) if tok.type == "fence"]


def _highlight(code: str, lang: str, dark: bool) -> str:
    from pygments import highlight
    from pygments.lexers import get_lexer_by_name, guess_lexer
    from pygments.util import ClassNotFound

    lexer = None
    if lang:
        try:
            lexer = get_lexer_by_name(lang, stripnl=False)
        except ClassNotFound:
            lexer = None
    if lexer is None and len(code) > 40:
        try:
            lexer = guess_lexer(code)
        except ClassNotFound:
            lexer = None
    if lexer is None:
        return html.escape(code)
    return highlight(code, lexer, _formatter(dark))


def render_html(text: str, key: str, dark: bool = False, first_block: int = 0) -> str:
    """One message's Markdown as HTML; ``key`` names the message in the copy links.

    ``first_block`` numbers the code blocks when ``text`` is a later part of a message.
    """
    md = _md()
    tokens = md.parse(text)
    out: list[str] = []
    block = first_block
    bg, fg = code_colours(dark)
    link = "#8ab4f8" if dark else "#0969da"
    # Render the token stream, swapping fences for our own highlighted table cells.
    start = 0
    for i, tok in enumerate(tokens):
        if tok.type != "fence":
            continue
        if i > start:
            out.append(md.renderer.render(tokens[start:i], md.options, {}))
        lang = (tok.info or "").strip().split(" ")[0]
        code = _highlight(tok.content.rstrip("\n"), lang, dark)
        label = html.escape(lang) if lang else "code"
        out.append(
            f'<table width="100%" cellspacing="0" cellpadding="6" style="background:{bg};margin:4px 0">'
            f'<tr><td style="color:#888;font-size:small">{label}&nbsp;&nbsp;'
            f'<a href="copy:{key}:{block}" style="color:{link}">Copy code</a></td></tr>'
            f'<tr><td><pre style="color:{fg};font-family:monospace;margin:0">{code}</pre></td></tr></table>'
        )
        block += 1
        start = i + 1
    if start < len(tokens):
        out.append(md.renderer.render(tokens[start:], md.options, {}))
    return "".join(out)


def warm_up() -> None:
    """Import the lexers and build the parser once, at idle time, so the first reply does not stall."""
    render_html("# w\n\n```python\nx = 1\n```\n\n```js\nlet y = 2;\n```\n\n| a |\n|---|\n| b |\n", "0")
