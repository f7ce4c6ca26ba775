import io

import pytest

from beedeck.core.printable import TerminalGuard, printable


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("ring\x07 back\x08space", "ring\\x07 back\\x08space"),
    ("one\nerror: forged\r", "one\\nerror: forged\\r"),
    ("csi\x9b2J del\x7f", "csi\\x9b2J del\\x7f"),
    ("rtl\u202eevil\u2028line", "rtl\\u202eevil\\u2028line"),
    ("Qwen3-8B · Q4_K_M ✓", "Qwen3-8B · Q4_K_M ✓"),
])
def test_printable_shows_every_control_character_as_an_escape(raw: str, shown: str) -> None:
    assert printable(raw) == shown


def test_printable_cuts_long_text_and_takes_any_value() -> None:
    assert printable("x" * 500, 10) == "x" * 9 + "…"
    assert printable(["a", 1]) == "['a', 1]"


def test_the_terminal_guard_keeps_newlines_tabs_and_carriage_returns_only() -> None:
    out = io.StringIO()
    guard = TerminalGuard(out)
    print("bar\r\tok\x1b[2J\x07", file=guard)  # type: ignore[arg-type]
    assert out.getvalue() == "bar\r\tok\\x1b[2J\\x07\n"
    assert guard.isatty() is False
