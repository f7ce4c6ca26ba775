"""Text from outside (a model's ``general.name``, a tensor name, a server's answer) made safe to show.

A GGUF header or a server can hold ANSI escapes, BEL, backspaces or newlines: printed raw, they recolour
or clear the terminal, ring it, or forge a line of an error message ("error: ..." that BeeDeck never
wrote). :func:`printable` shows every such character as a visible escape instead (``\\x1b``, ``\\n``), so
the text is still recognisable and nothing in it acts on the terminal. :class:`TerminalGuard` wraps a
stream for the CLI as a last line of defence: whatever reaches it loses its control characters but the
newline, tab and carriage return BeeDeck's own output uses.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

# C0 controls, DEL, C1 controls (0x80-0x9f: 0x9b is a one-byte CSI), and the Unicode line and
# paragraph separators and bidirectional overrides, which reorder or break what a terminal shows.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_STREAM = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # keeps \t \n \r


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (
        f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def printable(text: Any, limit: int | None = 200) -> str:
    """``text`` with every control character shown as an escape, cut to ``limit`` characters (None: whole)."""
    out = _UNSAFE.sub(_escape, str(text))
    if limit is not None and len(out) > limit:
        out = out[: limit - 1] + "…"
    return out


class TerminalGuard:
    """A text stream that passes on everything but control characters (newline, tab and carriage
    return excepted), shown as escapes: the CLI's stdout and stderr go through one of these."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_UNSAFE_IN_STREAM.sub(_escape, text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, buffer ...
        return getattr(self._stream, name)
