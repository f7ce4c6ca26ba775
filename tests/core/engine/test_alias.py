"""The server's model alias: short, stable, never a path."""

from __future__ import annotations

import pytest

from beedeck.core.engine.alias import MAX_LEN, model_alias
from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from tests.fixtures.engines import MAINLINE, help_stdout


@pytest.mark.parametrize(
    ("target", "alias"),
    [
        ("/home/me/.local/share/beedeck/models/starter/SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2-135m-instruct.q4_1"),
        ("C:\\Users\\me\\Qwen3.6-27B-Q4_K_M-00001-of-00003.gguf", "qwen3.6-27b-q4_k_m"),
        ("/m/My Model (v2)!.GGUF", "my-model-v2"),
        ("/m/.gguf", "model"),
        ("/m/" + "x" * 100 + ".gguf", "x" * MAX_LEN),
    ],
)
def test_alias_is_the_file_name_made_safe(target: str, alias: str) -> None:
    assert model_alias(target) == alias


def test_alias_never_holds_a_folder() -> None:
    name = model_alias("/home/someone/models/a.gguf")
    assert "/" not in name and "home" not in name and "someone" not in name


def test_build_argv_names_the_model_by_its_alias() -> None:
    caps = caps_from_texts("ml", "", help_stdout(MAINLINE))
    argv = build_argv(LaunchSettings(target="/home/me/m/Gemma-3-270M.Q8_0.gguf"), caps).argv
    assert argv[:4] == ["-m", "/home/me/m/Gemma-3-270M.Q8_0.gguf", "--alias", "gemma-3-270m.q8_0"]  # no speculation


def test_an_engine_without_alias_drops_it_with_a_note() -> None:
    bare = EngineCaps(path="x", generation=Generation.MAINLINE, flags=frozenset({"-m", "--port", "--host"}))
    plan = build_argv(LaunchSettings(target="/m/t.gguf"), bare)
    assert "--alias" not in plan.argv and any(n.setting == "alias" for n in plan.notes)
