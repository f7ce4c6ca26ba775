"""``beedeck recommend --repo OWNER/NAME [--draft-repo ...]``: size a Hub repo from its headers, plan every
quant with every compatible draft kind for this machine's GPUs, and name the fast path with its evidence."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from beedeck.core.download import DownloadError
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.speculation.advice import load_advice
from beedeck.core.models.hub.sizing import summary
from beedeck.core.models.planner import GiB
from beedeck.core.models.recommend import mode_choice
from beedeck.core.models.recommend.from_repo import recommend_repo
from beedeck.core.models.recommend.live_plan import LiveRow


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 1


def gpus_and_card(args: argparse.Namespace) -> tuple[list[int], str]:
    """Free bytes per GPU and the card class (from --card, else the first detected GPU)."""
    card = args.card or ""
    if args.vram is not None:
        vram = [int(args.vram * GiB)] if args.vram > 0 else []
        return vram, card or mode_choice.card_class(int(args.vram * GiB) + GiB, None)
    try:
        from beedeck.core.machine.hardware import detect

        gpus = detect().gpus
    except (ImportError, OSError):
        gpus = []
    if gpus and not card:
        card = mode_choice.card_class(gpus[0].memory_total, gpus[0].compute_capability, gpus[0].name)
    return [g.memory_free for g in gpus], card or "smaller"


def print_table(args: argparse.Namespace) -> int:
    """``recommend --table``: the fast mode per card class and engine generation for every model family with
    published figures, and the evidence behind each; BeeDeck's own measurements count for this machine's card."""
    evidence = mode_choice.load_evidence()
    advice = load_advice()
    card = gpus_and_card(args)[1]  # --card, else the detected GPU's class: where the measurements were taken
    out: list[dict[str, Any]] = []
    for family in evidence.get("families", {}):
        own = mode_choice.measured_family(advice, family, evidence)
        rows = mode_choice.table(family, evidence, own=own, own_card=card)
        if args.json:
            out += [{"family": family, "card_class": c.card_class, "engine": c.engine, "mode": c.mode,
                     "evidence": c.evidence, "why": c.why, "source": c.source} for c in rows]
            continue
        print(f"{family} (every kind assumed to fit; the engine rules and the evidence decide):")
        for c in rows:
            print(f"  {c.line()}")
    if args.json:
        print(json.dumps(out, indent=2))
    return 0


def _row_dict(r: LiveRow) -> dict[str, Any]:
    return {"target": r.target.filename, "quant": r.target.quant, "size": r.target.size, "kind": r.kind,
            "draft": r.draft.filename if r.draft else None, "draft_size": r.draft.size if r.draft else None,
            "fits": r.fits, "ctx": r.ctx, "cache": [r.settings.cache_type_k, r.settings.cache_type_v],
            "gpu_bytes": r.plan.gpu_total if r.plan else None, "cost_tokens": r.cost_tokens,
            "problem": r.problem, "settings": r.settings.to_dict(), "line": r.line()}


def run_hub_recommend(args: argparse.Namespace, caps: EngineCaps | None, tune: EngineCaps | None = None) -> int:
    vram, card = gpus_and_card(args)
    try:
        rec = recommend_repo(args.repo, vram, card, draft_repos=args.draft_repo,
                             generation=Generation(args.generation) if args.generation else Generation.BEE_B,
                             caps=caps, revision=args.revision, offline=args.offline, quants=args.quant,
                             advice=load_advice(), tune_caps=tune)
    except DownloadError as exc:  # the hub errors (gated, missing, offline) and SizingError: one clear line
        return _fail(str(exc))
    if args.json:
        c = rec.choice
        print(json.dumps({"sizing": [summary(s) for s in (rec.target, *rec.drafts)], "card_class": card,
                          "generation": rec.generation.value, "vram": vram, "draft_ubatch_size": rec.ubd,
                          "rows": [_row_dict(r) for r in rec.rows], "notes": rec.notes,
                          "mode": {"mode": c.mode, "evidence": c.evidence, "why": c.why, "source": c.source}},
                         indent=2))
        return 0
    print("\n".join(rec.report(vram)))
    return 0
