"""JSON and JSONC config files, read within bounds and edited in place.

OpenCode reads ``opencode.json`` as JSONC (``//`` and ``/* */`` comments, trailing commas); Claude Code's
``settings.json`` is plain JSON. :class:`Document` parses either (nested at most :data:`MAX_DEPTH` levels:
a file nested 200,000 deep is a message, not a ``RecursionError``), and :meth:`Document.set` /
:meth:`Document.delete` change one member at a time by editing the text itself, so everything else in the
file (the user's comments, key order, indentation) is kept byte for byte. Every edit is parsed again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from beedeck.core.agents.formats import AgentConfigError

MAX_DEPTH = 64  # a config nests 4-6 levels; json's own parser recurses until RecursionError

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*.*?\*/)
  | (?P<str>"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")
  | (?P<punct>[{}\[\],:])
  | (?P<lit>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)
""", re.VERBOSE | re.DOTALL)


class JsonError(AgentConfigError):
    """The text is not JSON (or JSONC) BeeDeck can read; the message says where."""


@dataclass
class Node:
    """A value: ``kind`` is object, array or scalar; ``start``/``end`` its span in the text."""

    kind: str
    start: int
    end: int
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)
    value: Any = None


@dataclass
class Member:
    key: str
    key_start: int
    node: Node
    comma: int | None  # where the comma after the value is (None: the last member, no trailing comma)


@dataclass(frozen=True)
class _Tok:
    kind: str
    start: int
    end: int
    text: str


def _too_deep(what: str) -> JsonError:
    return JsonError(f"{what} nests more than {MAX_DEPTH} levels deep: it is not a config BeeDeck can read. Move it "
                     "aside, then write again.")


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


class _Parser:
    def __init__(self, text: str, comments: bool, what: str) -> None:
        self.text, self.what, self.toks, self.i = text, what, [], 0
        pos = depth = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise self.error(pos, f"unexpected {text[pos:pos + 12]!r}")
            kind = m.lastgroup or ""
            if kind in ("line", "block") and not comments:
                raise self.error(pos, "a comment, which plain JSON does not allow (this program reads plain JSON)")
            if kind in ("str", "punct", "lit"):
                self.toks.append(_Tok(kind, m.start(), m.end(), m.group()))
                depth += 1 if m.group() in "{[" else -1 if m.group() in "}]" else 0
                if depth > MAX_DEPTH:  # said before the rest is read
                    raise _too_deep(what)
            pos = m.end()

    def error(self, pos: int, msg: str) -> JsonError:
        return JsonError(f"{self.what} is not valid JSON (line {_line_of(self.text, pos)}: {msg})")

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, want: str | None = None) -> _Tok:
        tok = self.peek()
        if tok is None:
            raise self.error(len(self.text), "it ends early")
        if want is not None and tok.text != want:
            raise self.error(tok.start, f"expected {want!r}, found {tok.text[:12]!r}")
        self.i += 1
        return tok

    def value(self, depth: int, comments: bool) -> Node:
        if depth > MAX_DEPTH:
            raise _too_deep(self.what)
        tok = self.take()
        if tok.kind in ("str", "lit"):
            return Node("scalar", tok.start, tok.end, value=json.loads(tok.text))
        if tok.text not in "{[":
            raise self.error(tok.start, f"unexpected {tok.text!r}")
        closing = "}" if tok.text == "{" else "]"
        node = Node("object" if closing == "}" else "array", tok.start, tok.end)
        while True:
            nxt = self.peek()
            if nxt is not None and nxt.text == closing:
                self.take()
                break
            key: _Tok | None = None
            if closing == "}":
                key = self.take()
                if key.kind != "str":
                    raise self.error(key.start, "a member name must be a string in double quotes")
                self.take(":")
            child = self.value(depth + 1, comments)
            sep = self.take()
            comma = sep.start if sep.text == "," else None
            if key is not None:
                node.members.append(Member(json.loads(key.text), key.start, child, comma))
            else:
                node.items.append(child)
            if sep.text == closing:
                break
            if sep.text != ",":
                raise self.error(sep.start, f"expected ',' or {closing!r}")
            after = self.peek()
            if after is not None and after.text == closing and not comments:
                raise self.error(after.start, f"a comma before {closing!r}")
        node.end = self.toks[self.i - 1].end
        return node


def _data(node: Node) -> Any:
    if node.kind == "object":
        return {m.key: _data(m.node) for m in node.members}
    if node.kind == "array":
        return [_data(n) for n in node.items]
    return node.value


class Document:
    """A JSON/JSONC text and its parse. ``comments``: the format allows comments and trailing commas."""

    def __init__(self, text: str, *, comments: bool, what: str) -> None:
        self.comments, self.what = comments, what
        self.text = text if text.strip() else "{\n}\n"  # a new file: one member a line
        self._parse()

    def _parse(self) -> None:
        p = _Parser(self.text, self.comments, self.what)
        if not p.toks:
            raise JsonError(f"{self.what} holds only comments: put {{}} in it or move it aside.")
        self.root = p.value(0, self.comments)
        if p.peek() is not None:
            raise p.error(p.toks[p.i].start, "more after the end of the value")
        if self.root.kind != "object":
            raise JsonError(f"{self.what} holds a JSON {self.root.kind}, not an object: move it aside first.")
        self.data: dict[str, Any] = _data(self.root)

    # ---- layout ----

    def _line_start(self, pos: int) -> int:
        return self.text.rfind("\n", 0, pos) + 1

    def _indent_before(self, pos: int) -> str | None:
        """The whitespace that starts ``pos``'s line, when only whitespace comes before ``pos`` there."""
        before = self.text[self._line_start(pos):pos]
        return before if not before.strip() else None

    def _unit(self) -> str:
        first = self.root.members[0] if self.root.members else None
        found = self._indent_before(first.key_start) if first else None
        return found or "  "

    def _render(self, value: Any, indent: str | None) -> str:
        if indent is None:
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        return json.dumps(value, ensure_ascii=False, indent=self._unit()).replace("\n", "\n" + indent)

    def _edit(self, start: int, end: int, new: str) -> None:
        self.text = self.text[:start] + new + self.text[end:]

    # ---- edits ----

    def _find(self, node: Node, key: str) -> Member | None:
        return next((m for m in reversed(node.members) if m.key == key), None)  # the last one wins, as in json

    def set(self, path: tuple[str, ...], value: Any) -> None:
        """Make ``path`` (keys from the top) hold ``value``, creating objects on the way."""
        node = self.root
        for i, key in enumerate(path):
            member = self._find(node, key)
            rest = path[i + 1:]
            nested: Any = value
            for k in reversed(rest):
                nested = {k: nested}
            if member is None:
                self._insert(node, key, nested)
                break
            if not rest or member.node.kind != "object":
                self._edit(member.node.start, member.node.end,
                           self._render(nested, self._indent_before(member.key_start)))
                break
            node = member.node
        self._parse()

    def delete(self, path: tuple[str, ...]) -> None:
        """Remove the member at ``path`` (every duplicate of it); nothing when it is not there."""
        while True:
            node: Node | None = self.root
            for key in path[:-1]:
                found = self._find(node, key) if node is not None else None
                node = found.node if found is not None and found.node.kind == "object" else None
            member = self._find(node, path[-1]) if node is not None else None
            if node is None or member is None:
                return
            self._remove(node, member)
            self._parse()

    def _insert(self, obj: Node, key: str, value: Any) -> None:
        if obj.members:
            last = obj.members[-1]
            indent = self._indent_before(obj.members[0].key_start)
            after = last.comma + 1 if last.comma is not None else last.node.end
            if indent is None and obj is self.root:  # a file on one line: BeeDeck's members one a line below it
                indent = self._unit()
                if "\n" not in self.text[after:obj.end - 1]:
                    self._edit(obj.end - 1, obj.end - 1, "\n")
            text = f"{json.dumps(key, ensure_ascii=False)}: {self._render(value, indent)}"
            if indent is None:
                self._edit(after, after, (" " if last.comma is not None else ", ") + text)
                return
            line_end = self.text.find("\n", after)
            line_end = len(self.text) if line_end < 0 else line_end
            rest = self.text[after:line_end].strip()
            at = line_end if not rest or rest.startswith("//") else after
            self._edit(at, at, "\n" + indent + text)
            if last.comma is None:
                self._edit(last.node.end, last.node.end, ",")
            return
        if obj is not self.root and "\n" not in self.text[self.root.start:self.root.end]:
            # an empty object in a file on one line ({"a": 1, "env": {}}) stays on that line
            self._edit(obj.start + 1, obj.start + 1, f"{json.dumps(key, ensure_ascii=False)}: {self._render(value, None)}")
            return
        outer = self.text[self._line_start(obj.start):obj.start]
        outer = outer[:len(outer) - len(outer.lstrip())]
        indent = outer + self._unit()
        text = f"{json.dumps(key, ensure_ascii=False)}: {self._render(value, indent)}"
        inner = self.text[obj.start + 1:obj.end - 1]
        if "\n" not in inner:
            self._edit(obj.end - 1, obj.end - 1, "\n" + outer)
        self._edit(obj.start + 1, obj.start + 1, "\n" + indent + text)

    def _remove(self, obj: Node, member: Member) -> None:
        start, end = member.key_start, (member.comma + 1 if member.comma is not None else member.node.end)
        at = obj.members.index(member)
        if member.comma is None and at > 0:
            prev = obj.members[at - 1]
            start = prev.comma if prev.comma is not None else start
        line_end = self.text.find("\n", end)
        line_end = len(self.text) if line_end < 0 else line_end
        if self._indent_before(start) is not None and not self.text[end:line_end].strip() and line_end < len(self.text):
            start, end = self._line_start(start), line_end + 1
        self._edit(start, end, "")


def loads(text: str, *, comments: bool, what: str) -> dict[str, Any]:
    """The object in ``text`` (bounded as :class:`Document`); raises JsonError with a message."""
    return Document(text, comments=comments, what=what).data
