"""App settings: defaults, round trip, migrations, corrupt files kept aside, secrets never stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beedeck.core import settings as st
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode


def test_missing_file_gives_defaults() -> None:
    s = st.load_settings()
    assert s == st.AppSettings()
    assert not s.first_run_done and s.goal == "quality"


def test_round_trip_in_config_dir(beedeck_home: Path) -> None:
    profile = LaunchSettings(target="/m/t.gguf", draft="/m/d.gguf", spec_mode=Mode.DFLASH, ctx_size=65536)
    s = st.AppSettings(first_run_done=True, last_profile=profile.to_dict(), goal="speed", theme="dark",
                       default_engine_id="bee-a-1", download_dir="/data/models")
    path = st.save_settings(s)
    assert path == beedeck_home / "config" / "settings.json"
    assert json.loads(path.read_text())["schema_version"] == st.SCHEMA_VERSION
    back = st.load_settings()
    assert back == s
    assert LaunchSettings.from_dict(back.last_profile or {}) == profile
    assert back.models_folder() == Path("/data/models")


def test_api_key_never_written() -> None:
    data = LaunchSettings(target="t.gguf", api_key="sk-secret-123").to_dict()
    data["api_key"] = "sk-secret-123"  # even if a caller slips one in
    path = st.save_settings(st.AppSettings(last_profile=data))
    assert "sk-secret-123" not in path.read_text()


def test_v1_file_is_migrated() -> None:
    path = st.settings_path()
    path.write_text(json.dumps({"schema_version": 1, "profile": {"target": "a.gguf"},
                                "recommend_goal": "context", "first_run_done": True}))
    s = st.load_settings()
    assert s.last_profile == {"target": "a.gguf"} and s.goal == "context" and s.first_run_done


def test_a_file_of_a_newer_beedeck_is_left_as_it_is_and_never_overwritten() -> None:
    """A downgrade (an older .deb over a newer one) must not cost the newer version its settings."""
    path = st.settings_path()
    content = json.dumps({"schema_version": st.SCHEMA_VERSION + 1, "goal": "context", "future": [1]})
    path.write_text(content)
    s, notice = st.load_settings_checked()
    assert s == st.AppSettings() and "written by a newer BeeDeck" in notice and "saves no change" in notice
    s.goal = "context"
    with pytest.raises(st.NewerSettingsError, match="newer BeeDeck .* is left as it is"):  # said, for the window
        st.save_settings(s)
    assert path.read_text() == content and not list(path.parent.glob("settings.json.corrupt-*"))
    path.unlink()
    st.save_settings(s)  # with the newer file gone, saving works again
    assert json.loads(path.read_text())["goal"] == "context"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"schema_version": "x"})])
def test_corrupt_file_is_kept_aside_and_defaults_used(content: str) -> None:
    path = st.settings_path()
    path.write_text(content)
    s = st.load_settings()
    assert s == st.AppSettings()
    assert not path.exists()
    kept = list(path.parent.glob("settings.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == content


def test_two_corrupt_files_in_the_same_second_both_kept() -> None:
    path = st.settings_path()
    for text in ("{bad1", "{bad2"):
        path.write_text(text)
        st.load_settings()
    kept = sorted(p.read_text() for p in path.parent.glob("settings.json.corrupt-*"))
    assert kept == ["{bad1", "{bad2"]


def test_wrong_types_and_unknown_values_fall_back_per_field() -> None:
    st.settings_path().write_text(json.dumps({
        "schema_version": st.SCHEMA_VERSION, "first_run_done": "yes", "goal": "fastest",
        "theme": "dark", "last_profile": [1], "unknown_key": 5,
    }))
    s = st.load_settings()
    assert s.first_run_done is False and s.goal == "quality" and s.theme == "dark" and s.last_profile is None
    assert st.AppSettings(goal="fastest").check() == [
        "goal 'fastest' is unknown: use one of quality, speed, context."]


def test_a_field_this_beedeck_does_not_know_survives_the_next_save() -> None:
    """A newer BeeDeck of the same schema added a field: a theme change here must not drop it."""
    path = st.settings_path()
    path.write_text(json.dumps({"schema_version": st.SCHEMA_VERSION, "theme": "dark", "future": {"x": [1, 2]}}))
    s, notice = st.load_settings_checked()
    assert s.theme == "dark" and notice == ""
    s.theme = "light"
    st.save_settings(s)
    saved = json.loads(path.read_text())
    assert saved["future"] == {"x": [1, 2]} and saved["theme"] == "light"


def test_an_older_files_renamed_fields_are_migrated_not_kept_as_unknown() -> None:
    path = st.settings_path()
    path.write_text(json.dumps({"schema_version": 1, "recommend_goal": "context", "old_extra": 1}))
    s = st.load_settings()
    st.save_settings(s)
    saved = json.loads(path.read_text())
    assert saved["goal"] == "context" and "recommend_goal" not in saved and saved["old_extra"] == 1
