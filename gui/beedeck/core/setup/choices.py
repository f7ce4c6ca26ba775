"""What a setup was asked to do: the machine, the pair, the way to the engine (the wizard's pages, or the
command's flags), and the two things both read before the steps run: the engines and offers for this pair, and
the build's arguments (the dry run's and the build's)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beedeck.core.engine import engine_offers
from beedeck.core.engine import registry as engines
from beedeck.core.engine.engine_offers import BUILD, DOWNLOAD, EXISTING, EngineOffers, Offer
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.registry import EngineRecord, EngineRegistry
from beedeck.core.machine.report import HardwareReport
from beedeck.core.models.recommend.from_catalog import Choice
from beedeck.core.models.recommend.mode_choice import card_class
from beedeck.core.setup.services import SetupServices

WAYS = (DOWNLOAD, BUILD, EXISTING)


@dataclass
class SetupChoices:
    """The choices the steps run on. ``choice`` None (or the catalog's starter) is the starter profile, as is
    ``use_starter`` (the wizard's starter button). ``engine`` is the way to the engine: ``download`` (the
    release ``offers`` named), ``build``, or ``existing`` (the registered ``engine_id``, or ``engine_path``: a
    llama-server to register first). ``overrides`` are settings named outright (the command's ``--ctx``,
    ``--cache-type-k``...): they win over the pick's and the re-plan's, and the launch check judges them."""

    report: HardwareReport | None
    choice: Choice | None
    engine: str = EXISTING
    engine_id: str = ""
    engine_path: str = ""
    offers: EngineOffers | None = None
    use_starter: bool = False
    card: str = "smaller"  # the first GPU's card class (mode_choice.card_class): what the settings are tuned for
    goal: str = "quality"
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def starter(self) -> bool:
        return self.use_starter or self.choice is None or self.choice.pair_id == "starter"

    @property
    def no_draft(self) -> bool:
        """A pick without a draft file: the target's own MTP head, or no speculation (or the starter)."""
        return self.starter or (self.choice is not None and self.choice.draft_file is None)

    @property
    def gpu(self) -> bool:
        return self.report is not None and self.report.has_gpu

    @property
    def generation(self) -> str:
        return self.choice.generation.value if self.choice is not None else ""

    def settings(self) -> LaunchSettings:
        """The pick's settings with the ones named outright (a copy)."""
        assert self.choice is not None
        s = LaunchSettings.from_dict(self.choice.settings.to_dict())
        for key, value in self.overrides.items():
            setattr(s, key, value)
        return s

    def free_vram(self) -> list[int]:
        """Free bytes per GPU the settings are planned for ([] for the starter, which runs on the CPU)."""
        if self.starter or self.report is None:
            return []
        return [g.memory_free for g in self.report.gpus]


def card_of(report: HardwareReport | None) -> str:
    """The first GPU's card class (the mode advice's and the drafter's tuning: mode_choice.card_class)."""
    gpus = report.gpus if report is not None else []
    if not gpus:
        return "smaller"
    return card_class(gpus[0].memory_total, gpus[0].compute_capability, gpus[0].name)


def build_args(choices: SetupChoices, registry: EngineRegistry) -> dict[str, Any]:
    """The build's arguments for this machine and the pick (the dry run's and the build's): the FlashAttention
    kernels of the pick's K/V types and no more (no pick: the engine's default set, which has f16 and q8_0)."""
    report = choices.report
    gpus = [g.compute_capability for g in (report.gpus if report else []) if g.compute_capability]
    s = choices.settings() if choices.choice is not None else None
    pairs = [(s.cache_type_k, s.cache_type_v)] if s is not None else None
    return {"gpus": gpus, "cpu_only": not gpus, "cache_pairs": pairs,
            "driver_cuda": report.cuda_driver_version if report else None, "registry": registry}


def find_engines(choices: SetupChoices, services: SetupServices) -> tuple[list[EngineRecord], EngineOffers]:
    """The ready engines, best for this pair and machine first, and the three offers (the starter registered
    first: it probes its binary; the download offer asks the releases API; the build's offer runs the build's
    preflight): blocking, never on a GUI thread."""
    registry = services.registry
    try:
        registry.ensure_starter(services.locate_starter)
    except engines.EngineError:
        pass  # no starter installed: the list simply lacks it
    records = [r for r in registry.list() if r.ready]
    if choices.starter:
        records.sort(key=lambda r: r.origin != engines.Origin.STARTER)
    else:
        records = engine_offers.order_records(records, choices.generation, choices.gpu)
    offers = engine_offers.engine_offers(
        choices.report, records, generation=choices.generation, starter_mode=choices.starter,
        resolve=services.resolve_release,
        missing_tools=lambda: services.missing_build_tools(choices.report, registry.root))
    return records, offers


def unlisted_offers(starter_mode: bool, error: object) -> EngineOffers:
    """The offers when the engine list itself could not be read: only a build is left."""
    why = f"The engine list could not be read ({error})."
    return EngineOffers({
        DOWNLOAD: Offer(DOWNLOAD, False, why, "Download a prebuilt release"),
        BUILD: Offer(BUILD, not starter_mode, engine_offers.STARTER_WHY if starter_mode else engine_offers.BUILD_WHY,
                     "Build BeeLlama from source"),
        EXISTING: Offer(EXISTING, False, why)}, BUILD)
