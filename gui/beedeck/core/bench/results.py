"""What one benchmark run measured, raw: per-reply samples, how each mode was served, the report.

A benchmark measures variants (:class:`~beedeck.core.engine.mode.Variant`): every mode as the toggle serves it (the
baseline without any speculation is what every speed-up is measured against), and the in-server baseline
(:data:`~beedeck.core.engine.mode.IN_SERVER_BASELINE`: the DFlash server asked for no drafts, on engines that
honour it; what the toggle's per-request Baseline runs at, the draft still loaded). The files keep each
variant's word (:attr:`Variant.key`) under "mode", as earlier BeeDecks wrote them.

:mod:`beedeck.core.bench.report` turns a :class:`BenchReport` into statistics and files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from beedeck.core.bench.suites import BenchSuite
from beedeck.core.engine.client import ChatResult
from beedeck.core.engine.mode import IN_SERVER_BASELINE, Mode, Variant

VARIANTS = (*(Variant(m) for m in Mode), IN_SERVER_BASELINE)  # what a benchmark can measure, in the toggle's order

__all__ = ["VARIANTS", "BenchReport", "ModeRun", "Sample", "keyed", "unkeyed"]


def keyed(row: Any) -> dict[str, Any]:
    """A dataclass with a ``variant`` as the files write it: its word under "mode", first (as before variants)."""
    data = asdict(row)
    del data["variant"]
    return {"mode": row.variant.key, **data}


def unkeyed(row: object) -> dict[str, Any]:
    """The fields of a row :func:`keyed` wrote, its variant back from its word; ValueError if it names none."""
    if not isinstance(row, dict):
        raise ValueError("not an object")
    data = dict(row)
    variant = Variant.parse(data.pop("mode", None))
    if variant is None:
        raise ValueError("no variant")
    return {"variant": variant, **data}


@dataclass
class Sample:
    """One reply, measured. Rates in tokens/s, times in seconds, memory in bytes."""

    variant: Variant
    prompt_id: str
    rep: int
    seed: int
    completion_tokens: int = 0
    gen_tps: float = 0.0  # the server's timings.predicted_per_second
    prompt_tps: float = 0.0
    prompt_tokens: int = 0
    cache_n: int = 0  # prompt tokens reused from a cache: must be 0 (cache_prompt is off)
    ttft_s: float | None = None
    wall_s: float = 0.0
    predicted_ms: float = 0.0
    client_tps: float | None = None
    draft_n: int = 0
    draft_n_accepted: int = 0
    acceptance: float | None = None  # accepted / drafted
    accepted_share: float | None = None  # accepted / generated
    peak_gpu_mem: int | None = None
    finish_reason: str | None = None
    text: str = ""
    error: str | None = None

    @classmethod
    def from_result(cls, variant: Variant, prompt_id: str, rep: int, seed: int, r: ChatResult) -> Sample:
        t = r.timings
        usage = r.usage or {}
        tokens = int(usage.get("completion_tokens") or (t.predicted_n if t else 0))
        return cls(
            variant, prompt_id, rep, seed, completion_tokens=tokens,
            gen_tps=t.predicted_per_second if t else (r.client_tokens_per_s or 0.0),
            prompt_tps=t.prompt_per_second if t else 0.0, prompt_tokens=t.prompt_n if t else 0,
            cache_n=t.cache_n if t else 0, ttft_s=r.ttft_s, wall_s=r.wall_s,
            predicted_ms=t.predicted_ms if t else 0.0, client_tps=r.client_tokens_per_s,
            draft_n=t.draft_n if t else 0, draft_n_accepted=t.draft_n_accepted if t else 0,
            acceptance=t.acceptance if t else None, accepted_share=t.accepted_share if t and t.draft_n else None,
            finish_reason=r.finish_reason, text=r.text,
        )


@dataclass
class ModeRun:
    """How one variant was served: its argv (secrets masked), how it was switched to, and what that cost."""

    variant: Variant
    switching: str  # "restart" | "per-request" | "side-by-side" | "external"
    argv: list[str] = field(default_factory=list)
    request_extra: dict[str, Any] = field(default_factory=dict)
    spec_type: str | None = None
    stop_previous_s: float | None = None  # stopping the previous mode's server
    ready_s: float | None = None  # start to /health 200
    error: str | None = None
    measured_at: float | None = None  # kept from an earlier run (core/bench/baseline_cache.py): when; None: now
    fresh_starts: int = 0  # started again before a repetition (its drafter learns across requests: runner.py)


@dataclass
class BenchReport:
    """Everything one run measured, raw. ``bench_report.summarize()`` turns it into statistics."""

    suite: BenchSuite
    variants: list[Variant]
    reps: int
    warmup: int
    samples: list[Sample] = field(default_factory=list)
    runs: list[ModeRun] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    finished: float = 0.0
    cancelled: bool = False
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a reader must know that is no error

    @property
    def ok(self) -> bool:
        return not self.errors and not self.cancelled

    def samples_for(self, variant: Variant, prompt_id: str | None = None) -> list[Sample]:
        return [s for s in self.samples if s.variant == variant and s.error is None
                and (prompt_id is None or s.prompt_id == prompt_id)]
