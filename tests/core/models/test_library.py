"""The local GGUF library: real (tiny) GGUF files in the Hub cache, BeeDeck's folder, LM Studio's and user folders."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from beedeck.core import paths
from beedeck.core.models import library
from beedeck.core.models.library import find_local, match, match_catalog, scan


def make_gguf(arch: str, file_type: int | None, name: str = "model") -> bytes:
    """A real, tiny GGUF (written by the gguf package) with the given architecture and file type."""
    import gguf

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.gguf"
        w = gguf.GGUFWriter(str(p), arch)
        w.add_name(name)
        if file_type is not None:
            w.add_file_type(file_type)
        w.add_tensor("t", np.zeros(4, dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        return p.read_bytes()


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield tmp_path


def _hub_cache_file(root: Path, repo: str, filename: str, data: bytes, commit: str = "c0ffee") -> Path:
    storage = root / "hf-home" / "hub" / ("models--" + repo.replace("/", "--"))
    blob = storage / "blobs" / f"blob{abs(hash((repo, filename)))}"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(data)
    pointer = storage / "snapshots" / commit / filename
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    (storage / "refs").mkdir(exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return pointer


def test_scan_finds_models_in_all_default_places(isolated_dirs: Path) -> None:
    target = make_gguf("qwen3", 15, name="Qwen3 8B")
    draft = make_gguf("dflash", 7, name="Qwen3 8B DFlash")
    _hub_cache_file(isolated_dirs, "unsloth/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", target)
    (paths.models_dir() / "qwen3-8b-dflash-Q8_0.gguf").write_bytes(draft)
    lms = isolated_dirs / "home" / ".lmstudio" / "models" / "lmstudio-community" / "Gemma-GGUF"
    lms.mkdir(parents=True)
    (lms / "gemma-Q6_K.gguf").write_bytes(make_gguf("gemma3", 18))
    (lms / "notes.txt").write_text("not a model")

    models = {m.source: m for m in scan()}
    assert set(models) == {"hf-cache", "beedeck", "lmstudio"}
    hf = models["hf-cache"]
    assert (hf.repo, hf.filename, hf.architecture, hf.file_type_name, hf.name) == (
        "unsloth/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", "qwen3", "Q4_K_M", "Qwen3 8B")
    assert hf.size == len(target) and not hf.is_draft
    bee = models["beedeck"]
    assert bee.is_draft and bee.architecture == "dflash" and bee.file_type_name == "Q8_0" and bee.repo is None
    lm = models["lmstudio"]
    assert (lm.repo, lm.filename, lm.file_type_name) == ("lmstudio-community/Gemma-GGUF", "gemma-Q6_K.gguf", "Q6_K")


def test_dflash_draft_architecture_variant_is_a_draft(tmp_path: Path) -> None:
    d = tmp_path / "user"
    d.mkdir()
    (d / "draft.gguf").write_bytes(make_gguf("dflash-draft", None))
    (m,) = scan([d])
    assert m.is_draft and m.source == "user" and m.file_type_name == ""


def test_split_sets_are_grouped_and_incomplete_ones_flagged(tmp_path: Path) -> None:
    d = tmp_path / "user"
    d.mkdir()
    header = make_gguf("qwen3moe", 15)
    for i in (1, 2, 3):
        (d / f"big-Q4_K_M-{i:05d}-of-00003.gguf").write_bytes(header if i == 1 else b"\0" * 1000)
    (d / "half-00001-of-00002.gguf").write_bytes(header)
    models = {m.path.name: m for m in scan([d])}
    big = models["big-Q4_K_M-00001-of-00003.gguf"]
    assert len(big.files) == 3 and big.complete and big.size == len(header) + 2000
    assert big.architecture == "qwen3moe"
    assert not models["half-00001-of-00002.gguf"].complete
    assert find_local("any/repo", "half-00001-of-00002.gguf", list(models.values())) is None
    assert find_local("any/repo", "big-Q4_K_M-00001-of-00003.gguf", list(models.values())) is big


def test_unreadable_file_is_listed_with_its_error(tmp_path: Path) -> None:
    d = tmp_path / "user"
    d.mkdir()
    (d / "broken.gguf").write_bytes(b"NOTAGGUF" * 10)
    (m,) = scan([d])
    assert m.error is not None and "not a GGUF" in m.error
    assert find_local("x/y", "broken.gguf", [m]) is None


def test_same_blob_in_two_snapshots_is_listed_once(isolated_dirs: Path) -> None:
    data = make_gguf("llama", 2)
    p1 = _hub_cache_file(isolated_dirs, "org/m", "m.gguf", data, commit="aaa")
    p2 = p1.parents[1] / "bbb" / "m.gguf"
    p2.parent.mkdir()
    p2.symlink_to(p1.resolve())
    assert len([m for m in scan() if m.source == "hf-cache"]) == 1


def test_match_prefers_repo_then_file_name(isolated_dirs: Path) -> None:
    data = make_gguf("qwen3", 15)
    _hub_cache_file(isolated_dirs, "unsloth/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", data)
    (paths.models_dir() / "Qwen3-8B-Q4_K_M.gguf").write_bytes(data)
    models = scan()
    entries = [("other/Qwen3-8B-GGUF", "Qwen3-8B-Q8_0.gguf"), ("unsloth/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf")]
    hf = next(m for m in models if m.source == "hf-cache")
    bee = next(m for m in models if m.source == "beedeck")
    assert match(hf, entries) == entries[1]
    assert match(bee, entries) == entries[1]  # same file name, repo unknown
    assert match(bee, entries[:1]) is None
    assert find_local("unsloth/Qwen3-8B-GGUF", "Qwen3-8B-Q4_K_M.gguf", models) is hf
    assert find_local("nobody/else", "qwen3-8b-q4_k_m.gguf", models) is not None  # file names compare case-blind
    assert find_local("unsloth/Qwen3-8B-GGUF", "Qwen3-8B-Q5_K_M.gguf", models) is None
    assert match_catalog(models, entries) == {hf.path: entries[1], bee.path: entries[1]}


def test_downloaded_model_is_found_locally(isolated_dirs: Path) -> None:
    """End to end: download from the fake hub into the Hub cache, then find_local sees it."""
    from beedeck.core.models.hub.client import download_model
    from tests.fakes.fake_hub import FakeHub

    data = make_gguf("qwen3", 15)
    with FakeHub() as hub:
        hub.add_repo("org/Q-GGUF", {"Q-Q4_K_M.gguf": data})
        (path,) = download_model("org/Q-GGUF", "Q-Q4_K_M.gguf", endpoint=hub.endpoint)
    found = find_local("org/Q-GGUF", "Q-Q4_K_M.gguf")
    assert found is not None and found.path == path and found.file_type_name == "Q4_K_M"


def test_default_dirs_follow_hf_env(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(isolated_dirs / "elsewhere"))
    dirs = dict((s, d) for d, s in library.default_dirs() if s != "lmstudio")
    assert dirs == {"hf-cache": isolated_dirs / "elsewhere", "beedeck": paths.models_dir()}


def test_catalog_file_on_disk_is_recognised(isolated_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file named like a shipped catalog entry (resources/catalog.json) matches it; the CLI shows it."""
    import json

    from beedeck import cli

    entries = library.catalog_entries()
    assert entries and all(f.endswith(".gguf") for _r, f in entries)
    repo, filename = entries[0]
    _hub_cache_file(isolated_dirs, repo, filename, make_gguf("gemma3", 12))
    user = isolated_dirs / "user"
    user.mkdir()
    (user / "unrelated.gguf").write_bytes(make_gguf("llama", 1))
    models = scan()
    assert match_catalog(models, entries) == {models[0].path: (repo, filename)}
    assert find_local(repo, filename) is not None
    assert cli.main(["models", "scan", str(user), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["source"] == "user" and row["catalog"] is None and row["file_type"] == "F16"
    assert cli.main(["models", "list"]) == 0
    assert "[in catalog]" in capsys.readouterr().out
