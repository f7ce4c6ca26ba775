"""The wait before a reply's first token, in words: the server reads the prompt first, the whole conversation
(a long reply before this message is read too, unless the server kept it from the last request), and on a CPU
that takes seconds (issue 37: 13 s after a long reply, with nothing said).

From what the server reports (llama-server's ``prompt_progress``, sent when the request asks ``return_progress``:
:class:`~beedeck.core.engine.client.answers.PromptProgress`), else from the prompt's size in characters (what
BeeDeck knows for sure: a token count would be a guess)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beedeck.core.engine.client.answers import PromptProgress

HINT_AFTER_S = 1.0  # a first token sooner than this needs no words


def prompt_chars(messages: Sequence[dict[str, Any]]) -> int:
    """The characters of a request's messages (what the server reads before it answers)."""
    return sum(len(str(m.get("content") or "")) for m in messages)


def seconds_left(progress: PromptProgress) -> int | None:
    """The seconds the rest of the prompt takes at the pace read so far; None before a pace is known."""
    if progress.read <= 0 or progress.time_ms <= 0 or progress.read >= progress.to_read:
        return None
    per_s = progress.read / (progress.time_ms / 1000)
    return max(1, round((progress.to_read - progress.read) / per_s))


def reading_hint(progress: PromptProgress | None, chars: int) -> str:
    """The sentence under the transcript while the prompt is read, e.g. "Reading the whole conversation before
    the reply: 1,024 of 3,076 tokens, about 12 s left." With ``progress`` None (a server that says nothing of
    it), what is known: the conversation's size."""
    if progress is None:
        return (f"Waiting for the first token: the server reads the whole conversation first ({chars:,} characters), "
                "and a long one takes a while.")
    if progress.cache:
        what = f"the new part of the conversation ({progress.cache:,} tokens kept from before)"
    else:
        what = "the whole conversation"
    left = seconds_left(progress)
    return (f"Reading {what} before the reply: {progress.read:,} of {progress.to_read:,} tokens"
            + (f", about {left} s left." if left else "."))


def reading_short(progress: PromptProgress | None) -> str:
    """The speed dock's time-to-first-token row while the prompt is read."""
    if progress is None or not progress.to_read:
        return "waiting for the first token…"
    return f"reading the prompt: {progress.read:,} of {progress.to_read:,} tokens…"
