"""Files and tables of an auto-tune run (:mod:`beedeck.core.bench.tune`), in the benchmark report's
conventions: ``tune.md`` for people, ``tune.json`` with everything raw (schema, kind, environment,
every point with its settings, argv and replies), ``tune.csv`` with one row per point, and a PNG of
the search when the UI's renderer is given (this module stays Qt-free). Written atomically.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.bench.tune.points import TunePoint, TuneResult
from beedeck.core.engine.speculation.comparison import Comparison

SCHEMA_VERSION = 1
CSV_FIELDS = ("index", "role", "knob", "changes", "status", "accepted", "best", "gen_tps_median", "gen_tps_min",
              "gen_tps_max", "replies", "speedup_vs_baseline", "ci_low_vs_baseline", "ci_high_vs_baseline",
              "speedup_vs_start", "ci_low_vs_start", "ci_high_vs_start", "acceptance", "identical", "compared",
              "seconds", "reason")
TuneChartRenderer = Callable[[TuneResult, Path], list[Path]]


def _sp(sp: Comparison | None) -> dict[str, Any] | None:
    return None if sp is None else sp.as_dict()


def point_dict(p: TunePoint, best: TunePoint | None) -> dict[str, Any]:
    return {
        "index": p.index, "role": p.role, "label": p.label, "knob": p.knob, "changes": p.changes,
        "status": p.status, "reason": p.reason, "accepted": p.accepted, "best": p is best, "seconds": p.seconds,
        "gen_tps": None if p.gen_tps is None else asdict(p.gen_tps), "vs_baseline": _sp(p.vs_baseline),
        "vs_start": _sp(p.vs_start), "acceptance": p.acceptance, "identical": p.identical, "compared": p.compared,
        "settings": p.settings.to_dict(), "argv": p.argv, "samples": [asdict(s) for s in p.samples],
    }


def result_dict(r: TuneResult) -> dict[str, Any]:
    plan = r.plan
    return {
        "schema": SCHEMA_VERSION, "kind": "beedeck-tune", "engine": r.engine, "mode": r.mode,
        "suite": r.suite.to_dict(), "budget_s": r.budget_s, "elapsed_s": r.elapsed_s, "started": r.started,
        "finished": r.finished, "cancelled": r.cancelled, "identity_checked": r.identity_checked,
        "confirmed": r.confirmed, "unconfirmed": r.unconfirmed,
        "min_gain": r.min_gain,
        "plan": {"candidates": plan.candidates, "measured_points": plan.measured_points, "reps": plan.reps,
                 "prompts": plan.prompts, "point_s": plan.point_s, "est_total_s": plan.est_total_s,
                 "knobs": [k.to_dict() for k in plan.knobs], "text": plan.describe()},
        "improved": r.improved, "verdict": r.verdict, "notes": r.notes, "best_vs_start": _sp(r.best_vs_start),
        "best_index": None if r.best is None else r.best.index,
        "best_settings": None if r.best is None else r.best.settings.to_dict(),
        "environment": r.environment, "points": [point_dict(p, r.best) for p in r.points],
    }


def _num(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def to_csv(r: TuneResult) -> str:
    """One row per point: what changed, what happened, speed and both speed-ups with their intervals."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for p in r.points:
        g, b, s = p.gen_tps, p.vs_baseline, p.vs_start
        w.writerow([p.index, p.role, p.knob or "", "; ".join(f"{k}={v}" for k, v in p.changes.items()), p.status,
                    int(p.accepted), int(p is r.best), _num(g.median if g else None), _num(g.min if g else None),
                    _num(g.max if g else None), g.n if g else 0, _num(b.ratio if b else None),
                    _num(b.ci_low if b else None), _num(b.ci_high if b else None), _num(s.ratio if s else None),
                    _num(s.ci_low if s else None), _num(s.ci_high if s else None), _num(p.acceptance),
                    p.identical, p.compared, f"{p.seconds:.2f}", p.reason])
    return buf.getvalue()


def _cell_sp(sp: Comparison | None) -> str:
    """The rule's words: "1.73x (1.71-1.75, 3 runs of 2 prompts)", or why there is no ratio."""
    return "-" if sp is None else sp.text()


def point_cells(p: TunePoint, best: TunePoint | None) -> list[str]:
    """The table row of one point, shared by the terminal, the Markdown file and the view."""
    g = p.gen_tps
    mark = "best" if p is best else ("kept" if p.accepted else "")
    same = f"{p.identical}/{p.compared}" if p.compared else "-"
    acc = "-" if p.acceptance is None else f"{100 * p.acceptance:.0f} %"
    return [str(p.index + 1), p.label, p.status + (f" ({mark})" if mark else ""),
            "-" if g is None else f"{g.median:.1f}", "-" if g is None else f"{g.min:.1f}-{g.max:.1f}", acc,
            _cell_sp(p.vs_baseline), _cell_sp(p.vs_start), same, f"{p.seconds:.1f}"]


COLUMNS = ("#", "point", "status", "tok/s", "min-max", "accept", "vs baseline (95% CI)", "vs start (95% CI)",
           "same text", "time (s)")


def format_table(r: TuneResult) -> str:
    """The plain-text table for the terminal."""
    rows = [list(COLUMNS)] + [point_cells(p, r.best) for p in r.points]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def to_markdown(r: TuneResult, charts: list[Path] | None = None) -> str:
    env = r.environment
    lines = [f"# BeeDeck auto-tune: {r.suite.name}", "", f"**{r.verdict}**", ""]
    if env.get("time_utc"):
        lines.append(f"- When: {env['time_utc']}; BeeDeck {env.get('beedeck', '')}")
    lines.append(f"- Engine: {r.engine or '-'}; mode tuned: {r.mode}")
    lines.append(f"- Suite: {r.suite.name} ({r.suite.source}), {len(r.suite.prompts)} prompts, temperature "
                 f"{r.suite.temperature:g}, max_tokens {r.suite.max_tokens}; "
                 f"output identity {'required' if r.identity_checked else 'not checked'}")
    lines.append(f"- {r.plan.describe()}")
    lines.append(f"- Time spent: {r.elapsed_s:.0f} s of a {r.budget_s:.0f} s budget"
                 + ("; cancelled" if r.cancelled else ""))
    lines.append(f"- A point wins only when the 95 % interval of its speed over the best so far lies above "
                 f"{1 + r.min_gain:.2f}x; a winner is measured again with the start after the search and must "
                 "still clear it with both runs pooled"
                 + {True: " (it did).", False: " (it did not).", None: " (not done here)."}[r.confirmed])
    lines += ["", "## Points", "", "| " + " | ".join(COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in point_cells(p, r.best)) + " |" for p in r.points]
    reasons = [f"- {p.index + 1} {p.label}: {p.reason}" for p in r.points if p.reason]
    if reasons:
        lines += ["", "## Why points were left out", "", *reasons]
    if r.best is not None and r.best.argv:
        lines += ["", "## Best launch line", "", f"`{' '.join(r.best.argv)}`"]
    if charts:
        lines += ["", "## Chart", ""] + [f"![{c.stem}]({c.name})" for c in charts]
    if r.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in r.notes]
    return "\n".join(lines) + "\n"


def write_tune_reports(r: TuneResult, out_dir: str | Path, chart_renderer: TuneChartRenderer | None = None) -> list[Path]:
    """Write tune.md, tune.json, tune.csv (and the chart when a renderer is given) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    charts = chart_renderer(r, out) if chart_renderer is not None else []
    files = [out / "tune.md", out / "tune.json", out / "tune.csv"]
    paths.atomic_write_text(files[0], to_markdown(r, charts))
    paths.atomic_write_text(files[1], json.dumps(result_dict(r), indent=2, ensure_ascii=False) + "\n")
    paths.atomic_write_text(files[2], to_csv(r))
    return files + list(charts)
