"""Auto-tune: a bounded search for the launch settings that run fastest on this engine and card.

Every point is measured with the benchmark core (:func:`beedeck.core.bench.runner.run_bench`, one
server per point, ``cache_prompt`` off, the suite's seed), so a tuned point is measured exactly as a
benchmark would measure it. The rules:

- the baseline is measured once, on a server WITHOUT speculation (the start's settings with
  speculation off); every speed-up is against it;
- the start (the hand-written settings) is measured next; its time sets the per-point estimate, and
  the plan (points, estimated time, what fits the budget) is reported before the search goes on;
- the search is coordinate-wise over :func:`beedeck.core.bench.tune.knobs.knobs_for`: each knob's
  values are tried on top of the best point so far, one server each;
- a point the memory planner says does not fit is skipped without starting a server;
- at temperature 0 a point whose text differs from the baseline's is rejected (output identity);
- a point replaces the best only when the 95 % bootstrap interval of its speed over the best's lies
  wholly above ``1 + min_gain``: a difference inside the noise is never called a win;
- a new point is started only while the elapsed time plus the estimate for it and for the
  confirmation below stays inside the budget;
  ``cancel_event`` stops between and inside replies;
- a winner is confirmed: the start and the winner are measured once more after the search, and the
  win stands only if both runs together still clear the noise (on a loaded machine the speed drifts
  between points, which one interval per point cannot see). Without budget for it, a note says so.

The result says best vs start vs baseline with intervals, the points tried and the time spent, and
says so plainly when nothing beat the start. Data: :mod:`beedeck.core.bench.tune.points`; files:
:mod:`beedeck.core.bench.tune.report`.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from beedeck.core.bench.environment import collect_environment
from beedeck.core.bench.report import stats
from beedeck.core.bench.results import BenchReport, Sample
from beedeck.core.bench.runner import DEFAULT_REPS, run_bench
from beedeck.core.bench.suites import BenchError, BenchPrompt, BenchSuite
from beedeck.core.bench.tune.knobs import (
    FitFn,
    Knob,
    draft_block_size,
    is_cpu_engine,
    knobs_for,
    order_draft_max,
    planner_fit,
)
from beedeck.core.bench.tune.points import (
    BASELINE_ROLE,
    CANCELLED,
    CANDIDATE_ROLE,
    CONFIRM_POINTS,
    CONFIRM_ROLE,
    FAILED,
    INVALID,
    MEASURED,
    MIN_GAIN,
    NO_FIT,
    START_ROLE,
    TEXT_DIFFERS,
    TunePlan,
    TunePoint,
    TuneResult,
    _dur,
)
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.speculation.comparison import MIN_RUNS, Comparison, Evidence, compare

ProgressFn = Callable[[int, int, str], None]
# (settings, their mode, status line callback) -> the raw report of that one point
MeasureFn = Callable[[LaunchSettings, Mode, Callable[[str], None]], BenchReport]

# ----------------------------------------------------------------------------- prompts


class ChatMessageLike(Protocol):
    """What a suite needs of a chat message (core.chat.store.Message, read-only)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


def suite_from_chat(messages: Iterable[ChatMessageLike], last: int, name: str, max_tokens: int = 256,
                    temperature: float = 0.0, source: str = "chat") -> BenchSuite:
    """A suite of the last ``last`` user prompts of a conversation, oldest first. Each is sent alone
    (without the replies before it), so every point answers exactly the same requests."""
    texts = [m.content for m in messages if m.role == "user" and m.content.strip()]
    if last < 1:
        raise BenchError(f"--last must be at least 1, not {last}.")
    if not texts:
        raise BenchError(f"The conversation {name!r} has no prompts of yours to tune on: pick another one or a suite.")
    picked = texts[-last:]
    prompts = tuple(BenchPrompt(f"chat-{i + 1}", t, "chat") for i, t in enumerate(picked))
    return BenchSuite(f"chat: {name}", prompts, max_tokens, temperature, 42,
                      description=f"the last {len(picked)} prompts of the conversation {name!r}", source=source)


# ----------------------------------------------------------------------------- the search


def _evidence(samples: Sequence[Sample], mode: Mode | None = None) -> Evidence:
    """A point's replies as the rule's evidence (core/engine/speculation/comparison.py): tokens/s per prompt;
    with ``mode`` (a comparison against the baseline, which differs in the mode) what it drafted too."""
    drafted = sum(s.draft_n for s in samples) if mode is not None and mode.speculates else None
    return Evidence.of(((s.prompt_id, s.gen_tps) for s in samples if s.error is None), drafted=drafted)


def bench_measure(engine: str | Path, caps: EngineCaps, suite: BenchSuite, *, reps: int, warmup: int,
                  cancel: threading.Event, environment: dict[str, Any], on_line: Callable[[str], None] | None = None,
                  ready_timeout: float = 600.0) -> MeasureFn:
    """The real measurement: one :func:`run_bench` per point (restart switching: its own server)."""

    def measure(settings: LaunchSettings, mode: Mode, status: Callable[[str], None]) -> BenchReport:
        return run_bench(engine, caps, settings, suite, (Variant(mode),), reps=reps, warmup=warmup,
                         on_progress=lambda done, total, label: status(f"{label} ({done}/{total})"),
                         cancel_event=cancel, on_line=on_line, switching="restart", in_server_baseline="off",
                         ready_timeout=ready_timeout, environment=environment)

    return measure


class _Search:
    def __init__(self, suite: BenchSuite, plan: TunePlan, measure: MeasureFn, fits: FitFn | None,
                 on_progress: ProgressFn | None, on_point: Callable[[TunePoint], None] | None,
                 on_plan: Callable[[TunePlan], None] | None, cancel: threading.Event, clock: Callable[[], float],
                 identity: bool, min_gain: float) -> None:
        self.suite, self.plan, self.measure, self.fits = suite, plan, measure, fits
        self.on_progress, self.on_point, self.on_plan = on_progress, on_point, on_plan
        self.cancel, self.clock, self.min_gain = cancel, clock, min_gain
        self.identity = identity and suite.temperature == 0
        self.prompt_ids = [p.id for p in suite.prompts]
        self.points: list[TunePoint] = []
        self.durations: list[float] = []
        self.t0 = clock()
        self.cancelled = False
        self.baseline: TunePoint | None = None
        self.start: TunePoint | None = None
        self.best: TunePoint | None = None  # the fastest point so far that beat the one before it
        self.again: tuple[TunePoint, TunePoint] | None = None  # the start and the winner measured again

    @property
    def total(self) -> int:
        return self.plan.measured_points

    def progress(self, label: str) -> None:
        if self.on_progress is not None:
            self.on_progress(min(len(self.points), self.total), self.total, label)

    def add(self, point: TunePoint) -> TunePoint:
        self.points.append(point)
        if self.on_point is not None:
            self.on_point(point)
        return point

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def run_point(self, role: str, settings: LaunchSettings, mode: Mode, knob: str | None = None,
                  changes: dict[str, Any] | None = None) -> TunePoint:
        point = TunePoint(len(self.points), role, settings, knob, dict(changes or {}))
        head = f"point {point.index + 1}/{self.total}: {point.label}"
        self.progress(head)
        t = self.clock()
        report = self.measure(settings, mode, lambda line: self.progress(f"{head}: {line}"))
        point.seconds = self.clock() - t
        self.durations.append(point.seconds)
        point.samples = [s for s in report.samples if s.error is None]
        point.argv = next((r.argv for r in report.runs if r.argv), [])
        if report.cancelled:
            self.cancelled = True
            point.status, point.reason = CANCELLED, "cancelled while it was measured"
        elif report.errors or not point.samples:
            # A point with a failed reply is not a candidate: its median would hide the failure.
            point.status = FAILED
            point.reason = ([*report.errors, *[r.error for r in report.runs if r.error]] or ["no reply finished"])[0]
        if point.samples:
            point.gen_tps = stats([s.gen_tps for s in point.samples])
            drafted = sum(s.draft_n for s in point.samples)
            point.acceptance = sum(s.draft_n_accepted for s in point.samples) / drafted if drafted else None
        self._compare(point, mode)
        return point

    def _compare(self, point: TunePoint, mode: Mode) -> None:
        if self.baseline is not None and point is not self.baseline and point.samples:
            base = self.baseline.samples
            point.vs_baseline = compare(_evidence(base), _evidence(point.samples, mode))
            ref = {(s.prompt_id, s.rep): s.text for s in base}
            pairs = [(ref[(s.prompt_id, s.rep)], s.text) for s in point.samples if (s.prompt_id, s.rep) in ref]
            point.compared = len(pairs)
            point.identical = sum(1 for a, b in pairs if a == b)
            if self.identity and point.identical < point.compared and point.status == MEASURED:
                point.status = TEXT_DIFFERS
                point.reason = (f"at temperature 0 its text differs from the baseline's in "
                                f"{point.compared - point.identical} of {point.compared} replies")
        if self.start is not None and point is not self.start and point.samples and self.start.samples:
            point.vs_start = compare(_evidence(self.start.samples), _evidence(point.samples))

    def estimate(self) -> float:
        return statistics.fmean(self.durations) if self.durations else 0.0

    def beats(self, point: TunePoint, best: TunePoint) -> Comparison | None:
        """The comparison of ``point`` over ``best`` when its interval lies wholly above 1 + min_gain, else None."""
        return self.beats_samples(point, point.samples, best.samples)

    def beats_samples(self, point: TunePoint, new: Sequence[Sample], ref: Sequence[Sample],
                      statuses: tuple[str, ...] = (MEASURED,)) -> Comparison | None:
        """The same test on given replies (a point measured twice pools both runs; ``statuses``: which
        points may win, a cancelled one only as an unconfirmed win)."""
        if point.status not in statuses or not new or not ref:
            return None
        sp = compare(_evidence(ref), _evidence(new))
        return sp if sp.above(1.0 + self.min_gain) else None


def tune(engine: str | Path | None, caps: EngineCaps, start_settings: LaunchSettings, suite: BenchSuite, *,
         budget_s: float, reps: int = DEFAULT_REPS, warmup: int = 1, on_progress: ProgressFn | None = None,
         on_plan: Callable[[TunePlan], None] | None = None, on_point: Callable[[TunePoint], None] | None = None,
         cancel_event: threading.Event | None = None, measure: MeasureFn | None = None, fits: FitFn | None = None,
         knobs: list[Knob] | None = None, files: Iterable[str | Path] | None = None, min_gain: float = MIN_GAIN,
         identity: bool = True, clock: Callable[[], float] = time.monotonic, free_vram: Sequence[int] | None = None,
         ram_available: int | None = None, on_line: Callable[[str], None] | None = None,
         ready_timeout: float = 600.0, environment: dict[str, Any] | None = None) -> TuneResult:
    """Search the knobs of this engine within ``budget_s`` seconds; see the module docstring.

    ``measure`` replaces the real benchmark (tests); ``fits`` replaces the planner's check (default:
    :func:`planner_fit` with ``free_vram`` per GPU, detected when not given, and the host's
    ``ram_available``); ``knobs`` replaces :func:`knobs_for`. ``on_plan`` is called before the first
    measurement and again once the time per point is known; ``on_point`` after every point.
    Raises BenchError before anything starts when the settings cannot be tuned.
    """
    if budget_s <= 0:
        raise BenchError(f"The time budget must be positive, not {budget_s:g} s: use e.g. 10m.")
    if reps < MIN_RUNS:
        raise BenchError(f"Tuning needs at least {MIN_RUNS} repetitions per prompt for an interval, not {reps}.")
    if measure is None and engine is None:
        raise BenchError("Give the engine to tune (or a measurement function).")
    cancel = cancel_event or threading.Event()
    start = replace(start_settings, extra_args=list(start_settings.extra_args))
    mode = start.spec_mode
    if knobs is None:
        knobs = knobs_for(caps, start, files, draft_block=draft_block_size(start))
    if environment is None:
        environment = collect_environment(engine, caps, start) if measure is None else {}
    if fits is None and measure is None:
        fits = planner_fit(caps, _free_vram(caps) if free_vram is None else free_vram,
                           ram_available if ram_available is not None else _ram_available())
    if measure is None:
        assert engine is not None
        measure = bench_measure(engine, caps, suite, reps=reps, warmup=warmup, cancel=cancel, environment=environment,
                                on_line=on_line, ready_timeout=ready_timeout)
    plan = TunePlan(mode, knobs, sum(len(k.values) for k in knobs), budget_s, reps, len(suite.prompts))
    result = TuneResult(suite, mode, plan, [], budget_s=budget_s, started=time.time(), min_gain=min_gain,
                        engine=str(engine or ""), environment=environment)
    s = _Search(suite, plan, measure, fits, on_progress, on_point, on_plan, cancel, clock, identity, min_gain)
    result.identity_checked = s.identity
    if on_plan is not None:
        on_plan(plan)
    try:
        _search(s, start, mode, result)
    finally:
        result.points, result.cancelled = s.points, s.cancelled or result.cancelled
        result.baseline, result.start, result.best = s.baseline, s.start, s.best
        result.elapsed_s, result.finished = s.elapsed(), time.time()
    _verdict(result, s)
    if on_progress is not None:
        # A cancelled search stops where it was: its bar must not jump to 100 %.
        measured = sum(1 for p in s.points if p.status != CANCELLED)
        on_progress(s.total if not result.cancelled else min(measured, s.total), s.total,
                    "cancelled" if result.cancelled else "done")
    return result


def _search(s: _Search, start: LaunchSettings, mode: Mode, result: TuneResult) -> None:
    baseline = s.add(s.run_point(BASELINE_ROLE, replace(start, spec_mode=Mode.BASELINE), Mode.BASELINE))
    s.baseline = baseline
    s.plan.point_s = baseline.seconds
    if s.on_plan is not None:
        s.on_plan(s.plan)
    if not baseline.measured or s.cancelled:
        return
    if mode == Mode.BASELINE:
        s.start = baseline
    else:
        s.start = s.add(s.run_point(START_ROLE, start, mode))
        s.plan.point_s = s.estimate()
        if not s.start.measured or s.cancelled:
            return
    s.best = s.start
    s.start.accepted = True
    ordered = [order_draft_max(k, s.start.acceptance) for k in s.plan.knobs]
    if ordered != s.plan.knobs:
        s.plan.knobs = ordered
        if s.on_plan is not None:
            s.on_plan(s.plan)
    skipped = 0
    for knob in s.plan.knobs:
        for value, shown in zip(knob.values, knob.to_dict()["values"], strict=True):
            if s.cancel.is_set() or s.cancelled:
                s.cancelled = True
                return
            settings = knob.apply(s.best.settings, value)
            changes = {**s.best.changes, knob.name: shown}
            problems = settings.check()
            fit = s.fits(settings) if s.fits is not None and not problems else None
            if problems or fit:
                p = TunePoint(len(s.points), CANDIDATE_ROLE, settings, knob.name, changes,
                              INVALID if problems else NO_FIT, "; ".join(problems) or f"the planner says {fit}")
                s.add(p)
                s.progress(f"skipped {p.label}: {p.status}")
                continue
            # Room for this point and for confirming a win afterwards (the start and the winner again).
            if s.elapsed() + s.estimate() * (1 + CONFIRM_POINTS) > s.plan.budget_s:
                skipped += 1
                continue
            point = s.add(s.run_point(CANDIDATE_ROLE, settings, mode, knob.name, changes))
            if point.status == CANCELLED:
                return
            if s.beats(point, s.best) is not None:
                point.accepted = True
                s.best = point
    if skipped:
        planned = s.plan.candidates
        result.notes.append(f"The budget ({_dur(s.plan.budget_s)}) ran out: {skipped} of the {planned} "
                            f"value{'' if planned == 1 else 's'} to try {'was' if skipped == 1 else 'were'} not "
                            "tried. Give more time to search them.")
    if s.best is not s.start:
        _confirm(s, mode, result)


def _confirm(s: _Search, mode: Mode, result: TuneResult) -> None:
    """Measure the start and the winner once more, one after the other: a win that came from the
    machine's load drifting between two points (not from the setting) does not survive the pooled
    comparison. Skipped, with a note, when the budget has no room for two more points."""
    assert s.start is not None and s.best is not None
    if s.elapsed() + CONFIRM_POINTS * s.estimate() > s.plan.budget_s:
        result.notes.append(f"The win was not measured a second time (the budget of {_dur(s.plan.budget_s)} had no "
                            "room for two more points): give more time to confirm it.")
        return
    start_mode = Mode.BASELINE if s.start is s.baseline else mode
    again_start = s.add(s.run_point(CONFIRM_ROLE, s.start.settings, start_mode, None, dict(s.start.changes)))
    if again_start.status == CANCELLED or s.cancelled:
        return
    again_best = s.add(s.run_point(CONFIRM_ROLE, s.best.settings, mode, None, dict(s.best.changes)))
    if again_best.status != CANCELLED and not s.cancelled:
        s.again = (again_start, again_best)


def _verdict(r: TuneResult, s: _Search) -> None:
    """The one-paragraph verdict, which never contradicts the table: a confirmed win, an unconfirmed one
    (cut short or not measured again: "run again to confirm", and it can still be saved), or the start."""
    if r.cancelled:
        r.notes.append(_cancel_note(r))
    if not r.identity_checked:
        r.notes.append(f"Output identity was not checked: the prompts ran at temperature {r.suite.temperature:g} "
                       "(tune at 0 to require the baseline's text).")
    if r.baseline is None or not r.baseline.measured:
        why = r.baseline.reason if r.baseline is not None else "cancelled"
        r.verdict = f"The baseline (no speculation) could not be measured ({why}): nothing was tuned."
        r.best = None
        return
    if r.start is None or not r.start.measured:
        why = r.start.reason if r.start is not None else "cancelled before it started"
        r.verdict = f"The start could not be measured ({why}): nothing was tuned."
        r.best = None
        return
    if r.start.status == TEXT_DIFFERS:
        r.notes.append(f"The start itself does not reproduce the baseline's text ({r.start.reason}).")
    start = r.start
    best = r.best or start
    r.best = start
    head = f"Baseline {_tps(r.baseline)}; start {_tps(start)}{_vs_base(start, r.baseline)}."
    tried = f"{r.tried} point{'' if r.tried == 1 else 's'} tried in {_dur(r.elapsed_s)}"
    sp = s.beats(best, start) if best is not start else None  # each step beat the one before; this checks the start
    if sp is not None and s.again is not None:
        again_start, again_best = s.again
        pooled = s.beats_samples(again_best, best.samples + again_best.samples, start.samples + again_start.samples)
        r.confirmed = pooled is not None
        if pooled is not None:
            r.best, r.improved, r.best_vs_start = best, True, pooled
            r.verdict = (f"{head} Best: {best.label}, {_tps(best)}{_vs_base(best, r.baseline)}, "
                         f"{_against(pooled, 'the start')}, both measured twice; {tried}.")
            return
        both = compare(_evidence(start.samples + again_start.samples), _evidence(best.samples + again_best.samples))
        r.notes.append(f"{best.label} first ran at {_against(sp, 'the start')}, but measured again after the "
                       f"search, both runs together ({both.text()}) no longer clear the noise: the first figure was "
                       "the machine's load, not the setting.")
    elif sp is not None:
        why = ("the search was cancelled before it was measured a second time" if r.cancelled else
               f"the budget of {_dur(s.plan.budget_s)} had no room to measure it a second time")
        _unconfirmed(r, best, sp, head, why)
        return
    cut = [(p, c) for p in r.points if p.role == CANDIDATE_ROLE and p.status == CANCELLED
           and (c := s.beats_samples(p, p.samples, start.samples, (CANCELLED,))) is not None]
    if cut:
        point, sp = max(cut, key=lambda pc: pc[1].ratio or 0.0)
        _unconfirmed(r, point, sp, head, f"the cancel cut its measurement short ({_replies(point, r)})")
        return
    r.verdict = f"{head} {_keep_start(r, tried)}"


def _unconfirmed(r: TuneResult, point: TunePoint, sp: Comparison, head: str, why: str) -> None:
    """A win measured once, not confirmed: said as such, and it can still be saved."""
    r.best, r.best_vs_start, r.unconfirmed = point, sp, True
    base = "" if r.baseline is None else _vs_base(point, r.baseline)
    r.verdict = (f"{head} Unconfirmed win: {point.label}, {_tps(point)}{base}, "
                 f"{_against(sp, 'the start')}, but {why}: run again to confirm. It can be saved as it is.")


def _keep_start(r: TuneResult, tried: str) -> str:
    """"No configuration beat the start measurably …: keep the start", naming the closest candidate and
    every candidate the cancel cut short (its row says cancelled: the verdict says what it lacks)."""
    when = " in what was measured before the cancel" if r.cancelled else ""
    rivals = [p for p in r.points if p.role == CANDIDATE_ROLE and p.status == MEASURED and p.vs_start is not None]
    top = max(rivals, key=lambda p: p.vs_start.ratio or 0.0 if p.vs_start else 0.0, default=None)
    closest = "" if top is None or top.vs_start is None else (
        f" The fastest candidate, {top.label}, ran at {_against(top.vs_start, 'the start')}: inside the noise or "
        f"below the {100 * r.min_gain:.0f} % needed.")
    cut = "".join(f" {p.label} was cut short by the cancel ({_replies(p, r)}; "
                  f"{p.vs_start.text() if p.vs_start else 'not compared'}): run again to measure it."
                  for p in r.points if p.role == CANDIDATE_ROLE and p.status == CANCELLED and p.samples)
    return f"No configuration beat the start measurably{when} ({tried}): keep the start.{closest}{cut}"


def _replies(p: TunePoint, r: TuneResult) -> str:
    want = r.plan.reps * len(r.suite.prompts)
    return f"{len(p.samples)} of {want} replies measured"


def _cancel_note(r: TuneResult) -> str:
    """What a cancelled search measured and what it did not."""
    measured = [p for p in r.points if p.status != CANCELLED and p.gen_tps is not None]
    cut = [p for p in r.points if p.status == CANCELLED]
    candidates = sum(1 for p in r.points if p.role == CANDIDATE_ROLE)
    left = max(0, r.plan.candidates - candidates)
    parts = [f"{len(measured)} point{'' if len(measured) == 1 else 's'} measured in full"]
    parts += [f"{p.label} cut short ({_replies(p, r)})" for p in cut]
    if left:
        parts.append(f"{left} candidate{'' if left == 1 else 's'} not tried")
    return ("The search was cancelled: " + "; ".join(parts) + ". The verdict covers only what was measured; "
            "a win found before the cancel was not confirmed.")


def _vs_base(p: TunePoint, baseline: TunePoint) -> str:
    sp = p.vs_baseline
    if sp is None or p is baseline:
        return ""
    return f" ({_against(sp, 'the baseline')})"


def _against(sp: Comparison, what: str) -> str:
    """"1.73x the start (95 % CI 1.71-1.75, 3 runs of 2 prompts)", or "no ratio to the start (one run: no
    interval)": the rule's comparison in a sentence."""
    if not sp.shown:
        return f"no ratio to {what} ({sp.why_not})"
    return f"{sp.ratio:.2f}x {what} (95 % CI {sp.interval_text()}, {sp.evidence_text()})"


def _tps(p: TunePoint) -> str:
    return "-" if p.gen_tps is None else f"{p.gen_tps.median:.1f} tok/s"


def _free_vram(caps: EngineCaps) -> list[int]:
    if is_cpu_engine(caps):
        return []
    from beedeck.core.machine.hardware import detect

    return [g.memory_free for g in detect().gpus]


def _ram_available() -> int | None:
    from beedeck.core.machine.system import system_info

    return system_info().ram_available
