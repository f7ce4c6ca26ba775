"""`beedeck tune`: search the launch settings for the fastest ones on this engine and card, headless.

The start is the saved profile (or the starter profile), ``--engine/--target/--draft``, or the
synthetic sticky pair (``--synthetic``); every launch flag of ``beedeck bench`` can change it (e.g.
``--draft-max 1`` for a deliberately poor start). Prints the plan, a progress bar on stderr, the
table of points and the verdict; writes tune.md / tune.json / tune.csv (+ tune.png when PySide6 is
importable) to ``--out``. ``--save-profile`` saves the best configuration as the launch profile,
only when it beat the start. Exit status: 0 ok (found or honestly not), 1 the baseline or the start
could not be measured, 2 bad arguments, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from beedeck.clicmd.advice import learn_from_tune
from beedeck.clicmd.background import run_interruptible
from beedeck.clicmd.bench import SYNTH_MAX_TOKENS, synthetic_dflash_settings
from beedeck.clicmd.launch_args import add_settings_arguments, apply_settings_arguments
from beedeck.core import paths
from beedeck.core.bench.runner import DEFAULT_REPS
from beedeck.core.bench.suites import BUILTIN_SUITES, BenchError, BenchSuite, load_suite
from beedeck.core.bench.tune import TunePlan, TuneResult, suite_from_chat, tune
from beedeck.core.bench.tune.report import TuneChartRenderer, format_table, result_dict, write_tune_reports
from beedeck.core.chat.store import ChatStore, ChatStoreError
from beedeck.core.engine.caps import EngineCaps, ProbeError
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.ports import HostError
from beedeck.core.engine.probe import probe_engine
from beedeck.core.profile import Profile, ProfileError, load_saved_profile, save_profile
from beedeck.core.starter import (
    StarterMissing,
    settings_for_model,
    starter_engine,
    starter_model,
)

DEFAULT_BUDGET = "10m"
DEFAULT_MAX_TOKENS = 128  # the same short replies at every point: enough to time generation


def parse_duration(text: str) -> float:
    """"10m", "90s", "1h", "1h30m" or plain seconds -> seconds; BenchError naming the fix."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*(h|min|m|s)", t)
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*(h|min|m|s)", "", t).strip():
        raise BenchError(f"--budget {text!r} is not a duration: use e.g. 10m, 90s or 1h.")
    scale = {"h": 3600.0, "m": 60.0, "min": 60.0, "s": 1.0}
    return sum(float(n) * scale[u] for n, u in parts)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("tune", help="search the launch settings for the fastest ones on this machine")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--suite", default="seed", metavar="NAME|FILE",
                     help=f"prompts: a built-in suite ({', '.join(BUILTIN_SUITES)}) or a JSON suite file")
    src.add_argument("--from-chat", type=int, metavar="ID",
                     help="prompts: your own last prompts of this conversation (see --last); they go only to the "
                          "local server BeeDeck starts")
    p.add_argument("--last", type=int, default=5, metavar="N", help="with --from-chat: how many prompts (default: 5)")
    p.add_argument("--budget", default=DEFAULT_BUDGET, metavar="TIME",
                   help=f"time for the whole search, e.g. 10m, 90s, 1h (default: {DEFAULT_BUDGET})")
    p.add_argument("--reps", type=int, default=DEFAULT_REPS, help=f"repetitions per prompt and point (default: {DEFAULT_REPS})")
    p.add_argument("--max-tokens", type=int, metavar="N", help=f"reply length (default: {DEFAULT_MAX_TOKENS})")
    p.add_argument("--min-gain", type=float, default=0.02, metavar="F",
                   help="a point must be faster by at least this share, outside the noise (default: 0.02)")
    p.add_argument("--out", metavar="DIR", help="report folder (default: a new folder under the data folder)")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON on stdout")
    p.add_argument("--save-profile", action="store_true",
                   help="save the best configuration as the launch profile (only if it beat the start; an "
                        "unconfirmed win is saved with a note to run again)")
    p.add_argument("--engine", metavar="BIN", help="llama-server binary (default: the saved profile's, else the starter)")
    p.add_argument("--target", metavar="GGUF", help="target model")
    p.add_argument("--draft", metavar="GGUF", help="DFlash draft model (its other quants beside it are tried too)")
    p.add_argument("--synthetic", action="store_true",
                   help="the tiny synthetic sticky target + DFlash draft (CPU, greedy, 100 %% acceptance)")
    add_settings_arguments(p)
    p.add_argument("--no-charts", action="store_true", help="do not draw the PNG chart")
    p.add_argument("--no-learn", action="store_true",
                   help="do not add the figures to the speed advice (`beedeck advice`)")
    p.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for each server")
    p.set_defaults(func=run_tune_command)


def _say(text: str, args: argparse.Namespace) -> None:
    """A line for the reader: stdout, or stderr when stdout carries the JSON."""
    if sys.stderr.isatty():
        sys.stderr.write("\r" + " " * 100 + "\r")
    print(text, file=sys.stderr if args.json else sys.stdout, flush=True)


def _start(args: argparse.Namespace) -> tuple[Path, EngineCaps, LaunchSettings, str]:
    """The engine, its capabilities, the start settings and the profile label."""
    label = ""
    engine = Path(args.engine) if args.engine else None
    settings: LaunchSettings | None = None
    if args.synthetic:
        settings, label = synthetic_dflash_settings(engine), "synthetic (tuned)"
    elif engine is None and not args.target:
        try:
            saved = load_saved_profile()
        except ProfileError as exc:
            raise BenchError(str(exc)) from None
        if saved is not None and saved.is_remote:
            raise BenchError(f"The saved profile is a server BeeDeck did not start ({saved.engine}): tuning starts "
                             "the engine once per point. Give the engine and the model: beedeck tune --engine "
                             "BIN --target MODEL.gguf [--draft DRAFT.gguf].")
        if saved is not None:
            engine, settings, label = Path(saved.engine), saved.settings, saved.label
            _say(f"Starting from the saved profile ({saved.engine}, {Path(settings.target).name}).", args)
    engine = engine or starter_engine()  # raises StarterMissing with the install command
    if settings is None:
        settings = settings_for_model(engine, Path(args.target) if args.target else starter_model())
    if args.draft:
        settings.draft = str(Path(args.draft))
    apply_settings_arguments(args, settings)
    caps = probe_engine(str(engine))
    if settings.draft and settings.spec_mode == Mode.BASELINE and caps.dflash_spec_type is not None:
        settings = replace(settings, spec_mode=Mode.DFLASH)  # tune what the draft is for
    return engine, caps, settings, label


def _suite(args: argparse.Namespace) -> BenchSuite:
    max_tokens = args.max_tokens or (SYNTH_MAX_TOKENS if args.synthetic else DEFAULT_MAX_TOKENS)
    if args.from_chat is None:
        suite = load_suite(args.suite)
        # A built-in suite's long replies would make every point slow; a user's file keeps its own length.
        own = args.max_tokens is None and not suite.source.startswith("builtin:")
        return suite.with_overrides(None if own else max_tokens, 0.0)
    try:
        store = ChatStore()
        try:
            conv = store.conversation(args.from_chat)
            if conv is None:
                raise BenchError(f"There is no conversation {args.from_chat} in the chat history: "
                                 "`beedeck chat` or the app lists them.")
            suite = suite_from_chat(store.messages(conv.id), args.last, conv.title, max_tokens,
                                    source=f"chat:{conv.id}")
        finally:
            store.close()
    except ChatStoreError as exc:
        raise BenchError(str(exc)) from None
    _say(f"Using the last {len(suite.prompts)} prompts of your conversation {conv.title!r} ({conv.id}), at "
         "temperature 0; they are sent only to the local server BeeDeck starts.", args)
    return suite


def chart_renderer() -> TuneChartRenderer | None:
    """The QPainter chart renderer when PySide6 is importable, else None (no PNG)."""
    try:
        from beedeck.ui.bench.tune_chart import render_tune_chart
    except ImportError:
        return None
    return render_tune_chart


_last_head: list[str] = [""]


def _bar(done: int, total: int, label: str) -> None:
    """A redrawn bar on a terminal; in a log (stderr not a terminal) one line per point instead."""
    if not sys.stderr.isatty():
        head = label.split(": ", 2)[:2]
        line = ": ".join(head) if label.startswith("point ") else label
        if line != _last_head[0]:
            _last_head[0] = line
            sys.stderr.write(f"[{done}/{total}] {line}\n")
            sys.stderr.flush()
        return
    width = 24
    filled = int(width * done / total) if total else width
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label[:60]:<60}")
    sys.stderr.flush()


def run_tune_command(args: argparse.Namespace) -> int:
    try:
        budget = parse_duration(args.budget)
        engine, caps, start, label = _start(args)
        suite = _suite(args)
    except (BenchError, StarterMissing, ProbeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else paths.data_dir() / "tune" / time.strftime("%Y%m%d-%H%M%S")
    cancel = threading.Event()

    def on_plan(plan: TunePlan) -> None:
        # First the whole plan, up front; then, once the baseline has been timed, only the estimate.
        _say(plan.estimate() if plan.point_s is not None else plan.describe(), args)

    def work() -> TuneResult:
        return tune(engine, caps, start, suite, budget_s=budget, reps=args.reps, on_progress=_bar,
                    on_plan=on_plan, cancel_event=cancel, min_gain=args.min_gain, ready_timeout=args.ready_timeout)

    # On a worker so Ctrl-C cancels cleanly: the server is stopped and the measured points are kept.
    outcome = run_interruptible(work, cancel, "beedeck-tune")
    interrupted = outcome.interrupted
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    try:
        result = outcome.unwrap()
    except (BenchError, HostError) as exc:  # HostError: a --host that does not resolve here
        print(f"error: {exc}", file=sys.stderr)
        return 2
    files = write_tune_reports(result, out, None if args.no_charts else chart_renderer())
    saved = _save(result, engine, label, args)
    learnt = None if args.no_learn else learn_from_tune(result, caps, start)
    if args.json:
        print(json.dumps({**result_dict(result), "files": [str(f) for f in files], "saved_profile": saved,
                          "advice": learnt},
                         indent=2, ensure_ascii=False))
    else:
        print(format_table(result))
        print()
        print(result.verdict)
        for note in result.notes:
            print(f"note: {note}")
        if saved:
            print(f"saved the best configuration as the launch profile: {saved}")
        if learnt:
            print(learnt)
        print(f"reports: {', '.join(str(f) for f in files)}")
    if interrupted or result.cancelled:
        return 130
    return 0 if result.best is not None else 1


def _save(result: TuneResult, engine: Path, label: str, args: argparse.Namespace) -> str | None:
    if not args.save_profile:
        return None
    if not result.savable or result.best_settings is None:
        _say("Nothing was saved: no configuration beat the start, so the profile stays as it is.", args)
        return None
    if not result.improved:
        _say("Saving an unconfirmed win (it was measured once): run tune again to confirm it.", args)
    try:
        return str(save_profile(Profile(str(engine), result.best_settings, label or "tuned")))
    except ProfileError as exc:  # a newer BeeDeck's profile.json: left as it is
        _say(str(exc), args)
        return None
