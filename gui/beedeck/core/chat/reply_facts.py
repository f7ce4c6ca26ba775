"""A reply's facts: which mode answered, how many tokens, how fast, how many drafts were accepted.

One typed record from the client's :class:`~beedeck.core.engine.client.answers.ChatResult` through the
chat store (stored as JSON in ``messages.stats``: :meth:`ReplyFacts.to_json` keeps the keys earlier
releases wrote, :meth:`ReplyFacts.from_json` reads every row they left) to the footer, the gauge, the
sparkline, the export and the advice. The mode is a :class:`~beedeck.core.engine.mode.Mode`, so a
reply is always labelled with its own mode's one name (:meth:`ReplyFacts.summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from beedeck.core.engine.client import MAX_MS, MAX_RATE, ChatResult, ImpossibleNumber, count, figure
from beedeck.core.engine.mode import Mode

MAX_SECONDS = MAX_MS / 1000


def _num(data: dict[str, Any], key: str, high: float) -> float | None:
    """A stored figure that can be true, else None: a row an earlier BeeDeck wrote from a lying server may
    hold NaN, a negative or 1e308, and it is shown, exported and learnt from."""
    try:
        return figure(data, key, high)
    except ImpossibleNumber:
        return None


def _int(data: dict[str, Any], key: str) -> int | None:
    try:
        return count(data, key)
    except ImpossibleNumber:
        return None


@dataclass(frozen=True)
class ReplyFacts:
    """What is known of one reply; None where the server or the client did not say."""

    mode: Mode | None = None  # None: sent without a mode (no toggle, or a row from before modes)
    cancelled: bool = False  # stopped by the user: the speed is a partial figure
    tokens: int | None = None  # generated tokens (the server's predicted_n)
    tps: float | None = None  # generation rate, the server's figure (else the client's clock)
    ttft_s: float | None = None  # request sent -> first token
    prompt_tps: float | None = None  # prefill rate
    prompt_n: int | None = None
    cache_n: int | None = None  # prompt tokens the server had cached (the conversation it did not read again)
    draft_n: int = 0  # tokens drafted
    draft_accepted: int = 0  # of which accepted
    reasoning_s: float | None = None  # time spent thinking (a reasoning model)
    error: str = ""  # the reply failed with this message

    @classmethod
    def from_result(cls, result: ChatResult, mode: Mode | None) -> ReplyFacts:
        t = result.timings
        ttft = round(result.ttft_s, 3) if result.ttft_s is not None else None
        if t is None:
            tps = round(result.client_tokens_per_s, 2) if result.client_tokens_per_s else None
            return cls(mode=mode, cancelled=result.cancelled, tps=tps, ttft_s=ttft)
        return cls(mode=mode, cancelled=result.cancelled, tokens=t.predicted_n, tps=round(t.predicted_per_second, 2),
                   ttft_s=ttft, prompt_tps=round(t.prompt_per_second, 1), prompt_n=t.prompt_n, cache_n=t.cache_n,
                   draft_n=t.draft_n, draft_accepted=t.draft_n_accepted if t.draft_n else 0)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ReplyFacts:
        """The facts a stored ``stats`` object holds; wrong-typed or unknown keys are ignored, and so are
        figures that cannot be true (checked as the client checks a server's)."""
        d = data if isinstance(data, dict) else {}
        draft_n, accepted = _int(d, "draft_n") or 0, _int(d, "draft_accepted") or 0
        if accepted > draft_n:
            draft_n = accepted = 0  # counts that contradict each other say nothing
        return cls(mode=Mode.parse(d.get("mode")), cancelled=d.get("cancelled") is True,
                   tokens=_int(d, "tokens"), tps=_num(d, "tps", MAX_RATE), ttft_s=_num(d, "ttft_s", MAX_SECONDS),
                   prompt_tps=_num(d, "prompt_tps", MAX_RATE), prompt_n=_int(d, "prompt_n"), cache_n=_int(d, "cache_n"),
                   draft_n=draft_n, draft_accepted=accepted,
                   reasoning_s=_num(d, "reasoning_s", MAX_SECONDS), error=str(d.get("error") or ""))

    def to_json(self) -> dict[str, Any]:
        """The stored form: only what is known, under the keys earlier releases used."""
        out: dict[str, Any] = {"mode": self.mode.value if self.mode else "", "cancelled": self.cancelled}
        for key in ("tokens", "tps", "ttft_s", "prompt_tps", "prompt_n", "cache_n", "reasoning_s"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.draft_n:
            out.update(draft_n=self.draft_n, draft_accepted=self.draft_accepted)
        if self.error:
            out["error"] = self.error
        return out

    def with_reasoning(self, seconds: float | None) -> ReplyFacts:
        return self if seconds is None else replace(self, reasoning_s=round(seconds, 2))

    @property
    def context_tokens(self) -> int | None:
        """The conversation the server holds after this reply: the prompt (read and cached) and the reply."""
        if self.prompt_n is None or self.tokens is None:
            return None
        return self.prompt_n + (self.cache_n or 0) + self.tokens

    @property
    def acceptance(self) -> float | None:
        """Accepted share of the drafted tokens (None without drafts)."""
        return self.draft_accepted / self.draft_n if self.draft_n else None

    @property
    def mode_label(self) -> str:
        return self.mode.label if self.mode else ""

    @property
    def full_speed(self) -> bool:
        """A figure to learn from: a reply that ran to its end at a known rate."""
        return not self.cancelled and not self.error and bool(self.tps)

    def summary(self) -> str:
        """The footer line, e.g. "120 tokens · 41.2 tok/s · TTFT 0.20 s · drafts 84/120 accepted (70 %) · N-gram"."""
        parts: list[str] = []
        if self.tokens is not None:
            parts.append(f"{self.tokens} tokens")
        if self.tps:
            parts.append(f"{self.tps:.1f} tok/s")
        if self.ttft_s is not None:
            parts.append(f"TTFT {self.ttft_s:.2f} s")
        if self.prompt_tps:
            parts.append(f"prefill {self.prompt_tps:.0f} tok/s")
        if self.draft_n:
            parts.append(f"drafts {self.draft_accepted}/{self.draft_n} accepted "
                         f"({100 * self.draft_accepted / self.draft_n:.0f} %)")
        if self.mode:
            parts.append(self.mode.label)
        if self.cancelled:
            parts.append("stopped")
        return " · ".join(parts)
