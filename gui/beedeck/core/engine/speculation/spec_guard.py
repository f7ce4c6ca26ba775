"""The "speculation is hurting" guard (docs/reference/anchors.md section 4, point 7): says once when a mode does
not pay here.

BeeLlama's adaptive controller can turn drafting down, but users still hit cases where speculation
costs speed (open prose, a mismatched draft, BeeLlama issue #94). The guard speaks from evidence the one
rule for ratios accepts (:mod:`beedeck.core.engine.speculation.comparison`), never from one reply's speed
against another's (two replies are two prompts):

- *slower*: a like-for-like comparison for this kind of prompt (code, prose or structured) says the mode
  is slower than the baseline beyond the noise: a benchmark's replies on this server
  (:meth:`SpecGuard.add_reference`, the same prompts in both modes) or the learnt advice for this setup;
- *drafted nothing*: the mode's last ``confirm`` replies of this kind in this conversation drafted no token
  at all (the server's own counters): it cannot speed them up.

It speaks after ``confirm`` replies of that mode and kind in the conversation (right after a reply in the
mode, when the user sees its speed), at most once per conversation and prompt kind. With the learnt
advice (:mod:`beedeck.core.engine.speculation.advice`, given by :meth:`SpecGuard.use_advice`) it suggests
the mode tune and benchmark runs found fastest for that kind on this setup instead of the baseline, and
:meth:`SpecGuard.mode_for_prompt` tells a toggle that follows the advice (opt-in) which mode to use for
the next prompt.

Qt-free: the chat view calls :meth:`SpecGuard.observe` after each reply and shows the advice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.advice import CODE, KINDS, PROSE, STRUCTURED, WorkloadAdvice, classify
from beedeck.core.engine.speculation.comparison import Comparison, Evidence, compare

__all__ = ["CODE", "KINDS", "PROSE", "STRUCTURED", "Advice", "SpecGuard", "classify_prompt", "references_from_bench"]


def classify_prompt(text: str) -> str:
    """The prompt's kind, "code", "prose" or "structured": :func:`beedeck.core.engine.speculation.advice.classify`,
    so the guard and the learnt advice file their figures under the same kinds."""
    return classify(text)


@dataclass(frozen=True)
class Advice:
    """A mode does not pay for this kind of prompt: ``comparison`` (against the baseline, by the rule) shows
    it slower, or (``comparison`` None) its last ``replies`` replies drafted nothing."""

    kind: str
    mode: Mode  # the speculative mode that does not pay
    comparison: Comparison | None  # its speed over the baseline's, like for like; None: it drafted nothing
    source: str  # where the comparison comes from ("a benchmark on this server", "tune and benchmark runs")
    replies: int  # this conversation's replies of the mode and kind behind the advice
    suggested_mode: Mode = Mode.BASELINE
    learned: str = ""  # why the suggestion is not the baseline: what the learnt advice measured

    @property
    def message(self) -> str:
        name = self.mode.label
        switch = self.suggested_mode.label
        c = self.comparison
        if c is not None and c.shown:
            text = (f"{name} is slower than {Mode.BASELINE.label} on {self.kind} prompts here: {c.ratio:.2f}x "
                    f"(95 % CI {c.interval_text()}, {c.evidence_text()}; {self.source}, the same prompts in both).")
        else:
            text = (f"{name} drafted nothing in your last {self.replies} {self.kind} replies (the server counted 0 "
                    "draft tokens): it finds nothing to guess here, so it cannot speed them up.")
        if self.learned:
            text += f" Tune and benchmark runs on this setup found {switch} fastest for {self.kind} ({self.learned})."
        return text + f" Switch to {switch} for this kind of prompt?"


@dataclass
class _Track:
    replies: dict[Mode, int] = field(default_factory=dict)  # replies per mode in this conversation
    drafted: dict[Mode, deque[int | None]] = field(default_factory=dict)  # the last replies' draft counts per mode
    told: bool = False


class SpecGuard:
    """Per conversation and kind of prompt: the replies per mode and what they drafted, and the like-for-like
    evidence per mode and kind; see the module docstring for the rules."""

    def __init__(self, *, confirm: int = 3, margin: float = 0.05, baseline_mode: Mode = Mode.BASELINE,
                 advice: WorkloadAdvice | None = None, setup: str | None = None) -> None:
        if confirm < 1 or not 0 <= margin < 1:
            raise ValueError("need confirm >= 1 and 0 <= margin < 1")
        self.confirm, self.margin = confirm, margin
        self.baseline_mode = baseline_mode
        self.conversation: str | None = None
        self._tracks: dict[str, _Track] = {}
        self._reference: dict[tuple[Mode, str], Evidence] = {}  # (mode, kind) -> a benchmark's replies
        self.advice, self.setup = advice, setup

    # ---- the learnt advice (core.engine.speculation.advice): what tune and benchmark runs found fastest ----

    def use_advice(self, advice: WorkloadAdvice | None, setup: str | None) -> None:
        """Consult ``advice`` for ``setup`` (:func:`beedeck.core.engine.speculation.advice.setup_key` of the running
        profile); call again when the profile changes. None turns the consultation off."""
        self.advice, self.setup = advice, setup

    def learned_mode(self, kind: str) -> Mode | None:
        """The mode the learnt advice found fastest for ``kind`` on this setup, or None (no advice given,
        too little evidence, or a tie)."""
        if self.advice is None or self.setup is None:
            return None
        return self.advice.best_mode(self.setup, kind)

    def mode_for_prompt(self, text: str, available: Iterable[Mode] | None = None) -> Mode | None:
        """For a toggle that follows the advice (the user opted in): the learnt fastest mode for this
        prompt's kind, when it is one of ``available`` (the modes the toggle can run now); else None,
        and the toggle stays where the user put it."""
        mode = self.learned_mode(classify_prompt(text))
        if mode is None or (available is not None and mode not in set(available)):
            return None
        return mode

    def new_conversation(self, conversation_id: str | None = None) -> None:
        """Forget this conversation's replies and promises (benchmark references stay)."""
        self.conversation = conversation_id
        self._tracks.clear()

    def add_reference(self, mode: Mode, kind: str, evidence: Evidence) -> None:
        """A benchmark's replies of ``mode`` for ``kind`` on this server (tokens/s per prompt): the
        like-for-like evidence the guard compares a mode with the baseline by."""
        self._reference[(mode, kind)] = evidence

    def clear_references(self) -> None:
        """Another server: its benchmark replies say nothing about this one."""
        self._reference.clear()

    def comparison(self, mode: Mode, kind: str) -> tuple[Comparison, str] | None:
        """``mode``'s speed over the baseline's for ``kind`` by the rule, and where it comes from: a benchmark on
        this server, else the learnt advice for this setup; None when neither has a comparison to show."""
        base, other = self._reference.get((self.baseline_mode, kind)), self._reference.get((mode, kind))
        if base is not None and other is not None:
            c = compare(base, other)
            if c.shown:
                return c, "a benchmark on this server"
        if self.advice is not None and self.setup is not None:
            c = self.advice.comparison(self.setup, kind, mode, self.baseline_mode)
            if c.shown:
                return c, "tune and benchmark runs on this setup"
        return None

    def observe(self, mode: Mode, tokens_per_s: float, kind: str, drafted: int | None = None) -> Advice | None:
        """Record one reply (its mode, speed and ``drafted`` tokens: None when not counted); returns Advice
        once per conversation and kind when the mode does not pay (see the module docstring)."""
        if tokens_per_s <= 0 or mode == self.baseline_mode:
            return None
        track = self._tracks.setdefault(kind, _Track())
        track.replies[mode] = track.replies.get(mode, 0) + 1
        track.drafted.setdefault(mode, deque(maxlen=self.confirm)).append(drafted)
        if track.told or track.replies[mode] < self.confirm:
            return None
        found = self.comparison(mode, kind)
        if found is not None and found[0].below(1.0 - self.margin):
            advice = Advice(kind, mode, found[0], found[1], track.replies[mode], self.baseline_mode)
        elif all(d == 0 for d in track.drafted[mode]):
            advice = Advice(kind, mode, None, "", track.replies[mode], self.baseline_mode)
        else:
            return None
        track.told = True
        return self._with_learned(advice)

    def _with_learned(self, advice: Advice) -> Advice:
        """Suggest the learnt fastest mode instead of the baseline where the advice has one that is
        neither the slow mode nor the baseline (e.g. MTP on prose where DFlash is losing)."""
        best = self.learned_mode(advice.kind)
        if best is None or best in (advice.mode, advice.suggested_mode) or self.advice is None or self.setup is None:
            return advice
        why = self.advice.verdict(self.setup, advice.kind).why
        return replace(advice, suggested_mode=best, learned=why)


def references_from_bench(samples: Iterable[tuple[Mode, str, str, float]]) -> dict[tuple[Mode, str], Evidence]:
    """Group benchmark replies ``(mode, prompt id, prompt text, tokens/s)`` by (mode, prompt kind), as the
    rule's evidence (tokens/s per prompt).

    A benchmark measures every mode on the same prompts, so its figures let the guard judge a mode
    against the baseline like for like, before and beyond what the conversation shows.
    """
    runs: dict[tuple[Mode, str], list[tuple[str, float]]] = {}
    for mode, pid, text, tps in samples:
        runs.setdefault((mode, classify_prompt(text)), []).append((pid, tps))
    return {key: Evidence.of(pairs) for key, pairs in runs.items()}
