"""engines: the registry (manifests, default, remove, corrupt files) and the smoke test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from beedeck.core import paths
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.registry import (
    EngineError,
    EngineRecord,
    EngineRegistry,
    Origin,
    SmokeResult,
    smoke_test,
)
from beedeck.core.starter import starter_engine

MINI = Path(__file__).resolve().parents[2] / "fixtures" / "mini_cmake"


@pytest.mark.engine
def test_starter_auto_registered_and_default(starter_engine_path: Path) -> None:
    reg = EngineRegistry()
    rec = reg.ensure_starter(starter_engine)
    assert rec is not None and rec.id == "starter" and rec.origin is Origin.STARTER
    assert rec.generation == Generation.MAINLINE.value and rec.caps and "--spec-type" in rec.caps["flags"]
    assert reg.default_id() == "starter" and reg.default() is not None
    assert Path(rec.binary) == starter_engine_path.resolve()
    manifest = json.loads((paths.engines_dir() / "starter" / "manifest.json").read_text())
    assert manifest["origin"] == "starter" and isinstance(manifest["caps"]["flags"], list)
    assert reg.ensure_starter(starter_engine) == rec  # idempotent: no second entry
    assert [r.id for r in reg.list()] == ["starter"]
    # Removing the starter forgets it but never deletes the pip package's binary.
    reg.remove("starter")
    assert starter_engine_path.is_file() and reg.list() == [] and reg.default_id() is None
    assert reg.ensure_starter(starter_engine) is None and reg.list() == []  # removed on purpose: stays removed


@pytest.mark.engine
def test_an_app_upgraded_in_place_gets_its_new_starter_engine_probed(tmp_path: Path,
                                                                    starter_engine_path: Path) -> None:
    """The .deb replaces /opt/beedeck/.../llama-server at the same path: the record must follow."""
    from beedeck.core.engine.probe import probe_engine

    installed = tmp_path / "opt" / "engine"
    shutil.copytree(starter_engine_path.parent, installed, symlinks=True)
    binary = installed / "llama-server"
    probed: list[str] = []
    reg = EngineRegistry(prober=lambda path: probed.append(path) or probe_engine(path))
    first = reg.ensure_starter(lambda: binary)
    assert first is not None and first.binary_stamp and len(probed) == 1
    assert reg.ensure_starter(lambda: binary) == first and len(probed) == 1  # unchanged: not probed again
    upgraded = binary.read_bytes()
    binary.unlink()
    binary.write_bytes(upgraded)  # a new file at the same path, as dpkg unpacks an upgrade
    binary.chmod(0o755)
    again = reg.ensure_starter(lambda: binary)
    assert again is not None and again.id == "starter" and len(probed) == 2
    assert again.binary_stamp != first.binary_stamp and [r.id for r in reg.list()] == ["starter"]
    assert json.loads((paths.engines_dir() / "starter" / "manifest.json").read_text())["binary_stamp"] == \
        again.binary_stamp


@pytest.mark.engine
def test_add_existing_twice_side_by_side_default_remove(tmp_path: Path, starter_engine_path: Path) -> None:
    copy_dir = tmp_path / "userbin"
    shutil.copytree(starter_engine_path.parent, copy_dir, symlinks=True)
    reg = EngineRegistry()
    a = reg.add_existing(starter_engine_path)
    b = reg.add_existing(copy_dir / "llama-server", name="my copy")
    assert a.id != b.id and {r.id for r in reg.list()} == {a.id, b.id}
    assert a.origin is Origin.EXISTING and a.version == "0.6.0-dev" and a.build is not None
    again = reg.add_existing(copy_dir / "llama-server")
    assert again.id == b.id and len(reg.list()) == 2  # same binary: refreshed, not duplicated
    reg.set_default(b.id)
    assert reg.default() is not None and reg.default().id == b.id  # type: ignore[union-attr]
    reg.remove(b.id)
    assert (copy_dir / "llama-server").is_file()  # a user's binary is never deleted
    assert reg.default_id() is None and [r.id for r in reg.list()] == [a.id]
    assert reg.reprobe(a.id).caps is not None


def test_add_something_that_is_not_llama_server(tmp_path: Path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    with pytest.raises(EngineError, match="was not added"):
        EngineRegistry().add_existing(fake)
    with pytest.raises(EngineError, match="was not added"):
        EngineRegistry().add_existing(tmp_path / "missing")


def test_corrupt_manifest_is_kept_aside_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    reg = EngineRegistry()
    good = reg.save(EngineRecord(id="good", origin=Origin.EXISTING, binary="/opt/x/llama-server"))
    bad_dir = reg.root / "bad"
    bad_dir.mkdir()
    (bad_dir / "manifest.json").write_text("{not json")
    (reg.root / "half").mkdir()
    (reg.root / "half" / "manifest.json").write_text(json.dumps({"origin": "built"}))
    assert [r.id for r in reg.list()] == [good.id]
    assert [p.read_text() for p in bad_dir.glob("manifest.json.corrupt-*")] == ["{not json"]
    assert not (bad_dir / "manifest.json").exists()
    assert len(reg.warnings) == 2 and "kept as" in reg.warnings[0] and "beedeck engine add" in reg.warnings[0]
    assert "could not be read" in caplog.text
    (reg.root / "registry.json").write_text("[]")
    assert reg.default_id() is None and len(list(reg.root.glob("registry.json.corrupt-*"))) == 1
    (reg.root / "registry.json").write_text("{")  # a second bad file keeps the first kept copy
    assert reg.default_id() is None and len(list(reg.root.glob("registry.json.corrupt-*"))) == 2


def test_records_round_trip_and_remove_owned_files() -> None:
    reg = EngineRegistry()
    rec = EngineRecord(id="built-1", origin=Origin.BUILT, binary=str(reg.root / "built-1" / "build" / "llama-server"),
                       build_options=["-DGGML_CUDA=OFF"], smoke=SmokeResult(True, "ok", "cpu", [], 1.0))
    reg.save(rec)
    (reg.root / "built-1" / "build").mkdir()
    (reg.root / "built-1" / "build" / "llama-server").write_bytes(b"x")
    loaded = reg.get("built-1")
    assert loaded == rec and loaded.created > 0 and loaded.ready
    reg.remove("built-1")
    assert not (reg.root / "built-1").exists()
    with pytest.raises(EngineError, match="No engine 'built-1'.*beedeck engine list"):
        reg.get("built-1")
    with pytest.raises(EngineError, match="not a valid engine id"):
        reg.get("../etc")


def test_remove_refuses_a_user_binary_inside_the_engine_folder() -> None:
    reg = EngineRegistry()
    reg.save(EngineRecord(id="odd", origin=Origin.EXISTING, binary=str(reg.root / "odd" / "llama-server")))
    (reg.root / "odd" / "llama-server").write_bytes(b"x")
    with pytest.raises(EngineError, match="not deleting a user's file"):
        reg.remove("odd")
    assert (reg.root / "odd" / "llama-server").exists()


@pytest.mark.engine
def test_smoke_test_catches_a_cpu_only_binary_when_a_gpu_was_expected(starter_engine_path: Path) -> None:
    cpu = smoke_test(starter_engine_path, expect_gpu=False)
    assert cpu.ok and cpu.backend == "cpu"
    gpu = smoke_test(starter_engine_path, expect_gpu=True)
    assert not gpu.ok and "silently run on the CPU" in gpu.message and "(none)" in gpu.message


@pytest.mark.engine
def test_cli_list_add_default_remove(tmp_path: Path, starter_engine_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck import cli

    assert cli.main(["engine", "list"]) == 0
    assert "* starter" in capsys.readouterr().out  # auto-registered and default
    copy_dir = tmp_path / "mine"
    shutil.copytree(starter_engine_path.parent, copy_dir, symlinks=True)
    assert cli.main(["engine", "add", str(copy_dir / "llama-server"), "--name", "mine", "--default"]) == 0
    added = capsys.readouterr().out.split()[1].rstrip(":")
    assert cli.main(["engine", "default"]) == 0 and f"* {added}" in capsys.readouterr().out
    assert cli.main(["engine", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["default"] == added and {e["id"] for e in listed["engines"]} == {"starter", added}
    assert cli.main(["engine", "remove", added]) == 0 and "kept" in capsys.readouterr().out
    assert (copy_dir / "llama-server").is_file()
    assert cli.main(["engine", "add", str(tmp_path / "nope")]) == 1
    assert "was not added" in capsys.readouterr().err
    assert cli.main(["engine", "remove", "ghost"]) == 1
