"""What the setup wizard needs from the core (replaceable in tests) and what it produces."""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.chat.repo_recommend import RepoRecommendation, recommend_repo
from beedeck.core.engine.speculation.advice import load_advice
from beedeck.core.machine import hardware
from beedeck.core.machine.report import HardwareReport
from beedeck.core.models import catalog_sizing
from beedeck.core.models.recommend import Recommendation, recommend
from beedeck.core.settings import AppSettings
from beedeck.ui.background import Runner, run_in_background

GiB = 1 << 30


@dataclass
class WizardServices:
    """The core calls the wizard makes; tests replace the ones that need hardware or the internet."""

    detect: Callable[[], HardwareReport] = field(default=lambda: hardware.detect(disk_path=paths.models_dir()))
    recommend: Callable[..., Recommendation] = recommend
    runner: Runner = run_in_background
    models_dir: Callable[[], Path] = paths.models_dir
    endpoint: str | None = None  # Hub endpoint; None: HF_ENDPOINT or huggingface.co
    # The recommend page's search box: (repo, free bytes per GPU, card class) -> RepoRecommendation
    size_repo: Callable[[str, list[int], str], RepoRecommendation] = field(
        default=lambda repo, vram, card: recommend_repo(repo, vram, card, advice=load_advice()))
    # Before the first recommendation: read the catalog repos' GGUF headers (endpoint -> CatalogSizing); what
    # was read at the Hub's current revision is cached, so this costs one API call per repo after the first
    # time, and offline the cache (or nothing) answers.
    size_catalog: Callable[[str | None], catalog_sizing.CatalogSizing] = field(
        default=lambda endpoint: catalog_sizing.refresh(endpoint=endpoint))
    extra: dict[str, Any] = field(default_factory=dict)  # overrides for the run page (see setup_run_page)
    # The session's one AppSettings copy, changed when setup completes (None: the saved file's, for a wizard
    # without a window), and how it is saved: Session.save_settings (None when saved, else why not), so the
    # session says it was saved; without a window, written to the file. A copy of its own would be overwritten
    # by the window's next save.
    settings: AppSettings | None = None
    save_settings: Callable[[], str | None] | None = None


@dataclass
class SetupResult:
    """What the wizard produced: launch ``engine`` with ``settings`` (the main window's Profile)."""

    engine: str
    settings: Any  # LaunchSettings
    label: str = ""
    engine_id: str = ""



def gib_text(n: float) -> str:
    return f"{n / GiB:.1f} GiB"
