"""The one-click baseline-versus-speculation benchmark: the runner that serves and measures every mode.

What makes the comparison fair (docs/reference/seed.md step 7-9, docs/reference/anchors.md 3g):

- every mode gets the same prompts, the same ``seed`` (suite seed + repetition index) and the same
  sampling (the suite's temperature plus its extra request fields);
- every request sends ``cache_prompt: false``, so no prompt cache carries over between requests or
  modes; ``cache_n`` is recorded per reply to prove it;
- a model-free mode's drafter keeps what it saw across requests (mainline's ``ngram-mod`` hashes every
  reply's n-grams into a table that outlives the request): the same prompt again would be drafted from its
  own earlier reply (measured on the starter, greedy: 0, then 64 of 64 tokens drafted, 12.4 -> 24.8 tok/s).
  So such a mode's server is started again before each repetition after the first, and it warms up on a
  prompt that is never measured; a server BeeDeck did not start cannot be, and the report says so;
- modes are switched per request where the engine can (BeeLlama: ``"speculative.n_max": 0`` is
  the baseline on a DFlash-launched server, docs/reference/engine-facts.md §3.9), which lets the runner interleave
  modes prompt by prompt; otherwise (mainline: speculation is command-line only) each mode gets its
  own server, started with the same argv apart from the speculation flags (same port too), and
  both argvs are recorded.

Suites live in :mod:`beedeck.core.bench.suites`, raw results in :mod:`beedeck.core.bench.results`,
statistics and report files in :mod:`beedeck.core.bench.report`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from beedeck.core.bench.baseline_cache import BaselineCache, BaselineKey, baseline_key
from beedeck.core.bench.environment import collect_environment
from beedeck.core.bench.peak import PeakTracker
from beedeck.core.bench.progress import TokenProgress
from beedeck.core.bench.results import VARIANTS, BenchReport, ModeRun, Sample
from beedeck.core.bench.suites import BenchError, BenchPrompt, BenchSuite
from beedeck.core.engine.argv import LaunchRefused, redact
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.client import ClientError, LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.core.engine.ports import claimed_free_port, release_port
from beedeck.core.engine.server import ServerFailed, ServerProcess, ServerState
from beedeck.core.engine.speculation.comparison import age_text
from beedeck.core.engine.speculation.modes import (
    available_modes,
    engine_spec_type,
    keeps_across_requests,
    option,
    pick_model_free_type,
    settings_for_mode,
)
from beedeck.core.engine.speculation.switching import NO_DRAFTS, PerRequestMemory, check_per_request
from beedeck.core.launcher import launch
from beedeck.core.machine.sampler import GpuSampler
from beedeck.core.models.paircheck import model_facts, read_infos

# Measured on the shared 2-core CI machine (docs/bench-report-example.md): the baseline tok/s of
# the same prompt moved 51-80 tok/s (synthetic 50 MB target, --threads 1) and 0.6-18 tok/s (starter
# Gemma 3 270M, default threads) between replies. One repetition cannot separate that from an
# effect; three give a median and a bootstrap interval at a cost users still accept, and the report
# flags a spread above 25 % with "use more repetitions".
DEFAULT_REPS = 3
WARMUP_MAX_TOKENS = 32
# What a mode whose drafter learns across requests warms up on: no measured prompt's words.
NEUTRAL_WARMUP = BenchPrompt("warm-up", "Say OK.", category="prose")
SCHEMA_VERSION = 1
ProgressFn = Callable[[int, int, str], None]


def parse_variants(words: Sequence[str]) -> list[Variant]:
    """The variants a command line names (a mode's value, "baseline-draft-loaded"); BenchError names the others."""
    out = []
    for word in dict.fromkeys(w.strip() for w in words if w.strip()):
        variant = Variant.parse(word)
        if variant is None:
            raise BenchError(f"Unknown benchmark mode {word!r}: use {', '.join(v.key for v in VARIANTS)}.")
        out.append(variant)
    return out


def check_modes(variants: Sequence[Variant], caps: EngineCaps | None, settings: LaunchSettings | None) -> list[Variant]:
    """Validate the requested variants for this engine and these model files (their GGUF headers are read
    where they exist: MTP needs heads in the target, each draft mode a draft of its kind); raises
    BenchError naming the fix."""
    out = list(dict.fromkeys(variants))
    if not out:
        raise BenchError("No benchmark mode was given: use baseline and any of "
                         f"{', '.join(m.value for m in Mode if m.speculates)}.")
    if IN_SERVER_BASELINE in out and Variant(Mode.DFLASH) not in out:
        raise BenchError(f"{IN_SERVER_BASELINE.key} is the DFlash server asked for no drafts: add dflash to the modes.")
    if caps is None:
        return out
    options = available_modes(caps, settings, model_facts(*read_infos(settings))) if settings is not None else []
    for v in out:
        if not v.mode.speculates:
            continue
        found = option(options, v.mode)
        why = found.reason if found is not None else engine_spec_type(v.mode, caps)[1]
        if why:
            raise BenchError(f"The {v.label} mode cannot run: {why} Or leave {v.key} out of the modes.")
    return out


def mode_settings(base: LaunchSettings, mode: Mode, caps: EngineCaps) -> LaunchSettings:
    """``base`` with only the speculation changed for ``mode`` (the baseline without any draft)."""
    return settings_for_mode(base, mode, caps)


SWITCHING = ("auto", "restart", "per-request", "side-by-side")
IN_SERVER_CHOICES = ("auto", "on", "off")


def run_bench(
    engine: str | Path | None,
    caps: EngineCaps | None,
    base_settings: LaunchSettings | None,
    suite: BenchSuite,
    variants: Sequence[Variant] = (Variant(Mode.BASELINE), Variant(Mode.DFLASH)),
    reps: int = DEFAULT_REPS,
    warmup: int = 1,
    on_progress: ProgressFn | None = None,
    cancel_event: threading.Event | None = None,
    gpu_sampler: GpuSampler | None = None,
    *,
    on_sample: Callable[[Sample], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    switching: str = "auto",
    in_server_baseline: str = "auto",
    per_request_memory: PerRequestMemory | None = None,
    url: str | None = None,
    api_key: str | None = None,
    ready_timeout: float = 600.0,
    pid_file: Path | None = None,
    environment: dict[str, Any] | None = None,
    baselines: BaselineCache | None = None,
    fresh_baseline: bool = False,
) -> BenchReport:
    """Run ``suite`` in every variant (a mode, or the in-server baseline) and return the raw
    :class:`BenchReport` (never raises mid-run).

    With ``url`` the benchmark talks to a running server (one mode; or dflash plus the in-server
    baseline with ``switching="per-request"``); otherwise it starts ``engine`` itself from
    ``base_settings``. ``switching``: "auto" / "restart" (one server per mode, the baseline without
    the draft), "side-by-side" (every mode's server at once, requests interleaved: the fairest on a
    busy machine, for models that fit twice) or "per-request" (only the DFlash server: its baseline is
    the in-server one, and the report says so). ``in_server_baseline``: also measure the DFlash server
    asked for no drafts ("auto": where the engine honours it, checked once and remembered in
    ``per_request_memory``). ``on_progress(done, total, label)`` and ``on_sample`` run on the calling
    thread; ``cancel_event`` stops between and inside replies (the report is then partial,
    ``cancelled`` True). Raises BenchError before anything starts if the modes cannot run. ``baselines``: the
    baseline kept for this setup is used instead of measuring it again (restart switching; none: always measured),
    and one measured is kept (core/bench/baseline_cache.py); ``fresh_baseline``: measure it again (and keep that).
    """
    if reps < 1:
        raise BenchError(f"reps must be at least 1, not {reps}: use 3 or more for a confidence interval.")
    modes = check_modes(variants, caps, base_settings)
    if url is None and (engine is None or caps is None or base_settings is None):
        raise BenchError("Give either a server URL or an engine, its capabilities and launch settings.")
    if switching not in SWITCHING:
        raise BenchError(f"Unknown mode switching {switching!r}: use one of {', '.join(SWITCHING)}.")
    if in_server_baseline not in IN_SERVER_CHOICES:
        raise BenchError(f"in_server_baseline must be one of {', '.join(IN_SERVER_CHOICES)}, not {in_server_baseline!r}.")
    if switching == "auto":
        switching = "restart"
    if switching == "per-request":
        allowed = {Variant(Mode.BASELINE), Variant(Mode.DFLASH), IN_SERVER_BASELINE}
        if Variant(Mode.DFLASH) not in modes or not set(modes) <= allowed:
            raise BenchError("Per-request switching serves every mode from the DFlash server: use only the "
                             "baseline and dflash modes, or restart switching.")
        # The DFlash server's own baseline is the in-server one: call it that, never "baseline".
        modes = [IN_SERVER_BASELINE if m == Variant(Mode.BASELINE) else m for m in modes]
        modes = list(dict.fromkeys(modes))
    if url is not None and switching != "per-request" and len(modes) > 1:
        raise BenchError("A running server can only be benchmarked in one mode (BeeDeck cannot restart it): "
                         "pass one mode, or --switching per-request to add its in-server baseline, or let "
                         "BeeDeck start the engine.")
    report = BenchReport(suite, modes, reps, warmup, started=time.time())
    report.environment = environment if environment is not None else collect_environment(
        engine, caps, base_settings, url, api_key)
    runner = _Runner(report, caps, on_progress, cancel_event or threading.Event(), PeakTracker(gpu_sampler),
                     on_sample, on_line, api_key, ready_timeout, pid_file, in_server_baseline, per_request_memory)
    runner.baselines, runner.fresh_baseline = baselines, fresh_baseline
    try:
        if url is not None:
            runner.run_external(url, switching)
        else:
            assert engine is not None and caps is not None and base_settings is not None
            how = {"per-request": runner.run_per_request, "side-by-side": runner.run_side_by_side}
            how.get(switching, runner.run_restart)(Path(engine), caps, base_settings)
    finally:
        runner.close()
        report.finished = time.time()
    return report


class _Runner:
    def __init__(self, report: BenchReport, caps: EngineCaps | None, on_progress: ProgressFn | None,
                 cancel: threading.Event, tracker: PeakTracker, on_sample: Callable[[Sample], None] | None,
                 on_line: Callable[[str], None] | None, api_key: str | None, ready_timeout: float,
                 pid_file: Path | None, in_server: str = "auto", memory: PerRequestMemory | None = None) -> None:
        self.r, self.caps, self.on_progress, self.cancel = report, caps, on_progress, cancel
        self.in_server = "on" if IN_SERVER_BASELINE in report.variants and in_server == "auto" else in_server
        self.memory = memory or PerRequestMemory()
        self.tracker, self.on_sample, self.on_line, self.api_key = tracker, on_sample, on_line, api_key
        self.ready_timeout = ready_timeout
        self.pid_file = pid_file  # None: each server's own ownership record (core.engine.pidfile)
        self.procs: dict[Variant, ServerProcess] = {}  # variant -> the server answering it
        # variant -> how its server was started (engine, caps, settings, pid file): to start it afresh
        self.launches: dict[Variant, tuple[Path, EngineCaps, LaunchSettings, Path | None]] = {}
        self.claimed_port: int | None = None  # restart switching's one port, claimed for the run
        self.tokens = TokenProgress(len(report.variants) * self.mode_budget())  # progress in tokens, not replies
        self.baselines: BaselineCache | None = None
        self.fresh_baseline = False
        self._label, self._reported = "", 0.0

    def mode_budget(self) -> int:
        """The tokens one mode may generate: its warm-ups and every prompt's ``max_tokens`` per rep (a mode started
        afresh before each repetition warms up again: measure() adds those)."""
        return self.warm_budget() + self.r.reps * self.rep_budget()

    def warm_budget(self) -> int:
        """The tokens of one mode's warm-ups."""
        suite = self.r.suite
        return self.r.warmup * min(WARMUP_MAX_TOKENS, suite.max_tokens_for(suite.prompts[0])) if suite.prompts else 0

    def rep_budget(self) -> int:
        """The tokens of one repetition of the suite in one mode."""
        return sum(self.r.suite.max_tokens_for(p) for p in self.r.suite.prompts)

    def progress(self, label: str) -> None:
        self._label, self._reported = label, time.monotonic()
        if self.on_progress is not None:
            self.on_progress(self.tokens.done, self.tokens.total, f"{label} · {self.tokens.describe()}")

    def streamed(self) -> None:
        """One more token of the running reply: the progress again at most twice a second."""
        self.tokens.token()
        if self.on_progress is not None and time.monotonic() - self._reported >= 0.5:
            self.progress(self._label)

    def close(self) -> None:
        self.tracker.stop()
        self.stop_all()
        if self.claimed_port is not None:
            release_port(self.claimed_port)  # a claim no server took over (each server ends its own)

    def stop_all(self) -> float | None:
        if not self.procs:
            return None
        t0 = time.perf_counter()
        for proc in {id(p): p for p in self.procs.values()}.values():
            proc.stop()
        self.procs.clear()
        return time.perf_counter() - t0

    # ---- serving ----

    def start(self, engine: Path, caps: EngineCaps, settings: LaunchSettings, run: ModeRun,
              pid_file: Path | None = None, again: bool = False) -> LlamaClient | None:
        if self.cancel.is_set():
            self.r.cancelled = True
            return None
        self.progress(f"starting the {run.variant.label} server")
        proc: ServerProcess | None = None
        try:
            proc = launch(engine, caps, settings, on_line=self.on_line, pid_file=pid_file or self.pid_file)
            self.procs[run.variant] = proc
            self.launches[run.variant] = (engine, caps, settings, pid_file)
            run.ready_s = self._wait_ready(proc)
            run.argv = redact([str(engine), *proc.argv])  # once ready: a port lost at the start is not the one used
            if run.ready_s is None:  # cancelled while the model loaded: stop it now, not once it is ready
                self.r.cancelled = True
                proc.stop()
                self.procs.pop(run.variant, None)
                return None
        except ServerFailed as exc:  # a refused launch (LaunchRefused) too
            # A refusal's words list its reasons with their remedies; a failure's are its message, then its remedy.
            said = str(exc) if isinstance(exc, LaunchRefused) else exc.failure.message + (
                f" ({exc.failure.remedy})" if exc.failure.remedy else "")
            run.error = f"The {run.variant.label} server did not start{' again for a repetition' * again}: {said}"
            self.r.errors.append(run.error)
            if proc is not None:
                proc.stop()
                self.procs.pop(run.variant, None)
            return None
        self.tracker.watch(proc.pid)
        return LlamaClient(proc.base_url, self.api_key if self.api_key is not None else settings.api_key)

    def _wait_ready(self, proc: ServerProcess) -> float | None:
        """``proc.wait_ready(ready_timeout)`` in short slices, so a cancel is seen within ~0.2 s even
        while a big model loads for minutes; None when cancelled."""
        deadline = time.monotonic() + self.ready_timeout
        while True:
            if self.cancel.is_set():
                return None
            left = deadline - time.monotonic()
            try:
                return proc.wait_ready(max(0.0, min(0.2, left)))
            except ServerFailed as exc:
                if exc.failure.code != "timeout":
                    raise
                if left <= 0.2:  # the real timeout: name the whole wait, not the last slice
                    raise ServerFailed(replace(exc.failure, message=(
                        f"llama-server did not become ready within {self.ready_timeout:.0f} s "
                        f"(state: {proc.state.value})."))) from None

    def skip(self, run: ModeRun) -> None:
        self.tokens.skip(self.mode_budget())

    def run_restart(self, engine: Path, caps: EngineCaps, base: LaunchSettings) -> None:
        if base.port == 0:  # one port for every mode: the argvs differ only in speculation (claimed: no other
            base = replace(base, port=claimed_free_port(base.host))  # BeeDeck takes it between two starts)
            self.claimed_port = base.port
        for variant in [v for v in self.r.variants if v != IN_SERVER_BASELINE]:
            if self.cancel.is_set():
                self.r.cancelled = True
                return
            settings = mode_settings(base, variant.mode, caps)
            key = self.baseline_key(engine, caps, settings) if variant == Variant(Mode.BASELINE) else None
            if key is not None and self.kept_baseline(key):
                continue
            run = ModeRun(variant, "restart", spec_type=_spec_type(settings, caps))
            self.r.runs.append(run)
            run.stop_previous_s = self.stop_all()
            client = self.start(engine, caps, settings, run)
            if client is None:
                self.skip(run)
                continue
            clients, runs = {variant: client}, [run]
            if variant == Variant(Mode.DFLASH) and self.wants_in_server(client):
                inner = self.in_server_run(run)
                clients[IN_SERVER_BASELINE] = client
                runs.append(inner)
            self.measure(clients, runs)
            if key is not None:
                self.keep_baseline(key, run)

    # ---- the baseline kept from an earlier run ----

    def baseline_key(self, engine: Path, caps: EngineCaps, settings: LaunchSettings) -> BaselineKey | None:
        gpus = [str(g.get("name", "")) for g in self.r.environment.get("gpus") or [] if isinstance(g, dict)]
        return None if self.baselines is None else baseline_key(engine, caps, settings, self.r.suite, self.r.reps,
                                                                self.r.warmup, gpus)

    def kept_baseline(self, key: BaselineKey) -> bool:
        """The baseline kept for this setup, used as measured then (the report says when); False: measure it."""
        kept = self.baselines.get(key) if self.baselines is not None and not self.fresh_baseline else None
        if kept is None:
            return False
        self.r.runs.append(kept.run)
        self.r.samples.extend(kept.samples)
        self.tokens.skip(self.mode_budget())
        self.progress(f"{Mode.BASELINE.label}: kept from an earlier run ({age_text(kept.measured_at)})")
        return True

    def keep_baseline(self, key: BaselineKey, run: ModeRun) -> None:
        """Keep a baseline measured whole (every prompt, every repetition, no error): the next run uses it."""
        samples = [s for s in self.r.samples if s.variant == Variant(Mode.BASELINE)]
        whole = len(samples) == self.r.reps * len(self.r.suite.prompts) and all(s.error is None for s in samples)
        if self.baselines is not None and whole and run.error is None and not self.r.cancelled:
            self.baselines.put(key, run, samples)

    def wants_in_server(self, client: LlamaClient) -> bool:
        """Whether to also measure the DFlash server asked for no drafts: asked for, or (auto) where
        this engine honours it (checked once on this server if the build is not known yet)."""
        if self.in_server == "off" or self.caps is None:
            return False
        known = self.memory.get(self.caps)
        if known is None:
            self.progress("checking whether this engine honours a per-request 'no drafts'")
            try:
                verdict = check_per_request(client)
            except ClientError:
                return False
            self.memory.remember(self.caps, verdict)
            self.r.environment["per_request"] = verdict.describe()
            known = verdict.honoured
        if not known and self.in_server == "on":
            self.r.errors.append(f"{IN_SERVER_BASELINE.key} was asked for, but this engine does not honour a "
                                 "per-request 'no drafts' (it drafts anyway): that mode was not measured.")
            self.skip(ModeRun(IN_SERVER_BASELINE, "per-request"))
        if known and IN_SERVER_BASELINE not in self.r.variants:
            self.r.variants.insert(self.r.variants.index(Variant(Mode.DFLASH)) + 1, IN_SERVER_BASELINE)
            self.tokens.add_total(self.mode_budget())
        return bool(known)

    def in_server_run(self, dflash_run: ModeRun) -> ModeRun:
        run = ModeRun(IN_SERVER_BASELINE, "per-request", argv=dflash_run.argv, request_extra=dict(NO_DRAFTS),
                      ready_s=dflash_run.ready_s)
        self.r.runs.append(run)
        if Variant(Mode.DFLASH) in self.procs:
            self.procs[IN_SERVER_BASELINE] = self.procs[Variant(Mode.DFLASH)]
        return run

    def run_side_by_side(self, engine: Path, caps: EngineCaps, base: LaunchSettings) -> None:
        """Every mode's server at once (own ports), requests interleaved: drifting machine load hits
        all modes alike. Only for models that fit twice (CPU runs, small models)."""
        runs = []
        clients: dict[Variant, LlamaClient] = {}
        for i, variant in enumerate(self.r.variants):
            settings = mode_settings(replace(base, port=0), variant.mode, caps)
            run = ModeRun(variant, "side-by-side", spec_type=_spec_type(settings, caps))
            self.r.runs.append(run)
            pid_file = self.pid_file.with_name(f"{self.pid_file.stem}-{i}{self.pid_file.suffix}") if self.pid_file else None
            client = self.start(engine, caps, settings, run, pid_file=pid_file)
            if client is None:
                self.skip(run)
                continue
            runs.append(run)
            clients[variant] = client
        if runs:
            self.measure(clients, runs)

    def run_per_request(self, engine: Path, caps: EngineCaps, base: LaunchSettings) -> None:
        settings = mode_settings(base, Mode.DFLASH, caps)
        runs = [ModeRun(m, "per-request", request_extra=dict(NO_DRAFTS) if m == IN_SERVER_BASELINE else {},
                        spec_type=None if m == IN_SERVER_BASELINE else _spec_type(settings, caps))
                for m in self.r.variants]
        self.r.runs.extend(runs)
        client = self.start(engine, caps, settings, runs[0])
        for run in runs[1:]:
            run.argv, run.ready_s, run.error = runs[0].argv, runs[0].ready_s, runs[0].error
            if runs[0].variant in self.procs:
                self.procs[run.variant] = self.procs[runs[0].variant]
        if client is not None:
            self.measure({r.variant: client for r in runs}, runs)

    def run_external(self, url: str, switching: str) -> None:
        runs = [ModeRun(m, "external" if switching != "per-request" else "per-request",
                        request_extra=dict(NO_DRAFTS) if m == IN_SERVER_BASELINE else {})
                for m in self.r.variants]
        self.r.runs.extend(runs)
        client = LlamaClient(url, self.api_key)
        self.measure({r.variant: client for r in runs}, runs)

    # ---- measuring ----

    def measure(self, clients: dict[Variant, LlamaClient], runs: list[ModeRun]) -> None:
        """Warm up every mode, then rep x prompt x mode (modes interleaved when they are all up). A mode whose
        drafter learns across requests starts each repetition after the first on a fresh server."""
        suite = self.r.suite
        learns = [run for run in runs if not run.request_extra and keeps_across_requests(run.variant.mode, run.spec_type)]
        for run in runs:
            if not self.warm_up(clients[run.variant], run, neutral=run in learns):
                return
        learners = [run for run in learns if run.variant in self.launches]
        if self.r.reps > 1:
            self.r.notes += [
                f"{run.variant.label}: its drafter keeps what it saw across requests, and BeeDeck did not start this "
                "server, so it could not start it afresh between repetitions: repetitions after the first may be "
                "drafted from the earlier replies to the same prompts (faster than new text)."
                for run in learns if run.variant not in self.launches]
        self.tokens.add_total(len(learners) * (self.r.reps - 1) * self.warm_budget())  # their warm-ups again
        runs = list(runs)
        for rep in range(self.r.reps):
            for run in learners if rep else ():
                client = self.fresh_start(run)
                if client is None or not self.warm_up(client, run, neutral=True):
                    if self.r.cancelled:
                        return
                    # This mode ends here; the others go on (as when a first start fails).
                    runs.remove(run)
                    learners = [r for r in learners if r is not run]
                    self.tokens.skip((self.r.reps - rep) * (self.rep_budget() + self.warm_budget()))
                    continue
                clients[run.variant] = client
            for p in suite.prompts:
                for run in runs:
                    if self.cancel.is_set():
                        self.r.cancelled = True
                        return
                    self.tokens.begin_reply(suite.max_tokens_for(p))
                    self.progress(f"{run.variant.label}: {p.id} ({rep + 1}/{self.r.reps})")
                    sample = self.request(clients[run.variant], run, p, rep, suite.seed + rep, suite.max_tokens_for(p))
                    self.tokens.end_reply()
                    if sample is None:
                        continue
                    self.r.samples.append(sample)
                    if self.on_sample is not None:
                        self.on_sample(sample)
                    if sample.error and self.server_gone(run):
                        return
        self.progress("done")

    def warm_up(self, client: LlamaClient, run: ModeRun, neutral: bool) -> bool:
        """The run's warm-up replies (``neutral``: on :data:`NEUTRAL_WARMUP`, for a drafter that keeps what it sees);
        False when the benchmark must stop."""
        suite = self.r.suite
        for _ in range(self.r.warmup):
            if self.cancel.is_set():
                self.r.cancelled = True
                return False
            p = NEUTRAL_WARMUP if neutral else suite.prompts[0]
            budget = min(WARMUP_MAX_TOKENS, suite.max_tokens_for(suite.prompts[0]))
            self.tokens.begin_reply(budget)
            self.progress(f"{run.variant.label}: warm-up")
            failed = self.request(client, run, p, -1, suite.seed, budget)
            self.tokens.end_reply()
            if failed is not None and self.server_gone(run):
                return False
        return True

    def fresh_start(self, run: ModeRun) -> LlamaClient | None:
        """The run's server stopped and started again as it was (what its drafter learnt is gone); its first
        start's argv and ready time stay the run's (the restarts are counted in ``fresh_starts``). None when
        it could not be started again (the run's error says why) or the benchmark was cancelled."""
        engine, caps, settings, pid_file = self.launches[run.variant]
        proc = self.procs.pop(run.variant, None)
        if proc is not None:
            proc.stop()
        first = (run.argv, run.ready_s)
        self.progress(f"{run.variant.label}: a fresh server for the next repetition")
        client = self.start(engine, caps, settings, run, pid_file=pid_file, again=True)
        if client is not None:
            run.argv, run.ready_s = first  # the run's own start, as the report shows it
            run.fresh_starts += 1
        return client

    def server_gone(self, run: ModeRun) -> bool:
        """True (and the error recorded) when the server this run uses has died."""
        proc = self.procs.get(run.variant)
        if proc is None or proc.state == ServerState.READY:
            return False
        run.error = f"The {run.variant.label} server stopped during the benchmark: {proc.failure or 'see its log'}"
        self.r.errors.append(run.error)
        return True

    def request(self, client: LlamaClient, run: ModeRun, p: BenchPrompt, rep: int, seed: int,
                max_tokens: int) -> Sample | None:
        suite = self.r.suite
        extra = {**suite.extra, "cache_prompt": False, **run.request_extra}
        stream = client.stream_chat(p.messages(), max_tokens=max_tokens, temperature=suite.temperature,
                                    seed=seed, extra=extra)
        if (proc := self.procs.get(run.variant)) is not None:
            self.tracker.watch(proc.pid)  # side by side: the peak of this reply's server, not the last started
        self.tracker.reset()
        try:
            # Cancel is checked per token: a reply stops within one token of the click (the prompt
            # phase of a benchmark prompt is short, so no watcher thread is needed for it).
            for _ in stream:
                self.streamed()
                if self.cancel.is_set():
                    stream.cancel()
            result = stream.result
        except ClientError as exc:
            if self.cancel.is_set():
                return None
            msg = f"{run.variant.label} / {p.id}: {exc}"
            self.r.errors.append(msg)
            return Sample(run.variant, p.id, rep, seed, error=str(exc))
        if result.cancelled or rep < 0:
            return None
        sample = Sample.from_result(run.variant, p.id, rep, seed, result)
        sample.peak_gpu_mem = self.tracker.read()
        if run.variant.mode == Mode.BASELINE and sample.draft_n:
            # Not a data point: a "baseline" that drafted is the speculative mode under another name.
            sample.error = (f"this {run.variant.label} reply drafted {sample.draft_n} tokens: the server used its draft "
                            "although the request asked for none, so it is left out of the figures")
            self.r.errors.append(f"{run.variant.label} / {p.id}: {sample.error}")
            if run.variant == IN_SERVER_BASELINE and self.caps is not None:
                self.memory.contradicted(self.caps, sample.draft_n)
        return sample


def _spec_type(settings: LaunchSettings, caps: EngineCaps) -> str | None:
    if settings.spec_mode == Mode.BASELINE:
        return None
    if settings.spec_mode == Mode.MODEL_FREE:
        return settings.spec_model_free_type
    return engine_spec_type(settings.spec_mode, caps)[0]


__all__ = ["DEFAULT_REPS", "IN_SERVER_CHOICES", "SWITCHING", "check_modes", "mode_settings", "parse_variants",
           "pick_model_free_type", "run_bench"]
