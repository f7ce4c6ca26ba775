"""core.agents.jsonc: JSON and OpenCode's JSONC read within bounds and edited in place, the user's comments,
order and indentation kept, every edit parsed again."""

from __future__ import annotations

import json
import re

import pytest

from beedeck.core.agents.jsonc import MAX_DEPTH, Document, JsonError, loads

USERS = """{
  // my editor theme
  "theme": "tokyonight", /* the dark one */
  "provider": {
    "other": {"name": "Other"}, // a second provider
  },
  "keybinds": [1, 2,],
}
"""


def _plain(text: str) -> object:
    """The data, comments and trailing commas dropped (a reference parser for the tests)."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))


def test_jsonc_edits_keep_every_comment_and_the_users_members() -> None:
    doc = Document(USERS, comments=True, what="opencode.json")
    doc.set(("provider", "beedeck"), {"name": "BeeDeck", "models": {"m": {"limit": {"context": 8192}}}})
    doc.set(("model",), "beedeck/m")
    for comment in ("// my editor theme", "/* the dark one */", "// a second provider"):
        assert comment in doc.text
    data = _plain(doc.text)
    assert data == {"theme": "tokyonight", "keybinds": [1, 2], "model": "beedeck/m",
                    "provider": {"other": {"name": "Other"}, "beedeck": {"name": "BeeDeck",
                                                                          "models": {"m": {"limit": {"context": 8192}}}}}}
    assert doc.data == data
    assert '    "beedeck": {\n      "name": "BeeDeck",\n' in doc.text  # at the file's own indentation
    again = Document(doc.text, comments=True, what="x")
    again.set(("provider", "beedeck"), {"name": "BeeDeck", "models": {"m": {"limit": {"context": 8192}}}})
    again.set(("model",), "beedeck/m")
    assert again.text == doc.text, "a second write changes nothing"


def test_a_replaced_value_and_a_deleted_member_leave_the_rest_byte_for_byte() -> None:
    text = '{\n  "env": {\n    "A": "1",\n    "TOKEN": "x",\n    "B": "2"\n  },\n  "helper": "old"\n}\n'
    doc = Document(text, comments=False, what="settings.json")
    doc.set(("env", "A"), "one")
    doc.delete(("env", "TOKEN"))
    doc.delete(("helper",))
    assert doc.text == '{\n  "env": {\n    "A": "one",\n    "B": "2"\n  }\n}\n'
    doc.delete(("absent", "x"))
    doc.set(("env",), {"C": 3})  # a value that was an object, replaced whole
    assert json.loads(doc.text) == {"env": {"C": 3}}


def test_new_files_one_line_files_and_empty_objects() -> None:
    fresh = Document("", comments=False, what="x")
    fresh.set(("env", "K"), "v")
    assert fresh.text == '{\n  "env": {\n    "K": "v"\n  }\n}\n'
    line = Document('{"a":1,"env":{}}', comments=False, what="x")
    line.set(("env", "K"), "v")
    line.set(("b",), [1])
    assert line.text == '{"a":1,"env":{"K": "v"},\n  "b": [\n    1\n  ]\n}'  # the file's own line kept whole
    short = Document('{"theme": "mine"}\n', comments=False, what="x")
    short.set(("model",), "m")
    assert short.text == '{"theme": "mine",\n  "model": "m"\n}\n'
    empty = Document('{\n  "env": {}\n}\n', comments=False, what="x")
    empty.set(("env", "K"), "v")
    assert empty.text == '{\n  "env": {\n    "K": "v"\n  }\n}\n'
    tabs = Document('{\n\t"a": 1\n}\n', comments=False, what="x")
    tabs.set(("b",), {"c": 1})
    assert tabs.text == '{\n\t"a": 1,\n\t"b": {\n\t\t"c": 1\n\t}\n}\n'


def test_a_key_given_twice_is_edited_where_json_reads_it() -> None:
    doc = Document('{"model": "a", "model": "b"}', comments=False, what="x")
    doc.set(("model",), "c")
    assert doc.data == {"model": "c"} and doc.text == '{"model": "a", "model": "c"}'
    doc.delete(("model",))
    assert doc.data == {}


@pytest.mark.parametrize(("text", "says"), [
    ("{ not json", r"line 1: unexpected"),
    ('{"a": 1} // note', r"a comment, which plain JSON does not allow"),
    ('{"a": 1,}', r"a comma before '}'"),
    ('{"a": NaN}', r"unexpected 'NaN"),
    ('{"a": 01}', r"expected ',' or '}'"),
    ("[1, 2]", r"holds a JSON array, not an object"),
    ('{"a": 1} {"b": 2}', r"more after the end"),
    ('{"a": "x\ny"}', r"unexpected"),
    ('{"a": 1', r"ends early"),
])
def test_plain_json_is_refused_with_where_and_why(text: str, says: str) -> None:
    with pytest.raises(JsonError, match=says):
        loads(text, comments=False, what="settings.json")


def test_jsonc_allows_comments_and_trailing_commas_but_not_a_file_of_comments() -> None:
    assert loads(USERS, comments=True, what="x")["keybinds"] == [1, 2]
    with pytest.raises(JsonError, match="holds only comments"):
        loads("// nothing here\n", comments=True, what="opencode.json")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 200_000])
def test_nesting_past_the_limit_is_a_message_not_a_recursion_error(depth: int) -> None:
    for text in ('{"a":' * depth + "1" + "}" * depth, '{"a":' + "[" * depth + "]" * depth + "}"):
        with pytest.raises(JsonError, match=rf"nests more than {MAX_DEPTH} levels deep"):
            loads(text, comments=True, what="opencode.json")
    ok = '{"a":' * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1)
    assert loads(ok, comments=False, what="x")
