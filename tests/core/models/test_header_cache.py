"""The model files' headers as the mode switch needs them: nothing is touched until the caller runs the
read (off its GUI thread), a file is read again only when it changed, an unreadable one counts as unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.models import header_cache
from beedeck.core.models.gguf import reader as gguf
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.header_cache import HeaderCache
from tests.fixtures import meta_gguf as mg


def _mtp_target(tmp_path: Path) -> Path:
    return mg.tiny_model(tmp_path / "qwen-mtp.gguf", arch="qwen35", n_embd=128, extra={"qwen35.nextn_predict_layers": 1})


def test_headers_are_read_when_asked_and_again_only_for_a_new_version(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[str] = []

    def inspect(path: str) -> ModelInfo:
        read.append(path)
        return gguf.inspect(path)

    cache = HeaderCache(inspect)
    target = _mtp_target(tmp_path)
    profile = LaunchSettings(target=str(target))
    with monkeypatch.context() as m:  # choosing what to read touches no file: even a stat can hang on a mount
        m.setattr(header_cache.os, "stat", lambda *_a: pytest.fail("a file was looked at"))
        paths = cache.to_read(profile)
        job = cache.reader(str(target))
    assert paths == [str(target)] and cache.to_read(profile) == []  # one read at a time per file
    assert cache.facts(profile).mtp_layers is None  # not read yet
    assert cache.store(str(target), job()) is True
    assert read == [str(target)] and cache.facts(profile).mtp_layers == 1
    assert cache.facts(profile).target_name == "qwen-mtp.gguf"
    cache.to_read(profile)
    assert cache.store(str(target), cache.reader(str(target))()) is False  # same version: checked, not read again
    assert read == [str(target)]
    target.write_bytes(target.read_bytes() + b"\0" * 32)  # a new version of the file is read again
    cache.to_read(profile)
    cache.store(str(target), cache.reader(str(target))())
    assert read == [str(target)] * 2


def test_a_missing_or_unreadable_file_counts_as_unread(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"GGUF not really")
    cache = HeaderCache()
    profile = LaunchSettings(target=str(bad), draft=str(tmp_path / "gone.gguf"))
    for path in cache.to_read(profile):
        cache.store(path, cache.reader(path)())
    assert cache.info(str(bad)) is None and cache.known[str(bad)][0] is not None  # looked at, not readable
    assert cache.known[str(tmp_path / "gone.gguf")] == (None, None, "")
    assert cache.errors() == {str(bad): "model.gguf is truncated (the header ends early): download it again."}
    assert cache.facts(profile).target_name == "" and not cache.facts(profile).draft_read
    cache.to_read(profile)
    cache.forget(str(bad))  # a read that failed: the file may be read again
    assert str(bad) in cache.to_read(profile)
    assert cache.facts(None) == cache.facts(LaunchSettings()) and cache.to_read(None) == []
