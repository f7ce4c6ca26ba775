"""The speed figures the gauge shows, without Qt: the live rate of a streaming reply, the dial's scale
and the last figure per mode (chat replies, benchmark medians, tune results), whose speed-ups come only
from the one rule for ratios (:mod:`beedeck.core.engine.speculation.comparison`).

Why a window of tokens with a floor on its time span: llama-server sends several pieces in one network
read when speculation accepts a run of drafted tokens (N-gram, DFlash), so two pieces can arrive a few
microseconds apart. A rate between two arrivals then reads hundreds of thousands of tokens/s (the issue:
after one N-gram reply the dial's scale jumped to 0-500,000 and stayed). Here the rate counts the last
``window_tokens`` tokens over the time since the arrival before them, and that span is never shorter
than ``min_span_s``: a burst of ``B`` tokens can lift the reading by at most ``B / min_span_s``, and a
stream younger than ``min_span_s`` has no rate yet.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.speculation.comparison import DRAFTED_NOTHING, Comparison, age_text

DEFAULT_SCALE = 50.0  # tokens/s: the dial before anything was measured on this server


def nice_scale(value: float) -> float:
    """The dial's full scale: the first of 1-2-5 x 10^n above value with 20 % headroom."""
    target = max(value * 1.2, 10.0)
    exp = 10 ** math.floor(math.log10(target))
    for m in (1, 2, 5, 10):
        if m * exp >= target:
            return float(m * exp)
    return float(10 * exp)


class LiveRate:
    """Tokens/s of one streaming reply over a sliding window of its last tokens.

    :meth:`start` when the request is sent, :meth:`add` per arrival (``tokens`` it carried, one for
    llama-server's pieces), :meth:`rate` whenever the dial repaints. Times are ``time.perf_counter()``
    seconds, passed in so tests give exact ones. The window is the newer of "the last
    ``window_tokens`` tokens" and "the last ``max_span_s`` seconds" (a slow stream follows changes
    within seconds), widened to at least ``min_span_s`` (a burst is no rate).
    """

    def __init__(self, window_tokens: int = 64, min_span_s: float = 0.25, max_span_s: float = 2.0) -> None:
        if not 0 < min_span_s < max_span_s or window_tokens < 1:
            raise ValueError("need window_tokens >= 1 and 0 < min_span_s < max_span_s")
        self.window_tokens = window_tokens
        self.min_span_s = min_span_s
        self.max_span_s = max_span_s
        self._times: deque[float] = deque()
        self._cum: deque[int] = deque()  # tokens arrived up to and including each arrival
        self.count = 0
        self.started_at: float | None = None
        self.first_token_at: float | None = None

    def start(self, t: float) -> None:
        """A new reply: forget the last one; ``t`` is when its request was sent."""
        self._times.clear()
        self._cum.clear()
        self.count = 0
        self.started_at = t
        self.first_token_at = None

    def add(self, t: float, tokens: int = 1) -> None:
        if self.first_token_at is None:
            self.first_token_at = t
        self.count += tokens
        self._times.append(t)
        self._cum.append(self.count)
        # Keep one arrival older than the longest window: the reference of a window after a pause.
        while len(self._times) > 2 and t - self._times[1] > self.max_span_s:
            self._times.popleft()
            self._cum.popleft()

    def ttft(self) -> float | None:
        """Seconds from the request to the first token (None before it)."""
        if self.started_at is None or self.first_token_at is None:
            return None
        return max(0.0, self.first_token_at - self.started_at)

    def rate(self, now: float) -> float | None:
        """Tokens/s over the window ending ``now``; None while the stream is younger than ``min_span_s``
        (or has one arrival); 0 when nothing arrived for ``max_span_s``."""
        n = len(self._times)
        if n < 2 or now - self._times[0] < self.min_span_s:
            return None
        times, cum = list(self._times), list(self._cum)
        total = cum[-1]
        # Newest reference leaving >= window_tokens tokens after it (cum is increasing).
        r_tok = max(0, bisect.bisect_right(cum, total - self.window_tokens) - 1)
        # Oldest reference within max_span_s (none: the stream paused, the last arrival is the reference).
        r_time = min(bisect.bisect_left(times, now - self.max_span_s), n - 1)
        r = max(r_tok, r_time)
        if now - times[r] < self.min_span_s:  # widen to the newest arrival at least min_span_s old
            r = max(0, bisect.bisect_right(times, now - self.min_span_s) - 1)
        return (total - cum[r]) / (now - times[r])


@dataclass(frozen=True)
class Figure:
    """One mode's last measured speed (or a benchmark variant's, the in-server baseline): ``source`` is "chat"
    (one reply; ``drafted``: its draft tokens), "benchmark" or "tune" (a median over many)."""

    variant: Variant
    tps: float
    source: str = "chat"
    drafted: int | None = None


@dataclass(frozen=True)
class Compared:
    """A mode's last speed-up over the baseline, as the rule (core/engine/speculation/comparison.py) gave
    it to a benchmark or a tune (like-for-like evidence: the same prompts, runs enough for an interval).
    ``baseline_at``: the baseline was kept from an earlier run of the same setup, measured then (None: with it)."""

    comparison: Comparison
    source: str
    baseline_at: float | None = None


class ModeFigures:
    """The last figure per mode on the current server: what the comparison lines show and what the
    dial's scale starts from at each reply. :meth:`clear` when the server (model, card) changes.

    A ratio is shown only as a benchmark or a tune measured it by the one rule: a chat reply's figure is
    one reply to one prompt, never a ratio against another reply (issue 37: "N-gram 45.6 tok/s · ×1.30"
    after a reply that drafted nothing); such a reply says that it drafted nothing instead."""

    def __init__(self) -> None:
        self._by_mode: dict[Variant, Figure] = {}
        self._compared: dict[Variant, Compared] = {}

    def record(self, mode: Mode | Variant, tps: float, source: str = "chat", *, drafted: int | None = None,
               comparison: Comparison | None = None, baseline_at: float | None = None) -> None:
        """``mode``'s latest speed; ``comparison``: its speed-up over the baseline as the rule gave it to
        this source (a benchmark's or a tune's, never a chat reply's); ``baseline_at``: when the baseline it
        compares against was measured, where it was kept from an earlier run (core/bench/baseline_cache.py)."""
        key = Variant.of(mode)
        if tps > 0 and math.isfinite(tps):
            self._by_mode[key] = Figure(key, float(tps), source, drafted)
        if comparison is not None and source != "chat":
            self._compared[key] = Compared(comparison, source, baseline_at)

    def get(self, mode: Mode | Variant) -> Figure | None:
        return self._by_mode.get(Variant.of(mode))

    def compared(self, mode: Mode | Variant) -> Compared | None:
        return self._compared.get(Variant.of(mode))

    def clear(self) -> None:
        self._by_mode.clear()
        self._compared.clear()

    def as_dict(self) -> dict[Variant, float]:
        return {m: f.tps for m, f in self._by_mode.items()}

    def ordered(self) -> list[Figure]:
        """In the toggle's order (Baseline first), a variant right after its mode."""
        return sorted(self._by_mode.values(), key=lambda f: f.variant.rank)

    def lines(self, now: float | None = None) -> list[str]:
        """One line per mode, e.g. "N-gram 45.6 tok/s (last reply) · drafted nothing", and under a mode a
        benchmark or tune compared: "  vs Baseline: ×2.10 (1.95-2.30, 3 runs of 3 prompts; benchmark)", with
        "; baseline kept, measured 3 h ago" where the baseline came from the cache (its age at ``now``).
        The baseline's line is there even when it was not measured (the reference every speed-up needs)."""
        out = [] if self.get(Mode.BASELINE) else ["Baseline —"]
        for f in self.ordered():
            text = f"{f.variant.label} {f.tps:.1f} tok/s"
            if f.source == "chat":
                text += " (last reply)"
                if f.drafted == 0 and f.variant.mode.speculates:
                    text += f" · {DRAFTED_NOTHING}"
            else:
                text += f" ({f.source})"
            out.append(text)
            if (c := self._compared.get(f.variant)) is not None and f.variant != Variant(Mode.BASELINE):
                kept = f"; baseline kept, {age_text(c.baseline_at, now)}" if c.baseline_at is not None else ""
                out.append(f"  vs {Mode.BASELINE.label}: {_ratio_text(c.comparison)}; {c.source}{kept}")
        return out

    def scale_for(self, mode: Mode | None) -> float:
        """The dial's full scale at the start of a reply in ``mode`` (None: a reply without one): room for this
        mode's last figure and the baseline marker; without either, the largest figure on this server, else
        the default."""
        known = [f.tps for m in (mode, Mode.BASELINE) if m is not None and (f := self.get(m)) is not None]
        if not known:
            known = [f.tps for f in self._by_mode.values()]
        return nice_scale(max(known)) if known else DEFAULT_SCALE


def _ratio_text(c: Comparison) -> str:
    """"×2.10 (1.95-2.30, 3 runs of 3 prompts)", or the rule's reason there is none."""
    if not c.shown:
        return c.why_not
    return f"×{c.ratio:.2f} ({c.interval_text()}, {c.evidence_text()})"
