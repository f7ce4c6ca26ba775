"""`beedeck worker`: lend this machine's devices to a llama-server elsewhere (llama.cpp's RPC worker).

Runs the engine's own ``ggml-rpc-server`` / ``rpc-server`` (built beside llama-server with RPC on)
in the foreground until Ctrl+C. It listens on 127.0.0.1 unless ``--host`` names another address
*and* ``--allow-network`` is given: the RPC protocol has no authentication, so that is for a trusted
network only (or keep 127.0.0.1 and reach it through an SSH tunnel).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from beedeck.core.engine.rpc import (
    DEFAULT_WORKER_PORT,
    NO_AUTH_WARNING,
    RpcError,
    is_loopback,
    require_worker_binary,
    start_worker,
)

if TYPE_CHECKING:
    from beedeck.core.launcher import Preflight


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("worker", help="run an RPC worker: lend this machine's devices to a server elsewhere")
    p.add_argument("--engine", metavar="BIN", help="the llama-server whose RPC worker to run (default: the "
                   "saved profile's engine, else the starter engine)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_WORKER_PORT, help=f"port (default: {DEFAULT_WORKER_PORT})")
    p.add_argument("--device", metavar="DEV,...", help="devices to lend, as the engine names them (CUDA0,...)")
    p.add_argument("--threads", type=int, metavar="N", help="CPU threads of the worker's CPU device")
    p.add_argument("--cache", action="store_true", help="keep received tensors in a local file cache")
    p.add_argument("--allow-network", action="store_true",
                   help="listen on an address other machines can reach (the RPC protocol has no authentication)")
    p.set_defaults(func=run_worker)


def default_engine() -> Path:
    from beedeck.core.profile import ProfileError, load_saved_profile
    from beedeck.core.starter import starter_engine

    try:
        profile = load_saved_profile()
    except ProfileError:
        profile = None
    if profile is not None and not profile.is_remote:
        return Path(profile.engine)
    return Path(starter_engine())


def run_worker(args: argparse.Namespace) -> int:
    try:
        engine = Path(args.engine) if args.engine else default_engine()
        binary = require_worker_binary(engine)
        if not is_loopback(args.host) and args.allow_network:  # without the flag the refusal below says it
            print(f"warning: {NO_AUTH_WARNING}", file=sys.stderr)
        devices = [d.strip() for d in (args.device or "").split(",") if d.strip()]
        worker = start_worker(binary, args.host, args.port, devices, args.threads, args.cache,
                              allow_network=args.allow_network, on_line=lambda line: print(line, flush=True))
    except RpcError as exc:
        print(f"error: {exc.message}\n  {exc.remedy}", file=sys.stderr)
        return 2
    try:
        worker.wait_listening()
        print(f"worker listening on {worker.address}; on the main machine: beedeck serve --rpc "
              f"{worker.address} ... (Ctrl+C stops it)", flush=True)
        while (rc := worker.wait(0.5)) is None:
            pass
        print(f"error: the worker exited with status {rc}", file=sys.stderr)
        return 1
    except RpcError as exc:
        print(f"error: {exc.message}\n  {exc.remedy}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping the worker ...", file=sys.stderr)
        return 0
    finally:
        worker.stop()


def print_rpc_plan(passed: Preflight) -> None:
    """After the launch preflight probed the workers through the engine: each device (workers first), and the
    launch's memory plan per device (the preflight's own), on stderr."""
    for d in passed.rpc_devices:
        print(f"device: {d.name} {d.description} ({d.free_mib:,} of {d.total_mib:,} MiB free)"
              + (f" on worker {d.worker}" if d.worker else " on this machine"), file=sys.stderr)
    for line in passed.memory.explain() if passed.memory is not None else [f"not planned ({passed.unplanned})"]:
        print(f"plan: {line}", file=sys.stderr)
