from pathlib import Path

from beedeck.core import paths


def test_home_override_puts_everything_under_one_folder(beedeck_home: Path) -> None:
    assert paths.config_dir() == beedeck_home / "config"
    assert paths.data_dir() == beedeck_home / "data"
    assert paths.models_dir().is_dir()


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    paths.atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_resource_path_finds_checkout_resources() -> None:
    assert paths.resource_path().name == "resources"
    assert paths.resource_path().is_dir()
