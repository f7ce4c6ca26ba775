import hashlib
from pathlib import Path

import pytest

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


def test_sha256_file_hashes_the_whole_file(tmp_path: Path) -> None:
    data = b"bee" * 500_000  # more than one 1 MiB block
    target = tmp_path / "blob.bin"
    target.write_bytes(data)
    assert paths.sha256_file(target) == hashlib.sha256(data).hexdigest()


def test_exclusive_lock_makes_its_folder_and_can_be_taken_again(tmp_path: Path) -> None:
    lock = tmp_path / "cache" / ".lock"
    with paths.exclusive_lock(lock):
        assert lock.is_file()
    with paths.exclusive_lock(lock):  # released on leaving the block
        pass


def test_safe_join_keeps_plain_names_and_folders_inside_the_root(tmp_path: Path) -> None:
    assert paths.safe_join(tmp_path, "snapshots", "abc123", "sub/m.gguf") == tmp_path / "snapshots/abc123/sub/m.gguf"


@pytest.mark.parametrize("part", ["../x", "a/../../x", "/etc/passwd", "", ".", "a//b", "a\\b", "a\0b", "refs/.."])
def test_safe_join_refuses_names_that_could_leave_the_root(tmp_path: Path, part: str) -> None:
    with pytest.raises(ValueError, match="is not a plain relative name"):
        paths.safe_join(tmp_path, "blobs", part)


def test_safe_join_refuses_a_link_on_disk_that_leads_out(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    (root / "snapshots").mkdir(parents=True)
    (root / "snapshots" / "c0ffee").symlink_to(tmp_path)  # planted earlier, pointing outside
    with pytest.raises(ValueError, match="leads outside"):
        paths.safe_join(root, "snapshots", "c0ffee", "m.gguf")
    (root / "loop").symlink_to(root / "loop")
    with pytest.raises(ValueError, match="leads outside"):
        paths.safe_join(root, "loop", "m.gguf")


def test_open_regular_refuses_fifos_devices_folders_and_oversized_files_without_blocking(tmp_path: Path) -> None:
    import os

    import pytest

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # no writer: a plain open() would block for ever
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b"{}" + b" " * 100)
    for path, kind in ((fifo, "a FIFO (named pipe)"), (link, "a character device"), (tmp_path, "a folder")):
        with pytest.raises(paths.NotARegularFileError, match="not a regular file") as info:
            paths.open_regular(path)
        assert info.value.kind == kind
    with pytest.raises(paths.NotARegularFileError, match="102 bytes, more than the 50"):
        paths.read_regular_text(big, 50)
    assert paths.read_regular_text(big, 200).startswith("{}")
