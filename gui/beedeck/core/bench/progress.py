"""A benchmark's progress and time left, counted in tokens rather than replies.

Why tokens: the replies of a suite differ by an order of magnitude in length, so a count of replies
stood at 87 % for over 30 s on the seed suite while its longest reply ran. Here the total is the token
budget of every reply (``max_tokens``, warm-ups included); a reply counts its tokens as they stream and,
once it ends, the rest of its budget (a reply that ends early leaves nothing to wait for). The time left
is the budget still to use at the pace the run has used it so far (server starts and prefill included:
wall-clock time, which is what the user waits for).
"""

from __future__ import annotations

import time
from collections.abc import Callable

MIN_ETA_ELAPSED_S = 3.0  # before this, one server start dominates the pace: no estimate yet
MIN_ETA_SHARE = 0.02


class TokenProgress:
    """``done``/``total`` tokens of a benchmark run and :meth:`eta_s`. ``clock`` is injectable (tests)."""

    def __init__(self, total: int = 0, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = max(0, int(total))
        self.clock = clock
        self.t0 = clock()
        self._closed = 0  # the budgets of ended (or skipped) replies
        self._budget = 0  # the running reply's budget
        self._streamed = 0  # tokens of the running reply so far

    @property
    def done(self) -> int:
        return min(self.total, self._closed + min(self._streamed, self._budget))

    def add_total(self, tokens: int) -> None:
        self.total += max(0, int(tokens))

    def begin_reply(self, budget: int) -> None:
        self._budget, self._streamed = max(0, int(budget)), 0

    def token(self, n: int = 1) -> None:
        self._streamed += n

    def end_reply(self) -> None:
        self._closed += self._budget
        self._budget = self._streamed = 0

    def skip(self, tokens: int) -> None:
        """Budget that will not be used (a mode whose server did not start)."""
        self._closed += max(0, int(tokens))

    def eta_s(self) -> float | None:
        """Seconds left at the pace so far; None until the run is long enough to have a pace."""
        elapsed = self.clock() - self.t0
        done = self.done
        if self.total <= 0 or elapsed < MIN_ETA_ELAPSED_S or done < MIN_ETA_SHARE * self.total:
            return None
        return (self.total - done) * elapsed / done

    def describe(self) -> str:
        """E.g. "1,234 of 9,600 tokens · about 2 min left" (the ETA once there is one)."""
        text = f"{self.done:,} of {self.total:,} tokens"
        eta = self.eta_s()
        if eta is not None:
            text += f" · about {format_duration(eta)} left"
        return text


def format_duration(seconds: float) -> str:
    """A time left in a user's words: "40 s", "3 min", "1 h 05 min"."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        m, rest = divmod(s, 60)
        return f"{m} min {rest:02d} s" if m < 10 else f"{round(s / 60)} min"
    h, rest = divmod(s, 3600)
    return f"{h} h {round(rest / 60):02d} min"
