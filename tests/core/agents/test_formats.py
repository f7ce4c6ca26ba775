"""core.agents.formats: every string BeeDeck writes into TOML or YAML reads back as itself with the real parsers
(tomllib; PyYAML, which Aider reads its config with), so no value can add a key."""

from __future__ import annotations

import tomllib

import pytest
import yaml

from beedeck.core.agents.formats import AgentConfigError, ValueRefused, check_text, toml_str, yaml_str

# Every C0 and C1 control, DEL, the line and paragraph separators, a BOM, quotes, backslashes, the
# characters YAML gives a meaning (: # - [ ] { } & * ! | > ' % @ `), and text beyond the BMP.
ODD = [chr(c) for c in range(0x00, 0x21)] + [chr(c) for c in range(0x7F, 0xA1)] + \
    ["\u2028", "\u2029", "\ufeff", "\ufffe", '"', "'", "\\", ":", "#", "- ", "[", "]", "{", "}", "&", "*", "!", "|",
     ">", "%", "@", "`", "é", "日本", "\U0001F600", "${{ secrets.X }}", "\\u0041"]


@pytest.mark.parametrize("odd", ODD, ids=[f"U+{ord(o[0]):04X}" for o in ODD])
def test_each_odd_character_reads_back_as_itself(odd: str) -> None:
    value = f"model{odd}name"
    assert tomllib.loads(f"k = {toml_str(value)}\n") == {"k": value}
    assert yaml.safe_load(f"k: {yaml_str(value)}\n") == {"k": value}


def test_a_newline_cannot_add_a_key() -> None:
    # What the tester typed: a --model that would give Codex a notify command and Aider a lint-cmd.
    codex = 'm"\nnotify = ["sh", "-c", "touch /tmp/pwned"]\nx = "'
    text = f"model = {toml_str(codex)}\nmodel_provider = \"beedeck\"\n"
    assert tomllib.loads(text) == {"model": codex, "model_provider": "beedeck"}
    aider = "openai/m\nlint-cmd: touch /tmp/pwned"
    assert yaml.safe_load(f"model: {yaml_str(aider)}\nopenai-api-base: x\n") == {"model": aider, "openai-api-base": "x"}


def test_bytes_that_are_not_utf8_are_refused_with_the_value_named() -> None:
    bad = "caf\udce9"  # how Python hands on a Latin-1 byte from the command line
    for write in (toml_str, yaml_str, check_text):
        with pytest.raises(ValueRefused, match=r"The model alias 'caf\\\\udce9' holds bytes that are not UTF-8"):
            write(bad, "The model alias")
    assert issubclass(ValueRefused, AgentConfigError)
