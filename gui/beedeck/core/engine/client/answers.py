"""What llama-server's HTTP answers become: the client's errors (each message says what happened and
what to do), the text check every prompt passes, and the timings and results of a chat reply."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


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


class ServerGone(ClientError):
    """The connection was refused or broke: the server is not running (any more)."""


class Stalled(ServerGone):
    """The reply stopped arriving for :data:`STALL_S` seconds after it began: the server looks hung."""


@dataclass
class Timings:
    """The server's own ``timings`` object from the last chunk of a reply."""

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
    def from_json(cls, data: dict[str, Any]) -> Timings:
        return cls(
            cache_n=int(data.get("cache_n", 0)),
            prompt_n=int(data.get("prompt_n", 0)),
            prompt_ms=float(data.get("prompt_ms", 0.0)),
            prompt_per_second=float(data.get("prompt_per_second", 0.0)),
            predicted_n=int(data.get("predicted_n", 0)),
            predicted_ms=float(data.get("predicted_ms", 0.0)),
            predicted_per_second=float(data.get("predicted_per_second", 0.0)),
            # Present only once a draft token was generated (docs/reference/engine-facts.md §3.7).
            draft_n=int(data.get("draft_n", 0)),
            draft_n_accepted=int(data.get("draft_n_accepted", 0)),
        )

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


@dataclass(frozen=True)
class ChatDelta:
    """A piece of the reply as it arrived; ``t`` is ``time.perf_counter()`` at arrival."""

    content: str
    reasoning: str
    t: float


def _error_from_body(status: int, body: bytes | str) -> HTTPStatusError:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        err = json.loads(text)["error"]
        return HTTPStatusError(status, str(err.get("message", "")), str(err.get("type", "")))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return HTTPStatusError(status, text.strip()[:300] or "no details")
