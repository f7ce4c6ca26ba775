"""`beedeck agent list|show|write|undo|key`: set a coding agent (OpenCode, Aider, Codex CLI, Continue,
Claude Code, any OpenAI/Anthropic tool) up to use BeeDeck's server (core.agents).

The server is the saved launch profile's (the starter's where none is saved); --port, --host, --model
and --ctx describe another. `write` prints the diff first and writes only after a yes (or --yes).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from beedeck.core.agents import configfile
from beedeck.core.agents.clients import BY_ID, CLIENTS, AgentClient, AgentConfigError, client
from beedeck.core.agents.endpoint import NO_KEY, Endpoint, api_key, endpoint_from_settings
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import ProfileError, load_saved_profile
from beedeck.core.starter import STARTER_MODEL_NAME


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("agent", help="use a coding agent (OpenCode, Aider, Codex, Continue, Claude Code) with BeeDeck's server")
    acts = p.add_subparsers(dest="agent_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
    acts.add_parser("list", help="the agents BeeDeck can set up").set_defaults(func=_list)
    for name, helptext, func in (("show", "what the agent needs, its command and the diff of its config", _show),
                                 ("write", "write the agent's config (the diff first; a backup of the old file)", _write)):
        a = acts.add_parser(name, help=helptext)
        a.add_argument("client", choices=list(BY_ID), metavar="CLIENT", help=", ".join(BY_ID))
        a.add_argument("--host", help="the server's host (default: the saved profile's)")
        a.add_argument("--port", type=int, help="the server's port (default: the saved profile's, else 8477)")
        a.add_argument("--model", help="the model alias the server answers to (default: from the profile's model)")
        a.add_argument("--ctx", type=int, help="the server's context size")
        if name == "write":
            a.add_argument("--yes", action="store_true", help="write without asking (after reading the diff)")
        a.set_defaults(func=func)
    u = acts.add_parser("undo", help="put back the config file BeeDeck's last write replaced")
    u.add_argument("client", choices=list(BY_ID), metavar="CLIENT")
    u.add_argument("--force", action="store_true", help="restore even though the file was edited since")
    u.set_defaults(func=_undo)
    acts.add_parser("key", help="print the server's API key from the keyring (for $(...) and apiKeyHelper)"
                    ).set_defaults(func=_key)


def _endpoint(args: argparse.Namespace) -> Endpoint:
    try:
        profile = load_saved_profile()
    except ProfileError as exc:
        print(f"{exc} Using the starter's server for now.", file=sys.stderr)
        profile = None
    settings = (profile.settings if profile is not None and not profile.is_remote
                else LaunchSettings(target=STARTER_MODEL_NAME, ctx_size=8192))
    if args.host:
        settings.host = args.host
    ep = endpoint_from_settings(settings, args.port)
    if args.model or args.ctx:
        from dataclasses import replace

        ep = replace(ep, model=args.model or ep.model, ctx_size=args.ctx or ep.ctx_size)
    return ep


def _list(args: argparse.Namespace) -> int:
    for c in CLIENTS:
        where = str(c.config()) if c.config else "(no config file: environment variables)"
        print(f"{c.id:12} {c.label:32} {c.protocol:9} {where}")
    return 0


def _describe(c: AgentClient, ep: Endpoint) -> list[str]:
    lines = [f"{c.label}: {ep.openai_url if c.protocol == 'openai' else ep.base_url} "
             f"({'/v1/chat/completions' if c.protocol == 'openai' else '/v1/messages'}), model {ep.model}"]
    lines += [f"  needs {need}" for need in c.needs(ep)]
    if ep.key_required:
        lines.append(f"  key: {c.key_note}")
    for name, value in c.env(ep).items():
        lines.append(f'  export {name}="{value}"' if value.startswith("$(") else f"  export {name}={value}")
    if c.command(ep):
        lines.append(f"  run: {c.command(ep)}")
    return lines


def _show(args: argparse.Namespace) -> int:
    c, ep = client(args.client), _endpoint(args)
    print("\n".join(_describe(c, ep)))
    if c.config is None:
        return 0
    try:
        plan = configfile.plan(c, ep)
    except AgentConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(plan.diff() or f"{plan.path} already says this: nothing to write.")
    return 0


def _write(args: argparse.Namespace) -> int:
    c, ep = client(args.client), _endpoint(args)
    try:
        plan = configfile.plan(c, ep)
    except AgentConfigError as exc:
        print(str(exc), file=sys.stderr)
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
    except (AgentConfigError, OSError) as exc:
        print(f"Not written: {exc}", file=sys.stderr)
        return 1
    kept = f" (the old file is kept as {backup})" if backup else ""
    print(f"Wrote {plan.path}{kept}. Undo: beedeck agent undo {c.id}")
    if c.command(ep):
        print(f"Run: {c.command(ep)}")
    return 0


def _undo(args: argparse.Namespace) -> int:
    try:
        print(configfile.undo(args.client, force=args.force))
    except (AgentConfigError, OSError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


def _key(args: argparse.Namespace) -> int:
    key = api_key()
    print(key or NO_KEY)
    return 0
