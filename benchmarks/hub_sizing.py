"""Bytes read and time to size Hub repos from their headers, against the fake Hub (not a test: prints numbers).

    PYTHONPATH=gui:. .venv/bin/python benchmarks/hub_sizing.py [--throttle-mbps 0]

Builds metadata-only GGUFs with real tensor layouts (tests/fixtures: Qwen3.8 27B Q4_K_M with its MTP
head, a 3-part Q8_0 split, DFlash2 and DSpark drafts; Gemma 4 31B Q4_K_S), serves them from the
protocol-level fake Hub, sizes each repo live and prints, per repo, the bytes read, the range
requests, the time and the share of the files' bytes; then checks that every live plan equals the
same files' plan from disk, and prints the mode recommendation for the four card classes with its
evidence. The goal: under 0.1% of a repo's bytes read, and equal plans.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fixtures import hub_models, meta_gguf

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.launch_settings import LaunchSettings, SpecMode
from beedeck.core.models import mode_choice
from beedeck.core.models.gguf import inspect
from beedeck.core.models.hub_sizing import size_repo, summary
from beedeck.core.models.live_plan import plan_live
from beedeck.core.models.planner import GiB, plan

GOAL_FRACTION = 0.001


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--throttle-mbps", type=float, default=0.0, help="CDN speed in MB/s (0: loopback speed)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        t0 = time.monotonic()
        repos = {
            "unsloth/Qwen3.8-27B-GGUF": {"Qwen3.8-27B-Q4_K_M.gguf": hub_models.qwen38_27b(d / "q4.gguf")},
            "incoai/Qwen3.8-27B-DFlash2-GGUF": {"Qwen3.8-27B-DFlash2-Q4_K_M.gguf":
                                                hub_models.qwen38_draft(d / "d2.gguf", "dflash2")},
            "Anbeeld/Qwen3.8-27B-DSpark-GGUF": {"Qwen3.8-27B-DSpark-Q4_K_M.gguf":
                                                hub_models.qwen38_draft(d / "ds.gguf", "dspark")},
            "unsloth/gemma-4-31B-it-GGUF": {"gemma-4-31B-it-Q4_K_S.gguf": meta_gguf.gemma4_31b(d / "g4.gguf")},
        }
        for p in hub_models.qwen38_27b_split(d / "Q8_0", "Qwen3.8-27B-Q8_0", 3):
            repos["unsloth/Qwen3.8-27B-GGUF"][f"Q8_0/{p.name}"] = p
        print(f"built the metadata-only GGUFs in {time.monotonic() - t0:.1f} s")
        with FakeHub() as hub:
            hub.cdn.throttle_bps = int(args.throttle_mbps * 1e6)
            for repo, files in repos.items():
                hub.add_repo(repo, {n: FakeFile.sparse_gguf(p) for n, p in files.items()})
            sized = {}
            print(f"\n{'repo':36} {'models':>6} {'read MB':>9} {'requests':>8} {'seconds':>8} {'of GB':>8} "
                  f"{'fraction':>9}  vs goal {GOAL_FRACTION:.1%}")
            for repo in repos:
                s = size_repo(repo, endpoint=hub.endpoint, cache_dir=d / "cache")
                sized[repo] = s
                m = summary(s)
                print(f"{repo:36} {m['models']:>6} {m['bytes_read'] / 1e6:>9.2f} {m['requests']:>8} "
                      f"{m['seconds']:>8.2f} {m['file_bytes'] / 1e9:>8.2f} {m['fraction_read']:>9.5%}  "
                      f"{m['fraction_read'] / GOAL_FRACTION:.3f}x of the goal")
        equal, total = 0, 0
        q4 = next(m for m in sized["unsloth/Qwen3.8-27B-GGUF"].models if m.quant == "Q4_K_M")
        q4_local = inspect(repos["unsloth/Qwen3.8-27B-GGUF"][q4.filename])
        for repo, files in repos.items():
            for m in sized[repo].models:
                local = inspect(files[m.filename])
                cases = ([(m.info, None, local, None, SpecMode.OFF), (m.info, None, local, None, SpecMode.MTP)]
                         if m.kind == "target" else
                         [(q4.info, m.info, q4_local, local, SpecMode.DFLASH if m.kind == "dflash2" else SpecMode.DSPARK)])
                for lt, ld, ft, fd, mode in cases:
                    for gen in (Generation.MAINLINE, Generation.BEE_B):
                        s = LaunchSettings(target="t", draft="d" if ld else None, spec_mode=mode, ctx_size=65536,
                                           cache_type_k="q8_0", cache_type_v="q8_0", flash_attn="on", kv_unified=True)
                        a, b = plan(lt, ld, s, gen, [24 * GiB]), plan(ft, fd, s, gen, [24 * GiB])
                        total += 1
                        equal += [x.items for x in a.devices] == [x.items for x in b.devices]
        print(f"\nlive-header plans equal to the files' own plans: {equal}/{total}")
        q = sized["unsloth/Qwen3.8-27B-GGUF"]
        drafts = [sized["incoai/Qwen3.8-27B-DFlash2-GGUF"], sized["Anbeeld/Qwen3.8-27B-DSpark-GGUF"]]
        for card, free, gen, version, ubd in (
                ("24gb-ampere", 23.5, Generation.MAINLINE, "", None), ("24gb-ada", 23.5, Generation.MAINLINE, "", None),
                ("24gb-ada", 23.5, Generation.BEE_B, "0.4.7", 64), ("32gb-blackwell", 31.3, Generation.MAINLINE, "", None),
                ("larger", 94.0, Generation.MAINLINE, "", None)):
            # the BeeLlama v0.4.7 row: an engine whose probe found -ubd and KVarN for draft caches
            caps = EngineCaps(path="bee", generation=gen, version=version, spec_types=("draft-dflash", "draft-mtp"),
                              cache_types=("f16", "q8_0", "q5_0", "q4_1", "kvarn4", "kvarn5"),
                              draft_cache_types=("f16", "q8_0", "kvarn4", "kvarn5"),
                              flags=frozenset({"--spec-type", "--spec-draft-type-k", "--spec-draft-type-v", "-ubd"})
                              ) if version else None
            rows, _notes = plan_live(q, drafts, [int(free * GiB)], gen, caps, ubd=ubd)
            runnable = sorted({r.kind for r in rows if r.fits})
            c = mode_choice.choose(card, gen, version, "qwen3.8-27b", runnable, mode_choice.load_evidence())
            print(f"\n{mode_choice.CLASS_LABEL[card]} ({free} GiB free, {gen.value} {version}"
                  + (f", -ubd {ubd}, kvarn5 draft caches" if ubd else "") + "):")
            for r in rows:
                if r.target.quant == "Q4_K_M":
                    print(f"  {r.line()}")
            print(f"  fast path: {c.line()}")
        print("\nBeeLlama v0.4.3 on a 24 GB Ada card: "
              + mode_choice.choose("24gb-ada", Generation.BEE_B, "v0.4.3", "qwen3.8-27b", ("none", "mtp", "dflash2"),
                                   mode_choice.load_evidence()).line())
    return 0 if equal == total else 1


if __name__ == "__main__":
    sys.exit(main())
