#!/usr/bin/env python3
"""The 24 GB desk on a big GPU (issue 36): every full-size figure inside a 4090's memory, per engine family.

    desk24_gpu.py measure --engine BIN --label ml|genb [--out DIR]    # on the GPU machine (desk24_run.sh)
    desk24_gpu.py measure --rehearse --engine BIN --label ml          # this CPU machine: tiny sizes, no hold

One engine per call, in order: hold all of the GPU's memory but 24,064 MiB (``memory_hold.py``: a 4090's
24,564 MiB less ~500 MiB a desktop takes), then

1. recommend as a user's recommendation is made: ``beedeck recommend --refresh --engine BIN --card 24gb-ada``
   reading the catalog's Gemma 4 31B headers from the metadata-only files (tests/fixtures/meta_gguf.py) served by
   the protocol-level fake hub (tests/fakes/fake_hub.py), the GPU's free memory read by NVML with the hold on;
2. start the recommended pair and context through BeeDeck's own serving (core/serving: preflight, plan, launch,
   the slot folder), one reply, then a prompt of token ids that fills the promised context; NVML's per-process
   memory and the plan at start and after the fill (and its peak during it), the plan's components;
3. the Baseline -> DFlash -> Baseline round trips through ``Serving.restart`` (the app's restart path): without
   the slot carried, with it, with it and ``--no-warmup``, and one at ``-lv 4`` for the fine split; each switch split
   into its parts (the save, the stop, the start's phases from the engine's log timestamps and BeeDeck's clock:
   core/engine/start_phases.py, the restore) and followed by the time to the first token of a 16k-token
   conversation's next turn (with the restore: only the turn is read; without: all of it);
4. acceptance on the first three replies after a restore into DFlash, on the sticky pair (target and draft agree
   on every token: what a restore leaves the drafter), against the same after a full re-read.

Writes ``desk24-<label>.json`` and ``desk24-<label>.md`` to ``--out`` (or $OUT). ``--rehearse``: the starter
engine (or a BeeLlama CPU build) with the synthetic sticky pair, a 4k context and a 1k conversation, no memory
hold, the recommendation made for 23.5 GiB: the script's own dry run, so the GPU call runs right the first time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "gui"), str(REPO), str(Path(__file__).resolve().parent)]
WORK = Path(os.environ.get("BEEDECK_GPU_WORK", "/tmp/beedeck-gpu"))
MiB = 1 << 20
LEAVE_MIB = 24_564 - 500  # a 4090 beside a desktop session
CARD = "24gb-ada"
TARGET_REPO, DRAFT_REPO = "unsloth/gemma-4-31B-it-GGUF", "Anbeeld/gemma-4-31B-it-DFlash-GGUF"
TARGET_QUANTS, DRAFT_QUANTS = ("Q4_K_S", "Q4_K_M", "Q5_K_M"), ("Q4_K_M", "Q5_K_M")  # what meta_gguf lays out


@dataclass(frozen=True)
class Sizes:
    ctx: int | None  # None: the context the recommendation promised
    conv: int  # the conversation carried across the switches (tokens)
    sticky_conv: int
    reply: int = 32
    margin: int = 64  # the fill leaves this much of the context for its reply


FULL = Sizes(None, 16_384, 4_096)
REHEARSAL = Sizes(4_096, 1_024, 512)


def _out(args: argparse.Namespace) -> Path:
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else WORK / "out")
    out.mkdir(parents=True, exist_ok=True)
    return out


# ------------------------------------------------------------------------------------------ the GPU
@contextlib.contextmanager
def memory_hold(leave_mib: int, on: bool) -> Iterator[dict[str, Any]]:
    """All of GPU 0's memory but ``leave_mib`` held by a side process for the ``with`` block (released at its end,
    or with this process whatever happens: memory_hold.py)."""
    if not on:
        yield {"held": False}
        return
    ready = WORK / f"hold-{os.getpid()}.json"
    ready.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("memory_hold.py")), "--leave-mib",
                             str(leave_mib), "--ready", str(ready), "--parent", str(os.getpid())])
    try:
        deadline = time.monotonic() + 180
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the memory hold did not start (exit {proc.poll()})")
            time.sleep(0.2)
        yield {"held": True, **json.loads(ready.read_text())}
    finally:
        ready.unlink(missing_ok=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def nvml_mib(pid: int | None) -> float | None:
    """MiB the process ``pid`` holds on GPU 0 (NVML's per-process figure), None without NVML or a GPU."""
    from beedeck.core.machine.nvml import held_by

    got = held_by({pid}) if pid else None
    return round(got[0] / MiB, 1) if got and got[0] is not None else None


def gpu_free_mib() -> list[float]:
    from beedeck.core.machine.hardware import detect

    return [round(g.memory_free / MiB, 1) for g in detect().gpus]


class PeakWatch:
    """NVML's per-process figure every 0.2 s while a long request runs: its peak."""

    def __init__(self, pid: int | None) -> None:
        self.pid, self.peak, self._stop = pid, None, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            got = nvml_mib(self.pid)
            if got is not None:
                self.peak = max(self.peak or 0.0, got)

    def __enter__(self) -> PeakWatch:
        if self.pid:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(2)


# ------------------------------------------------------------------------------- the recommendation
def hub_files(folder: Path) -> dict[str, dict[str, Path]]:
    """The catalog's Gemma 4 31B repos as metadata-only files under their catalog names."""
    from tests.fixtures import meta_gguf as mg

    folder.mkdir(parents=True, exist_ok=True)
    targets = {f"gemma-4-31B-it-{q}.gguf": mg.gemma4_31b(folder / f"gemma-4-31B-it-{q}.gguf", quant=q)
               for q in TARGET_QUANTS}
    drafts = {f"gemma4-31b-it-dflash-{q}.gguf": mg.dflash_draft(folder / f"gemma4-31b-it-dflash-{q}.gguf", "dflash",
                                                                 quant=q, **mg.GEMMA4_DRAFT)  # type: ignore[arg-type]
              for q in DRAFT_QUANTS}
    return {TARGET_REPO: targets, DRAFT_REPO: drafts}


def recommend(engine: str | None, vram_gib: float | None, home: Path, generation: str | None = None) -> dict[str, Any]:
    """``beedeck recommend --refresh --engine ENGINE --card 24gb-ada --json`` against the fake hub, as a child process
    (huggingface_hub reads HF_ENDPOINT at import): the recommendation, what it read, and how long it took.
    ``vram_gib``: the free memory to plan for (None: NVML's, with the hold on); ``generation`` instead of an engine
    (before the engine is built: which FlashAttention pairs its build needs)."""
    from tests.fakes.fake_hub import FakeFile, FakeHub

    files = hub_files(WORK / "hub")
    cmd = [sys.executable, "-m", "beedeck", "recommend", "--refresh", "--card", CARD, "--json"]
    cmd += ["--engine", engine] if engine else ["--generation", str(generation)]
    if vram_gib is not None:
        cmd += ["--vram", str(vram_gib)]
    with FakeHub() as hub:
        for repo, named in files.items():
            hub.add_repo(repo, {name: FakeFile.sparse_gguf(path) for name, path in named.items()})
        env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "BEEDECK_HOME": str(home), "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO / "gui"), str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
        t = time.monotonic()
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    rec: dict[str, Any] = {"seconds": round(time.monotonic() - t, 1), "rc": done.returncode,
                           "stderr_tail": done.stderr[-1500:], "files": {r: {n: str(p) for n, p in f.items()}
                                                                          for r, f in files.items()}}
    try:
        rec["answer"] = json.loads(done.stdout)
    except ValueError:
        rec["stdout_tail"] = done.stdout[-2000:]
    return rec


def recommended_profile(rec: dict[str, Any]) -> Any:
    """The recommended settings with the local files the fake hub served."""
    from beedeck.core.engine.launch_settings import LaunchSettings

    primary = rec["answer"]["primary"]
    s = LaunchSettings.from_dict(primary["settings"])
    s.target = rec["files"][TARGET_REPO][primary["target_file"]]
    s.draft = rec["files"][DRAFT_REPO][primary["draft_file"]] if primary.get("draft_file") else s.draft
    s.port = 0
    return s


def rehearsal_profile(caps: Any, sizes: Sizes, pair: str) -> Any:
    """A synthetic sticky pair (tests/fixtures/synth_gguf.py; ``pair`` "bench": the 50 MB one ``beedeck bench
    --synthetic`` uses, where compute shows) at the rehearsal's context, as the CPU engine runs it."""
    from tests.fixtures import synth_gguf as sg

    from beedeck.clicmd.bench import synthetic_bench_pair
    from beedeck.core.engine.launch_settings import LaunchSettings
    from beedeck.core.engine.mode import Mode

    fmt = "bee" if caps.generation.value == "bee-a" else "mainline"
    if pair == "bench":
        target, draft = synthetic_bench_pair(WORK / "synth-bench", fmt)
    else:
        target = sg.cached_target(WORK / "synth", sticky=True)
        draft = sg.cached_draft(WORK / "synth", target, sticky=True, fmt=fmt)  # type: ignore[arg-type]
    return LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, ctx_size=sizes.ctx or 4096,
                          draft_n_max=15, threads=1, flash_attn="auto", n_gpu_layers="0", draft_n_gpu_layers="0",
                          kv_unified=True)


# ------------------------------------------------------------------------------------------- serving
@dataclass
class Recorder:
    """The serving's events with the monotonic time each came."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    states: list[tuple[float, str]] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def events(self) -> Any:
        from beedeck.core.serving import ServingEvents

        return ServingEvents(line=lambda s: self.lines.append((time.monotonic(), s)),
                             state_changed=lambda st: self.states.append((time.monotonic(), str(st.value))),
                             ready=lambda _url: self.ready.append(time.monotonic()),
                             failed=lambda f: self.failed.append(f"{f.code}: {f.message}"))


def make_carry() -> Any:
    """BeeDeck's SlotCarry with a switch: off, a restart keeps nothing (the measurement before this change)."""
    from beedeck.core.serving import SlotCarry

    class Switchable(SlotCarry):
        on = True

        def before_stop(self, restart: Any, running: Any) -> None:
            if self.on:
                super().before_stop(restart, running)
            else:
                self.last = None

    return Switchable(WORK / "slots")


def serving(home: Path) -> tuple[Any, Recorder, Any]:
    from beedeck.core.engine.ports import free_port
    from beedeck.core.engine.speculation.switch_cost import SwitchCosts
    from beedeck.core.serving import Inline, Serving, ServingParts

    os.environ["BEEDECK_HOME"] = str(home)
    rec, carry = Recorder(), make_carry()
    s = Serving(ServingParts(costs=SwitchCosts(home / "start-times.json"), restart_steps=carry,
                             default_port=free_port(), ready_timeout_s=600.0), jobs=Inline(), events=rec.events())
    s.standby = False  # a 24 GB card: nothing beside the running server
    return s, rec, carry


def post(url: str, route: str, body: dict[str, Any], timeout: float = 900.0) -> dict[str, Any]:
    req = urllib.request.Request(url + route, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            answer: dict[str, Any] = json.loads(resp.read())
            return answer
    except urllib.error.HTTPError as exc:  # the server's own words
        raise RuntimeError(f"{route} answered HTTP {exc.code}: {exc.read()[:600]!r}") from None


def completion(url: str, ids: list[int], n_predict: int) -> dict[str, Any]:
    """A prompt of token ids (``/completion``, the prompt cache on): the server's timings, the wall time and the
    generated token ids."""
    t = time.monotonic()
    r = post(url, "/completion", {"prompt": ids, "n_predict": n_predict, "cache_prompt": True, "temperature": 0.0,
                                  "seed": 7, "ignore_eos": True, "return_tokens": True})
    tm = r.get("timings") or {}
    tokens = r.get("tokens")
    if not isinstance(tokens, list) or len(tokens) != tm.get("predicted_n"):  # an engine without return_tokens
        tokens = post(url, "/tokenize", {"content": r.get("content", "")}).get("tokens", [])
    return {"wall_s": round(time.monotonic() - t, 3), "prompt_n": tm.get("prompt_n"), "cache_n": tm.get("cache_n"),
            "prompt_ms": tm.get("prompt_ms"), "prompt_tps": tm.get("prompt_per_second"),
            "predicted_n": tm.get("predicted_n"), "tps": tm.get("predicted_per_second"), "draft_n": tm.get("draft_n"),
            "accepted": tm.get("draft_n_accepted"), "content": r.get("content", ""), "tokens": tokens}


def _timings(done: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in done.items() if k not in ("content", "tokens")}


_WORDS: dict[str, list[int]] = {}


def token_ids(target: str, n: int, seed: int = 0) -> list[int]:
    """``n`` token ids of ``target``'s vocabulary whose text is a plain word (no control, byte or partial-UTF-8
    token: BeeLlama v0.4.3 answers HTTP 500 "does not match the expected Content-only format" when a reply is one),
    spread over the vocabulary."""
    from beedeck.core.models.gguf.reader import inspect, iter_tokens

    if target not in _WORDS:
        words = []
        for i, text in enumerate(iter_tokens(inspect(target))):
            word = text.replace("\u2581", "").replace("Ġ", "")
            if word.isascii() and word.isalpha() and not (text.startswith("<") and text.endswith(">")):
                words.append(i)
            if len(words) >= 50_000:
                break
        _WORDS[target] = words or list(range(300, 1300))
    words = _WORDS[target]
    return [words[(i * 7919 + seed) % len(words)] for i in range(n)]


def start(s: Any, rec: Recorder, engine: str, caps: Any, settings: Any) -> dict[str, Any]:
    from beedeck.core.engine.start_phases import start_phases

    t0, i0 = time.monotonic(), len(rec.lines)
    s.start(engine, settings, caps)
    if not s.is_running():
        raise RuntimeError(f"the start failed: {rec.failed[-1:] or 'see the log'}")
    return {"ready_s": round(s.last_start_s or 0.0, 2), "wall_s": round(time.monotonic() - t0, 2),
            "phases": _phases(s, rec, i0, start_phases)}


def _phases(s: Any, rec: Recorder, i0: int, start_phases: Any) -> dict[str, Any]:
    from beedeck.core.engine.server_state import ServerState

    proc = s.proc
    times = getattr(proc, "state_times", {})
    spawned = times.get(ServerState.STARTING, 0.0)  # (the old server's last lines come before it)
    mine = [(t, line) for t, line in rec.lines[i0:] if not line.startswith("BeeDeck:") and t >= spawned]
    p = start_phases([line for _, line in mine], [t for t, _ in mine], times.get(ServerState.STARTING),
                     times.get(ServerState.READY))
    return p.as_dict()


def switch(s: Any, rec: Recorder, carry: Any, settings: Any, conv: list[int], tail: list[int]) -> dict[str, Any]:
    """One switch by ``Serving.restart``, split into its parts, then the next turn's time to its first token."""
    from beedeck.core.engine.start_phases import start_phases

    t0, i0, r0 = time.monotonic(), len(rec.lines), len(rec.ready)
    s.restart(settings)
    if len(rec.ready) == r0:
        raise RuntimeError(f"the switch did not become ready: {rec.failed[-1:]}")
    total = rec.ready[-1] - t0
    stopped = next((t for t, st in rec.states if t >= t0 and st == "stopped"), None)
    carried = carry.last
    out: dict[str, Any] = {
        "to": settings.spec_mode.setting, "total_s": round(total, 3), "ready_s": round(s.last_start_s or 0.0, 3),
        "stop_incl_save_s": round(stopped - t0, 3) if stopped else None,
        "save_s": round(carried.save_s, 3) if carried and carried.kind == "restored" else None,
        "restore_s": round(carried.restore_s, 3) if carried and carried.kind == "restored" else None,
        "carried": None if carried is None else {"kind": carried.kind, "why": carried.why, "tokens": carried.tokens,
                                                 "bytes": carried.size},
        "note": s.restart_note, "phases": _phases(s, rec, i0, start_phases)}
    out["next_turn"] = _timings(completion(s.base_url, conv + tail, 1))
    out["click_to_first_token_s"] = round(total + out["next_turn"]["wall_s"], 3)
    return out


def round_trip(s: Any, rec: Recorder, carry: Any, profile: Any, name: str, conv: list[int], carry_on: bool,
               extra: list[str], changes_end: bool = False) -> dict[str, Any]:
    """Baseline, then DFlash, by restart. ``conv`` is the conversation on the server; each switch's next turn
    continues it as a chat does (its 16 new tokens follow every token the server has, and ``conv`` grows by
    them), so a restored cache is used whole. ``changes_end``: the next turn instead replaces the conversation's
    last 16 tokens (a template that re-renders the reply, a regenerated answer): the server must go back 16
    tokens, which a model with sliding-window layers cannot do after a restore (its checkpoints are not saved)."""
    from beedeck.core.engine.mode import Mode
    from beedeck.core.engine.speculation.modes import settings_for_mode

    carry.on = carry_on
    base = replace(profile, extra_args=[*profile.extra_args, *extra])
    sw = []
    for i, mode in enumerate((Mode.BASELINE, Mode.DFLASH)):
        tail = token_ids(profile.target, 16, 99 + 2 * len(conv) + i)
        if changes_end:
            del conv[-16:]
        sw.append(switch(s, rec, carry, settings_for_mode(base, mode, s.caps), conv, tail))
        conv.extend(tail)
        print(json.dumps({"round_trip": name, **{k: sw[-1][k] for k in ("to", "total_s", "ready_s", "save_s",
                                                                          "restore_s", "click_to_first_token_s")},
                          "prompt_n": sw[-1]["next_turn"]["prompt_n"], "cache_n": sw[-1]["next_turn"]["cache_n"]}),
              flush=True)
    return {"name": name, "carry": carry_on, "extra_args": extra, "changes_end": changes_end, "switches": sw,
            "round_trip_s": round(sum(x["total_s"] for x in sw), 3),
            "round_trip_to_first_tokens_s": round(sum(x["click_to_first_token_s"] for x in sw), 3)}


# --------------------------------------------------------------------------------------- measuring
def plan_of(caps: Any, settings: Any) -> dict[str, Any]:
    """The launch preflight's plan for ``settings`` with the memory free now (what BeeDeck counted)."""
    from beedeck.core.launcher import preflight, room_now

    room = room_now()
    checked = preflight(caps, settings, devices=room.gpus, host_ram=room.host_ram)
    m = checked.memory
    if m is None:
        return {"unplanned": checked.unplanned}
    gpu = m.gpus[0] if m.gpus else m.host
    return {"gpu_total_mib": round(gpu.total / MiB, 1), "items_mib": {k: round(v / MiB, 1) for k, v in gpu.items.items()},
            "fa_copy_mib": round(getattr(m, "fa_copy", 0) / MiB, 1), "n_ctx": m.n_ctx, "cells_swa": m.cells_swa,
            "fits": m.fits, "refusals": [r.message for r in checked.refusals]}


def _vs(plan: float | None, nvml: float | None) -> float | None:
    return round(100.0 * (plan - nvml) / nvml, 2) if plan and nvml else None


def fill_context(s: Any, profile: Any, sizes: Sizes, rec: dict[str, Any]) -> list[int]:
    """A prompt that fills the promised context: its speed, and memory (plan vs NVML) at start and after."""
    pid = s.proc.pid if s.proc is not None else None
    n_ctx = sizes.ctx or profile.ctx_size
    ids = token_ids(profile.target, n_ctx - sizes.margin)
    with PeakWatch(pid) as watch:
        rec["fill"] = _timings(completion(s.base_url, ids, 8))
    rec["fill"]["tokens"] = len(ids)
    rec["memory"]["nvml_after_fill_mib"] = nvml_mib(pid)
    rec["memory"]["nvml_peak_during_fill_mib"] = watch.peak
    rec["memory"]["gpu_free_after_fill_mib"] = gpu_free_mib()
    plan = rec["memory"]["plan"].get("gpu_total_mib")
    rec["memory"]["plan_vs_nvml_start_pct"] = _vs(plan, rec["memory"]["nvml_at_start_mib"])
    rec["memory"]["plan_vs_nvml_after_fill_pct"] = _vs(plan, rec["memory"]["nvml_after_fill_mib"])
    grew = rec["memory"]["nvml_after_fill_mib"], rec["memory"]["nvml_at_start_mib"]
    rec["memory"]["grew_with_the_fill_mib"] = round(grew[0] - grew[1], 1) if None not in grew else None
    return ids


def acceptance(engine: str, caps: Any, profile: Any, sizes: Sizes, home: Path, rehearse: bool) -> dict[str, Any]:
    """The sticky pair: a conversation on Baseline, a switch into DFlash with the cache restored (and one without),
    and the acceptance of the first three replies after each."""
    from beedeck.core.engine.mode import Mode
    from beedeck.core.engine.speculation.modes import settings_for_mode

    if rehearse:
        sticky = profile
    else:
        import fullsize_gpu

        target, draft = fullsize_gpu._pair("gemma4-sticky")
        sticky = replace(profile, target=str(target), draft=str(draft))
    out: dict[str, Any] = {"target": Path(sticky.target).name}
    s, rec, carry = serving(home)
    try:
        start(s, rec, engine, caps, settings_for_mode(sticky, Mode.BASELINE, caps))
        # the sticky token ends the prompt: from it on, target and draft agree on every token
        conv = [*token_ids(sticky.target, sizes.sticky_conv, 5), _sticky_token(s.base_url, rehearse)]
        for carry_on in (True, False):
            if carry_on is False:
                carry.on = True
                s.restart(settings_for_mode(sticky, Mode.BASELINE, caps))
            completion(s.base_url, conv, 1)  # the conversation on Baseline
            carry.on = carry_on
            got = switch(s, rec, carry, settings_for_mode(sticky, Mode.DFLASH, caps), conv, [])
            replies, prompt = [], list(conv)
            for _ in range(3):
                r = completion(s.base_url, prompt, 64)
                replies.append({k: r[k] for k in ("prompt_n", "cache_n", "predicted_n", "draft_n", "accepted", "tps")})
                prompt += r["tokens"]
            out["restored" if carry_on else "read_again"] = {"switch": {k: got[k] for k in ("total_s", "carried", "note")},
                                                             "replies": replies}
    finally:
        s.shutdown()
    return out


def _sticky_token(url: str, rehearse: bool) -> int:
    """The token the sticky pair agrees on: " bee" of the synthetic pair (synth_gguf.STICKY_TOKEN), the metadata-only
    Gemma's STICKY_ID (meta_gguf.make_sticky)."""
    if not rehearse:
        from tests.fixtures.meta_gguf import STICKY_ID

        return STICKY_ID
    from tests.fixtures.synth_gguf import STICKY_TOKEN

    ids = post(url, "/tokenize", {"content": STICKY_TOKEN.replace("\u2581", " "), "add_special": False}).get("tokens", [])
    return int(ids[-1])


def measure(args: argparse.Namespace) -> int:
    from beedeck.core.engine.probe import probe_engine

    out, label = _out(args), args.label
    sizes = REHEARSAL if args.rehearse else FULL
    sizes = replace(sizes, ctx=args.ctx or sizes.ctx, conv=args.conv or sizes.conv)
    engine = str(args.engine)
    caps = probe_engine(engine)
    home = WORK / f"home-{label}"
    rec: dict[str, Any] = {"label": label, "engine": engine, "generation": caps.generation.value,
                           "release": caps.release, "backend": caps.gpu_backend, "rehearsal": args.rehearse,
                           "only_round_trips": args.only_round_trips,
                           "loadavg": os.getloadavg(), "memory": {}}
    t_all = time.monotonic()
    try:
        with memory_hold(LEAVE_MIB, not args.rehearse) as held:
            rec["hold"], rec["gpu_free_with_hold_mib"] = held, gpu_free_mib()
            rec["recommendation"] = recommend(engine, LEAVE_MIB / 1024 if args.rehearse else None, home)
            answer = rec["recommendation"].get("answer") or {}
            print(json.dumps({"recommended": answer.get("primary", {}).get("target_file"),
                              "draft": answer.get("primary", {}).get("draft_file"),
                              "ctx": answer.get("primary", {}).get("settings", {}).get("ctx_size")}), flush=True)
            profile = (rehearsal_profile(caps, sizes, args.pair) if args.rehearse
                       else recommended_profile(rec["recommendation"]))
            if sizes.ctx and not args.rehearse:
                profile.ctx_size = sizes.ctx
            rec["profile"] = {k: v for k, v in profile.to_dict().items() if v not in (None, [], "")}
            _serve_and_switch(engine, caps, profile, sizes, home, rec, out, label, args.only_round_trips, args.trips)
            if not args.only_round_trips and not args.no_acceptance:
                rec["acceptance"] = acceptance(engine, caps, profile, sizes, home, args.rehearse)
    except Exception as exc:  # the record says what broke, with everything measured before it
        rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["trace"] = traceback.format_exc()[-3000:]
    rec["seconds"] = round(time.monotonic() - t_all, 1)
    (out / f"desk24-{label}.json").write_text(json.dumps(rec, indent=1, default=str))
    (out / f"desk24-{label}.md").write_text(summary(rec))
    print(summary(rec), flush=True)
    return 0 if "error" not in rec else 1


def _serve_and_switch(engine: str, caps: Any, profile: Any, sizes: Sizes, home: Path, rec: dict[str, Any],
                      out: Path, label: str, only_round_trips: bool = False, n_trips: int | None = None) -> None:
    from beedeck.core.engine.client import LlamaClient
    from beedeck.core.engine.mode import Mode
    from beedeck.core.engine.speculation.modes import settings_for_mode

    s, recorder, carry = serving(home)
    try:
        first = settings_for_mode(profile, Mode.DFLASH, caps)
        rec["memory"]["plan"] = plan_of(caps, first)
        rec["first_start"] = start(s, recorder, engine, caps, first)
        rec["argv"] = s.proc.command() if s.proc is not None else None
        rec["memory"]["nvml_at_start_mib"] = nvml_mib(s.proc.pid)
        reply = LlamaClient(s.base_url, timeout=600.0).chat([{"role": "user", "content": "Say hello."}],
                                                            max_tokens=sizes.reply, temperature=0.0, seed=7,
                                                            extra={"ignore_eos": True})
        rec["first_reply"] = {"tokens": reply.timings.predicted_n if reply.timings else None,
                              "tps": reply.timings.predicted_per_second if reply.timings else None}
        if not only_round_trips:
            fill_context(s, profile, sizes, rec)
        conv = token_ids(profile.target, sizes.conv)  # the conversation carried across: a prefix of the fill
        rec["conversation"] = _timings(completion(s.base_url, conv, 1))
        rec["round_trips"] = []
        trips: list[tuple[str, bool, list[str], bool]] = [
            ("before: no slot carried", False, [], False), ("slot carried", True, [], False),
            ("slot carried, the turn changes the last 16 tokens", True, [], True),
            ("slot carried, --no-warmup", True, ["--no-warmup"], False)]
        if not only_round_trips:
            trips.append(("slot carried, -lv 4 (the fine split)", True, ["-lv", "4"], False))
        for name, on, extra, changes_end in trips[:n_trips]:  # --trips N: the first N (a short lease)
            rec["round_trips"].append(round_trip(s, recorder, carry, profile, name, conv, on, extra, changes_end))
            (out / f"desk24-{label}.json").write_text(json.dumps(rec, indent=1, default=str))  # so far
    finally:
        rec["log_tail"] = [line for _, line in recorder.lines[-80:]]
        s.shutdown()


# ------------------------------------------------------------------------------------------ summary
def _f(v: Any, unit: str = "") -> str:
    return "—" if v is None else (f"{v:,.2f}{unit}" if isinstance(v, float) else f"{v}{unit}")


def summary(rec: dict[str, Any]) -> str:
    """The Markdown summary of one engine's record."""
    lines = [f"# 24 GB desk: {rec['label']} ({rec.get('generation')}, {rec.get('backend')}"
             f"{', rehearsal on the CPU' if rec.get('rehearsal') else ''})", ""]
    p = (rec.get("recommendation") or {}).get("answer", {}).get("primary", {})
    st = p.get("settings", {})
    lines += [f"- hold: {rec.get('hold')}; free with the hold: {rec.get('gpu_free_with_hold_mib')} MiB",
              f"- recommended: {p.get('target_file')} + {p.get('draft_file')}, {st.get('ctx_size')} tokens, K/V "
              f"{st.get('cache_type_k')}/{st.get('cache_type_v')} (recommendation {_f((rec.get('recommendation') or {}).get('seconds'), ' s')})",
              f"- first start {_f((rec.get('first_start') or {}).get('ready_s'), ' s')}; one reply "
              f"{_f((rec.get('first_reply') or {}).get('tps'), ' tok/s')}"]
    fill, mem = rec.get("fill") or {}, rec.get("memory") or {}
    lines += [f"- fill: {fill.get('tokens')} tokens in {_f(fill.get('wall_s'), ' s')} ({_f(fill.get('prompt_tps'), ' tok/s')})",
              f"- memory: plan {_f((mem.get('plan') or {}).get('gpu_total_mib'), ' MiB')}; NVML at start "
              f"{_f(mem.get('nvml_at_start_mib'), ' MiB')} ({_f(mem.get('plan_vs_nvml_start_pct'), ' %')}), after the fill "
              f"{_f(mem.get('nvml_after_fill_mib'), ' MiB')} ({_f(mem.get('plan_vs_nvml_after_fill_pct'), ' %')}), peak "
              f"{_f(mem.get('nvml_peak_during_fill_mib'), ' MiB')}; grew {_f(mem.get('grew_with_the_fill_mib'), ' MiB')}; "
              f"plan's FA copy {_f((mem.get('plan') or {}).get('fa_copy_mib'), ' MiB')}", "",
              "| round trip | -> Baseline s | -> DFlash s | round trip s | save/restore s | next turn after each (prompt_n, s) | click to first tokens s |",
              "|---|---|---|---|---|---|---|"]
    for rt in rec.get("round_trips") or []:
        a, b = rt["switches"]
        sr = "/".join(_f(x.get(k)) for x in (a, b) for k in ("save_s", "restore_s"))
        nt = "; ".join(f"{x['next_turn'].get('prompt_n')}, {_f(x['next_turn'].get('wall_s'))}" for x in (a, b))
        lines.append(f"| {rt['name']} | {_f(a['total_s'])} | {_f(b['total_s'])} | {_f(rt['round_trip_s'])} | {sr} | {nt} | "
                     f"{_f(rt['round_trip_to_first_tokens_s'])} |")
    fine = next((rt for rt in rec.get("round_trips") or [] if "-lv 4" in rt["name"]), None)
    if fine:
        for sw in fine["switches"]:
            lines.append(f"- phases of the switch to {sw['to']} (-lv 4): " + ", ".join(
                f"{k} {v:.2f} s" for k, v in sw["phases"].items() if v))
    acc = rec.get("acceptance") or {}
    for key in ("restored", "read_again"):
        if key in acc:
            rows = [f"{r.get('accepted')}/{r.get('draft_n')} (prompt_n {r.get('prompt_n')})" for r in acc[key]["replies"]]
            lines.append(f"- acceptance after a switch into DFlash, cache {key.replace('_', ' ')}: " + ", ".join(rows))
    if rec.get("error"):
        lines += ["", f"**error**: {rec['error']}"]
    lines += ["", f"{rec.get('seconds')} s in all."]
    return "\n".join(lines) + "\n"


def kv_pairs(args: argparse.Namespace) -> int:
    """Before the build: the K/V cache types the recommendation for a generation uses (at 23.5 GiB free, as the hold
    leaves it), printed as the builder's ``--cache-type K/V`` arguments, so the engine is built with their kernels."""
    home = WORK / f"home-pairs-{args.generation}"
    rec = recommend(None, LEAVE_MIB / 1024, home, args.generation)
    st = ((rec.get("answer") or {}).get("primary") or {}).get("settings") or {}
    pairs = {"f16/f16", "q8_0/q8_0"}
    if st.get("cache_type_k") and st.get("cache_type_v"):
        pairs.add(f"{st['cache_type_k']}/{st['cache_type_v']}")
    print(" ".join(f"--cache-type {p}" for p in sorted(pairs)))
    print(json.dumps({"generation": args.generation, "settings": st, "rc": rec["rc"], "seconds": rec["seconds"],
                      "stderr": rec["stderr_tail"][-300:]}), file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=("measure", "kv-pairs"))
    ap.add_argument("--engine", type=Path)
    ap.add_argument("--generation", default="mainline", help="kv-pairs: mainline or bee-b")
    ap.add_argument("--label", default="")
    ap.add_argument("--rehearse", action="store_true", help="this CPU machine: tiny sizes, no memory hold")
    ap.add_argument("--pair", default="tiny", choices=("tiny", "bench"), help="--rehearse: the synthetic pair")
    ap.add_argument("--ctx", type=int, help="the context to start (default: the recommendation's; rehearsal 4096)")
    ap.add_argument("--conv", type=int, help="the conversation carried across a switch (tokens; default 16,384)")
    ap.add_argument("--only-round-trips", action="store_true",
                    help="start, the conversation and the round trips only (no fill, no -lv 4 split, no acceptance)")
    ap.add_argument("--trips", type=int, help="measure: only the first N round trips (a short lease)")
    ap.add_argument("--no-acceptance", action="store_true", help="measure: leave out the acceptance replies")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if args.phase == "kv-pairs":
        return kv_pairs(args)
    if args.engine is None or not args.label:
        ap.error("measure needs --engine and --label")
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
