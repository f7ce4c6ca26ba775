"""``beedeck setup``: the setup wizard's pipeline, headless. The same steps the wizard runs
(:data:`beedeck.core.setup.STEPS`: the engine, the target, the draft, the smoke test with the launch check, the
save), the wizard's choices as flags: the pair (default: the recommendation for this machine, as ``beedeck
recommend`` makes it; ``--repo`` a Hub repo sized from its headers, as the wizard's search box; ``--starter``),
the engine (``--engine download|build|existing``, a registered engine's id or a llama-server's path; default:
the wizard's preselected way), the context and K/V types. It prints the plan, asks (``--yes`` does not), prints
each step's progress, and saves the profile that ``beedeck serve --saved`` and the app start.

Exit status: 0 set up; 1 a step failed, nothing fits, or not confirmed; 2 bad arguments; 130 cancelled (Ctrl-C:
the step under way stops its children and keeps what it got, so running it again resumes).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.building import minutes_text
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.engine_offers import BUILD, DOWNLOAD, EXISTING, EngineOffers
from beedeck.core.engine.registry import EngineError, EngineRecord
from beedeck.core.machine.report import HardwareReport
from beedeck.core.models.recommend.from_catalog import Choice
from beedeck.core.printable import printable
from beedeck.core.profile import save_profile
from beedeck.core.setup import (
    WAYS,
    Setup,
    SetupChoices,
    SetupServices,
    Step,
    StepCancelled,
    StepFailed,
    card_of,
    find_engines,
    run_all,
)

CANCELLED = 130


class SetupRefused(Exception):
    """The flags ask for what cannot be done here; ``status`` is the exit status (1, or 2 for bad arguments)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("setup", help="get an engine and a model pair, check them and save the profile "
                                     "(the setup wizard, headless)")
    pair = p.add_mutually_exclusive_group()
    pair.add_argument("--starter", action="store_true", help="the starter profile (CPU, installed with BeeDeck)")
    pair.add_argument("--repo", metavar="OWNER/NAME", help="a GGUF repo on the Hub, sized from its headers (the "
                      "wizard's search box); default: the recommendation for this machine")
    pair.add_argument("--runner-up", action="store_true", help="the recommendation's runner-up")
    p.add_argument("--draft-repo", action="append", metavar="OWNER/NAME",
                   help="with --repo: a drafter repo (repeatable; default: the catalog's drafts for it)")
    p.add_argument("--quant", action="append", help="with --repo: only this target quant (repeatable)")
    p.add_argument("--kind", help="with --repo: this speculation kind (dflash2, mtp, none...; default: the fast path)")
    p.add_argument("--goal", default="quality", choices=("quality", "speed", "context"))
    p.add_argument("--refresh", action="store_true",
                   help="read the catalog repos' GGUF headers from the Hub first, as the wizard does before it "
                        "recommends (range requests, a few MB per file; cached by revision)")
    p.add_argument("--engine", metavar="WAY", default=None,
                   help="download, build or existing (the best engine you have), an engine id from `beedeck engine "
                        "list`, or the path of a llama-server to add (default: what the wizard preselects)")
    p.add_argument("--ctx", type=int, metavar="N", help="context tokens (default: the pick's)")
    p.add_argument("--cache-type-k", metavar="TYPE", help="K cache type (default: the pick's)")
    p.add_argument("--cache-type-v", metavar="TYPE", help="V cache type (default: the pick's)")
    p.add_argument("--yes", action="store_true", help="run without asking (after reading the plan)")
    p.add_argument("--verbose", action="store_true", help="print every line of a build, too")
    p.set_defaults(func=run_setup)


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    named = {"ctx_size": args.ctx, "cache_type_k": args.cache_type_k, "cache_type_v": args.cache_type_v}
    return {k: v for k, v in named.items() if v is not None}


def _engine_arg(args: argparse.Namespace, services: SetupServices) -> tuple[str, EngineRecord | None]:
    """The way to the engine the flag asks for, and the engine it names ("" : the preselected way)."""
    word = args.engine or ""
    if word in ("", *WAYS):
        return word, None
    registry = services.registry
    try:
        registry.ensure_starter(services.locate_starter)  # the starter's binary is the starter, not a copy
        if "/" in word or Path(word).is_file():  # a llama-server's path: probed and added, as `engine add`
            return EXISTING, registry.add_existing(word)
        return EXISTING, registry.get(word)
    except EngineError as exc:
        raise SetupRefused(f"{exc} (`beedeck engine list` lists the engines; a path adds one)", 2) from None


def _repo_choice(args: argparse.Namespace, report: HardwareReport, card: str, caps: EngineCaps | None,
                 tune: EngineCaps | None) -> Choice:
    from beedeck.core.download import DownloadError
    from beedeck.core.engine.speculation.advice import load_advice
    from beedeck.core.models.recommend.from_repo import recommend_repo

    vram = [g.memory_free for g in report.gpus]
    try:
        rec = recommend_repo(args.repo, vram, card, draft_repos=args.draft_repo, caps=caps, quants=args.quant,
                             advice=load_advice(), tune_caps=tune)
    except DownloadError as exc:  # the hub errors (gated, missing, offline) and SizingError
        raise SetupRefused(str(exc)) from None
    rows = rec.offered() or sorted((r for r in rec.rows if r.plan is not None), key=lambda r: -r.ctx)
    rows = [r for r in rows if args.kind in (None, r.kind)]
    if not rows:
        raise SetupRefused(f"Nothing in {args.repo} runs here:\n" + "\n".join(rec.report(vram)))
    if not rows[0].fits:
        print(f"note: {rows[0].line()} (the largest context this machine gives it)")
    return rec.choice_of(rows[0])


def _pair(args: argparse.Namespace, report: HardwareReport, services: SetupServices,
          named: EngineRecord | None) -> Choice | None:
    """The pick: None for the starter; else the Hub repo's row, or this machine's recommendation (or runner-up)."""
    from beedeck.core.engine.speculation.advice import load_advice
    from beedeck.core.models.recommend.from_catalog import default_engine_caps, recommend

    if args.starter:
        return None
    caps = named.engine_caps() if named is not None else None  # a named engine: only what it runs
    tune = caps or default_engine_caps(services.registry)
    card = card_of(report)
    if args.repo:
        return _repo_choice(args, report, card, caps, tune)
    if args.refresh:
        from beedeck.core.models.recommend import catalog_sizing

        sizing = catalog_sizing.refresh(on_repo=lambda repo, i, n: print(f"[{i + 1}/{n}] reading the headers of "
                                                                         f"{repo}", file=sys.stderr, flush=True))
        print("\n".join(f"  {printable(x, 400)}" for x in sizing.lines()))
    rec = recommend([g.memory_free for g in report.gpus], args.goal, caps=caps, card=card, advice=load_advice(),
                    tune_caps=tune)
    print(f"recommended: {printable(rec.primary.summary(), 400)}")
    for line in rec.reasons:
        print(f"  - {printable(line, 400)}")
    if args.runner_up:
        if rec.runner_up is None:
            raise SetupRefused("The recommendation has no runner-up here.")
        return rec.runner_up
    return None if rec.primary.pair_id == "starter" else rec.primary


def _way(asked: str, named: EngineRecord | None, offers: EngineOffers, records: list[EngineRecord]
         ) -> tuple[str, str]:
    """(the way, the engine id for an existing one), as asked or as the wizard preselects, checked against its
    offer (a greyed one says why)."""
    if named is not None:
        return EXISTING, named.id
    way = asked or offers.default
    offer = offers[way]
    if not offer.enabled:
        raise SetupRefused(f"The engine cannot come by {way} here: {offer.why}", 2 if asked else 1)
    return way, records[0].id if way == EXISTING and records else ""


def _plan_lines(setup: Setup, offers: EngineOffers) -> list[str]:
    c = setup.choices
    pair = c.choice.summary() if c.choice is not None and not c.starter else "the starter profile"
    engine = {DOWNLOAD: offers[DOWNLOAD].label, BUILD: "build BeeLlama from source",
              EXISTING: f"use {c.engine_id}"}[c.engine]
    lines = [f"pair: {pair}", f"engine: {engine} ({offers[c.engine].why})" if c.engine != EXISTING
             else f"engine: {engine}"]
    if c.overrides:
        lines.append("settings: " + ", ".join(f"{k} {v}" for k, v in c.overrides.items()))
    lines.append("steps: " + ", ".join(s.title_for(c).lower() for s in setup.steps()))
    return lines


def _confirmed(args: argparse.Namespace) -> bool:
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print("Nothing done: read the plan above, then run again with --yes.", file=sys.stderr)
        return False
    return input("Set up? [y/N] ").strip().lower() in ("y", "yes")


class _Progress:
    """A step's progress on stderr: at most a line a second (a terminal's line is rewritten)."""

    def __init__(self) -> None:
        self.last = 0.0
        self.shown = (-1, -1)

    def __call__(self, done: object, total: object, eta: float | None = None) -> None:
        d, t = int(done or 0), int(total or 0)  # type: ignore[call-overload]
        now = time.monotonic()
        if not t or (d, t) == self.shown or (d < t and now - self.last < 1.0):
            return
        self.last, self.shown = now, (d, t)
        if eta is not None:  # a build: steps and the time left
            text = f"  {d}/{t} build steps, about {minutes_text(eta)} left"
        else:
            text = f"  {d / 1e6:,.1f} of {t / 1e6:,.1f} MB ({100 * d // t} %)"
        end = "\r" if sys.stderr.isatty() and d < t else "\n"
        print(text + "   ", end=end, file=sys.stderr, flush=True)


def _run(setup: Setup, verbose: bool) -> int:
    cancel = threading.Event()
    outcome: dict[str, Any] = {}
    building = setup.choices.engine == BUILD and not verbose

    def on_step(step: Step, i: int, n: int) -> None:
        outcome["step"] = step
        print(f"[{i}/{n}] {step.title_for(setup.choices)}", flush=True)

    def on_line(line: str) -> None:
        if not (building and outcome["step"].key == "engine"):  # a build's compiler lines: --verbose
            print(f"  {printable(line, 2000)}", flush=True)

    def work() -> None:
        try:
            outcome["result"] = run_all(setup, on_progress=_Progress(), on_line=on_line, cancel_event=cancel,
                                        on_step=on_step, on_done=lambda _s, line: print(f"  done: {line}", flush=True))
        except (StepFailed, StepCancelled) as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="beedeck-setup")
    worker.start()
    while worker.is_alive():
        try:
            worker.join(0.2)
        except KeyboardInterrupt:
            cancel.set()  # the step stops its children (a build's compilers) and keeps what it got
            print("\ncancelling: stopping the step under way…", file=sys.stderr, flush=True)
    error = outcome.get("error")
    if isinstance(error, StepCancelled) or cancel.is_set():
        print("Cancelled: what was fetched or built is kept, so `beedeck setup` resumes where it stopped.",
              file=sys.stderr)
        return CANCELLED
    if isinstance(error, StepFailed):
        print(f"error: {error.failure.message}", file=sys.stderr)
        if error.failure.remedy:
            print(f"  what to do: {error.failure.remedy}", file=sys.stderr)
        return 1
    result = outcome["result"]
    print(f"Set up: {result.label} with {Path(result.settings.target).name}. Start it with `beedeck serve --saved`, "
          "or open the app.")
    return 0


def run_setup(args: argparse.Namespace) -> int:
    from beedeck.core.machine.hardware import detect

    if (args.draft_repo or args.quant or args.kind) and not args.repo:
        print("error: --draft-repo, --quant and --kind go with --repo.", file=sys.stderr)
        return 2
    if args.refresh and (args.repo or args.starter):
        print("error: --refresh reads the catalog's headers for the recommendation: leave out --repo and --starter.",
              file=sys.stderr)
        return 2
    services = SetupServices(save_profile=save_profile)
    report = detect(disk_path=paths.models_dir())
    print(f"machine: {len(report.gpus)} NVIDIA GPU(s)" if report.has_gpu else f"machine: no NVIDIA GPU ({report.reason})")
    try:
        asked, named = _engine_arg(args, services)
        choice = _pair(args, report, services, named)
        choices = SetupChoices(report, choice, card=card_of(report), goal=args.goal, overrides=_overrides(args))
        print("looking for engines and the newest release…", file=sys.stderr, flush=True)
        records, offers = find_engines(choices, services)
        choices.engine, choices.engine_id = _way(asked, named, offers, records)
        choices.offers = offers
    except SetupRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    setup = Setup(choices, services)
    print("\n".join(printable(line, 2000) for line in _plan_lines(setup, offers)))
    if not _confirmed(args):
        return 1
    return _run(setup, args.verbose)
