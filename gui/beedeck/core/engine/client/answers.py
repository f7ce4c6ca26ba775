"""What llama-server's HTTP answers become: the client's errors (each message says what happened and
what to do), the text check every prompt passes, and the timings and results of a chat reply (a
stream's chunks taken in :class:`StreamedReply`, its numbers checked by
:mod:`beedeck.core.engine.client.numbers`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from beedeck.core.engine.client.numbers import (
    MAX_BYTES,
    MAX_MS,
    MAX_RATE,
    ImpossibleNumber,
    check_rate,
    checked_usage,
    count,
    figure,
)


class ClientError(RuntimeError):
    """Any failure talking to llama-server; the message says what happened and what to do."""


class HTTPStatusError(ClientError):
    """llama-server answered with an error (an HTTP status, or an ``error`` object inside the stream)."""

    def __init__(self, status: int, message: str, err_type: str = "") -> None:
        self.status = status
        self.message = message
        self.err_type = err_type
        if status == 401:
            text = "The server refused the request because the API key is wrong (HTTP 401): use the key it was started with."
        elif status == 501 and "metrics" in message:
            text = f"{message} (HTTP 501): start the server with --metrics."
        elif err_type == "exceed_context_size_error" or "exceeds the available context size" in message:
            m = re.search(r"\((\d+) tokens\) exceeds the available context size \((\d+) tokens\)", message)
            sizes = f" ({m.group(1)} tokens; the context holds {m.group(2)})" if m else ""
            text = (f"The conversation is longer than the server's context{sizes}: start a new chat or shorten "
                    "the message, or raise Context in Settings (`--ctx` on the command line) and restart the server.")
        elif status == 503:
            text = f"The server is still loading the model (HTTP 503: {message}): wait until it is ready."
        else:
            text = f"The server answered HTTP {status}" + (f" ({err_type})" if err_type else "") + f": {message}"
        super().__init__(text)


class InvalidText(ClientError, ValueError):
    """Text BeeDeck was asked to send is not valid UTF-8 (a terminal or file in another encoding)."""


def check_text(text: str, what: str = "The message") -> None:
    """Refuse text that cannot be sent as UTF-8 (lone surrogates: bytes of another encoding that
    reached Python through a shell's argv or a pasted clipboard), naming where and how to fix it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start:exc.end].encode("utf-8", "surrogateescape")
        shown = " ".join(f"0x{b:02X}" for b in bad[:6])
        raise InvalidText(
            f"{what} is not valid UTF-8: byte(s) {shown} at character {exc.start + 1} are in another "
            "encoding (often Latin-1 from a terminal or a file). Retype it, or convert it first, e.g. "
            "`iconv -f latin1 -t utf-8`."
        ) from None


def _check_messages(messages: list[dict[str, Any]]) -> None:
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            check_text(content, f"The {m.get('role', 'message')} text" if len(messages) > 1 else "The message")


class StreamTruncated(ClientError):
    """The reply stream ended without ``[DONE]`` or a finish reason: the text may be incomplete."""


class ReplyOverrun(ClientError):
    """BeeDeck ended a reply that went past its ``max_tokens`` (with a margin) or its overall deadline."""


class ServerGone(ClientError):
    """The connection was refused or broke: the server is not running (any more)."""


class Stalled(ServerGone):
    """The reply stopped arriving for :data:`STALL_S` seconds after it began: the server looks hung."""


@dataclass
class Timings:
    """The server's own ``timings`` object from the last chunk of a reply, checked: :meth:`from_json`
    refuses one that cannot be true (:class:`~beedeck.core.engine.client.numbers.ImpossibleNumber`)."""

    cache_n: int
    prompt_n: int
    prompt_ms: float
    prompt_per_second: float
    predicted_n: int
    predicted_ms: float
    predicted_per_second: float
    draft_n: int = 0
    draft_n_accepted: int = 0

    @classmethod
    def from_json(cls, data: object) -> Timings:
        """The timings of ``data``; a key that is absent or null counts as 0 (not said). Raises
        ImpossibleNumber for a count that is not a whole number from 0 to 2^31 - 1, a time or rate that is
        not finite, negative or past any engine, more drafts accepted than drafted, or a rate its own
        count and time contradict."""
        if not isinstance(data, dict):
            raise ImpossibleNumber(f"timings is {type(data).__name__}, not an object")
        t = cls(
            cache_n=count(data, "cache_n") or 0,
            prompt_n=count(data, "prompt_n") or 0,
            prompt_ms=figure(data, "prompt_ms", MAX_MS) or 0.0,
            prompt_per_second=figure(data, "prompt_per_second", MAX_RATE) or 0.0,
            predicted_n=count(data, "predicted_n") or 0,
            predicted_ms=figure(data, "predicted_ms", MAX_MS) or 0.0,
            predicted_per_second=figure(data, "predicted_per_second", MAX_RATE) or 0.0,
            # Present only once a draft token was generated (docs/reference/engine-facts.md §3.7).
            draft_n=count(data, "draft_n") or 0,
            draft_n_accepted=count(data, "draft_n_accepted") or 0,
        )
        if t.draft_n_accepted > t.draft_n:
            raise ImpossibleNumber(f"draft_n_accepted {t.draft_n_accepted:,} is more than draft_n {t.draft_n:,}")
        check_rate(t.prompt_per_second, t.prompt_n, t.prompt_ms, "prompt")
        check_rate(t.predicted_per_second, t.predicted_n, t.predicted_ms, "predicted")
        return t

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens, or None when nothing was drafted."""
        return self.draft_n_accepted / self.draft_n if self.draft_n else None

    @property
    def accepted_share(self) -> float | None:
        """The share of generated tokens that came from accepted drafts."""
        return self.draft_n_accepted / self.predicted_n if self.predicted_n else None


@dataclass
class ChatResult:
    """One finished (or cancelled) reply, with the server's timings and the client's own clock."""

    text: str
    reasoning: str
    finish_reason: str | None
    timings: Timings | None
    usage: dict[str, Any] | None
    ttft_s: float | None  # request sent -> first content or reasoning token
    client_tokens_per_s: float | None  # generation rate seen from the client's side
    n_chunks: int
    wall_s: float
    cancelled: bool
    model: str
    # Why the server's timings were refused (``timings`` is then None): they could not be true.
    timings_rejected: str = ""


@dataclass(frozen=True)
class PromptProgress:
    """How far the server has read the prompt before the first token (llama-server's ``prompt_progress``, sent
    when the request asks ``return_progress``): ``total`` tokens in the prompt, ``cache`` of them kept from the
    last request (not read again), ``processed`` read so far (the cached ones included), in ``time_ms``."""

    total: int
    cache: int
    processed: int
    time_ms: float

    @classmethod
    def from_json(cls, data: object) -> PromptProgress | None:
        """The server's object, checked; None where a number cannot be true (the hint then goes without it)."""
        if not isinstance(data, dict):
            return None
        try:
            total, cache, processed = (count(data, k) for k in ("total", "cache", "processed"))
            time_ms = figure(data, "time_ms", MAX_MS)
        except ImpossibleNumber:
            return None
        if total is None or cache is None or processed is None or not cache <= total or not processed <= total:
            return None
        return cls(total, cache, processed, time_ms or 0.0)

    @property
    def to_read(self) -> int:
        """The tokens this request reads anew (not kept from the last one)."""
        return self.total - self.cache

    @property
    def read(self) -> int:
        """Of :attr:`to_read`, those read so far."""
        return max(0, self.processed - self.cache)


@dataclass(frozen=True)
class SlotFile:
    """What ``POST /slots/{id}?action=save|restore`` did: the slot's tokens written or read, the file's bytes and
    the server's own milliseconds (checked numbers)."""

    tokens: int
    bytes: int
    ms: float

    @classmethod
    def from_json(cls, data: object, saved: bool) -> SlotFile:
        """The answer of a save (``saved``: ``n_saved``/``n_written``) or a restore (``n_restored``/``n_read``);
        raises ImpossibleNumber for a count or time that cannot be true or is missing."""
        if not isinstance(data, dict):
            raise ImpossibleNumber(f"the slot answer is {type(data).__name__}, not an object")
        tokens = count(data, "n_saved" if saved else "n_restored")
        size = count(data, "n_written" if saved else "n_read", MAX_BYTES)
        timings = data.get("timings")
        ms = figure(timings, "save_ms" if saved else "restore_ms", MAX_MS) if isinstance(timings, dict) else None
        if tokens is None or size is None:
            raise ImpossibleNumber("the slot answer says no token count or no size")
        return cls(tokens, size, ms or 0.0)


@dataclass(frozen=True)
class ChatDelta:
    """A piece of the reply as it arrived; ``t`` is ``time.perf_counter()`` at arrival. A delta with
    ``progress`` (and no text) says how far the server has read the prompt."""

    content: str
    reasoning: str
    t: float
    progress: PromptProgress | None = None


def _error_from_body(status: int, body: bytes | str) -> HTTPStatusError:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        err = json.loads(text)["error"]
        return HTTPStatusError(status, str(err.get("message", "")), str(err.get("type", "")))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return HTTPStatusError(status, text.strip()[:300] or "no details")


class StreamedReply:
    """What a stream has brought so far: the text, the server's facts and the client's clock."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.finish: str | None = None
        self.timings: Timings | None = None
        self.timings_rejected = ""  # why the last timings were refused
        self.usage: dict[str, Any] | None = None
        self.model = ""
        self.n_chunks = 0
        self.done = False
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.n_token_chunks = 0
        self.chars = 0  # of text and reasoning
        self.t0 = time.perf_counter()

    def take(self, obj: dict[str, Any]) -> Iterator[ChatDelta]:
        """Take one parsed chunk; yield a delta for each choice that carries text."""
        self.n_chunks += 1
        if "error" in obj:
            err = obj["error"] if isinstance(obj["error"], dict) else {"message": str(obj["error"])}
            try:
                code = count(err, "code", high=599, low=100) or 500
            except ImpossibleNumber:
                code = 500  # an HTTP status is a number from 100 to 599; the message still says what went wrong
            raise HTTPStatusError(code, str(err.get("message", "")), str(err.get("type", "")))
        self.model = obj.get("model", self.model) or self.model
        if "timings" in obj:
            try:
                self.timings, self.timings_rejected = Timings.from_json(obj["timings"]), ""
            except ImpossibleNumber as exc:
                self.timings, self.timings_rejected = None, f"the server's timings cannot be true ({exc})"
        if obj.get("usage"):
            self.usage = checked_usage(obj["usage"])
        if "prompt_progress" in obj and (progress := PromptProgress.from_json(obj["prompt_progress"])) is not None:
            yield ChatDelta("", "", time.perf_counter(), progress)
        for choice in obj.get("choices") or ():
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            c = delta.get("content") or ""
            r = delta.get("reasoning_content") or ""
            if c or r:
                now = time.perf_counter()
                if self.t_first is None:
                    self.t_first = now
                self.t_last = now
                self.n_token_chunks += 1
                self.chars += len(c) + len(r)
                if c:
                    self.text.append(c)
                if r:
                    self.reasoning.append(r)
                yield ChatDelta(c, r, now)

    def result(self, cancelled: bool) -> ChatResult:
        wall = time.perf_counter() - self.t0
        rate = None
        t_first, t_last, timings = self.t_first, self.t_last, self.timings
        if t_first is not None and t_last is not None and t_last > t_first:
            # Count tokens by the server's own number when it sent one (a chunk may carry
            # several tokens); the first token's arrival is the start of the clock.
            n = timings.predicted_n if timings and timings.predicted_n else self.n_token_chunks
            rate = (n - 1) / (t_last - t_first) if n > 1 else None
            if rate is not None and rate > MAX_RATE:
                rate = None  # a count the clock cannot have seen arrive
        return ChatResult(
            text="".join(self.text),
            reasoning="".join(self.reasoning),
            finish_reason=self.finish,
            timings=timings,
            usage=self.usage,
            ttft_s=(t_first - self.t0) if t_first is not None else None,
            client_tokens_per_s=rate,
            n_chunks=self.n_chunks,
            wall_s=wall,
            cancelled=cancelled,
            model=self.model,
            timings_rejected=self.timings_rejected,
        )
