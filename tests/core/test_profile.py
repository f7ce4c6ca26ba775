"""profile.json from another version: a newer BeeDeck's profile is said as such and left alone, unknown
fields survive a save, and only a file that is not a profile at all is kept aside as damaged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beedeck.core import profile as profile_mod
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode


def _write(data: dict[str, object]) -> tuple[Path, str]:
    path = profile_mod.profile_path()
    text = json.dumps(data, indent=1)
    path.write_text(text)
    return path, text


def _local(**settings: object) -> dict[str, object]:
    return {"engine": "/opt/bee/llama-server", "label": "Bee", "settings": {"target": "/m/q.gguf", **settings}}


@pytest.mark.parametrize("data, says", [
    (_local(spec_mode="eagle9"), "a speculation mode this BeeDeck does not know: 'eagle9'"),
    ({**_local(), "schema_version": profile_mod.SCHEMA_VERSION + 1}, "format version 2"),
    ({"kind": "cluster", "url": "http://x:1", "label": "pods"}, "a kind of profile this BeeDeck does not know"),
], ids=["newer-spec-mode", "newer-schema", "newer-kind"])
def test_a_profile_of_a_newer_beedeck_is_said_as_such_left_in_place_and_not_overwritten(
        data: dict[str, object], says: str) -> None:
    path, text = _write(data)
    with pytest.raises(profile_mod.NewerProfileError) as exc:
        profile_mod.load_saved_profile()
    assert "written by a newer BeeDeck" in str(exc.value) and says in str(exc.value)
    assert "kept as" not in str(exc.value) and "Choose the engine" not in str(exc.value)  # not damage
    assert path.read_text() == text and not list(path.parent.glob("profile.json.corrupt-*"))
    mine = profile_mod.Profile("/opt/old/llama-server", LaunchSettings(target="/m/old.gguf"), "older")
    with pytest.raises(profile_mod.NewerProfileError, match="applies to this session only"):
        profile_mod.save_profile(mine)  # Settings → Save: the newer file stays as it was
    assert path.read_text() == text


def test_fields_this_beedeck_does_not_know_survive_a_save() -> None:
    path, _ = _write({**_local(spec_mode="dflash", draft="/m/d.gguf", future_knob=3), "future_top": {"a": [1]},
                      "schema_version": 1})
    loaded = profile_mod.load_saved_profile()
    assert loaded is not None and loaded.settings.spec_mode is Mode.DFLASH
    loaded.settings.ctx_size = 8192  # Settings → Save with one change
    profile_mod.save_profile(loaded)
    saved = json.loads(path.read_text())
    assert saved["future_top"] == {"a": [1]} and saved["settings"]["future_knob"] == 3
    assert saved["settings"]["ctx_size"] == 8192 and saved["schema_version"] == profile_mod.SCHEMA_VERSION


def test_a_profile_without_a_version_is_the_first_one_and_gets_its_version_on_save() -> None:
    path, _ = _write(_local())  # every profile.json written before the version existed
    loaded = profile_mod.load_saved_profile()
    assert loaded is not None and loaded.engine == "/opt/bee/llama-server"
    profile_mod.save_profile(loaded)
    assert json.loads(path.read_text())["schema_version"] == 1


@pytest.mark.parametrize("data", [{**_local(), "schema_version": "two"}, _local(spec_mode=7), _local(ctx_size=-5)],
                         ids=["version-not-a-number", "mode-not-text", "out-of-range"])
def test_only_real_damage_is_kept_aside(data: dict[str, object]) -> None:
    path, text = _write(data)
    with pytest.raises(profile_mod.ProfileError) as exc:
        profile_mod.load_saved_profile()
    assert not isinstance(exc.value, profile_mod.NewerProfileError) and "kept as" in str(exc.value)
    (kept,) = path.parent.glob("profile.json.corrupt-*")
    assert kept.read_text() == text and not path.exists()


def test_the_engine_is_named_with_its_build() -> None:
    """Issue 37: the starter's engine was "mainline 0.6.0-dev" (its build number came out 0); built with its number,
    its name says which build it is."""
    from beedeck.core.engine.help_text import parse_version

    def caps(version_text: str) -> EngineCaps:
        version, build, commit, _built_with = parse_version(version_text)
        return EngineCaps("/opt/ml/llama-server", Generation.MAINLINE, version=version, build=build, commit=commit)

    profile = profile_mod.Profile("/opt/ml/llama-server", LaunchSettings(target="/m/q.gguf"), "Starter engine")
    built = caps("version: 0.6.0-dev (build 11434, commit unknown)\n")
    assert profile_mod.engine_display_name(profile, built) == "Starter engine · mainline 0.6.0-dev (b11434)"
    older = caps("version: 8123 (abcdef1)\n")
    assert profile_mod.engine_display_name(profile, older) == "Starter engine · mainline 8123"  # the build is the version
    unbuilt = caps("version: 0.6.0-dev (build 0, commit unknown)\n")
    assert profile_mod.engine_display_name(profile, unbuilt) == "Starter engine · mainline 0.6.0-dev"
