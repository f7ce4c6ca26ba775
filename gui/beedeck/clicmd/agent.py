"""`beedeck agent list|show|write|undo|key`: set a coding agent (OpenCode, Aider, Codex CLI, Continue,
Claude Code, any OpenAI/Anthropic tool) up to use BeeDeck's server (core.agents).

The server is the one BeeDeck runs (its port, alias, context per slot after the engine's cap, key and
chat template, read from the server itself: core.agents.running); with none running, the saved profile's
(the starter's where none is saved), said as such. --port picks one of several running servers; --host,
--model and --ctx describe another. `write` prints the diff first and writes only after a yes (or --yes).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from typing import Any

from beedeck.core.agents import configfile
from beedeck.core.agents.clients import BY_ID, CLIENTS, AgentClient, AgentConfigError, client, refusal
from beedeck.core.agents.running import ServerView, agent_key, describe, server_view
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import ProfileError, load_saved_profile
from beedeck.core.starter import STARTER_MODEL_NAME

_HOST = re.compile(r"^[A-Za-z0-9._:%\[\]-]{1,253}$")


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("agent", help="use a coding agent (OpenCode, Aider, Codex, Continue, Claude Code) with BeeDeck's server")
    acts = p.add_subparsers(dest="agent_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    acts.add_parser("list", help="the agents BeeDeck can set up").set_defaults(func=_list)
    for name, helptext, func in (("show", "what the agent needs, its command and the diff of its config", _show),
                                 ("write", "write the agent's config (the diff first; a backup of the old file)", _write)):
        a = acts.add_parser(name, help=helptext)
        a.add_argument("client", choices=list(BY_ID), metavar="CLIENT", help=", ".join(BY_ID))
        a.add_argument("--host", help="the server's host (default: the running server's, else the saved profile's)")
        a.add_argument("--port", type=int, help="the server's port (default: the running server's; with several "
                       "running, the one on this port)")
        a.add_argument("--model", help="the model alias the server answers to (default: the server's own)")
        a.add_argument("--ctx", type=int, help="the context per slot (default: what the server really gives)")
        if name == "write":
            a.add_argument("--yes", action="store_true", help="write without asking (after reading the diff)")
        a.set_defaults(func=func)
    u = acts.add_parser("undo", help="put back the config file BeeDeck's last write replaced (again: the one before)")
    u.add_argument("client", choices=list(BY_ID), metavar="CLIENT")
    u.add_argument("--force", action="store_true", help="restore even though the file was edited since")
    u.set_defaults(func=_undo)
    acts.add_parser("key", help="print the running server's API key (for $(...) and apiKeyHelper)"
                    ).set_defaults(func=_key)


def _view(args: argparse.Namespace) -> ServerView:
    try:
        profile = load_saved_profile()
    except ProfileError as exc:
        print(f"{exc} Using the starter's server for now.", file=sys.stderr)
        profile = None
    local = profile is not None and not profile.is_remote
    settings = profile.settings if profile is not None and local else LaunchSettings(target=_starter_model(),
                                                                                      ctx_size=8192)
    view = server_view(settings, args.port, "the saved profile" if local else "the starter's settings")
    if not (args.host or args.model or args.ctx):
        return view
    if args.host and not _HOST.match(args.host):
        raise AgentConfigError(f"--host {args.host!r} is not a host name or an address: give one such as 127.0.0.1 "
                               "or 192.168.1.20.")
    ep = replace(view.endpoint, host=args.host or view.endpoint.host, model=args.model or view.endpoint.model,
                 ctx_size=args.ctx or view.endpoint.ctx_size)
    if args.host and not ep.is_local:
        ep = replace(ep, key_required=True)
    given = ", ".join(f"--{k} {v}" for k, v in (("host", args.host), ("model", args.model), ("ctx", args.ctx)) if v)
    return replace(view, endpoint=ep, lines=(*view.lines, f"note: {given} as given, not as the server says"))


def _starter_model() -> str:
    """The starter's model where it already is (the package's, or the one taken out into the data folder)."""
    from beedeck.core import paths
    from beedeck.core.starter import bundled

    found = [p for p in (bundled(STARTER_MODEL_NAME), paths.models_dir() / "starter" / STARTER_MODEL_NAME) if p]
    return str(next((p for p in found if p.is_file()), STARTER_MODEL_NAME))


def _caps(view: ServerView) -> EngineCaps | None:
    engine = view.engine
    if not engine:
        try:
            profile = load_saved_profile()
        except ProfileError:
            profile = None
        engine = profile.engine if profile is not None and not profile.is_remote else ""
    if not engine:
        from beedeck.core.starter import StarterMissing, starter_engine

        try:
            engine = str(starter_engine())
        except StarterMissing:
            return None
    try:
        from beedeck.core.engine.probe import probe_engine

        return probe_engine(engine)
    except Exception:  # advice only: an engine that cannot be probed here gets none
        return None


def _list(args: argparse.Namespace) -> int:
    for c in CLIENTS:
        where = str(c.config()) if c.config else "(no config file: environment variables)"
        print(f"{c.id:12} {c.label:32} {c.protocol:9} {where}")
    return 0


def _plan(args: argparse.Namespace) -> tuple[AgentClient, ServerView, configfile.ConfigPlan | None] | int:
    c = client(args.client)
    try:
        view = _view(args)
    except AgentConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    print("\n".join(describe(c, view, _caps(view))))
    if c.config is None:
        return c, view, None
    why_not = refusal(c, view.endpoint)
    if why_not and args.agent_command == "write":
        print(f"Not written: {why_not}", file=sys.stderr)
        return 1
    try:
        return c, view, configfile.plan(c, view.endpoint)
    except AgentConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1


def _show(args: argparse.Namespace) -> int:
    planned = _plan(args)
    if isinstance(planned, int):
        return planned
    plan = planned[2]
    if plan is not None:
        print(plan.diff() or f"{plan.path} already says this: nothing to write.")
    return 0


def _write(args: argparse.Namespace) -> int:
    planned = _plan(args)
    if isinstance(planned, int):
        return planned
    c, view, plan = planned
    if plan is None:
        print(f"{c.label} has no config file of its own: use the environment above.", file=sys.stderr)
        return 1
    if not plan.changes:
        print(f"{plan.path} already says this: nothing to write.")
        return 0
    print(plan.diff())
    if not args.yes:
        if not sys.stdin.isatty():
            print("Not written: read the diff above, then run again with --yes.", file=sys.stderr)
            return 1
        if input(f"Write {plan.path}? [y/N] ").strip().lower() not in ("y", "yes"):
            print("Not written.")
            return 1
    try:
        backup = configfile.write(plan)
    except configfile.AlreadyWritten as exc:
        print(f"{exc} Nothing to write.")
        return 0
    except (AgentConfigError, OSError) as exc:
        print(f"Not written: {exc}", file=sys.stderr)
        return 1
    kept = f" (the old file is kept as {backup})" if backup else ""
    print(f"Wrote {plan.path}{kept}. Undo: beedeck agent undo {c.id}")
    if c.command(view.endpoint):
        print(f"Run: {c.command(view.endpoint)}")
    return 0


def _undo(args: argparse.Namespace) -> int:
    try:
        print(configfile.undo(args.client, force=args.force))
    except (AgentConfigError, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def _key(args: argparse.Namespace) -> int:
    found = agent_key()
    if found.key is None:
        print(f"No API key is known for BeeDeck's server: {found.source}. Start the server with its key (the app "
              "keeps it in the keyring; `BEEDECK_API_KEY=... beedeck serve --host ...` reads it from the "
              "environment), or export BEEDECK_API_KEY where the agent runs.", file=sys.stderr)
        return 1
    print(found.key)
    return 0
