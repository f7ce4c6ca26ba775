"""BeeDeck's command line: the core, headless. Each command group lives in ``beedeck.clicmd``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from beedeck import __version__
from beedeck.core import paths
from beedeck.core.printable import TerminalGuard

# Each module defines register(sub, groups): `sub` is the top-level subparsers object and
# `groups` maps a group name ("engine", "models") to that group's subparsers.
# The modules follow core's wings: machine, models, engine, chat, bench.
COMMAND_MODULES: tuple[str, ...] = (
    "beedeck.clicmd.machine",
    "beedeck.clicmd.models.library",
    "beedeck.clicmd.models.plan",
    "beedeck.clicmd.engine.probe",
    "beedeck.clicmd.engine.manage",
    "beedeck.clicmd.engine.serve",
    "beedeck.clicmd.setup",
    "beedeck.clicmd.chat",
    "beedeck.clicmd.bench",
    "beedeck.clicmd.connect",
    "beedeck.clicmd.worker",
    "beedeck.clicmd.tune",
    "beedeck.clicmd.advice",
    "beedeck.clicmd.agent",
)

GROUPS = {
    "engine": "manage llama-server engines (probe, list, add, build, download, remove)",
    "models": "find and download GGUF models",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="beedeck", description="BeeDeck: fast local coding models, headless.")
    parser.add_argument("--version", action="version", version=f"beedeck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups = {}
    for name, help_text in GROUPS.items():
        group_parser = sub.add_parser(name, help=help_text)
        groups[name] = group_parser.add_subparsers(dest=f"{name}_command", metavar="ACTION")
        group_parser.set_defaults(func=lambda args, p=group_parser: (p.print_help(), 2)[1])
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub, groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    words = [args.command, getattr(args, f"{args.command}_command", None)]
    paths.set_role("`beedeck " + " ".join(w for w in words if w) + "`")  # how other BeeDeck processes name this one
    # Model names, tensor names and server answers end up in what the commands print: no control
    # character in them may act on the terminal (core/printable.py).
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalGuard(out), TerminalGuard(err)
    try:
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":
    sys.exit(main())
