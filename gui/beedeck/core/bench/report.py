"""Benchmark statistics and report files: Markdown, JSON (raw data + environment), CSV.

Statistics are medians with their spread (min/max, quartiles), and a speed-up per prompt and overall by
BeeDeck's one rule for ratios (:mod:`beedeck.core.engine.speculation.comparison`): the same prompts, a 95 %
bootstrap interval from a seeded RNG (the same report always gives the same interval) and the number of
runs, or no ratio and why not ("one run: no interval", "drafted nothing"). PNG charts are drawn by the UI layer (``beedeck.ui.bench.bench_chart.render_report_charts``, QPainter
on a QImage, works offscreen); :func:`write_reports` takes the renderer as a callable so this module
stays Qt-free.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.bench.results import BenchReport, Sample, keyed
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant
from beedeck.core.engine.speculation.comparison import (
    DRAFTED_NOTHING,
    MIN_RUNS,
    Comparison,
    Evidence,
    age_text,
    compare,
    few_runs,
)

SAME_TEXT_NOTE = (
    "same text: replies word for word the baseline's (same prompt, seed and repetition). Exact speculation "
    "keeps the text only at temperature 0 and with the same batch shapes; at this suite's temperature {temp:g} "
    "sampling draws differently once drafts are verified, so {ident}/{comp} is expected and says nothing "
    "about quality.")
# The guide's measured numbers (docs/reference/seed.md steps 7-9), shown only for the same GPU and pair.
GUIDE_REFERENCE = {
    "gpu": "RTX 4090", "target": "gemma-4-31B-it-Q4_K_S", "draft": "gemma4-31b-it-dflash-Q5_K_M",
    "baseline_tok_s": 40.68, "dflash_tok_s": (130.0, 153.0), "speedup": (3.2, 3.8),
}


@dataclass(frozen=True)
class Stats:
    """Median and spread of one measure over repeated replies."""

    n: int
    median: float
    min: float
    max: float
    q1: float
    q3: float
    mean: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def spread_pct(self) -> float:
        """(max - min) / median, in percent: the run-to-run spread."""
        return 100.0 * (self.max - self.min) / self.median if self.median else 0.0


def stats(values: Sequence[float | None]) -> Stats | None:
    vals = sorted(float(v) for v in values if v is not None)
    if not vals:
        return None
    q1, q3 = (statistics.quantiles(vals, n=4, method="inclusive")[::2] if len(vals) > 1 else (vals[0], vals[0]))
    return Stats(len(vals), statistics.median(vals), vals[0], vals[-1], q1, q3, statistics.fmean(vals))


def mode_evidence(samples: Sequence[Sample], variant: Variant) -> Evidence:
    """A variant's replies as the rule's evidence: tokens/s per prompt, and what it drafted where it speculates.
    Every mode of one run is served with the same settings apart from the speculation (``mode_settings``)."""
    drafted = sum(s.draft_n for s in samples) if variant.mode.speculates else None
    return Evidence.of(((s.prompt_id, s.gen_tps) for s in samples), drafted=drafted)


@dataclass
class ModeSummary:
    """One variant's figures over a set of replies (one prompt, or all)."""

    variant: Variant
    gen_tps: Stats | None
    prompt_tps: Stats | None
    ttft_s: Stats | None
    wall_s: Stats | None
    tokens: Stats | None
    draft_n: int = 0
    draft_n_accepted: int = 0
    acceptance: float | None = None  # pooled: all accepted / all drafted
    accepted_share: float | None = None  # pooled: all accepted / all generated
    peak_gpu_mem: int | None = None
    cache_n: int = 0
    speedup: Comparison | None = None  # vs the baseline, by the rule (no ratio without its evidence)
    similarity: float | None = None  # median difflib ratio to the baseline's text, same prompt and rep
    identical: int = 0  # replies identical to the baseline's
    compared: int = 0


def _mode_summary(mode: Variant, samples: list[Sample]) -> ModeSummary:
    drafted = sum(s.draft_n for s in samples)
    accepted = sum(s.draft_n_accepted for s in samples)
    generated = sum(s.completion_tokens for s in samples)
    peaks = [s.peak_gpu_mem for s in samples if s.peak_gpu_mem is not None]
    return ModeSummary(
        mode, stats([s.gen_tps for s in samples]), stats([s.prompt_tps for s in samples]),
        stats([s.ttft_s for s in samples]), stats([s.wall_s for s in samples]),
        stats([s.completion_tokens for s in samples]), drafted, accepted,
        accepted / drafted if drafted else None, accepted / generated if drafted and generated else None,
        max(peaks) if peaks else None, sum(s.cache_n for s in samples),
    )


@dataclass
class Summary:
    """``overall[variant]`` and ``prompts[prompt_id][variant]``, plus flags a reader must see."""

    overall: dict[Variant, ModeSummary]
    prompts: dict[str, dict[Variant, ModeSummary]]
    flags: list[str] = field(default_factory=list)
    reference: dict[str, Any] | None = None  # the guide's numbers, when hardware and pair match

    def to_dict(self) -> dict[str, Any]:
        """As the files write it: each variant by its word (:func:`keyed`)."""
        return {"overall": {v.key: keyed(m) for v, m in self.overall.items()},
                "prompts": {p: {v.key: keyed(m) for v, m in by.items()} for p, by in self.prompts.items()},
                "flags": list(self.flags), "reference": self.reference}


def _compare(ms: ModeSummary, base: list[Sample], other: list[Sample]) -> list[tuple[str, int]]:
    """Fill similarity fields; returns (prompt_id, rep) pairs whose text differs."""
    by_key = {(s.prompt_id, s.rep): s.text for s in base}
    ratios, differ = [], []
    for s in other:
        ref = by_key.get((s.prompt_id, s.rep))
        if ref is None:
            continue
        ratios.append(difflib.SequenceMatcher(None, ref, s.text, autojunk=False).ratio())
        if ref == s.text:
            ms.identical += 1
        else:
            differ.append((s.prompt_id, s.rep))
    ms.compared = len(ratios)
    ms.similarity = statistics.median(ratios) if ratios else None
    return differ


def kept_flags(report: BenchReport) -> list[str]:
    """A mode whose figures were kept from an earlier run of the same setup (core/bench/baseline_cache.py), said."""
    return [f"{run.variant.label} was kept from an earlier run of this setup ({age_text(run.measured_at, report.started)}: "
            "the same GPU, engine build, model file, context, KV types, settings and prompts); the speed-ups compare "
            "against it. Measure it again with --fresh-baseline (the dialog: Measure the baseline again)."
            for run in report.runs if run.measured_at is not None]


def summarize(report: BenchReport) -> Summary:
    """Medians, spread, speed-ups with intervals, output similarity and flags for one run."""
    suite = report.suite
    prompt_ids = [p.id for p in suite.prompts]
    out = Summary({}, {pid: {} for pid in prompt_ids})
    greedy = suite.temperature == 0
    ref = reference_mode(report)
    if ref == IN_SERVER_BASELINE:
        out.flags.append(f"There is no baseline without the draft in this run: speed-ups are against {ref.key} (the "
                         "DFlash server asked for no drafts). On a GPU the loaded draft slows that baseline, so "
                         "these speed-ups are too high; let BeeDeck start the engine to measure the real one.")
    for mode in report.variants:
        samples = report.samples_for(mode)
        if not samples:
            continue
        ms = out.overall[mode] = _mode_summary(mode, samples)
        for pid in prompt_ids:
            ps = report.samples_for(mode, pid)
            if ps:
                out.prompts[pid][mode] = _mode_summary(mode, ps)
        if ms.cache_n:
            out.flags.append(f"{mode.label}: {ms.cache_n} prompt tokens came from a cache although cache_prompt was off; "
                             "the prompt speeds are not comparable.")
        if ref is None or mode == ref:
            continue
        ms.speedup = compare(mode_evidence(report.samples_for(ref), ref), mode_evidence(samples, mode))
        differ = _compare(ms, report.samples_for(ref), samples)
        for pid in prompt_ids:
            pm = out.prompts[pid].get(mode)
            if pm is not None:
                pm.speedup = compare(mode_evidence(report.samples_for(ref, pid), ref),
                                     mode_evidence(report.samples_for(mode, pid), mode))
                _compare(pm, report.samples_for(ref, pid), report.samples_for(mode, pid))
        if mode == IN_SERVER_BASELINE:
            if ms.speedup.shown:
                out.flags.append(
                    f"{IN_SERVER_BASELINE.label} (what the chat toggle's per-request Baseline runs at: the draft stays "
                    f"loaded) ran at {ms.speedup.text()} a server without the draft; the speed-ups above are "
                    "against the server without the draft.")
            continue
        if differ and greedy:
            where = ", ".join(f"{p} rep {r + 1}" for p, r in differ[:5])
            out.flags.append(f"{mode.label}: with greedy decoding the text differs from the baseline in {len(differ)} of "
                             f"{ms.compared} replies ({where}). A lossless method should match; small differences "
                             "can come from batched verification numerics on a quantised model.")
        if ms.speedup.below(1.0):
            out.flags.append(f"{mode.label} is slower than the baseline ({ms.speedup.text()}): leave it off "
                             "for this kind of prompt.")
        elif ms.speedup.why_not == DRAFTED_NOTHING:
            out.flags.append(f"{mode.label} drafted nothing on these prompts (the server counted 0 draft "
                             "tokens): its speed is the baseline's plus its overhead, no speed-up to show.")
    for m, st in out.overall.items():
        if st.gen_tps is not None and st.gen_tps.n >= 3 and st.gen_tps.spread_pct > 25:
            out.flags.append(f"{m.label}: generation speed varied by {st.gen_tps.spread_pct:.0f} % between replies "
                             "(other programs competing for the machine?): use more repetitions.")
    if ref is not None and 0 < report.reps < MIN_RUNS and len(out.overall) > 1:
        once = "once" if report.reps == 1 else "twice"
        out.flags.append(f"{few_runs(report.reps).capitalize()}: each prompt ran {once} per mode, so no speed-up is "
                         f"shown. Run {MIN_RUNS} or more repetitions for speed-ups with their 95 % intervals.")
    out.flags += kept_flags(report)
    out.flags += report.notes
    if report.errors:
        out.flags.extend(f"error: {e}" for e in report.errors[:10])
    if report.cancelled:
        out.flags.append(cancelled_note(report))
    out.reference = guide_reference(report.environment)
    return out


def cancelled_note(report: BenchReport) -> str:
    """What a cancelled run measured and what it did not, per mode: "The run was cancelled: Baseline measured
    all 9 replies; N-gram 4 of 9 (not measured: kv-report run 2-3, linked-list); DFlash none"."""
    want = [(p.id, rep) for p in report.suite.prompts for rep in range(report.reps)]
    parts = []
    for mode in report.variants:
        got = {(s.prompt_id, s.rep) for s in report.samples_for(mode)}
        missing = [w for w in want if w not in got]
        if not missing:
            parts.append(f"{mode.label} measured all {len(want)} replies")
        elif len(missing) == len(want):
            parts.append(f"{mode.label} none")
        else:
            parts.append(f"{mode.label} {len(want) - len(missing)} of {len(want)} (not measured: "
                         f"{_missing_text(missing, report.reps)})")
    return ("The run was cancelled: " + "; ".join(parts) + ". The figures cover only the replies that finished; "
            "speed-ups compare only the prompts both sides finished.")


def _missing_text(missing: list[tuple[str, int]], reps: int) -> str:
    by_prompt: dict[str, list[int]] = {}
    for pid, rep in missing:
        by_prompt.setdefault(pid, []).append(rep + 1)
    out = []
    for pid, runs in by_prompt.items():
        if len(runs) == reps:
            out.append(pid)
        else:
            out.append(f"{pid} run{'s' if len(runs) > 1 else ''} {', '.join(map(str, runs))}")
    return ", ".join(out)


def reference_mode(report: BenchReport) -> Variant | None:
    """What speed-ups are measured against: a server without the draft, else (a running server
    switched per request) the in-server baseline, else nothing."""
    for mode in (Variant(Mode.BASELINE), IN_SERVER_BASELINE):
        if mode in report.variants and report.samples_for(mode):
            return mode
    return None


def guide_reference(env: dict[str, Any]) -> dict[str, Any] | None:
    """The guide's numbers if this run used its GPU (RTX 4090) and pair (Gemma 4 31B Q4_K_S + Q5_K_M draft)."""
    gpus = " ".join(str(g.get("name", "")) for g in env.get("gpus", []))
    models = env.get("models", {})
    target = str(models.get("target", {}).get("file", "")).lower()
    draft = str(models.get("draft", {}).get("file", "")).lower()
    if "4090" in gpus and "gemma-4-31b" in target and "q4_k_s" in target and "dflash" in draft and "q5_k_m" in draft:
        return dict(GUIDE_REFERENCE)
    return None


# ---------------------------------------------------------------------------------------- writers


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def _mem(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


def _speedup(sp: Comparison | None) -> str:
    return "-" if sp is None else sp.text()


def _ref_cell(ref: dict[str, Any] | None, mode: Variant) -> str:
    if ref is None:
        return ""
    if mode == Variant(Mode.BASELINE):
        return f" {ref['baseline_tok_s']:.2f} |"
    if mode == Variant(Mode.DFLASH):
        lo, hi = ref["dflash_tok_s"]
        return f" {lo:.0f}-{hi:.0f} |"
    return " - |"


def engine_line(env: dict[str, Any]) -> str:
    """The engine as the report names it: only what is known (no "?" placeholders)."""
    eng = env.get("engine", {})
    if eng:
        known = [str(eng["generation"])] if eng.get("generation") else []
        known += [f"{label} {eng[key]}" for key, label in (("version", "version"), ("build", "build"),
                                                            ("gpu_backend", "backend")) if eng.get(key)]
        return f"{eng.get('path', '')}" + (f" ({', '.join(known)})" if known else "")
    server = env.get("server", {})
    where = f"the server at {env.get('server_url', '?')}, started outside BeeDeck"
    if server.get("build_info"):
        model = Path(str(server.get("model_path") or "")).name
        return f"{where} (build {server['build_info']}" + (f", model {model}" if model else "") + ")"
    return f"{where} (it did not say which build it is)"


def to_markdown(report: BenchReport, summary: Summary | None = None, charts: Sequence[Path] = ()) -> str:
    """The human report: settings line, overall and per-prompt tables, how modes were served, flags."""
    s = summary or summarize(report)
    suite, env = report.suite, report.environment
    models = env.get("models", {})
    gpus = ", ".join(g["name"] for g in env.get("gpus", [])) or "none (CPU only)"
    lines = [f"# BeeDeck benchmark: {suite.name}", ""]
    lines.append(f"- When: {env.get('time_utc', '')}; BeeDeck {env.get('beedeck', '')}")
    lines.append(f"- Engine: {engine_line(env)}")
    lines.append(f"- GPU: {gpus}; CPU cores: {env.get('cpu_cores', '?')}")
    for role in ("target", "draft"):
        m = models.get(role)
        if m:
            lines.append(f"- {role.capitalize()}: {m['file']} ({m.get('architecture', '?')}, {m.get('quant', '?')})")
    lines.append(f"- Suite: {suite.name} ({suite.source}), {len(suite.prompts)} prompts x {report.reps} repetitions "
                 f"per mode after {report.warmup} warm-up; max_tokens {suite.max_tokens}, temperature "
                 f"{suite.temperature}, seed {suite.seed} + repetition, cache_prompt off")
    lines += ["", "## Overall", ""]
    ref = s.reference
    head = "| mode | gen tok/s (median) | min-max | IQR | prompt tok/s | TTFT s | wall s | tokens | acceptance | accepted share | peak GPU memory | speed-up (95 % CI) | same text |"
    if ref:
        head += " guide (RTX 4090) |"
    lines += [head, "|" + " --- |" * (head.count("|") - 1)]
    for mode in report.variants:
        m = s.overall.get(mode)
        if m is None or m.gen_tps is None:
            lines.append(f"| {mode.label} | no finished replies |" + " |" * (head.count("|") - 3))
            continue
        g = m.gen_tps
        same = f"{m.identical}/{m.compared}" if m.compared else "-"
        lines.append(
            f"| {mode.label} | {_f(g.median)} | {_f(g.min)}-{_f(g.max)} | {_f(g.iqr)} | "
            f"{_f(m.prompt_tps.median if m.prompt_tps else None)} | {_f(m.ttft_s.median if m.ttft_s else None, 3)} | "
            f"{_f(m.wall_s.median if m.wall_s else None, 2)} | {_f(m.tokens.median if m.tokens else None, 0)} | "
            f"{_pct(m.acceptance)} | {_pct(m.accepted_share)} | {_mem(m.peak_gpu_mem)} | {_speedup(m.speedup)} | {same} |"
            + _ref_cell(ref, mode)
        )
    if not ref:
        lines += ["", f"The guide's figures (baseline {GUIDE_REFERENCE['baseline_tok_s']} tok/s, DFlash 130-153 tok/s on an "
                  "RTX 4090 with Gemma 4 31B Q4_K_S + the Q5_K_M DFlash draft) are not shown: this run's GPU or "
                  "model pair differs."]
    lines += ["", "## Per prompt", "",
              "| prompt | mode | gen tok/s (median) | min-max | acceptance | speed-up (95 % CI) | similarity to baseline |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in suite.prompts:
        for mode in report.variants:
            pm = s.prompts.get(p.id, {}).get(mode)
            if pm is None or pm.gen_tps is None:
                continue
            sim = "-" if pm.similarity is None else f"{pm.similarity:.3f} ({pm.identical}/{pm.compared} identical)"
            lines.append(f"| {p.id} ({p.category}) | {mode.label} | {_f(pm.gen_tps.median)} | {_f(pm.gen_tps.min)}-"
                         f"{_f(pm.gen_tps.max)} | {_pct(pm.acceptance)} | {_speedup(pm.speedup)} | {sim} |")
    lines += ["", "## How each mode was served", ""]
    for run in report.runs:
        cost = []
        if run.stop_previous_s is not None:
            cost.append(f"stopping the previous server took {run.stop_previous_s:.2f} s")
        if run.ready_s is not None:
            cost.append(f"ready {run.ready_s:.2f} s after start")
        if run.fresh_starts:
            times = "once" if run.fresh_starts == 1 else f"{run.fresh_starts} times"
            cost.append(f"started afresh {times}, before each repetition after the first (its drafter keeps what it "
                        "saw across requests, so a repetition would draft from its own earlier reply)")
        extra = f", request fields {json.dumps(run.request_extra)}" if run.request_extra else ""
        kept = f" (kept from an earlier run of this setup, {age_text(run.measured_at, report.started)})" \
            if run.measured_at is not None else ""
        lines.append(f"- {run.variant.label}: {run.switching}{kept}{extra}" + (f"; {'; '.join(cost)}" if cost else "")
                     + (f"; **{run.error}**" if run.error else ""))
        if run.argv:
            lines.append(f"  `{' '.join(run.argv)}`")
    if charts:
        lines += ["", "## Charts", ""] + [f"![{c.stem}]({c.name})" for c in charts]
    if note := same_text_note(report, s):
        lines += ["", note]
    if s.flags:
        lines += ["", "## Flags", ""] + [f"- {f}" for f in s.flags]
    return "\n".join(lines) + "\n"


def same_text_note(report: BenchReport, summary: Summary) -> str:
    """What the "same text" column means, when some compared reply differs ("" when all match or none
    was compared); at temperature 0 a difference is worth a look, and the note says so."""
    rows = [m for m in summary.overall.values() if m.compared]
    ident, comp = sum(m.identical for m in rows), sum(m.compared for m in rows)
    if not comp or ident == comp:
        return ""
    temp = report.suite.temperature
    if temp == 0:
        return (f"same text: {ident}/{comp} replies word for word the baseline's at temperature 0. Exact "
                "speculation should keep the text; small differences can come from batched kernels' "
                "rounding, a large share from a draft or engine that changes the output (see the per-prompt "
                "similarity).")
    return SAME_TEXT_NOTE.format(temp=temp, ident=ident, comp=comp)


def report_dict(report: BenchReport, summary: Summary | None = None) -> dict[str, Any]:
    """Everything, raw: suite, environment, per-mode argv, every reply (with its text) and the summary."""
    return {
        "schema": 1, "kind": "beedeck-bench", "suite": report.suite.to_dict(), "modes": [v.key for v in report.variants],
        "reps": report.reps, "warmup": report.warmup, "started": report.started, "finished": report.finished,
        "cancelled": report.cancelled, "errors": report.errors, "notes": report.notes,
        "environment": report.environment,
        "runs": [keyed(r) for r in report.runs], "samples": [keyed(x) for x in report.samples],
        "summary": (summary or summarize(report)).to_dict(),
    }


CSV_FIELDS = ("mode", "prompt_id", "rep", "seed", "completion_tokens", "gen_tps", "prompt_tps", "prompt_tokens",
              "cache_n", "ttft_s", "wall_s", "predicted_ms", "client_tps", "draft_n", "draft_n_accepted",
              "acceptance", "accepted_share", "peak_gpu_mem", "finish_reason", "error")


def to_csv(report: BenchReport) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for smp in report.samples:
        row = keyed(smp)
        w.writerow(["" if row[f] is None else row[f] for f in CSV_FIELDS])
    return buf.getvalue()


ChartRenderer = Callable[[BenchReport, Summary, Path], list[Path]]


def write_reports(report: BenchReport, out_dir: str | Path, chart_renderer: ChartRenderer | None = None) -> list[Path]:
    """Write report.md, report.json, samples.csv (and PNG charts when a renderer is given) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(report)
    charts = chart_renderer(report, summary, out) if chart_renderer is not None else []
    files = [out / "report.md", out / "report.json", out / "samples.csv"]
    paths.atomic_write_text(files[0], to_markdown(report, summary, charts))
    paths.atomic_write_text(files[1], json.dumps(report_dict(report, summary), indent=2, ensure_ascii=False) + "\n")
    paths.atomic_write_text(files[2], to_csv(report))
    return files + list(charts)
