"""The "speculation is hurting" guard (docs/reference/anchors.md section 4, point 7): says once when DFlash is slower.

BeeLlama's adaptive controller can turn drafting down, but users still hit cases where speculation
costs speed (open prose, a mismatched draft, BeeLlama issue #94). The guard keeps a rolling
generation speed per mode for the current conversation and prompt kind (code, prose or structured), compares
the speculative mode with the measured baseline, and returns one :class:`Advice` when speculation is
clearly slower. It never nags:

- it needs ``min_samples`` replies of each mode (benchmark figures can stand in for the baseline);
- hysteresis: it arms when speculation is ``enter_margin`` slower than the baseline and disarms
  only when it recovers to within ``exit_margin``; it must stay armed for ``confirm`` replies in a
  row before it speaks;
- it speaks at most once per conversation and prompt kind.

With the learnt advice (:mod:`beedeck.core.engine.speculation.advice`, given by :meth:`SpecGuard.use_advice`) it
suggests the mode tune and benchmark runs found fastest for that kind on this setup instead of the
baseline, and :meth:`SpecGuard.mode_for_prompt` tells a toggle that follows the advice (opt-in) which
mode to use for the next prompt.

Qt-free: the chat view calls :meth:`SpecGuard.observe` after each reply and shows the advice.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from beedeck.core.engine.speculation.advice import CODE, KINDS, PROSE, STRUCTURED, WorkloadAdvice, classify
from beedeck.core.engine.speculation.modes import BASELINE, LABELS

__all__ = ["CODE", "KINDS", "PROSE", "STRUCTURED", "Advice", "SpecGuard", "classify_prompt", "references_from_bench"]


def classify_prompt(text: str) -> str:
    """The prompt's kind, "code", "prose" or "structured": :func:`beedeck.core.engine.speculation.advice.classify`,
    so the guard and the learnt advice file their figures under the same kinds."""
    return classify(text)


@dataclass(frozen=True)
class Advice:
    """Speculation is slower than the baseline for this conversation and kind of prompt."""

    kind: str
    mode: str  # the slower speculative mode, e.g. "dflash"
    mode_tps: float  # its rolling median
    baseline_tps: float
    n_mode: int
    n_baseline: int
    suggested_mode: str = "baseline"

    @property
    def slowdown(self) -> float:
        """How much slower, as a fraction of the baseline (0.08 = 8 % slower)."""
        return 1.0 - self.mode_tps / self.baseline_tps if self.baseline_tps else 0.0

    learned: str = ""  # why the suggestion is not the baseline: what the learnt advice measured

    @property
    def message(self) -> str:
        name = LABELS.get(self.mode, self.mode)
        switch = LABELS.get(self.suggested_mode, self.suggested_mode)
        text = (f"{name} is costing you {self.slowdown:.0%} on {self.kind} in this conversation: "
                f"{self.mode_tps:.1f} tok/s against {self.baseline_tps:.1f} tok/s without speculation "
                f"(medians of {self.n_mode} and {self.n_baseline} replies).")
        if self.learned:
            text += f" Tune and benchmark runs on this setup found {switch} fastest for {self.kind} ({self.learned})."
        return text + f" Switch to {switch} for this kind of prompt?"


@dataclass
class _Track:
    values: dict[str, deque[float]] = field(default_factory=dict)
    armed_streak: int = 0
    armed: bool = False
    told: bool = False


class SpecGuard:
    """Rolling per-mode speed for one conversation at a time; see the module docstring for the rules."""

    def __init__(self, *, min_samples: int = 3, window: int = 8, enter_margin: float = 0.05,
                 exit_margin: float = 0.02, confirm: int = 2, baseline_mode: str = BASELINE,
                 advice: WorkloadAdvice | None = None, setup: str | None = None) -> None:
        if not 0 <= exit_margin <= enter_margin < 1:
            raise ValueError("need 0 <= exit_margin <= enter_margin < 1 for hysteresis")
        self.min_samples, self.window, self.confirm = min_samples, window, confirm
        self.enter_margin, self.exit_margin = enter_margin, exit_margin
        self.baseline_mode = baseline_mode
        self.conversation: str | None = None
        self._tracks: dict[str, _Track] = {}
        self._reference: dict[tuple[str, str], list[float]] = {}  # (mode, kind) -> figures from a benchmark
        self.advice, self.setup = advice, setup

    # ---- the learnt advice (core.engine.speculation.advice): what tune and benchmark runs found fastest ----

    def use_advice(self, advice: WorkloadAdvice | None, setup: str | None) -> None:
        """Consult ``advice`` for ``setup`` (:func:`beedeck.core.engine.speculation.advice.setup_key` of the running
        profile); call again when the profile changes. None turns the consultation off."""
        self.advice, self.setup = advice, setup

    def learned_mode(self, kind: str) -> str | None:
        """The mode the learnt advice found fastest for ``kind`` on this setup, or None (no advice given,
        too little evidence, or a tie)."""
        if self.advice is None or self.setup is None:
            return None
        return self.advice.best_mode(self.setup, kind)

    def mode_for_prompt(self, text: str, available: Iterable[str] | None = None) -> str | None:
        """For a toggle that follows the advice (the user opted in): the learnt fastest mode for this
        prompt's kind, when it is one of ``available`` (the modes the toggle can run now); else None,
        and the toggle stays where the user put it."""
        mode = self.learned_mode(classify_prompt(text))
        if mode is None or (available is not None and mode not in set(available)):
            return None
        return mode

    def new_conversation(self, conversation_id: str | None = None) -> None:
        """Forget this conversation's figures and promises (benchmark references stay)."""
        self.conversation = conversation_id
        self._tracks.clear()

    def add_reference(self, mode: str, kind: str, tokens_per_s: list[float]) -> None:
        """Benchmark figures that stand in for a mode until the conversation has its own."""
        self._reference[(mode, kind)] = [v for v in tokens_per_s if v > 0][-self.window:]

    def figure(self, mode: str, kind: str) -> tuple[float, int] | None:
        """(rolling median tok/s, replies behind it) for this mode and kind, or None with too few."""
        track = self._tracks.get(kind)
        vals = list(track.values.get(mode, ())) if track else []
        if len(vals) < self.min_samples:
            vals = self._reference.get((mode, kind), []) if len(vals) == 0 else vals
        if len(vals) < self.min_samples:
            return None
        return statistics.median(vals), len(vals)

    def observe(self, mode: str, tokens_per_s: float, kind: str) -> Advice | None:
        """Record one reply's generation speed; returns Advice once when speculation is slower."""
        if tokens_per_s <= 0:
            return None
        track = self._tracks.setdefault(kind, _Track())
        track.values.setdefault(mode, deque(maxlen=self.window)).append(tokens_per_s)
        if track.told:
            return None
        base = self.figure(self.baseline_mode, kind)
        spec_modes = [m for m in track.values if m != self.baseline_mode]
        if base is None or not spec_modes:
            return None
        worst: Advice | None = None
        for m in spec_modes:
            fig = self.figure(m, kind)
            if fig is None:
                continue
            adv = Advice(kind, m, fig[0], base[0], fig[1], base[1], self.baseline_mode)
            if worst is None or adv.slowdown > worst.slowdown:
                worst = adv
        if worst is None:
            return None
        if mode == self.baseline_mode and not track.armed:
            return None  # speak right after a speculative reply, when the user sees its speed
        if worst.slowdown >= self.enter_margin:
            track.armed = True
        elif worst.slowdown < self.exit_margin:
            track.armed = False
        track.armed_streak = track.armed_streak + 1 if track.armed else 0
        if track.armed and track.armed_streak >= self.confirm:
            track.told = True
            return self._with_learned(worst)
        return None

    def _with_learned(self, advice: Advice) -> Advice:
        """Suggest the learnt fastest mode instead of the baseline where the advice has one that is
        neither the slow mode nor the baseline (e.g. MTP on prose where DFlash is losing)."""
        best = self.learned_mode(advice.kind)
        if best is None or best in (advice.mode, advice.suggested_mode) or self.advice is None or self.setup is None:
            return advice
        why = self.advice.verdict(self.setup, advice.kind).why
        return Advice(advice.kind, advice.mode, advice.mode_tps, advice.baseline_tps, advice.n_mode,
                      advice.n_baseline, best, why)


def references_from_bench(samples: Iterable[tuple[str, str, float]]) -> dict[tuple[str, str], list[float]]:
    """Group benchmark replies ``(mode, prompt text, tokens/s)`` by (mode, prompt kind).

    A benchmark measures both modes on the same prompts, so its figures let the guard judge DFlash
    before the conversation has baseline replies of its own.
    """
    out: dict[tuple[str, str], list[float]] = {}
    for mode, text, tps in samples:
        if tps > 0:
            out.setdefault((mode, classify_prompt(text)), []).append(tps)
    return out
