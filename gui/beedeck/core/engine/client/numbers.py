"""Numbers a server sends, checked before anything prints, shows, stores or learns from them.

A reply's ``timings``, its ``usage``, ``/props``' context and slot count: each is the server's to get
wrong, and a lying or broken one sends NaN, a negative count, 1e308 or more drafts accepted than were
drafted. These helpers take a number from a JSON object and return it only when it can be true (a whole
number where a count belongs, finite, not negative, within bounds no real server comes near), else raise
:class:`ImpossibleNumber` naming the field and what it held. ``null`` and a missing key are "not said".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from beedeck.core.printable import printable

MAX_COUNT = (1 << 31) - 1  # llama.cpp counts tokens, slots and contexts in int32
MAX_RATE = 1e7  # tokens/s: 0.1 us a token, far past any engine (a cached prefill of a few tokens included)
MAX_MS = 1e9  # milliseconds: eleven days for one reply
MAX_BYTES = 1 << 50  # a model file of a pebibyte
RATE_SLACK = 2.0  # a stated rate may differ from n / time by this factor (engines divide by n or by n - 1)


class ImpossibleNumber(ValueError):
    """A number a server sent that cannot be true; the message names the field and the value."""


def _shown(value: object) -> str:
    return printable(repr(value), 40)


def count(data: Mapping[str, Any], key: str, high: int = MAX_COUNT, low: int = 0) -> int | None:
    """``data[key]`` as a whole number from ``low`` to ``high`` (a float that is whole counts); None when
    absent or null; :class:`ImpossibleNumber` otherwise."""
    value = data.get(key)
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not whole:
        raise ImpossibleNumber(f"{key} is {_shown(value)}, not a whole number")
    if not low <= value <= high:
        raise ImpossibleNumber(f"{key} is {_shown(value)}, outside {low:,}..{high:,}")
    return int(value)


def figure(data: Mapping[str, Any], key: str, high: float) -> float | None:
    """``data[key]`` as a finite number from 0 to ``high``; None when absent or null; else
    :class:`ImpossibleNumber`."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ImpossibleNumber(f"{key} is {_shown(value)}, not a number")
    if not math.isfinite(value) or not 0 <= value <= high:
        raise ImpossibleNumber(f"{key} is {_shown(value)}, outside 0..{high:g}")
    return float(value)


def check_rate(rate: float, n: int, ms: float, what: str) -> None:
    """A stated rate must agree with its own count and time (n / ms), within :data:`RATE_SLACK`."""
    if rate <= 0 or n < 2 or ms <= 0:
        return  # nothing to compare: a single token, no time, or no rate stated
    implied = n * 1000.0 / ms
    if not implied / RATE_SLACK <= rate <= implied * RATE_SLACK:
        raise ImpossibleNumber(f"{what}_per_second is {rate:g}, but {n:,} tokens in {ms:g} ms is {implied:.4g}")


def checked_usage(usage: object) -> dict[str, Any] | None:
    """The OpenAI ``usage`` object with its token counts checked: impossible ones are left out (None when
    nothing usable is left)."""
    if not isinstance(usage, dict):
        return None
    out: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        try:
            n = count(usage, key)
        except ImpossibleNumber:
            continue
        if n is not None:
            out[key] = n
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        try:
            cached = count(details, "cached_tokens")
        except ImpossibleNumber:
            cached = None
        if cached is not None:
            out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out or None
