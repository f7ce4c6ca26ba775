"""How one chat message looks: its header links, stats line and thinking section, as HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from PySide6.QtGui import QGuiApplication, QPalette

from beedeck.core.chat.reply_facts import ReplyFacts

DIM = "#888"  # thinking text and stats lines: readable on light and dark palettes, clearly secondary


@dataclass
class MessageView:
    """What the view shows for one message."""

    id: int
    role: str
    content: str
    facts: ReplyFacts = field(default_factory=ReplyFacts)  # a reply's (empty for the user's messages)
    complete: bool = True
    reasoning: str = ""
    version: tuple[int, int] | None = None  # (1-based position, count) when the turn has other versions


def is_dark(palette: QPalette | None = None) -> bool:
    pal = palette or QGuiApplication.palette()
    return pal.color(QPalette.ColorRole.Base).lightness() < 128


def thinking_summary(reasoning: str, seconds: float | None, expanded: bool) -> str:
    """The folded line of a thinking section, e.g. "Thought for 12.3 s · 850 chars — show"."""
    took = f"Thought for {seconds:.1f} s" if seconds is not None else "Thought"
    return f"{took} · {len(reasoning):,} chars — {'hide' if expanded else 'show'}"


def empty_html(send_keys: str = "Enter") -> str:
    return (
        '<p style="color:#888;margin-top:40px" align="center">Ask anything. '
        f"{html.escape(send_keys)} sends, Esc stops, Ctrl+N starts a new chat.</p>"
    )


def version_html(m: MessageView) -> str:
    """"◀ 2/3 ▶" for a turn with several versions (regenerated, or edited and resent); links
    ``version:<id>:-1`` / ``version:<id>:1``, a dimmed arrow at either end."""
    if m.version is None or m.version[1] < 2:
        return ""
    pos, count = m.version

    def arrow(symbol: str, step: int, enabled: bool, title: str) -> str:
        if not enabled:
            return f'<span style="color:{DIM}">{symbol}</span>'
        return f'<a href="version:{m.id}:{step}" title="{title}">{symbol}</a>'

    older = arrow("◀", -1, pos > 1, "Show the earlier version")
    newer = arrow("▶", 1, pos < count, "Show the later version")
    return f"{older}&nbsp;{pos}/{count}&nbsp;{newer}"


def header_html(m: MessageView) -> str:
    who = {"user": "You", "assistant": "Assistant"}.get(m.role, m.role.title())
    links = [f'<a href="copy-msg:{m.id}">Copy</a>']
    if m.role == "user":
        links.append(f'<a href="edit:{m.id}">Edit</a>')
    elif m.role == "assistant":
        links.append(f'<a href="regenerate:{m.id}">Regenerate</a>')
    versions = version_html(m)
    if versions:
        links.append(versions)
    return (
        f'<p style="margin-top:14px;margin-bottom:2px"><b>{who}</b>&nbsp;&nbsp;'
        f'<span style="font-size:small">{"&nbsp;&nbsp;".join(links)}</span></p>'
    )


def stats_html(m: MessageView) -> str:
    facts = m.facts
    line = facts.summary()
    if not m.complete and not facts.cancelled:
        line = (line + " · " if line else "") + "interrupted"
    return f'<p style="color:{DIM};font-size:small;margin-top:2px">{html.escape(line)}</p>' if line else ""


def thinking_html(m: MessageView, seconds: float | None, expanded: bool) -> str:
    """The folded (or expanded) thinking section of a message; empty without thinking."""
    if not m.reasoning:
        return ""
    line = html.escape(thinking_summary(m.reasoning, seconds, expanded))
    out = (
        f'<p style="margin-top:2px;margin-bottom:4px"><a href="think:{m.id}" '
        f'style="color:{DIM};text-decoration:none">{"▾" if expanded else "▸"} <b>Thinking</b> · {line}</a></p>'
    )
    if expanded:
        body = html.escape(m.reasoning.strip()).replace("\n", "<br>")
        out += f'<p style="color:{DIM};margin-left:14px;margin-bottom:6px">{body}</p>'
    return out
