"""The setup wizard's three ways to get an engine, each with the reason it is offered or greyed.

On an NVIDIA machine the first choice is a prebuilt download of the newest release whose CUDA runtime
the driver runs (:func:`beedeck.core.engine.releases.index.resolve_release`, looked up before the user
clicks, so the choice names the archive and its size); building from source is the alternative, and
an engine already registered sits beside them. Qt-free: ``ui/setup`` renders what this returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from beedeck.core.engine.building import preflight
from beedeck.core.engine.registry import EngineRecord, Origin
from beedeck.core.engine.releases import (
    BEE_REPO,
    MAINLINE_REPO,
    AssetChoice,
    ReleaseError,
    host_platform,
    releases_api_base,
    resolve_release,
    tag_version,
)
from beedeck.core.machine.report import HardwareReport

DOWNLOAD, BUILD, EXISTING = "download", "build", "existing"
STARTER_WHY = ("The starter runs on the engine installed with BeeDeck: nothing to download or build. For a "
               "real model go Back and pick a pair (it needs a GPU), or use Settings with a GGUF you have.")
# Under the second greyed choice on the starter path: its own words, not the first one's paragraph again.
STARTER_BUILD_WHY = "Nothing to build either: the starter's engine comes ready-made with BeeDeck."
BUILD_WHY = ("The alternative: compile BeeLlama for exactly this GPU. It takes from several minutes to most of "
             "an hour (the CUDA kernels dominate) and needs git, CMake, a C++ compiler and, for the GPU, the "
             "CUDA toolkit.")
_FAMILY = {"mainline": "mainline llama.cpp", "bee-a": "BeeLlama 0.1-0.3", "bee-b": "BeeLlama"}


@dataclass(frozen=True)
class Offer:
    """One way to get an engine: whether it can be chosen, and why (one or two sentences)."""

    key: str  # download | build | existing
    enabled: bool
    why: str
    label: str = ""
    choice: AssetChoice | None = None  # download: the release archive the click will fetch
    backend: str = ""  # download: cuda | cpu


@dataclass
class EngineOffers:
    offers: dict[str, Offer] = field(default_factory=dict)
    default: str = EXISTING
    api_url: str = ""

    def __getitem__(self, key: str) -> Offer:
        return self.offers[key]


def _backend_of(rec: EngineRecord) -> str:
    if rec.smoke is not None and rec.smoke.backend:
        return rec.smoke.backend
    return str((rec.caps or {}).get("gpu_backend") or "")


def repo_for(generation: str) -> tuple[str, Callable[[str], bool] | None]:
    """The release repository for an engine generation, and the tag filter it needs."""
    if generation == "mainline":
        return MAINLINE_REPO, None
    if generation == "bee-a":  # a fork-format pair: BeeLlama before 0.4 (the Gen B loader reads another format)
        return BEE_REPO, lambda tag: (v := tag_version(tag)) is not None and v < (0, 4, 0)
    return BEE_REPO, lambda tag: (v := tag_version(tag)) is None or v >= (0, 4, 0)


def _download_offer(report: HardwareReport | None, generation: str, resolve: Callable[..., AssetChoice],
                    api_url: str, host: tuple[str, str]) -> Offer:
    gpu = report is not None and report.has_gpu
    backend = "cuda" if gpu else "cpu"
    repo, accept = repo_for(generation)
    family = _FAMILY.get(generation, "BeeLlama")
    driver = report.cuda_driver_version if report is not None else None
    try:
        choice = resolve(repo, None, os_name=host[0], arch=host[1], backend=backend,
                         cuda_driver_version=driver, api_url=api_url, accept=accept)
    except ReleaseError as exc:
        return Offer(DOWNLOAD, False, f"No prebuilt {family} for this machine: {exc}", "Download a prebuilt release",
                     backend=backend)
    label = f"Download {family} {choice.tag} prebuilt ({choice.total_bytes / 2**20:.0f} MiB)"
    if gpu and choice.platform.cuda is not None:
        cuda = ".".join(map(str, choice.platform.cuda))
        why = (f"Recommended: the quickest way, minutes instead of a build. {choice.asset.name} is built for CUDA "
               f"{cuda}, which your driver ({'CUDA ' + driver if driver else 'CUDA version unknown'}) runs"
               + (", with its CUDA runtime" if choice.extra else "") + ".")
    else:
        why = f"The quickest way: {choice.asset.name}, prebuilt for this machine's CPU (no NVIDIA GPU found)."
    checked = "sha256-checked" if all(a.sha256 for a in [choice.asset, *choice.extra]) else "checked by size"
    why += f" Downloaded from {api_url if 'api.github.com' not in api_url else 'GitHub'}, {checked}, then smoke-tested."
    if choice.notes:
        why += " " + " ".join(choice.notes)
    return Offer(DOWNLOAD, True, why, label, choice, backend)


def _build_offer(report: HardwareReport | None, missing: list[str]) -> Offer:
    why = BUILD_WHY
    if missing:
        why += " Missing here: " + "; ".join(missing) + " (the build checks again before it starts)."
    if report is None or not report.has_gpu:
        why += " Without an NVIDIA GPU it builds a CPU engine."
    return Offer(BUILD, True, why, "Build BeeLlama from source")


def _suited(rec: EngineRecord, generation: str, gpu: bool) -> bool:
    """An engine of the pair's generation that uses the GPU (not the CPU-only starter)."""
    return rec.generation == generation and rec.origin != Origin.STARTER and (not gpu or _backend_of(rec) == "cuda")


def order_records(records: list[EngineRecord], generation: str, gpu: bool) -> list[EngineRecord]:
    """Registered engines, the best for this pair and machine first (what the wizard's list shows)."""
    return sorted(records, key=lambda r: (not _suited(r, generation, gpu), r.generation != generation,
                                          r.origin == Origin.STARTER))


def _existing_offer(records: list[EngineRecord], gpu: bool, generation: str) -> Offer:
    if not records:
        return Offer(EXISTING, False, "No engine is registered yet: download or build one here, or add a "
                     "llama-server you have with `beedeck engine add PATH`.", "Use an engine you have")
    top = records[0]
    backend = _backend_of(top) or "unknown backend"
    why = f"{top.name or top.id}: {top.generation} {top.version}, {backend}."
    if gpu and backend != "cuda":
        why += " It has no CUDA backend, so on this machine it would leave the GPU idle."
    elif generation and top.generation != generation:
        why += f" The recommended pair wants a {_FAMILY.get(generation, generation)} engine."
    return Offer(EXISTING, True, why, "Use an engine you have:")


def engine_offers(report: HardwareReport | None, records: list[EngineRecord], *, generation: str,
                  starter_mode: bool, resolve: Callable[..., AssetChoice] = resolve_release,
                  api_url: str | None = None, host: tuple[str, str] | None = None,
                  missing_tools: Callable[[], list[str]] | None = None) -> EngineOffers:
    """The three offers and the one to preselect, ``records`` ordered by :func:`order_records` (the first is
    the one "use an engine you have" names). Calls the releases API (``resolve``) and the build's preflight:
    run it off the GUI thread."""
    gpu = report is not None and report.has_gpu
    existing = _existing_offer(records, gpu, generation)
    if starter_mode:
        return EngineOffers({DOWNLOAD: Offer(DOWNLOAD, False, STARTER_WHY, "Download a prebuilt release"),
                             BUILD: Offer(BUILD, False, STARTER_BUILD_WHY, "Build BeeLlama from source"),
                             EXISTING: existing}, EXISTING if records else BUILD)
    try:
        base = api_url or releases_api_base()
    except ReleaseError as exc:
        download = Offer(DOWNLOAD, False, str(exc), "Download a prebuilt release")
        base = ""
    else:
        download = _download_offer(report, generation, resolve, base, host or host_platform())
    build = _build_offer(report, missing_tools() if missing_tools else [])
    if records and _suited(records[0], generation, gpu):
        default = EXISTING
    elif download.enabled:
        default = DOWNLOAD
    elif gpu or not records:
        default = BUILD
    else:
        default = EXISTING
    return EngineOffers({DOWNLOAD: download, BUILD: build, EXISTING: existing}, default, base)


def missing_build_tools(report: HardwareReport | None, build_root: Path) -> list[str]:
    """The build's preflight, as short "what is missing (remedy)" lines (subprocess calls: off the GUI thread)."""
    gpu = report is not None and report.has_gpu
    checks = preflight(need_git=True, cuda=gpu, driver_cuda=report.cuda_driver_version if report else None,
                       build_root=build_root)
    return [f"{c.name} ({c.remedy})" for c in checks if not c.ok]
