#!/usr/bin/env python3
"""Full size on a real GPU: today's engine built the way BeeDeck builds it, then the 19 GB toggle.

Run from a checkout on a GPU machine with no network (BeeDeck's core packages plus gguf; CUDA toolkit,
CMake and Ninja for the build), each phase writing JSON and text to ``--out`` (or $OUT):

    fullsize_gpu.py build  --source TARBALL      # BeeDeck's builder, the profile's K/V pairs; progress + ETA
    fullsize_gpu.py dryrun --source TARBALL ...  # configure-only step counts and estimates per builder choice
    fullsize_gpu.py toggle --engine BIN          # Baseline -> DFlash -> Baseline at full size, per variant
    fullsize_gpu.py sweep  --engine BIN          # baseline and DFlash tokens/s, draft max 1..16
    fullsize_gpu.py standby --engine BIN         # the switch with the other mode kept loaded beside (--preload:
                                                 # loaded before the first click, as the app does)
    fullsize_gpu.py cold --engine BIN            # a start with the page cache dropped, then warm
    fullsize_gpu.py download --engine BIN        # the prebuilt path end to end on this NVIDIA machine: the
                                                 # recorded BeeLlama listing served locally, BIN's folder as
                                                 # the archive BeeDeck's picker chooses, `beedeck engine download`

``build`` records every progress callback (time, steps done, total, the estimate) so the ETA's error at
10/25/50/75 % is computed against the real end, and copies the build's ``.ninja_log`` (the CUDA step
costs the estimate ships). ``toggle`` starts the metadata-only Gemma 4 31B Q4_K_M target (18.7 GB,
zero weights, sparse) with its upstream-format DFlash Q5_K_M draft (1.1 GB) through BeeDeck's
``launch`` exactly as the window's restart path does (stop the server, start the other mode's
settings), and times each switch as stop + start-to-ready, for each load variant.
Work files live in ``$BEEDECK_GPU_WORK`` (default /tmp/beedeck-gpu), outside the checkout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "gui"), str(REPO)]
WORK = Path(os.environ.get("BEEDECK_GPU_WORK", "/tmp/beedeck-gpu"))
PROMPT = "Write a Python function that checks whether a string is a palindrome."


def _out(args: argparse.Namespace) -> Path:
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else WORK / "out")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _unpack(source: Path) -> Path:
    """A source folder as is; a tarball unpacked once into WORK: split_gpus.py's resolver (this folder)."""
    from split_gpus import resolve_source

    return resolve_source(source)


def _gpus() -> tuple[list[str], str | None]:
    from beedeck.core.machine.hardware import detect

    report = detect()
    ccs = [f"{g.compute_capability[0]}.{g.compute_capability[1]}" for g in report.gpus if g.compute_capability]
    return ccs, report.cuda_driver_version


def eta_errors(samples: list[tuple[float, int, int, float | None]], end: float) -> dict[str, Any]:
    """The estimate's error at the first sample past each share of the steps: (estimate - real) / real."""
    out: dict[str, Any] = {}
    for share in (0.10, 0.25, 0.50, 0.75, 0.90):
        hit = next(((t, d, n, e) for t, d, n, e in samples if n and d / n >= share and e is not None), None)
        if hit is None:
            continue
        t, d, n, e = hit
        real = end - t
        out[f"{int(share * 100)}%"] = {"elapsed_s": round(t, 1), "estimate_s": round(e, 1), "real_left_s": round(real, 1),
                                        "error_pct": round(100.0 * (e - real) / real, 1) if real > 0 else None}
    return out


def phase_build(args: argparse.Namespace) -> int:
    from beedeck.core.engine.building import build_engine
    from beedeck.core.engine.registry import EngineRegistry

    out = _out(args)
    src = _unpack(args.source)
    gpus, driver = _gpus()
    pairs = [tuple(p.split("/", 1)) for p in args.cache_type] or [("f16", "f16"), ("q8_0", "q8_0")]
    samples: list[tuple[float, int, int, float | None]] = []
    t0 = time.monotonic()

    def progress(done: int, total: int, eta: float | None) -> None:
        samples.append((time.monotonic() - t0, done, total, eta))
        if len(samples) % 25 == 0:
            (out / f"build-progress-{args.label}.json").write_text(json.dumps(samples))

    reg = EngineRegistry(root=WORK / f"registry-{args.label}")
    rec: dict[str, Any] = {"source": str(args.source), "gpus": gpus, "driver_cuda": driver, "pairs": pairs,
                           "cores": os.cpu_count()}
    try:
        result = build_engine(str(src), gpus=gpus, cpu_only=not gpus, driver_cuda=driver, cache_pairs=pairs,
                              all_quants=args.all_quants, registry=reg, on_progress=progress)
        end = time.monotonic() - t0
        rec.update(ok=result.ok, binary=str(result.binary), options=result.options, notes=result.notes,
                   seconds=round(end, 1), planned_steps=result.planned_steps, smoke=str(result.smoke),
                   eta=eta_errors(samples, end), samples=len(samples))
        log = result.binary.parent.parent / ".ninja_log"
        if log.is_file():
            shutil.copy(log, out / f"{args.label}.ninja_log")
        (WORK / f"{args.label}.engine").write_text(str(result.binary))
    except Exception as exc:  # the record says what broke; the phase's exit code too
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-3000:])
    (out / f"build-progress-{args.label}.json").write_text(json.dumps(samples))
    (out / f"build-{args.label}.json").write_text(json.dumps(rec, indent=1))
    (WORK / f"{args.label}.done").write_text("1")
    print(json.dumps({k: v for k, v in rec.items() if k != "trace"}, indent=1), flush=True)
    return 0 if rec.get("ok") else 1


def phase_dryrun(args: argparse.Namespace) -> int:
    """Configure-only plans per builder choice: steps, estimated minutes, options (no compiling)."""
    from beedeck.core.engine.building import build_engine
    from beedeck.core.engine.registry import EngineRegistry

    out = _out(args)
    gpus, driver = _gpus()
    rows = []
    choices = [("profile f16+q8_0", [("f16", "f16"), ("q8_0", "q8_0")], False), ("no pairs given", None, False),
               ("kvarn4 profile", [("kvarn4", "kvarn4")], False), ("ALL_QUANTS", None, True)]
    for source in args.source_list:
        src = _unpack(Path(source))
        for i, (label, pairs, allq) in enumerate(choices):
            reg = EngineRegistry(root=WORK / f"dry-{src.name}-{i}")
            t = time.monotonic()
            try:
                r = build_engine(str(src), gpus=gpus, cpu_only=not gpus, driver_cuda=driver, cache_pairs=pairs,
                                 all_quants=allq, registry=reg, dry_run=True)
                rows.append({"source": src.name, "choice": label, "steps": r.planned_steps,
                             "estimate_min": round((r.estimate_s or 0) / 60, 1), "options": r.options,
                             "notes": r.notes, "configure_s": round(time.monotonic() - t, 1)})
            except Exception as exc:
                rows.append({"source": src.name, "choice": label, "error": f"{type(exc).__name__}: {exc}"})
            print(json.dumps(rows[-1]), flush=True)
            (out / "dryrun.json").write_text(json.dumps(rows, indent=1))
    return 0


def _pair(which: str, caps: Any = None) -> tuple[Path, Path]:
    from tests.fixtures import meta_gguf as mg

    folder = WORK / "meta"
    if which == "synth":  # the tiny sticky pair: the script's own dry run on a CPU engine
        from beedeck.clicmd.bench import synthetic_bench_pair

        fmt = "bee" if caps is not None and caps.dflash_draft_arch == "dflash-draft" else "mainline"
        return synthetic_bench_pair(WORK / "synth", fmt)
    if which == "gemma4-q4km":
        return mg.gemma4_pair(folder, "Q4_K_M", "dflash")
    if which == "gemma4-q4ks":
        return mg.gemma4_pair(folder, "Q4_K_S", "dflash")
    if which == "gemma4-fork":
        return mg.gemma4_pair(folder, "Q4_K_M", "dflash-draft")
    if which == "qwen36-fork":
        return mg.qwen36_pair(folder, "dflash-draft")
    if which in ("gemma4-sticky", "gemma4-sticky-fork"):  # the layout with tensors that make the pair agree
        fmt = "dflash-draft" if which.endswith("fork") else "dflash"
        sticky = WORK / ("meta-sticky-fork" if fmt == "dflash-draft" else "meta-sticky")
        done = sticky / "done"
        if done.is_file():  # written once: writing the header again would empty the file
            return Path(done.read_text().split("\n")[0]), Path(done.read_text().split("\n")[1])
        pair = mg.make_sticky(*mg.gemma4_pair(sticky, "Q4_K_M", fmt))
        done.write_text(f"{pair[0]}\n{pair[1]}")
        return pair
    return mg.qwen36_pair(folder, "dflash")


def _base(target: Path, draft: Path, ctx: int) -> Any:
    from beedeck.core.engine.launch_settings import LaunchSettings

    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size = ctx
    s.draft_n_max = 15
    return s


def _variant(s: Any, name: str, caps: Any) -> Any:
    """The load variants timed: the guide's line as BeeDeck runs it, and the candidate fast restarts."""
    from beedeck.core.engine.speculation.restart import fast_restart_settings

    s = dataclasses.replace(s, extra_args=list(s.extra_args))
    if name == "guide":  # --no-mmap --mlock (the guide's DFlash line), fit pass on, warmup on
        return s
    if name == "mmap":
        s.mmap, s.mlock = True, False
        return s
    if name == "fast":  # BeeDeck's toggle restart (core/engine/speculation/restart.py)
        return fast_restart_settings(s, caps)
    fast = fast_restart_settings(s, caps)
    if name == "fast-nowarmup":  # and no empty warm-up run at start
        fast.extra_args += ["--no-warmup"]
        return fast
    if name == "none":  # no mmap, no mlock: read() into pinned staging buffers, async uploads
        fast.mmap = fast.mlock = False
        return fast
    if name == "dio":  # direct I/O (bypasses the page cache: each start reads the disk)
        fast.extra_args += ["--load-mode", "dio"]
        return fast
    raise ValueError(name)


def _start(engine: str, caps: Any, s: Any) -> tuple[Any, float]:
    from beedeck.core.launcher import launch

    t = time.monotonic()
    proc = launch(engine, caps, s, stop_leftover=False)
    proc.wait_ready(timeout=600)
    return proc, time.monotonic() - t


def _reply(url: str, max_tokens: int = 64, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    from beedeck.core.engine.client import LlamaClient

    r = LlamaClient(url, timeout=300.0).chat([{"role": "user", "content": PROMPT}], max_tokens=max_tokens,
                                             temperature=0.0, seed=7,
                                             extra={"cache_prompt": False, "ignore_eos": True, **(extra or {})})
    t = r.timings
    return {"tok_s": round(t.predicted_per_second, 1) if t else None, "tokens": t.predicted_n if t else None,
            "drafted": t.draft_n if t else None, "accepted": t.draft_n_accepted if t else None,
            "ttft_ms": round(t.prompt_ms, 1) if t else None, "wall_s": round(r.wall_s, 3),
            "ttft_s": round(r.ttft_s, 3) if r.ttft_s is not None else 0.0}


def phase_toggle(args: argparse.Namespace) -> int:
    from beedeck.core.engine.mode import Mode
    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.speculation.modes import settings_for_mode

    out = _out(args)
    engine = str(args.engine or Path((WORK / "genb.engine").read_text().strip()))
    caps = probe_engine(engine)
    target, draft = _pair(args.pair, caps)
    os.environ.setdefault("BEEDECK_HOME", str(WORK / "home"))
    results = []
    for variant in args.variants.split(","):
        base = _variant(_base(target, draft, args.ctx), variant, caps)
        rec: dict[str, Any] = {"variant": variant, "pair": args.pair, "ctx": args.ctx, "switches": []}
        try:
            cold_proc, cold = _start(engine, caps, base)
            rec["first_start_s"] = round(cold, 2)
            rec["argv"] = cold_proc.command()
            rec["first_reply"] = _reply(cold_proc.base_url)
            proc = cold_proc
            for mode in (Mode.BASELINE, Mode.DFLASH, Mode.BASELINE, Mode.DFLASH):
                t = time.monotonic()
                proc.stop()
                stopped = time.monotonic() - t
                proc, ready = _start(engine, caps, settings_for_mode(base, mode, caps))
                first = _reply(proc.base_url, 32)
                rec["switches"].append({"to": mode, "stop_s": round(stopped, 2), "ready_s": round(ready, 2),
                                        "total_s": round(stopped + ready, 2), "reply": first})
                if len(rec["switches"]) == 2:  # one switch's own log: where its start's seconds go
                    rec["log_switch_to_dflash"] = list(proc.log_lines())[-400:]
                print(json.dumps({"variant": variant, **rec["switches"][-1]}), flush=True)
            proc.stop()
            sw = rec["switches"]
            rec["round_trip_s"] = round(sw[0]["total_s"] + sw[1]["total_s"], 2)
            rec["round_trip_2_s"] = round(sw[2]["total_s"] + sw[3]["total_s"], 2)
        except Exception as exc:
            rec["error"] = f"{type(exc).__name__}: {exc}"
            rec["trace"] = traceback.format_exc()[-2500:]
        results.append(rec)
        print(json.dumps({k: v for k, v in rec.items() if k not in ("argv", "trace")}), flush=True)
        (out / f"toggle-{args.pair}-{args.label}.json").write_text(json.dumps(results, indent=1))
    return 0


def phase_sweep(args: argparse.Namespace) -> int:
    from beedeck.core.engine.mode import Mode
    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.speculation.modes import settings_for_mode
    from beedeck.core.engine.speculation.restart import fast_restart_settings
    from beedeck.core.engine.speculation.switching import NO_DRAFTS

    out = _out(args)
    engine = str(args.engine or Path((WORK / "genb.engine").read_text().strip()))
    caps = probe_engine(engine)
    os.environ.setdefault("BEEDECK_HOME", str(WORK / "home"))
    rows = []
    for which in args.pairs.split(","):
        target, draft = _pair(which, caps)
        base = fast_restart_settings(_base(target, draft, args.ctx), caps)
        points: list[tuple[str, Any]] = [("baseline", settings_for_mode(base, Mode.BASELINE, caps))]
        points += [(f"dflash n_max {n}", dataclasses.replace(base, draft_n_max=n)) for n in args.n_max]
        per_request_done = False
        for label, s in points:
            row: dict[str, Any] = {"pair": which, "point": label}
            proc = None
            try:
                proc, ready = _start(engine, caps, s)
                row["ready_s"] = round(ready, 2)
                _reply(proc.base_url, 16)  # warm-up
                runs = [_reply(proc.base_url, args.max_tokens) for _ in range(args.reps)]
                if label != "baseline" and not per_request_done:  # the switch without a restart, where honoured
                    row["per_request_baseline"] = [_reply(proc.base_url, args.max_tokens, NO_DRAFTS)
                                                   for _ in range(args.reps)]
                    per_request_done = True
                proc.stop()
                row["runs"] = runs
                speeds = sorted(r["tok_s"] for r in runs if r["tok_s"])
                row["median_tok_s"] = speeds[len(speeds) // 2] if speeds else None
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
                row["log_tail"] = _log_tail(proc, exc)
                if proc is not None:
                    proc.stop()
            rows.append(row)
            print(json.dumps(row), flush=True)
            (out / f"sweep-{args.label}.json").write_text(json.dumps(rows, indent=1))
    return 0


def _log_tail(proc: Any, fallback: Any = None, n: int = 80) -> list[str]:
    """The last lines of a server's log (the record of why a start or a reply broke off)."""
    if proc is not None:
        try:
            return list(proc.log_lines())[-n:]
        except Exception:  # a record, not a check: whatever is there
            pass
    failure = getattr(fallback, "failure", None)  # a ServerFailed: the failure holds the log's tail
    tail = getattr(failure, "log_tail", None) or []
    return list(tail if not isinstance(tail, str) else tail.splitlines())[-n:]


def phase_cold(args: argparse.Namespace) -> int:
    """A cold start: the page cache dropped (where the machine allows it), then the guide's DFlash line and
    BeeDeck's switch settings started to ready, each once cold and once warm."""
    import subprocess

    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.speculation.restart import fast_restart_settings

    out = _out(args)
    engine = str(args.engine)
    caps = probe_engine(engine)
    target, draft = _pair(args.pair, caps)
    os.environ.setdefault("BEEDECK_HOME", str(WORK / "home"))
    rows = []
    for name, s in (("guide", _base(target, draft, args.ctx)),
                    ("fast", fast_restart_settings(_base(target, draft, args.ctx), caps))):
        for state in ("cold", "warm"):
            row: dict[str, Any] = {"settings": name, "state": state}
            if state == "cold":
                drop = subprocess.run(["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"],
                                      capture_output=True, text=True)
                row["page_cache_dropped"] = drop.returncode == 0
                row["drop_error"] = drop.stderr.strip()[-200:]
            proc = None
            try:
                proc, ready = _start(engine, caps, s)
                row["ready_s"] = round(ready, 2)
                row["reply"] = _reply(proc.base_url, 32)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"
                row["log_tail"] = _log_tail(proc, exc)
            finally:
                if proc is not None:
                    proc.stop()
            rows.append(row)
            print(json.dumps(row)[:600], flush=True)
            (out / f"cold-{args.pair}-{args.label}.json").write_text(json.dumps(rows, indent=1))
    return 0


def _nvml_used_mib() -> list[int]:
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
    except OSError:  # no GPU (the script's own dry run on a CPU engine)
        return []
    return [int(x) for x in out.split()]


def phase_standby(args: argparse.Namespace) -> int:
    """The switch as BeeDeck's serving (core/serving) makes it with memory free for both: the first switch loads the
    other mode beside the running server (core/engine/speculation/standby.py decides, from the launch preflight's plan
    against what is free now), every later one only changes the server the chat talks to; timed from the
    click to the first token of a reply on the other server."""
    from beedeck.core.engine.mode import Mode
    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.server import free_port
    from beedeck.core.engine.speculation.modes import settings_for_mode
    from beedeck.core.engine.speculation.restart import fast_restart_settings
    from beedeck.core.engine.speculation.standby import free_now
    from beedeck.core.launcher import standby_preflight

    out = _out(args)
    engine = str(args.engine or Path((WORK / "genb.engine").read_text().strip()))
    caps = probe_engine(engine)
    target, draft = _pair(args.pair, caps)
    os.environ.setdefault("BEEDECK_HOME", str(WORK / "home"))
    first = _base(target, draft, args.ctx)  # the profile as saved: the guide's DFlash line
    rec: dict[str, Any] = {"pair": args.pair, "ctx": args.ctx, "engine": engine, "switches": []}
    procs = []
    try:
        proc, cold = _start(engine, caps, dataclasses.replace(first, port=free_port()))
        procs.append(proc)
        rec["first_start_s"] = round(cold, 2)
        rec["first_reply"] = _reply(proc.base_url, 32)
        baseline = settings_for_mode(first, Mode.BASELINE, caps)
        gpu_free, ram = free_now()
        rec["free_before_switch"] = {"gpu": gpu_free, "ram": ram}
        beside = standby_preflight(caps, baseline, gpu_free=gpu_free, ram_available=ram)
        rec["refusal"] = beside.refusals[0].message if beside.refusals else None
        other_settings = fast_restart_settings(dataclasses.replace(baseline, port=free_port()), caps)
        if args.preload:  # the app's preload: loaded in the background while the running server answers
            import threading

            box: dict[str, Any] = {}

            def load() -> None:
                try:
                    box["proc"], box["ready"] = _start(engine, caps, other_settings)
                except Exception as exc:
                    box["error"] = f"{type(exc).__name__}: {exc}"

            t = time.monotonic()
            loader = threading.Thread(target=load)
            loader.start()
            during = []
            while loader.is_alive():
                during.append(_reply(proc.base_url, 64))
            loader.join()
            if "error" in box:
                raise RuntimeError(box["error"])
            other, ready = box["proc"], box["ready"]
            procs.append(other)
            rec["preload"] = {"ready_s": round(ready, 2), "wall_s": round(time.monotonic() - t, 2),
                              "replies_during": during, "reply_alone": _reply(proc.base_url, 64)}
            t = time.monotonic()
            reply = _reply(other.base_url, 32)  # the first click: nothing is loaded, the chat changes port
            rec["switches"].append({"to": Mode.BASELINE, "how": "swapped to the preloaded server", "ready_s": 0.0,
                                    "to_first_token_s": round(time.monotonic() - t - reply["wall_s"] + reply["ttft_s"], 2),
                                    "reply": reply})
        else:
            t = time.monotonic()
            other, ready = _start(engine, caps, other_settings)
            procs.append(other)
            reply = _reply(other.base_url, 32)
            rec["switches"].append({"to": Mode.BASELINE, "how": "loaded beside", "ready_s": round(ready, 2),
                                    "to_first_token_s": round(time.monotonic() - t - reply["wall_s"] + reply["ttft_s"], 2),
                                    "reply": reply})
        rec["nvml_used_mib_both"] = _nvml_used_mib()
        serving = {Mode.BASELINE: other, Mode.DFLASH: proc}
        for mode in (Mode.DFLASH, Mode.BASELINE, Mode.DFLASH, Mode.BASELINE):
            t = time.monotonic()
            reply = _reply(serving[mode].base_url, 32)  # the switch: the chat's next request goes to the other port
            rec["switches"].append({"to": mode, "how": "swapped", "ready_s": 0.0,
                                    "to_first_token_s": round(time.monotonic() - t - reply["wall_s"] + reply["ttft_s"], 2),
                                    "reply": reply})
            print(json.dumps(rec["switches"][-1]), flush=True)
        sw = rec["switches"]
        rec["round_trip_first_s"] = round(sw[0]["ready_s"] + sw[1]["ready_s"], 2)
        rec["round_trip_kept_s"] = round(sw[1]["ready_s"] + sw[2]["ready_s"], 2)
        rec["round_trip_kept_to_first_token_s"] = round(sw[1]["to_first_token_s"] + sw[2]["to_first_token_s"], 2)
    except Exception as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["trace"] = traceback.format_exc()[-2500:]
    finally:
        for p in procs:
            p.stop()
    (out / f"standby-{args.pair}-{args.label}{'-preload' if args.preload else ''}.json").write_text(json.dumps(rec, indent=1))
    print(json.dumps({k: v for k, v in rec.items() if k != "trace"}), flush=True)
    return 0


def phase_download(args: argparse.Namespace) -> int:
    """The prebuilt path end to end on this GPU machine, as far as a machine with no network allows: the
    recorded BeeLlama release listing (tests/fixtures/releases/beellama.json) served by the protocol-level
    fake on loopback, the asset BeeDeck's picker chooses for this driver's CUDA made of ``--engine``'s folder
    (the build this lease made: GitHub's own archive cannot be fetched here), then the real command
    ``beedeck engine download`` with the real NVML detection: resolve, download, sha256, unpack, smoke test
    (backend cuda), register. The downloaded binary then starts the full-size pair and answers."""
    import subprocess

    from tests.fakes.fake_releases import FakeReleases, make_tar_gz, server_bundle

    from beedeck.core.engine.probe import probe_engine
    from beedeck.core.engine.releases import resolve_release
    from beedeck.core.engine.releases.assets import host_platform

    out = _out(args)
    engine = Path(str(args.engine))
    listing = REPO / "tests" / "fixtures" / "releases" / "beellama.json"
    gpus, driver = _gpus()
    rec: dict[str, Any] = {"driver_cuda": driver, "gpus": gpus, "listing": str(listing.relative_to(REPO))}
    home = WORK / "home-download"
    env = {**os.environ, "BEEDECK_HOME": str(home), "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO / "gui"), str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    try:
        with FakeReleases() as probe_fake:  # which asset the picker wants, from the listing alone
            repo = probe_fake.add_listing(listing)
            host_os, host_arch = host_platform()
            want = resolve_release(repo, None, os_name=host_os, arch=host_arch, backend="cuda" if gpus else "cpu",
                                   cuda_driver_version=driver, api_url=probe_fake.url)  # cpu: the dry run here
        rec["chosen"] = {"tag": want.tag, "asset": want.asset.name, "extra": [a.name for a in want.extra],
                         "notes": list(want.notes)}
        files, links = server_bundle(engine.parent)
        archives = {want.asset.name: make_tar_gz(WORK / want.asset.name, files, links)}
        for extra in want.extra:  # a runtime companion: this machine's own CUDA runtime libraries
            libs = {p.name: p for p in Path("/usr/local/cuda/lib64").glob("libcudart.so*") if not p.is_symlink()}
            archives[extra.name] = make_tar_gz(WORK / extra.name, dict(libs))
        rec["archive_bytes"] = {k: v.stat().st_size for k, v in archives.items()}
        with FakeReleases() as fake:
            fake.add_listing(listing, archives)
            t = time.monotonic()
            cli = subprocess.run([sys.executable, "-m", "beedeck", "engine", "download", "--default"],
                                 env={**env, "BEEDECK_RELEASES_API": fake.url}, capture_output=True, text=True,
                                 timeout=300)
            rec["download_s"] = round(time.monotonic() - t, 2)
            rec["cli_rc"], rec["cli_stdout"], rec["cli_stderr"] = cli.returncode, cli.stdout[-3000:], cli.stderr[-3000:]
            rec["requests"] = [p for p, _r in fake.requests]
        listed = subprocess.run([sys.executable, "-m", "beedeck", "engine", "list"], env=env, capture_output=True,
                                text=True, timeout=120)
        rec["engine_list"] = listed.stdout[-2000:]
        binary = next((line.split(": ", 1)[1].strip() for line in cli.stdout.splitlines()
                       if line.startswith("registered ")), None)
        rec["binary"] = binary
        if binary:
            caps = probe_engine(binary)
            rec["caps"] = {"generation": caps.generation.value, "version": caps.version, "release": caps.release,
                           "gpu_backend": caps.gpu_backend, "devices": list(caps.devices)}
            target, draft = _pair(args.pair, caps)
            os.environ["BEEDECK_HOME"] = str(home)
            proc, ready = _start(binary, caps, _base(target, draft, args.ctx))
            rec["ready_s"] = round(ready, 2)
            rec["reply"] = _reply(proc.base_url, 64)
            rec["log_device_lines"] = [x for x in proc.log_lines() if "CUDA0" in x][:12]
            proc.stop()
    except Exception as exc:
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["trace"] = traceback.format_exc()[-2500:]
    (out / f"download-{args.label}.json").write_text(json.dumps(rec, indent=1))
    print(json.dumps({k: v for k, v in rec.items() if k not in ("trace", "engine_list")}, indent=1)[:4000], flush=True)
    return 0 if "error" not in rec and rec.get("cli_rc") == 0 else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("build", "dryrun", "toggle", "sweep", "standby", "cold", "download"))
    ap.add_argument("--source", type=Path)
    ap.add_argument("--sources", dest="source_list", nargs="*", default=[])
    ap.add_argument("--label", default="genb")
    ap.add_argument("--cache-type", action="append", default=[])
    ap.add_argument("--all-quants", action="store_true")
    ap.add_argument("--engine", type=Path)
    ap.add_argument("--pair", default="gemma4-q4km")
    ap.add_argument("--pairs", default="gemma4-q4km")
    ap.add_argument("--ctx", type=int, default=32768)
    ap.add_argument("--variants", default="guide,mmap,fast")
    ap.add_argument("--n-max", type=int, nargs="*", default=[1, 2, 4, 8, 12, 16])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--preload", action="store_true", help="standby: load the other mode before the first click")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    return {"build": phase_build, "dryrun": phase_dryrun, "toggle": phase_toggle, "sweep": phase_sweep,
            "standby": phase_standby, "cold": phase_cold, "download": phase_download}[args.phase](args)


if __name__ == "__main__":
    sys.exit(main())
