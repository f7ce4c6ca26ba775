"""Bytes read and time to size Hub repos from their headers, against the fake Hub (not a test: prints numbers).

    PYTHONPATH=gui:. .venv/bin/python benchmarks/hub_sizing.py [--throttle-mbps 0]

Builds metadata-only GGUFs with real tensor layouts (tests/fixtures: Qwen3.8 27B Q4_K_M with its MTP
head, a 3-part Q8_0 split, DFlash2 and DSpark drafts; Gemma 4 31B Q4_K_S), serves them from the
protocol-level fake Hub, sizes each repo live and prints three sections: per repo, the bytes read, the
requests the fake Hub saw (API calls, HEADs, range GETs), the time and the share of the files' bytes;
then whether every live plan equals the same files' plan from disk; then the card-class table: each
class's Q4_K_M rows with the fast path chosen and its evidence, and the full mode table
(mode_choice.table: every card class x engine generation). The goal: under 0.1% of a repo's bytes
read, and equal plans.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fixtures import hub_models, meta_gguf
from tests.fixtures.engines import help_stdout

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import inspect
from beedeck.core.models.hub.sizing import size_repo, summary
from beedeck.core.models.planner import GiB, plan
from beedeck.core.models.recommend import mode_choice
from beedeck.core.models.recommend.live_plan import plan_live

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
            print("\n== 1. bytes, requests and time per repo, sized live against the fake Hub ==")
            print(f"{'repo':34} {'models':>6} {'read MB':>8} {'CDN MB':>7} {'API':>4} {'HEAD':>4} {'range':>5} "
                  f"{'seconds':>7} {'of GB':>6} {'fraction':>9}  vs goal {GOAL_FRACTION:.1%}")
            for repo in repos:
                before = len(hub.requests), hub.bytes_sent
                s = size_repo(repo, endpoint=hub.endpoint, cache_dir=d / "cache")
                sized[repo] = s
                m = summary(s)
                seen = hub.requests[before[0]:]
                api = sum(r.server == "hub" and r.path.startswith("/api/") for r in seen)
                head = sum(r.method == "HEAD" for r in seen)
                ranged = sum(r.method == "GET" and "range" in {k.lower() for k in r.headers} for r in seen)
                print(f"{repo:34} {m['models']:>6} {m['bytes_read'] / 1e6:>8.2f} "
                      f"{(hub.bytes_sent - before[1]) / 1e6:>7.2f} {api:>4} {head:>4} {ranged:>5} "
                      f"{m['seconds']:>7.2f} {m['file_bytes'] / 1e9:>6.2f} {m['fraction_read']:>9.5%}  "
                      f"{m['fraction_read'] / GOAL_FRACTION:.3f}x of the goal")
        equal, total = 0, 0
        q4 = next(m for m in sized["unsloth/Qwen3.8-27B-GGUF"].models if m.quant == "Q4_K_M")
        q4_local = inspect(repos["unsloth/Qwen3.8-27B-GGUF"][q4.filename])
        for repo, files in repos.items():
            for m in sized[repo].models:
                local = inspect(files[m.filename])
                cases = ([(m.info, None, local, None, Mode.BASELINE), (m.info, None, local, None, Mode.MTP)]
                         if m.kind == "target" else
                         [(q4.info, m.info, q4_local, local, Mode.DFLASH if m.kind == "dflash2" else Mode.DSPARK)])
                for lt, ld, ft, fd, mode in cases:
                    for gen in (Generation.MAINLINE, Generation.BEE_B):
                        s = LaunchSettings(target="t", draft="d" if ld else None, spec_mode=mode, ctx_size=65536,
                                           cache_type_k="q8_0", cache_type_v="q8_0", flash_attn="on", kv_unified=True)
                        a, b = plan(lt, ld, s, gen, [24 * GiB]), plan(ft, fd, s, gen, [24 * GiB])
                        total += 1
                        equal += [x.items for x in a.devices] == [x.items for x in b.devices]
        print("\n== 2. plans from the live headers against the same files' full-download plans ==")
        print(f"live-header plans equal to the files' own plans (every device item, to the byte): {equal}/{total}")
        print("\n== 3. the card-class table: the fast path per class and engine, with its evidence ==")
        q = sized["unsloth/Qwen3.8-27B-GGUF"]
        drafts = [sized["incoai/Qwen3.8-27B-DFlash2-GGUF"], sized["Anbeeld/Qwen3.8-27B-DSpark-GGUF"]]
        ev = mode_choice.load_evidence()
        # BeeLlama engines as their probes see them: v0.4.3's real --help, v0.4.7's derived one (-ubd, KVarN
        # draft caches; tests/fixtures/engines/README.md), each with the release recorded beside the binary
        bee = {v: replace(caps_from_texts(f"beellama-{v}", "version: 0 (unknown)", help_stdout(f"beellama-{v[1:]}-cpu")),
                          release=v) for v in ("v0.4.3", "v0.4.7")}
        for card, free, gen, caps in (
                ("24gb-ampere", 23.5, Generation.MAINLINE, None), ("24gb-ada", 23.5, Generation.MAINLINE, None),
                ("24gb-ada", 23.5, Generation.BEE_B, bee["v0.4.3"]), ("24gb-ada", 23.5, Generation.BEE_B, bee["v0.4.7"]),
                ("32gb-blackwell", 31.3, Generation.MAINLINE, None), ("larger", 94.0, Generation.MAINLINE, None)):
            ubd = mode_choice.ubd_for(card, caps, ev)
            rows, _notes = plan_live(q, drafts, [int(free * GiB)], gen, caps, ubd=ubd)
            runnable = sorted({r.kind for r in rows if r.fits})
            version = mode_choice.engine_version(caps)
            c = mode_choice.choose(card, gen, version, "qwen3.8-27b", runnable, ev)
            print(f"\n{mode_choice.CLASS_LABEL[card]} ({free} GiB free, {gen.value}" + (f" {version}" if version else "")
                  + (f", -ubd {ubd}" if ubd else "") + "):")
            for r in rows:
                if r.target.quant == "Q4_K_M":
                    print(f"  {r.line()}")
            print(f"  fast path: {c.line()}")
        print("\nBeeLlama v0.4.3 on a 24 GB Ada card: "
              + mode_choice.choose("24gb-ada", Generation.BEE_B, "v0.4.3", "qwen3.8-27b", ("none", "mtp", "dflash2"),
                                   mode_choice.load_evidence()).line())
        print("\nThe mode table (beedeck recommend --table), every kind assumed to fit:")
        for row in mode_choice.table("qwen3.8-27b", mode_choice.load_evidence()):
            print(f"  {row.line()}")
    return 0 if equal == total else 1


if __name__ == "__main__":
    sys.exit(main())
