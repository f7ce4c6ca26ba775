"""What the setup wizard needs from the core (replaceable in tests) and what it produces."""


from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.speculation.advice import WorkloadAdvice, load_advice
from beedeck.core.machine import hardware
from beedeck.core.machine.report import HardwareReport
from beedeck.core.models.recommend import catalog_sizing
from beedeck.core.models.recommend.from_catalog import Recommendation, default_engine_caps, recommend
from beedeck.core.models.recommend.from_repo import RepoRecommendation, recommend_repo
from beedeck.core.settings import AppSettings
from beedeck.ui.background import Runner, run_in_background

GiB = 1 << 30


@dataclass
class WizardServices:
    """The core calls the wizard makes; tests replace the ones that need hardware or the internet."""

    detect: Callable[[], HardwareReport] = field(default=lambda: hardware.detect(disk_path=paths.models_dir()))
    # (free bytes per GPU, goal, card=, tune_caps=, advice=) -> Recommendation
    recommend: Callable[..., Recommendation] = recommend
    runner: Runner = run_in_background
    models_dir: Callable[[], Path] = paths.models_dir
    endpoint: str | None = None  # Hub endpoint; None: HF_ENDPOINT or huggingface.co
    # The recommend page's search box: (repo, free bytes per GPU, card class, draft repos) -> RepoRecommendation;
    # None: :meth:`size_live` (this services' endpoint, the default engine's generation and tuning, the advice)
    size_repo: Callable[[str, list[int], str, Sequence[str]], RepoRecommendation] | None = None
    # The engine the drafter is tuned for before one is picked; None: the registry's default (extra["registry"])
    engine_caps: Callable[[], EngineCaps | None] | None = None
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

    def tune_caps(self) -> EngineCaps | None:
        """The engine the drafter is tuned for (worker thread: it may read the registry)."""
        return self.engine_caps() if self.engine_caps is not None else default_engine_caps(self.extra.get("registry"))

    def advice(self) -> WorkloadAdvice:
        """BeeDeck's own measured speed advice (worker thread: it reads a file)."""
        return load_advice()

    def size(self, repo: str, vram: list[int], card: str, draft_repos: Sequence[str] = ()) -> RepoRecommendation:
        """The search box's call: the injected ``size_repo``, else :meth:`size_live`."""
        if self.size_repo is not None:
            return self.size_repo(repo, vram, card, draft_repos)
        return self.size_live(repo, vram, card, draft_repos)

    def size_live(self, repo: str, vram: list[int], card: str, draft_repos: Sequence[str] = ()) -> RepoRecommendation:
        """Size ``repo`` (and ``draft_repos``, else the catalog's drafts for it) from this services' Hub endpoint,
        for the default engine's generation (BeeLlama >= 0.4 without one, or when it is a CPU-only build such as
        the starter), tuned for that engine, with BeeDeck's own advice first."""
        caps = self.tune_caps()
        gpu_engine = caps is not None and caps.generation != Generation.UNKNOWN and caps.gpu_backend != "cpu"
        generation = caps.generation if gpu_engine and caps is not None else Generation.BEE_B
        return recommend_repo(repo, vram, card, draft_repos=list(draft_repos) or None, generation=generation,
                              endpoint=self.endpoint, advice=self.advice(), tune_caps=caps)


def gib_text(n: float) -> str:
    return f"{n / GiB:.1f} GiB"
