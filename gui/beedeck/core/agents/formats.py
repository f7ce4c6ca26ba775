"""Values as each config format writes them, so that no value can add a key.

A model alias or a host comes from the user (``--model``, ``--host``) or from a server's answer: a newline
in it, written bare into TOML or YAML, would start a line of its own (Codex's ``notify`` command, Aider's
``lint-cmd``). Every string BeeDeck writes into a TOML or YAML file goes through :func:`toml_str` or
:func:`yaml_str` (a double-quoted scalar with every character outside the plainly printable ones escaped);
JSON goes through :mod:`json`. ``tests/core/agents/test_formats.py`` reads each back with the real parsers
(``tomllib``, PyYAML: what Aider reads its config with) for every control and odd character.
"""

from __future__ import annotations

_TOML_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
_YAML_ESCAPES = {"\0": "\\0", "\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
                 "\r": "\\r", "\x1b": "\\e", '"': '\\"', "\\": "\\\\"}


class AgentConfigError(ValueError):
    """A client's config file cannot be read, merged or written: the message names it and the fix."""


class ValueRefused(AgentConfigError):
    """A value no config file can hold (a lone surrogate: bytes that were not UTF-8)."""


def _check(value: str, what: str) -> None:
    bad = next((c for c in value if "\ud800" <= c <= "\udfff"), None)
    if bad is not None:
        raise ValueRefused(f"{what} {value.encode('utf-8', 'backslashreplace').decode('ascii')!r} holds bytes that "
                           "are not UTF-8 text: give it in UTF-8.")


def toml_str(value: str, what: str = "the value") -> str:
    """``value`` as a TOML basic string: control characters and DEL escaped, the rest as UTF-8."""
    _check(value, what)
    out = []
    for c in value:
        if c in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[c])
        elif c < " " or c == "\x7f":
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _yaml_printable(c: str) -> bool:
    """YAML 1.1/1.2's printable set, less the byte-order mark and the line breaks it folds (NEL, LS, PS)."""
    n = ord(c)
    return (0x20 <= n <= 0x7E or 0xA0 <= n <= 0xD7FF or 0xE000 <= n <= 0xFFFD or n >= 0x10000) and \
        n not in (0xFEFF, 0x2028, 0x2029)


def yaml_str(value: str, what: str = "the value") -> str:
    """``value`` as a YAML double-quoted scalar: every character outside the printable set escaped."""
    _check(value, what)
    out = []
    for c in value:
        if c in _YAML_ESCAPES:
            out.append(_YAML_ESCAPES[c])
        elif _yaml_printable(c):
            out.append(c)
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02X}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(f"\\U{ord(c):08X}")
    return '"' + "".join(out) + '"'


def check_text(value: str, what: str) -> str:
    """``value`` when it can be written into a JSON config (raises ValueRefused for non-UTF-8 bytes)."""
    _check(value, what)
    return value
