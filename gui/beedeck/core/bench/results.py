"""What one benchmark run measured, raw: per-reply samples, how each mode was served, the report.

:mod:`beedeck.core.bench.report` turns a :class:`BenchReport` into statistics and files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from beedeck.core.bench.suites import BenchSuite
from beedeck.core.engine.client import ChatResult
from beedeck.core.engine.speculation.modes import (
    BASELINE,
    DFLASH,
    DSPARK,
    EAGLE3,
    IN_SERVER_BASELINE,
    MODE_OF_SPEC,
    MODEL_FREE,
    MTP,
)

# One mode key per SpecMode, the words the chat toggle and the reply stats use too
# (core.engine.speculation.modes.MODE_OF_SPEC); BASELINE is the server without any speculation, which every
# speed-up is measured against. IN_SERVER_BASELINE (speculation.modes) is the DFlash server asked for no drafts
# (engines that honour it): what the chat toggle's per-request Baseline runs at, the draft still loaded.
MODES = (BASELINE, DFLASH, EAGLE3, DSPARK, MTP, MODEL_FREE, IN_SERVER_BASELINE)
BASELINES = (BASELINE, IN_SERVER_BASELINE)
SPECULATIVE_MODES = (DFLASH, EAGLE3, DSPARK, MTP, MODEL_FREE)

__all__ = ["BASELINE", "BASELINES", "DFLASH", "DSPARK", "EAGLE3", "IN_SERVER_BASELINE", "MODEL_FREE", "MODES",
           "MODE_OF_SPEC", "MTP", "SPECULATIVE_MODES", "BenchReport", "ModeRun", "Sample"]


@dataclass
class Sample:
    """One reply, measured. Rates in tokens/s, times in seconds, memory in bytes."""

    mode: str
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
    def from_result(cls, mode: str, prompt_id: str, rep: int, seed: int, r: ChatResult) -> Sample:
        t = r.timings
        usage = r.usage or {}
        tokens = int(usage.get("completion_tokens") or (t.predicted_n if t else 0))
        return cls(
            mode, prompt_id, rep, seed, completion_tokens=tokens,
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
    """How one mode was served: its argv (secrets masked), how it was switched to, and what that cost."""

    mode: str
    switching: str  # "restart" | "per-request" | "side-by-side" | "external"
    argv: list[str] = field(default_factory=list)
    request_extra: dict[str, Any] = field(default_factory=dict)
    spec_type: str | None = None
    stop_previous_s: float | None = None  # stopping the previous mode's server
    ready_s: float | None = None  # start to /health 200
    error: str | None = None
    measured_at: float | None = None  # kept from an earlier run (core/bench/baseline_cache.py): when; None: now


@dataclass
class BenchReport:
    """Everything one run measured, raw. ``bench_report.summarize()`` turns it into statistics."""

    suite: BenchSuite
    modes: list[str]
    reps: int
    warmup: int
    samples: list[Sample] = field(default_factory=list)
    runs: list[ModeRun] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    finished: float = 0.0
    cancelled: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and not self.cancelled

    def samples_for(self, mode: str, prompt_id: str | None = None) -> list[Sample]:
        return [s for s in self.samples if s.mode == mode and s.error is None
                and (prompt_id is None or s.prompt_id == prompt_id)]
