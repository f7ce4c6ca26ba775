"""`beedeck serve`: run llama-server in the foreground (the starter profile unless told otherwise)."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from beedeck.clicmd.launch_args import add_settings_arguments, apply_settings_arguments
from beedeck.clicmd.worker import print_rpc_plan
from beedeck.core.engine.argv import LaunchRefused, build_argv, redact
from beedeck.core.engine.caps import EngineCaps, ProbeError
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.remote import stored_api_key
from beedeck.core.engine.rpc.probe import restate
from beedeck.core.engine.server import ServerFailed, ServerFailure, ServerProcess, describe
from beedeck.core.engine.speculation.modes import parse_spec, pick_model_free_type
from beedeck.core.launcher import Preflight, launch
from beedeck.core.profile import ProfileError, load_saved_profile
from beedeck.core.starter import (
    StarterMissing,
    StarterProfile,
    settings_for_model,
    starter_engine,
    starter_model,
)


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("serve", help="run llama-server in the foreground (default: the starter profile)")
    add_launch_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON line when ready (the log goes to stderr)")
    p.add_argument("--print-argv", action="store_true", help="print the command line and exit without starting")
    p.add_argument("--exit-when-ready", action="store_true", help="stop the server and exit once it is ready")
    p.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for ready (default: 600)")
    p.set_defaults(func=run_serve)


def add_launch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--saved", action="store_true",
                   help="the saved profile (what `beedeck setup` or the app saved) instead of the starter; the "
                        "flags below change it for this run")
    p.add_argument("--engine", metavar="BIN", help="llama-server binary (default: the starter engine)")
    p.add_argument("--model", metavar="GGUF", help="target model (default: the starter model)")
    p.add_argument("--draft", metavar="GGUF", help="draft model (a DFlash, EAGLE-3 or DSpark GGUF)")
    p.add_argument("--spec", metavar="MODE",
                   help="speculative decoding: off (the default, but --saved's own), dflash, eagle3, dspark (with "
                        "--draft), mtp (the target's own MTP heads, no draft), or an N-gram type such as ngram-mod")
    p.add_argument("--port", type=int, metavar="N", help="port (default: a free one)")
    p.add_argument("--host", metavar="H", help="address to listen on (default: 127.0.0.1; another address "
                   "needs an API key: BEEDECK_API_KEY in the environment, or --api-key-prompt)")
    p.add_argument("--api-key-prompt", action="store_true",
                   help="ask for the server's API key on the terminal (never pass a key on the command line)")
    add_settings_arguments(p)


def saved_profile(args: argparse.Namespace) -> tuple[Path, LaunchSettings]:
    """``--saved``: the saved profile's engine and settings (raises ProfileError: none saved, a server BeeDeck did
    not start, a newer BeeDeck's file, or flags that name another engine or model)."""
    if args.engine or args.model or args.draft:
        raise ProfileError("--saved starts the saved profile's engine and models: leave out --engine, --model "
                           "and --draft (or --saved).")
    profile = load_saved_profile()
    if profile is None:
        raise ProfileError("No profile is saved yet: run `beedeck setup` (or the app's setup wizard) first.")
    if profile.is_remote:
        raise ProfileError(f"The saved profile is a server BeeDeck did not start ({profile.engine}): talk to it "
                           f"with `beedeck chat --url {profile.engine}`.")
    return Path(profile.engine), profile.settings


def resolve(args: argparse.Namespace) -> tuple[Path, EngineCaps, LaunchSettings]:
    """Engine, its capabilities and the settings for these arguments (raises StarterMissing, ProbeError,
    ProfileError)."""
    # Only what was not given comes from the starter: assembling its model for a user's own model
    # would cost a 250 MB copy, and its chat template (Gemma's) would be wrong for another model.
    saved = getattr(args, "saved", False)
    settings: LaunchSettings
    if saved:
        engine, settings = saved_profile(args)
    else:
        engine = Path(args.engine) if args.engine else starter_engine()
        settings = (settings_for_model(engine, Path(args.model)) if args.model
                    else StarterProfile(engine=engine, model=starter_model()).settings())
    model_free_type = None
    if args.spec is not None or not saved:  # the saved profile keeps its own mode unless one is named
        settings.spec_mode, model_free_type = parse_spec(args.spec)
    if model_free_type:
        settings.spec_model_free_type = model_free_type
    if args.draft:
        settings.draft = str(Path(args.draft))
    apply_settings_arguments(args, settings)
    if args.port is not None:
        settings.port = args.port
    if args.host:
        settings.host = args.host
    settings.api_key = api_key_from(args) or (settings.api_key if saved else None)  # the saved one's: the keyring
    caps = probe_engine(str(engine))
    if settings.spec_mode == Mode.MODEL_FREE and not model_free_type:  # "--spec model-free": one that runs here
        settings.spec_model_free_type = pick_model_free_type(caps, settings.spec_model_free_type) or \
            settings.spec_model_free_type
    return engine, caps, settings


API_KEY_ENV = "BEEDECK_API_KEY"


def api_key_from(args: argparse.Namespace) -> str | None:
    """The API key from the environment or the terminal: a key on the command line would show in ps
    and in the shell's history."""
    if getattr(args, "api_key_prompt", False):
        key = getpass.getpass("API key for the server (not shown): ").strip()
        return key or None
    env = os.environ.get(API_KEY_ENV, "").strip() or None
    if env is None and getattr(args, "url", None):  # bench --url: the key a saved remote profile keeps
        return stored_api_key(args.url)
    return env


def print_failure(failure: ServerFailure, tail_lines: int = 12) -> None:
    failure = restate(failure)  # a failure RPC workers caused, said as such
    print(f"error: {failure.message}", file=sys.stderr)
    if failure.remedy:
        print(f"  what to do: {failure.remedy}", file=sys.stderr)
    tail = [x for x in failure.log_tail if x.strip()][-tail_lines:]
    if tail:
        print("  last log lines:", file=sys.stderr)
        for line in tail:
            print(f"    {line}", file=sys.stderr)


def print_refusal(exc: LaunchRefused) -> None:
    """Why the launch was refused (the launch preflight's refusals, as the launch form shows them), with the
    command line's own way out where the form's differs."""
    for r in exc.refusals:
        print(f"error: {r.message}", file=sys.stderr)
        if r.remedy:
            print(f"  what to do: {r.remedy}", file=sys.stderr)
        if "needs an API key" in r.message:
            print(f"  from the command line: put the key in the {API_KEY_ENV} environment variable, or pass "
                  "--api-key-prompt to type it (a key in argv would show in ps and the shell history).",
                  file=sys.stderr)


# Refusals of the arguments themselves (a value or flag this engine does not take): exit status 2, as a bad
# command line; any other refusal (a model file, a draft, the machine's memory, a known crash) means this run
# could not go: exit status 1, as a server that failed to start.
ARGUMENT_CODES = frozenset({"bad_value", "unknown_argument", "unsupported_cache_type"})


def refusal_status(exc: LaunchRefused) -> int:
    return 2 if all(r.code in ARGUMENT_CODES for r in exc.refusals) else 1


def start_from_args(args: argparse.Namespace, *, on_line: Any = None) -> ServerProcess | int:
    """Launch for these arguments; on a refusal print why and return the exit status instead."""
    try:
        engine, caps, settings = resolve(args)
    except (StarterMissing, ProbeError, ProfileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def checked(passed: Preflight) -> None:
        if settings.rpc_workers:  # the workers the preflight probed through the engine, and the per-device plan
            print_rpc_plan(passed)

    try:
        return launch(engine, caps, settings, on_line=on_line, on_checked=checked)
    except LaunchRefused as exc:  # the preflight's refusals (a ServerFailed too: caught first)
        print_refusal(exc)
        return refusal_status(exc)
    except ServerFailed as exc:
        print_failure(exc.failure)
        return 1


def ready_facts(proc: ServerProcess) -> dict[str, Any]:
    """What the engine really made, from the server itself: the context per slot after its own cap (it caps a
    slot at the model's training context), and the tool-safe advice for the speculation it runs."""
    from beedeck.core.agents.running import asked_per_slot, context_line, read_props, spec_of_argv
    from beedeck.core.agents.toolsafe import spec_lines

    props = read_props(proc.base_url, proc.api_key)
    asked = asked_per_slot(proc.argv)
    said = [context_line(asked, props.n_ctx if props else None, props.n_ctx_train if props else None, running=True)]
    said += spec_lines(spec_of_argv(proc.argv), proc.caps)
    return {"n_ctx": props.n_ctx if props else None, "n_ctx_asked": asked, "said": said}


def run_serve(args: argparse.Namespace) -> int:
    if args.print_argv:
        try:  # the command line alone (build_argv's refusals): nothing starts, so nothing else is judged
            engine, caps, settings = resolve(args)
            plan = build_argv(replace(settings), caps)
        except (StarterMissing, ProbeError, ProfileError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except LaunchRefused as exc:
            print_refusal(exc)
            return 2
        print(shlex.join([str(engine), *redact(plan.argv)]))
        return 0

    def on_line(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started = start_from_args(args, on_line=on_line)
    if isinstance(started, int):
        return started
    proc = started
    try:
        if not args.json:
            print("running: " + shlex.join(redact(proc.command())), flush=True)
            for note in proc.notes:
                print(f"note: {note.message}", flush=True)
        try:
            ready_s = proc.wait_ready(args.ready_timeout)
        except ServerFailed as exc:
            print_failure(exc.failure)
            return 1
        facts = ready_facts(proc)
        if args.json:
            print(json.dumps({**describe(proc), "time_to_ready_s": round(ready_s, 3), **facts}), flush=True)
        else:
            print(f"ready in {ready_s:.2f} s at {proc.base_url} (Ctrl+C stops it)", flush=True)
            for line in facts["said"]:
                print(line, flush=True)
        if args.exit_when_ready:
            return 0
        while proc.wait_exit(0.5) is None:
            pass
        if proc.failure is not None:
            print_failure(proc.failure)
            return 1
        return 0
    except KeyboardInterrupt:
        print("stopping llama-server ...", file=sys.stderr, flush=True)
        return 0
    finally:
        proc.stop()
