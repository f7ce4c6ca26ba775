"""``beedeck inspect`` / ``plan`` / ``recommend``: read a GGUF, plan a launch's memory, pick a pair."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect
from beedeck.core.models.planner import GiB, MemoryPlan, MiB, PlanError, plan
from beedeck.core.printable import printable


def _info_dict(m: ModelInfo) -> dict[str, Any]:
    kv = m.kv_layers()
    return {
        "path": str(m.path), "parts": [str(p) for p in m.parts], "file_size": m.file_size,
        "architecture": m.architecture, "name": m.name, "file_type": m.file_type, "n_layer": m.n_layer,
        "n_embd": m.n_embd, "n_ff": m.n_ff, "n_head": m.n_head[0] if m.n_head else 0,
        "n_head_kv": sorted(set(m.n_head_kv)), "head_dim_k": sorted(set(m.head_dim_k)),
        "kv_layers": len(kv), "swa_layers": sum(m.is_swa), "sliding_window": m.sliding_window,
        "recurrent_layers": sum(m.is_recurrent), "vocab_size": m.vocab_size, "tokenizer": m.tokenizer_model,
        "context_length": m.context_length, "chat_template": m.has_chat_template,
        "tensor_count": len(m.tensors), "tensor_bytes": m.tensor_bytes, "tied_embeddings": m.tied_embeddings,
        "dflash": None if m.dflash is None else {
            "format": m.dflash.fmt, "block_size": m.dflash.block_size, "mask_token_id": m.dflash.mask_token_id,
            "target_layer_ids": list(m.dflash.target_layer_ids)},
    }


def _fail(msg: str) -> int:
    print(f"error: {printable(msg, 1000)}", file=sys.stderr)  # GGUF errors quote the file's own text
    return 1


def run_inspect(args: argparse.Namespace) -> int:
    try:
        m = inspect(args.file)
    except GGUFError as exc:
        return _fail(str(exc))
    d = _info_dict(m)
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    print(f"{m.path.name}: {printable(m.architecture)} {printable(m.name or '')} {m.file_type}".rstrip())
    print(f"  {m.file_size / GiB:.2f} GiB in {len(m.parts)} file(s), {len(m.tensors)} tensors")
    print(f"  layers {m.n_layer}, hidden {m.n_embd}, heads {d['n_head']} (KV {d['n_head_kv']} x {d['head_dim_k']})")
    if m.sliding_window:
        print(f"  sliding window {m.sliding_window} on {d['swa_layers']} layers, {d['kv_layers'] - d['swa_layers']} global")
    if d["recurrent_layers"]:
        print(f"  {d['recurrent_layers']} recurrent (linear-attention) layers, {d['kv_layers']} attention layers")
    print(f"  vocabulary {m.vocab_size} ({printable(m.tokenizer_model or '?')}), native context {m.context_length}, "
          f"chat template: {'yes' if m.has_chat_template else 'no'}")
    if m.dflash:
        print(f"  DFlash draft ({m.dflash.fmt}): block {m.dflash.block_size}, target layers "
              f"{list(m.dflash.target_layer_ids)}, mask token {m.dflash.mask_token_id}")
    return 0


def _vram(args: argparse.Namespace) -> list[int]:
    if args.vram is not None:
        return [int(args.vram * GiB)] if args.vram > 0 else []
    try:
        from beedeck.core.machine.hardware import detect
    except ImportError:
        return []
    gpus = detect().gpus
    if getattr(args, "gpu", None) is not None:
        gpus = [g for g in gpus if g.index == args.gpu]
    return [g.memory_free for g in gpus]


def plan_dict(p: MemoryPlan) -> dict[str, Any]:
    return {
        "devices": [{"name": d.name, "free": d.free, "total": d.total, "left": d.left, "items": d.items}
                    for d in p.devices],
        "n_ctx": p.n_ctx, "n_ctx_seq": p.n_ctx_seq, "cells_swa": p.cells_swa, "fits": p.fits,
        "cpu_tensors": len(p.cpu_tensors), "explain": p.explain(),
    }


def run_plan(args: argparse.Namespace) -> int:
    try:
        target = inspect(args.target)
        draft = inspect(args.draft) if args.draft else None
    except GGUFError as exc:
        return _fail(str(exc))
    gen = Generation(args.generation)
    s = LaunchSettings(
        target=args.target, draft=args.draft, spec_mode=Mode.DFLASH if draft else Mode.BASELINE,
        ctx_size=args.ctx, n_gpu_layers=args.ngl, cache_type_k=args.cache_k, cache_type_v=args.cache_v,
        flash_attn=args.flash_attn, parallel=args.parallel, ubatch_size=args.ubatch, batch_size=args.batch,
        kv_unified=True if args.kv_unified else None,
    )
    try:
        p = plan(target, draft, s, gen, _vram(args))
    except PlanError as exc:
        return _fail(str(exc))
    if args.json:
        print(json.dumps(plan_dict(p), indent=2))
    else:
        print("\n".join(p.explain()))
        for d in p.devices:
            print(f"  {d.name}: " + ", ".join(f"{k}={v / MiB:,.1f} MiB" for k, v in d.items.items()))
    return 0 if p.fits or not p.gpus else 3


def run_recommend(args: argparse.Namespace) -> int:
    from beedeck.clicmd.models.hub_recommend import gpus_and_card, print_table
    from beedeck.core.engine.speculation.advice import load_advice
    from beedeck.core.models.recommend.from_catalog import default_engine_caps, recommend

    if args.table:
        return print_table(args)
    gen = Generation(args.generation) if args.generation else None
    caps = None
    if args.engine:
        from beedeck.core.engine.caps import ProbeError
        from beedeck.core.engine.probe import probe_engine

        try:
            caps = probe_engine(args.engine)
        except ProbeError as exc:
            return _fail(f"{args.engine} could not be probed: {exc}")
    tune = caps or default_engine_caps()  # without --engine: -ubd and KVarN drafts for the default engine
    if args.repo:
        from beedeck.clicmd.models.hub_recommend import run_hub_recommend

        return run_hub_recommend(args, caps, tune)
    sizing = None
    if args.refresh:
        if args.offline:
            return _fail("--refresh reads the catalog's GGUF headers from the Hub; --offline forbids that.")
        from beedeck.core.models.recommend import catalog_sizing

        sizing = catalog_sizing.refresh(on_repo=lambda repo, i, n: print(f"[{i + 1}/{n}] reading the headers of "
                                                                         f"{repo}", file=sys.stderr))
        if not args.json:
            print("Sizing the catalog from its GGUF headers (range requests, nothing downloaded):")
            print("\n".join(f"  {printable(x, 400)}" for x in sizing.lines()))
    vram, card = gpus_and_card(args)
    no_gpu = ("--vram 0 plans without a GPU, so the starter profile is recommended" if args.vram is not None
              else "No NVIDIA GPU was detected, so the starter profile is recommended")
    r = recommend(vram, args.goal, gen, caps=caps, card=card, advice=load_advice(), tune_caps=tune, no_gpu=no_gpu)
    c = r.primary
    if args.json:
        mode = None if c.mode is None else {"mode": c.mode.mode, "evidence": c.mode.evidence, "why": c.mode.why,
                                            "source": c.mode.source}
        print(json.dumps({"sizing": None if sizing is None else sizing.to_dict(),
                          "sized_from": c.sized_from or None, "download_bytes": c.download_bytes, "card_class": card,
            "primary": {"pair": c.pair_id, "generation": c.generation.value, "target_repo": c.target_repo,
                        "target_file": c.target_file, "draft_repo": c.draft_repo, "draft_file": c.draft_file,
                        "kind": c.draft_kind or None, "mode": mode, "cost_tokens": c.cost_tokens,
                        "target_path": str(c.target_path) if c.target_path else None,
                        "draft_path": str(c.draft_path) if c.draft_path else None,
                        "settings": c.settings.to_dict()},
            "runner_up": None if r.runner_up is None else {"pair": r.runner_up.pair_id,
                                                          "summary": r.runner_up.summary()},
            "reasons": r.reasons, "plan": None if r.plan is None else plan_dict(r.plan)}, indent=2))
        return 0
    print(c.summary())
    for line in r.reasons:
        print(f"  - {line}")
    if r.plan is not None:
        print("\n".join("  " + x for x in r.plan.explain()))
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    p = sub.add_parser("inspect", help="show what a GGUF model is (architecture, layers, DFlash keys)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_inspect)

    p = sub.add_parser("plan", help="estimate a launch's memory per device before starting it")
    p.add_argument("--target", required=True)
    p.add_argument("--draft")
    p.add_argument("--ctx", type=int, default=4096)
    p.add_argument("--cache-k", default="f16")
    p.add_argument("--cache-v", default="f16")
    p.add_argument("--flash-attn", default="on", choices=("on", "off", "auto"))
    p.add_argument("--ngl", default="all", help="-ngl: a number or all")
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--ubatch", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--kv-unified", action="store_true")
    p.add_argument("--generation", default="mainline", choices=[g.value for g in Generation])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--vram", type=float, help="free GPU memory in GiB (0: CPU only)")
    g.add_argument("--gpu", type=int, help="plan for this detected GPU")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_plan)

    p = sub.add_parser("recommend", help="pick a model, its speculation mode (by evidence), quants and context for "
                                         "this machine (from the GGUF headers: --refresh reads them)")
    p.add_argument("--vram", type=float, help="free GPU memory in GiB (default: detected; 0: CPU only)")
    p.add_argument("--goal", default="quality", choices=("quality", "speed", "context"))
    p.add_argument("--generation", choices=[g.value for g in Generation if g != Generation.UNKNOWN])
    p.add_argument("--engine", metavar="LLAMA_SERVER",
                   help="offer only what this llama-server runs (probed: its generation and speculation modes)")
    p.add_argument("--repo", metavar="OWNER/NAME",
                   help="size any GGUF repo on the Hub from its headers (no download) and plan every quant")
    p.add_argument("--draft-repo", action="append", metavar="OWNER/NAME",
                   help="a drafter repo to plan with --repo (repeatable; default: the catalog's drafts for it)")
    p.add_argument("--revision", help="with --repo: a branch, tag or commit (default main)")
    p.add_argument("--quant", action="append", help="with --repo: plan only this quant (repeatable)")
    p.add_argument("--card", choices=("24gb-ampere", "24gb-ada", "32gb-blackwell", "larger", "smaller"),
                   help="with --repo: the card class the mode advice is for (default: the detected GPU)")
    p.add_argument("--refresh", action="store_true",
                   help="read the catalog repos' GGUF headers from the Hub first (range requests, a few MB per file; "
                        "cached by revision): the catalog holds no sizes, so a first run needs this once")
    p.add_argument("--offline", action="store_true",
                   help="only what was read before (the cache); without --repo or --refresh nothing is read anyway")
    p.add_argument("--table", action="store_true",
                   help="print the fast speculation mode for every card class and engine generation, with the "
                        "evidence behind each (BeeDeck's own measurements, else the published figures it cites)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_recommend)
