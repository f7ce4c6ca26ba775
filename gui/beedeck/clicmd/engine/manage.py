"""``beedeck engine list|add|build|download|remove|default|reprobe``: the engine registry, headless."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from beedeck.core.engine.building import BEE_REPO as BEE_GIT
from beedeck.core.engine.building import BuildError, BuildResult, build_engine, plan_lines
from beedeck.core.engine.registry import EngineError, EngineRecord, EngineRegistry
from beedeck.core.engine.releases import (
    BEE_REPO,
    MAINLINE_REPO,
    RELEASES_API_ENV,
    ReleaseError,
    download_engine,
)
from beedeck.core.profile import ProfileError, load_saved_profile
from beedeck.core.starter import starter_engine, starter_model

_REPOS = {"bee": BEE_REPO, "beellama": BEE_REPO, "mainline": MAINLINE_REPO}


def register(sub: Any, groups: dict[str, Any]) -> None:
    engine = groups["engine"]
    p = engine.add_parser("list", help="list registered engines (the default is marked *)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_list)

    p = engine.add_parser("add", help="probe an existing llama-server and register it")
    p.add_argument("path", metavar="PATH")
    p.add_argument("--name", default="")
    p.add_argument("--default", action="store_true", help="also make it the default engine")
    p.set_defaults(func=run_add)

    p = engine.add_parser("build", help="build llama-server from source (BeeLlama's latest release by default)")
    p.add_argument("--source", default=BEE_GIT, help="git URL or local source folder (default: BeeLlama)")
    p.add_argument("--ref", help="git tag/branch/commit (default: the latest release tag)")
    p.add_argument("--cpu", action="store_true", help="build without CUDA")
    p.add_argument("--gpu", action="append", default=[], metavar="CC",
                   help="compute capability to build for, e.g. 8.9 (repeatable; default: the detected GPUs)")
    p.add_argument("--cache-type", action="append", default=[], metavar="K/V",
                   help="K/V cache pair you will use, e.g. q8_0/q4_0 (repeatable; default: the saved profile's): "
                        "a CUDA build compiles the FlashAttention kernels these need and no more")
    p.add_argument("--all-quants", action="store_true",
                   help="compile every K/V pair's FlashAttention kernels (GGML_CUDA_FA_ALL_QUANTS: the longest build)")
    p.add_argument("--dry-run", action="store_true",
                   help="configure only: print the CMake options, the targets, the steps and the estimated time")
    p.add_argument("--no-native", action="store_true", help="portable build (GGML_NATIVE=OFF)")
    p.add_argument("--rpc", action="store_true",
                   help="add llama.cpp's RPC backend and its worker (for `beedeck worker` and serve --rpc)")
    p.add_argument("-j", "--jobs", type=int, help="parallel compile jobs (default: all cores)")
    p.add_argument("-D", dest="extra", action="append", default=[], metavar="OPT=VAL", help="extra CMake option")
    p.add_argument("--verbose", action="store_true", help="print every compiler line")
    p.add_argument("--default", action="store_true", help="make the result the default engine")
    p.set_defaults(func=run_build)

    p = engine.add_parser("download", help="download a prebuilt llama-server from GitHub releases")
    p.add_argument("--repo", default="bee", help="bee, mainline or OWNER/NAME (default: bee)")
    p.add_argument("--tag", help="release tag (default: the latest release)")
    p.add_argument("--backend", choices=["cpu", "cuda", "vulkan"], help="default: cuda if a GPU is detected")
    p.add_argument("--api-url", default=None, metavar="URL",
                   help=f"releases API base, e.g. a GitHub Enterprise https://HOST/api/v3 (default: ${RELEASES_API_ENV}, "
                        "the releases_api setting, else api.github.com)")
    p.add_argument("--default", action="store_true", help="make the result the default engine")
    p.set_defaults(func=run_download)

    p = engine.add_parser("remove", help="unregister an engine (deletes only files BeeDeck built or downloaded)")
    p.add_argument("id")
    p.set_defaults(func=run_remove)

    p = engine.add_parser("default", help="show the default engine, or set it")
    p.add_argument("id", nargs="?")
    p.set_defaults(func=run_default)

    p = engine.add_parser("reprobe", help="probe an engine's binary again (after updating it in place)")
    p.add_argument("id")
    p.set_defaults(func=run_reprobe)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _describe(rec: EngineRecord, default_id: str | None) -> str:
    mark = "*" if rec.id == default_id else " "
    state = "ready" if rec.ready else f"NOT READY ({rec.smoke.message if rec.smoke else ''})"
    version = f"{rec.version} build {rec.build}" if rec.build else rec.version
    return f"{mark} {rec.id:<34} {rec.origin.value:<10} {rec.generation:<9} {version:<18} {state}\n    {rec.binary}"


def _smoke_model() -> Path:
    """The starter model, the one a new engine must generate from before it is registered ready (never
    downloaded for that: without it the smoke test says generation was not tried)."""
    return starter_model(download=False)


def _registry() -> EngineRegistry:
    reg = EngineRegistry(smoke_model=_smoke_model)
    reg.ensure_starter(starter_engine)
    for warning in reg.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return reg


def run_list(args: argparse.Namespace) -> int:
    reg = _registry()
    records = reg.list()
    default = reg.default()
    if args.json:
        print(json.dumps({"default": default.id if default else None,
                          "engines": [r.to_dict() for r in records]}, indent=1))
        return 0
    if not records:
        print("No engines yet: `beedeck engine download`, `beedeck engine build` or `beedeck engine add PATH`.")
    for rec in records:
        print(_describe(rec, default.id if default else None))
    return 0


def run_add(args: argparse.Namespace) -> int:
    reg = _registry()
    try:
        rec = reg.add_existing(args.path, name=args.name)
        if args.default:
            reg.set_default(rec.id)
    except EngineError as exc:
        return _fail(str(exc))
    print(f"added {rec.id}: {rec.generation} {rec.version}")
    return 0


def _detected_gpus() -> tuple[list[str], str | None, str]:
    from beedeck.core.machine.hardware import detect

    report = detect()
    ccs = [f"{g.compute_capability[0]}.{g.compute_capability[1]}" for g in report.gpus if g.compute_capability]
    return ccs, report.cuda_driver_version, report.reason


class _Progress:
    def __init__(self) -> None:
        self.last = -1.0

    def __call__(self, done: int, total: int, eta: float | None) -> None:
        pct = 100.0 * done / total if total else 0.0
        if pct - self.last < 1.0 and done != total:
            return
        self.last = pct
        eta_text = f", about {int(eta) // 60} min {int(eta) % 60} s left" if eta is not None else ""
        end = "\r" if sys.stderr.isatty() and done != total else "\n"
        print(f"  {done}/{total} ({pct:.0f} %){eta_text}   ", end=end, file=sys.stderr, flush=True)


def run_build(args: argparse.Namespace) -> int:
    reg = _registry()
    gpus: list[str] = list(args.gpu)
    driver = None
    cpu = args.cpu
    if not cpu:
        detected, driver, reason = _detected_gpus()  # the driver's CUDA version: the toolkit it can run
        gpus = gpus or detected
        if not gpus:
            print(f"No NVIDIA GPU detected ({reason or 'none found'}): building a CPU engine.", file=sys.stderr)
            cpu = True
    pairs, origin = _cache_pairs(args)
    if not cpu:
        print(f"K/V cache types: {origin}", file=sys.stderr)
    started = time.monotonic()
    try:
        result = build_engine(
            args.source, ref=args.ref, gpus=[] if cpu else gpus, cpu_only=cpu, driver_cuda=driver,
            cache_pairs=pairs, native=not args.no_native, jobs=args.jobs, rpc=args.rpc,
            all_quants=args.all_quants, dry_run=args.dry_run,
            extra_options=[f"-D{x}" for x in args.extra], registry=reg,
            on_line=(lambda line: print(line, flush=True)) if args.verbose else None,
            on_note=lambda note: print(f"note: {note}", file=sys.stderr, flush=True),
            on_progress=_Progress(),
        )
    except BuildError as exc:
        return _fail(str(exc))
    for note in result.notes:
        print(f"{'note' if note.startswith('rebuilt ') else 'chose'}: {note}")
    if result.dry_run:
        return _print_plan(result)
    print(f"options: {' '.join(result.options)}")
    print(f"log: {result.log_path}")
    print(f"built {result.binary} in {time.monotonic() - started:.0f} s")
    if not result.ok:
        return _fail(f"the engine was registered as {result.engine_id} but is not ready: "
                     f"{result.smoke.message if result.smoke else 'no smoke test'}")
    if args.default:
        reg.set_default(result.engine_id)
    print(f"registered {result.engine_id} ({result.record.generation if result.record else '?'})")
    return 0


def _cache_pairs(args: argparse.Namespace) -> tuple[list[tuple[str, str]] | None, str]:
    """The K/V pairs to build for and where they came from: --cache-type, else the saved profile's."""
    if args.cache_type:
        pairs = [(p.split("/", 1)[0], p.split("/", 1)[1]) if "/" in p else (p, p) for p in args.cache_type]
        return pairs, "as given (" + ", ".join(f"{k}/{v}" for k, v in pairs) + ")"
    if args.all_quants:
        return None, "every pair (--all-quants)"
    try:
        saved = load_saved_profile()
    except ProfileError as exc:
        print(f"warning: {exc}", file=sys.stderr)
        saved = None
    if saved is not None and not saved.is_remote:
        s = saved.settings
        return [(s.cache_type_k, s.cache_type_v)], f"the saved profile's ({s.cache_type_k}/{s.cache_type_v})"
    return None, "none saved yet: the engine's default set (f16 and q8_0 among them; --cache-type K/V for others)"


def _print_plan(result: BuildResult) -> int:
    for line in plan_lines(result):
        print(line)
    print(f"folder:  {result.log_path.parent} (configured; `beedeck engine build` without --dry-run compiles)")
    return 0


def run_download(args: argparse.Namespace) -> int:
    reg = _registry()
    repo = _REPOS.get(args.repo, args.repo)
    backend, driver = args.backend, None
    if backend in (None, "cuda"):
        gpus, driver, _ = _detected_gpus()
        backend = backend or ("cuda" if gpus else "cpu")
    last = [-1]

    def progress(done: int, total: int | None) -> None:
        pct = int(100 * done / total) if total else -1
        if pct != last[0]:
            last[0] = pct
            print(f"  {done / 2**20:.1f} MiB" + (f" ({pct} %)" if total else ""), file=sys.stderr, flush=True)

    try:
        rec = download_engine(repo=repo, tag=args.tag, backend=backend, cuda_driver_version=driver,
                              api_url=args.api_url, registry=reg, on_progress=progress,
                              on_line=lambda line: print(line, file=sys.stderr, flush=True))
    except (ReleaseError, EngineError) as exc:
        return _fail(str(exc))
    if not rec.ready:
        return _fail(f"downloaded as {rec.id} but not ready: {rec.smoke.message if rec.smoke else ''}")
    if args.default:
        reg.set_default(rec.id)
    print(f"registered {rec.id}: {rec.binary}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    try:
        rec = _registry().remove(args.id)
    except EngineError as exc:
        return _fail(str(exc))
    kept = "" if rec.owns_files else f" (kept {rec.binary})"
    print(f"removed {rec.id}{kept}")
    return 0


def run_default(args: argparse.Namespace) -> int:
    reg = _registry()
    try:
        rec = reg.set_default(args.id) if args.id else reg.default()
    except EngineError as exc:
        return _fail(str(exc))
    if rec is None:
        return _fail("no engines registered yet: see `beedeck engine list`")
    print(_describe(rec, rec.id))
    return 0


def run_reprobe(args: argparse.Namespace) -> int:
    try:
        rec = _registry().reprobe(args.id)
    except EngineError as exc:
        return _fail(str(exc))
    print(f"{rec.id}: {rec.generation} {rec.version}")
    return 0
