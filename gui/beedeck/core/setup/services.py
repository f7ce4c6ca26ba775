"""The core calls the setup steps make, in one place: the wizard and ``beedeck setup`` pass the real ones, tests
replace those that need the internet, a GPU or minutes of compiling (at the level of their protocol)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths, starter
from beedeck.core.engine import engine_offers
from beedeck.core.engine import registry as engines
from beedeck.core.engine.building import build_engine
from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.engine.releases import download_engine, resolve_release
from beedeck.core.models import library
from beedeck.core.models.hub import client as hub
from beedeck.core.profile import Profile
from beedeck.core.settings import AppSettings


def _starter_model_here() -> Path:
    """The starter model a new engine generates from in its smoke test (never downloaded for that)."""
    return starter.starter_model(download=False)


@dataclass
class SetupServices:
    """What the steps call. ``registry`` gets the starter model as its smoke model when it has none (a new
    engine generates from it before it is registered ready)."""

    registry: EngineRegistry = field(default_factory=EngineRegistry)
    locate_starter: Callable[[], Path] = starter.starter_engine
    starter_model: Callable[[], Path] = starter.starter_model
    download_model: Callable[..., list[Path]] = hub.download_model
    build_engine: Callable[..., Any] = build_engine
    download_engine: Callable[..., Any] = download_engine
    resolve_release: Callable[..., Any] = resolve_release
    missing_build_tools: Callable[..., list[str]] = engine_offers.missing_build_tools
    smoke_test: Callable[..., engines.SmokeResult] = engines.smoke_test
    find_local: Callable[[str, str], library.LocalModel | None] = library.find_local
    models_dir: Callable[[], Path] = paths.models_dir
    endpoint: str | None = None  # the Hub; None: HF_ENDPOINT or huggingface.co
    # The app's settings the save step changes (None: the saved file's), and how they are saved: None when saved,
    # else why not (the wizard passes the session's copy and its save, so the window's next save keeps them).
    settings: AppSettings | None = None
    save_settings: Callable[[AppSettings], str | None] | None = None
    # How the profile is saved (profile.json; the command's); None: the caller applies it (the wizard hands it to
    # the session, which saves it once the launch passed its preflight).
    save_profile: Callable[[Profile], object] | None = None

    def __post_init__(self) -> None:
        if self.registry.smoke_model is None:
            self.registry.smoke_model = (self.starter_model if self.starter_model is not starter.starter_model
                                         else _starter_model_here)
