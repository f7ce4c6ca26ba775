"""What tune and benchmark runs teach the workload advice (:mod:`beedeck.core.engine.speculation.advice`).

core.bench and core.chat are sibling wings that do not import each other, so this module only turns
results into the advice's plain input, ``(mode, prompt text, tokens/s)`` per measured reply, and the
caller (the CLI, the Tune and Benchmark dialogs) hands it to ``WorkloadAdvice.learn`` with the
setup's key. Only figures a user could get are fed: error-free replies, of a server without
speculation (Baseline) or of a speculating one; the DFlash server asked for no drafts (the in-server
baseline) is a benchmark variant, no mode of the toggle, and is left out.
"""

from __future__ import annotations

from beedeck.core.bench.results import BenchReport
from beedeck.core.bench.tune import BASELINE_ROLE, MEASURED, TuneResult
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import settings_digest

AdviceSample = tuple[Mode, str, float]  # (mode, prompt text, generation tokens/s)


def bench_advice_samples(report: BenchReport) -> list[AdviceSample]:
    """Every error-free reply of a benchmark, as the advice learns it."""
    texts = {p.id: p.text for p in report.suite.prompts}
    return [(s.variant.mode, texts.get(s.prompt_id, ""), s.gen_tps) for s in report.samples
            if s.error is None and s.gen_tps > 0 and not s.variant.draft_loaded]


def tune_advice_samples(result: TuneResult) -> list[AdviceSample]:
    """The baseline's replies and those of the point the user will run: the best, when it changed only the
    speculation (draft max, the draft file...) and so runs with the baseline's settings apart from the mode,
    as the advice compares modes (its setup key is those settings); else the start, which does. A best
    that changed another setting (threads, ubatch...) is another setup, with no baseline of its own here.
    A point whose text differed at temperature 0 (or a search that measured no start) teaches nothing of its
    own: the baseline alone never makes a verdict."""
    texts = {p.id: p.text for p in result.suite.prompts}
    base = result.baseline
    runs = result.best if result.best is not None and result.best.status == MEASURED else result.start
    if base is not None and runs is not None and settings_digest(runs.settings) != settings_digest(base.settings):
        runs = result.start
    out: list[AdviceSample] = []
    for point in (base, runs):
        if point is None or point.status != MEASURED or (point is runs and point.role == BASELINE_ROLE):
            continue
        mode = Mode.BASELINE if point.role == BASELINE_ROLE else result.mode
        out += [(mode, texts.get(s.prompt_id, ""), s.gen_tps) for s in point.samples if s.error is None and s.gen_tps > 0]
    return out
