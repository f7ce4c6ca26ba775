"""The launch-form settings that matter headless, shared by ``serve``, ``chat`` and ``bench``.

Each flag maps onto one :class:`LaunchSettings` field; the engine-specific spelling is build_argv's job.
"""

from __future__ import annotations

import argparse

from beedeck.core.engine.argv import layers_for_workers
from beedeck.core.engine.launch_settings import LaunchSettings


def add_settings_arguments(p: argparse.ArgumentParser, *, with_ctx: bool = True) -> None:
    g = p.add_argument_group("launch settings (as in the app's Settings)")
    if with_ctx:
        g.add_argument("--ctx", type=int, metavar="N", help="context tokens for the chat slot")
    g.add_argument("--cache-type-k", metavar="TYPE", help="KV cache type for K (f16, q8_0, q4_0, turbo4, kvarn4, ...)")
    g.add_argument("--cache-type-v", metavar="TYPE", help="KV cache type for V")
    g.add_argument("--draft-max", type=int, metavar="N", help="most tokens drafted per step (--spec-draft-n-max)")
    g.add_argument("--flash-attn", choices=("on", "off", "auto"), help="flash attention (default: auto)")
    g.add_argument("--kv-unified", action=argparse.BooleanOptionalAction, default=None,
                   help="one KV pool for all slots (BeeLlama 0.1-0.3 halves the slot context without it)")
    g.add_argument("--threads", type=int, metavar="N", help="CPU threads for generation")
    g.add_argument("--cache-reuse", type=int, metavar="N",
                   help="reuse prompt-cache chunks of at least N tokens (--cache-reuse; agents: 256)")
    g.add_argument("--gpu-layers", metavar="N|auto|all",
                   help="layers on the GPUs and the RPC workers (default: all; the starter's CPU profile keeps them "
                        "on this machine's CPU, unless --rpc names workers: then they all go to the workers)")
    g.add_argument("--rpc", metavar="HOST:PORT,...", type=rpc_workers_arg,
                   help="RPC workers (`beedeck worker` on each machine) that hold part of the model")


def rpc_workers_arg(text: str) -> list[str]:
    """``--rpc``'s value, checked (argparse names the bad address)."""
    from beedeck.core.engine.rpc import RpcError, parse_workers

    try:
        return [str(w) for w in parse_workers(text)]
    except RpcError as exc:
        raise argparse.ArgumentTypeError(f"{exc.message} {exc.remedy}") from None


def apply_settings_arguments(args: argparse.Namespace, s: LaunchSettings) -> LaunchSettings:
    """``s`` with every given flag applied (in place, and returned)."""
    if getattr(args, "ctx", None) is not None:
        s.ctx_size = args.ctx
    if args.cache_type_k:
        s.cache_type_k = args.cache_type_k
    if args.cache_type_v:
        s.cache_type_v = args.cache_type_v
    if args.draft_max is not None:
        s.draft_n_max = args.draft_max
    if args.flash_attn:
        s.flash_attn = args.flash_attn
    if args.kv_unified is not None:
        s.kv_unified = args.kv_unified
    if args.threads is not None:
        s.threads = args.threads
    if getattr(args, "cache_reuse", None) is not None:
        s.cache_reuse = args.cache_reuse
    if args.gpu_layers:
        s.n_gpu_layers = args.gpu_layers
    if getattr(args, "rpc", None):
        s.rpc_workers = args.rpc
        if not args.gpu_layers:  # workers named: the layers go to them (the starter keeps none on a GPU: 0)
            s.n_gpu_layers = layers_for_workers(s.n_gpu_layers)
    return s
