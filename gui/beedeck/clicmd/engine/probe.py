"""`beedeck engine probe BIN [--json]` and `beedeck engine argv ...`: what a llama-server supports,
and the command line BeeDeck would run on it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from beedeck.core.engine.argv import LaunchRefused, build_argv
from beedeck.core.engine.caps import EngineCaps, Generation, ProbeError
from beedeck.core.engine.known_issues import load_table, markdown_table
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.probe import probe_engine

_GENERATION_TEXT = {
    Generation.BEE_A: "BeeLlama <= 0.3 (Gen A: fork DFlash, TurboQuant)",
    Generation.BEE_B: "BeeLlama >= 0.4 (Gen B: upstream DFlash, KVarN)",
    Generation.MAINLINE: "mainline llama.cpp",
    Generation.UNKNOWN: "unknown llama-server (no DFlash markers)",
}
_NOTABLE = (
    "--spec-dflash-cross-ctx",
    "-cd",
    "--spec-dm-adaptive",
    "--spec-dm-controller",
    "--load-mode",
    "--mlock",
    "--no-mmap",
    "--kv-tail-tokens",
    "--fit",
    "--reasoning",
    "--metrics",
    "--log-jsonl",
    "--no-log-prefix",
)


def register(sub: Any, groups: dict[str, Any]) -> None:
    engine = groups["engine"]
    p = engine.add_parser("probe", help="show what a llama-server binary supports")
    p.add_argument("binary", metavar="BIN", help="path to llama-server")
    p.add_argument("--json", action="store_true", help="print the capability model as JSON")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds per probe run (default: 15)")
    p.add_argument("--no-cache", action="store_true", help="probe again even if the binary is unchanged")
    p.set_defaults(func=run_probe)

    a = engine.add_parser("argv", help="print the llama-server command BeeDeck would run")
    a.add_argument("--engine", required=True, metavar="BIN", help="path to llama-server")
    a.add_argument("--target", required=True, metavar="GGUF")
    a.add_argument("--draft", metavar="GGUF")
    a.add_argument("--spec", choices=[m.setting for m in Mode], default=Mode.BASELINE.setting)
    a.add_argument(
        "--preset", choices=["guide-baseline", "guide-dflash"], help="start from the guide's settings"
    )
    a.add_argument("--ctx", type=int, help="context tokens for the chat slot")
    a.add_argument("--port", type=int)
    a.set_defaults(func=run_argv)

    k = engine.add_parser("known-issues", help="list what BeeDeck knows crashes or fails on each engine")
    k.add_argument("--markdown", action="store_true", help="print docs/known-issues.md")
    k.add_argument("--json", action="store_true", help="print the table as JSON")
    k.set_defaults(func=run_known_issues)


def run_known_issues(args: argparse.Namespace) -> int:
    rows = load_table()
    if args.markdown:
        sys.stdout.write(markdown_table(rows))
    elif args.json:
        print(json.dumps([{**vars(r), "params": dict(r.params)} for r in rows], indent=1))
    else:
        for r in rows:
            message, remedy = r.render({}, use_defaults=False)
            print(f"{r.id}  [{', '.join(r.engines)}; {r.backend}; {r.versions or 'all versions'}; {r.severity}]")
            print(f"    {message}\n    -> {remedy}")
    return 0


def _version_text(caps: EngineCaps) -> str:
    parts = [f"build {caps.build}"] if caps.build is not None else []
    if caps.commit:
        parts.append(f"commit {caps.commit}")
    if caps.version and caps.version != str(caps.build):  # Bee prints the build number as its version
        return f"{caps.version} ({', '.join(parts)})" if parts else caps.version
    return ", ".join(parts) or "?"


def _human(caps: EngineCaps) -> str:
    lines = [
        f"engine:      {caps.path}",
        f"generation:  {_GENERATION_TEXT[caps.generation]}",
        f"version:     {_version_text(caps)}",
    ]
    if caps.built_with:
        lines.append(f"built with:  {caps.built_with}")
    if caps.gpu_backend:
        devices = ", ".join(caps.devices) if caps.devices else "none (CPU only)"
        lines.append(f"devices:     {devices}")
    spelling = caps.dflash_spec_type
    lines.append(
        f"DFlash:      --spec-type {spelling} (draft architecture {caps.dflash_draft_arch})"
        if spelling
        else "DFlash:      not supported"
    )
    lines.append(f"N-gram:      {', '.join(caps.model_free_spec_types) or 'none'}")
    lines.append(f"KV caches:   {', '.join(caps.cache_types) or '?'}")
    if caps.load_modes:
        lines.append(f"load modes:  {', '.join(caps.load_modes)}")
    present = [f for f in _NOTABLE if caps.has(f)]
    lines.append(f"notable:     {' '.join(present) or '-'}")
    lines.append(f"options:     {len(caps.flags)} names")
    return "\n".join(lines)


def run_probe(args: argparse.Namespace) -> int:
    try:
        caps = probe_engine(args.binary, timeout=args.timeout, use_cache=not args.no_cache)
    except ProbeError as exc:
        print(f"beedeck: {exc}", file=sys.stderr)
        return 1
    if args.json:
        data: dict[str, Any] = caps.to_dict()
        data["dflash_spec_type"] = caps.dflash_spec_type
        data["dflash_draft_arch"] = caps.dflash_draft_arch
        print(json.dumps(data, indent=2))
    else:
        print(_human(caps))
    return 0


def run_argv(args: argparse.Namespace) -> int:
    try:
        caps = probe_engine(args.engine)
    except ProbeError as exc:
        print(f"beedeck: {exc}", file=sys.stderr)
        return 1
    if args.preset == "guide-dflash":
        if not args.draft:
            print("beedeck: --preset guide-dflash needs --draft", file=sys.stderr)
            return 2
        settings = LaunchSettings.guide_dflash(args.target, args.draft)
    elif args.preset == "guide-baseline":
        settings = LaunchSettings.guide_baseline(args.target)
    else:
        settings = LaunchSettings(target=args.target, draft=args.draft)
    if args.preset is None or args.spec != Mode.BASELINE.setting:
        settings.spec_mode = next(m for m in Mode if m.setting == args.spec)  # one of the parser's choices
    if args.ctx is not None:
        settings.ctx_size = args.ctx
    if args.port is not None:
        settings.port = args.port
    try:
        plan = build_argv(settings, caps)
    except LaunchRefused as exc:
        for reason in exc.reasons:
            print(f"beedeck: refused: {reason}", file=sys.stderr)
        return 1
    print(plan.command_line(caps.path))
    for note in plan.notes:
        print(f"# {note.kind}: {note.message}", file=sys.stderr)
    return 0
