"""A small llama-server HTTP client: streaming chat with cancel and timings, plus the status routes.

Streaming reads the raw SSE lines of ``POST /v1/chat/completions`` (docs/reference/engine-facts.md §3.7)
over a fresh connection per request, so :meth:`ChatStream.cancel` can shut that one socket down and
wake a read that is blocked waiting for the next token (docs/reference/python-stack.md, StreamWorker). Closing the
connection is how llama-server learns to stop generating; ``X-Conversation-Id`` is never sent, as it
would keep the generation running after a disconnect.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2
# httpx2 is imported where a request is made (it was about a sixth of the window's cold start).

from beedeck.core.engine.bounded import BodyTooLarge, Fetched, bounded_get
from beedeck.core.engine.client.answers import (
    ChatDelta,
    ChatResult,
    ClientError,
    ReplyOverrun,
    ServerGone,
    SlotFile,
    Stalled,
    StreamedReply,
    StreamTruncated,
    _check_messages,
    _error_from_body,
)
from beedeck.core.printable import printable

DEFAULT_TIMEOUT_S = (10.0, 600.0)  # (connect, read): a long prompt on a CPU can take minutes to the first token
# Once tokens flow, one decoding step is at most seconds even for a big model on a CPU: this long a
# silence after the first token means a hung server (stopped, swapping to death), not a slow one.
STALL_S = 120.0
STATUS_DEADLINE_S = 30.0  # /props, /slots, /metrics: the whole answer, however slowly it trickles
STATUS_LIMIT = 16 << 20  # bytes of a status answer; more is not llama-server talking
# A slot's KV cache written to or read from its file: a 16k-token conversation of a 31B model is about 1 GB
# (the GPU's copy to the host, then the disk); far past that a server is not saving, it hangs.
SLOT_FILE_TIMEOUT_S = 120.0
LINE_LIMIT = 16 << 20  # one SSE line (one chunk of a reply is a few hundred bytes)
# A fast stream is read at most this often: llama-server writes each token as it comes, and every read
# costs the reading thread ~50 us of Python (httpx, h11) that holds the GIL against the GUI thread; at
# 10,000 tokens/s one read per token kept the worker busy ~57 % of a core. Waiting this long after a
# read that came soon after the previous one lets the next tokens gather in the socket, so one read
# takes ~20 of them; a slow stream (gaps longer than this) is read at once, as before.
READ_COALESCE_S = 0.002
# A reply may run this far past its max_tokens before BeeDeck ends it: a real server stops at the cap (it
# even shortens drafts to the budget left), and streams a piece per token or fewer.
OVERRUN_MARGIN = 16  # tokens, or a sixteenth of max_tokens if more
TOKEN_CHARS = 1024  # characters a token's text may hold (the starter's longest of 49,152 is 81)
# The overall deadline of a reply with a max_tokens: the first token's wait, then this long per token, far
# slower than a big model on a CPU. A server that pings or trickles for ever meets it.
FIRST_TOKEN_S = DEFAULT_TIMEOUT_S[1]
SLOWEST_TOKEN_S = 2.0


def token_cap(max_tokens: int) -> int:
    """The pieces a reply capped at ``max_tokens`` may stream before BeeDeck ends it."""
    return max_tokens + max(OVERRUN_MARGIN, max_tokens // 16)


def reply_deadline(max_tokens: int | None) -> float | None:
    """Seconds a reply of up to ``max_tokens`` may take in all (None: no cap, no deadline)."""
    return None if max_tokens is None else FIRST_TOKEN_S + max_tokens * SLOWEST_TOKEN_S


class ChatStream:
    """Iterate to get :class:`ChatDelta` pieces; afterwards ``.result`` holds the :class:`ChatResult`.

    The request starts on the first ``next()``, so the stream can be built on one thread and consumed
    on a worker. :meth:`cancel` may be called from any thread; the iteration then ends within about
    100 ms, without raising, and ``result.cancelled`` is True. A reply that streams past its
    ``max_tokens`` (:func:`token_cap`) or its ``deadline_s`` is ended by BeeDeck: :class:`ReplyOverrun`,
    with ``result`` holding what arrived.
    """

    def __init__(self, client: LlamaClient, payload: dict[str, Any], stall_s: float | None = STALL_S,
                 deadline_s: float | None = None) -> None:
        self._client = client
        self._payload = payload
        self._stall_s = stall_s
        max_tokens = payload.get("max_tokens")
        self._max_tokens = max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else None
        self._deadline_s = deadline_s
        self._t0 = time.monotonic()
        self._overrun = ""  # why BeeDeck ended the reply (past its cap or its deadline)
        self._stalled = False
        self._last_bytes = time.monotonic()
        self._flowing = False  # set at the first token: only then does the stall clock run
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._result: ChatResult | None = None
        self._started = False

    @property
    def result(self) -> ChatResult:
        if self._result is None:
            raise RuntimeError("the stream has not finished yet: iterate it to the end first")
        return self._result

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop the reply: shut the socket down so a blocked read returns at once."""
        self._cancel.set()
        with self._lock:
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _trace(self, name: str, info: dict[str, Any]) -> None:
        # httpcore reports the new connection before the request is written: keep its socket so a
        # cancel during a long prompt (before any response header) can still interrupt the read.
        if name == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                self._sock = sock
            if self._cancel.is_set():
                self.cancel()

    def _watch(self, done: threading.Event) -> None:
        """The stall clock (once tokens flow) and the overall deadline, checked a few times a second."""
        step = min(0.5, *(x / 4 for x in (self._stall_s, self._deadline_s) if x))
        while not done.wait(step):
            now = time.monotonic()
            if self._stall_s and self._flowing and now - self._last_bytes > self._stall_s:
                self._stalled = True
                self.cancel()  # shuts the socket: the blocked read returns at once
                return
            if self._deadline_s and now - self._t0 > self._deadline_s:
                self._overrun = self._deadline_message()
                self.cancel()
                return

    def __iter__(self) -> Iterator[ChatDelta]:
        if self._started:
            raise RuntimeError("a ChatStream can be iterated only once")
        self._started = True
        return self._run()

    def _run(self) -> Iterator[ChatDelta]:
        import httpx2

        reply = StreamedReply()
        if self._cancel.is_set():
            self._result = reply.result(True)
            return
        http = httpx2.Client(timeout=self._client.timeout, trust_env=False)
        self._t0 = time.monotonic()
        watch_done = threading.Event()
        if self._stall_s or self._deadline_s:
            threading.Thread(target=self._watch, args=(watch_done,), name="chat-stall-watch", daemon=True).start()
        try:
            yield from self._stream(http, reply)
        except ReplyOverrun:
            self._result = reply.result(True)
            raise
        except (httpx2.TransportError, OSError) as exc:
            if self._stalled or self._overrun:
                self._result = reply.result(True)
                raise self._ended_error() from exc
            if self._cancel.is_set():
                self._result = reply.result(True)
                return
            raise self._broken(exc) from exc
        finally:
            watch_done.set()
            with self._lock:
                self._sock = None
            http.close()
        if self._stalled or self._overrun:
            self._result = reply.result(True)
            raise self._ended_error()
        if self._cancel.is_set():
            self._result = reply.result(True)
            return
        self._result = reply.result(False)
        if not reply.done and reply.finish is None:
            raise StreamTruncated(
                "The reply stream ended early (no [DONE] and no finish reason): the text may be cut off. "
                "See the server log, then try again."
            )

    def _stream(self, http: httpx2.Client, reply: StreamedReply) -> Iterator[ChatDelta]:
        """POST the request and take its SSE lines into ``reply`` until [DONE], a cancel or the end."""
        with http.stream(
            "POST",
            self._client.base_url + "/v1/chat/completions",
            json=self._payload,
            headers=self._client._headers({"Accept": "text/event-stream"}),
            extensions={"trace": self._trace},
        ) as resp:
            if resp.status_code != 200:
                body = b""
                for block in resp.iter_bytes():  # an error page, read up to 1 MB
                    body += block
                    if len(body) > 1 << 20:
                        break
                raise _error_from_body(resp.status_code, body[: 1 << 20])
            for line in _sse_lines(resp, self._touch):
                if self._cancel.is_set():
                    break
                if not line.startswith("data:"):
                    continue  # blank separators and ": ping" keep-alive comments
                data = line[5:].strip()
                if data == "[DONE]":
                    reply.done = True
                    break
                try:
                    obj = json.loads(data)
                except (ValueError, RecursionError):
                    obj = None
                if not isinstance(obj, dict):
                    raise ClientError(f"The server sent a malformed stream line: {printable(data, 200)}")
                for delta in reply.take(obj):
                    if delta.progress is None:
                        self._flowing = True  # the stall clock runs once text comes (reading a prompt is slow)
                    yield delta
                if self._max_tokens is not None:
                    self._check_cap(reply)

    def _broken(self, exc: Exception) -> ServerGone:
        """What a transport error in the middle of a request means, said for the user."""
        import httpx2

        if isinstance(exc, httpx2.ConnectError):
            return ServerGone(
                f"Could not connect to {self._client.base_url}: the server is not running. Start it, or check the URL."
            )
        if isinstance(exc, httpx2.TimeoutException):
            return ServerGone(f"The server at {self._client.base_url} stopped answering (timed out): see its log.")
        return ServerGone(
            f"The connection to the server broke in the middle of the reply ({type(exc).__name__}): the "
            "server stopped, or the network between here and it did."
        )

    def _touch(self) -> None:
        self._last_bytes = time.monotonic()

    def _check_cap(self, reply: StreamedReply) -> None:
        """End a reply that went past its max_tokens: more pieces than the cap, or more text than it can hold."""
        assert self._max_tokens is not None
        cap = token_cap(self._max_tokens)
        if reply.n_token_chunks > cap:
            seen = f"{reply.n_token_chunks:,} pieces arrived"
        elif reply.chars > cap * TOKEN_CHARS:
            seen = f"{reply.chars:,} characters arrived, more than {cap:,} tokens can hold"
        else:
            return
        raise ReplyOverrun(
            f"The server went on past the reply's cap of {self._max_tokens:,} tokens ({seen}), so it ignores "
            "max_tokens: BeeDeck ended the reply, and what arrived is kept. Check the server, or a proxy before it "
            "that rewrites requests."
        )

    def _deadline_message(self) -> str:
        size = f"a reply of up to {self._max_tokens:,} tokens" if self._max_tokens else "a reply"
        return (f"The reply went on for more than {self._deadline_s:g} s, BeeDeck's limit for {size}: BeeDeck ended "
                "it, and what arrived is kept. The server may be stuck (see its log); if it is only that slow, "
                "raise the limit (`beedeck chat --deadline S`).")

    def _ended_error(self) -> ClientError:
        return ReplyOverrun(self._overrun) if self._overrun else self._stall_error()

    def _stall_error(self) -> Stalled:
        return Stalled(
            f"llama-server sent nothing for {self._stall_s:g} s in the middle of the reply: it looks hung "
            "(stopped, or the machine is out of memory and swapping). What arrived is kept; restart the server "
            "and try again."
        )


def _sse_lines(resp: httpx2.Response, on_bytes: Callable[[], None] | None = None) -> Iterator[str]:
    """Lines split on ``\n`` only, from raw bytes as they arrive.

    ``Response.iter_lines`` uses ``str.splitlines``, which also splits on U+2028, U+0085 and friends:
    llama-server writes those raw inside its JSON when a model emits them, which would cut a chunk
    in two. Splitting bytes also skips a text-decoding layer per chunk.
    """
    buf = b""
    last = woke = 0.0  # when the previous block arrived; when the last pause ended
    for block in resp.iter_bytes():
        now = time.monotonic()
        if now - last < READ_COALESCE_S and now - woke >= READ_COALESCE_S:
            # A fast stream: let the next pieces gather before the next read (see READ_COALESCE_S).
            # A block is one HTTP chunk, and one read may hold many: the blocks after a pause come
            # from the buffer, so pause again only once a pause's worth of time has passed.
            time.sleep(READ_COALESCE_S)
            woke = time.monotonic()
        last = now
        if on_bytes is not None:
            on_bytes()
        buf += block
        if b"\n" not in block:
            if len(buf) > LINE_LIMIT:
                raise ClientError(f"The server sent a stream line longer than {LINE_LIMIT >> 20} MB without an end: "
                                  "it is not a llama-server reply (check the URL), or the server is broken.")
            continue
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            yield raw.rstrip(b"\r").decode("utf-8", "replace")
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace")


_METRIC_LINE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*(?:\{[^}]*\})?)\s+(?P<value>\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text to {name: value}; ``llamacpp:`` is dropped, labels are kept as written."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _METRIC_LINE.match(line.strip())
        if not m:
            continue
        try:
            value = float(m.group("value"))
        except ValueError:
            continue
        name = m.group("name")
        if name.startswith("llamacpp:"):
            name = name[len("llamacpp:") :]
        out[name] = value
    return out


class LlamaClient:
    """HTTP client for one llama-server. Methods are blocking; run them off the GUI thread."""

    def __init__(
        self, base_url: str, api_key: str | None = None, timeout: httpx2.Timeout | float | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        import httpx2

        if timeout is None:
            timeout = httpx2.Timeout(DEFAULT_TIMEOUT_S[0], read=DEFAULT_TIMEOUT_S[1])
        self.timeout = timeout if isinstance(timeout, httpx2.Timeout) else httpx2.Timeout(timeout)

    def __repr__(self) -> str:  # never shows the key
        return f"LlamaClient({self.base_url!r}, api_key={'set' if self.api_key else None})"

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _get(self, path: str, timeout: float | None = None) -> Fetched:
        import httpx2

        deadline = timeout if timeout is not None else STATUS_DEADLINE_S
        try:
            return bounded_get(self.base_url + path, headers=self._headers(), limit=STATUS_LIMIT, deadline_s=deadline,
                               connect_s=self.timeout.connect)
        except BodyTooLarge:
            raise ClientError(f"{self.base_url}{path} answered more than {STATUS_LIMIT >> 20} MB: that is not "
                              "llama-server (check the URL).") from None
        except httpx2.ConnectError as exc:
            raise ServerGone(f"Could not connect to {self.base_url}: the server is not running.") from exc
        except httpx2.TransportError as exc:
            raise ServerGone(f"The server at {self.base_url} did not answer ({type(exc).__name__}): see its log.") from exc

    def _get_json(self, path: str) -> Any:
        resp = self._get(path)
        if resp.status_code != 200:
            raise _error_from_body(resp.status_code, resp.content)
        try:
            return resp.json()
        except ValueError:
            raise ClientError(f"{self.base_url}{path} did not answer JSON: check that it is llama-server.") from None

    def health(self, timeout: float = 2.0) -> int:
        """The HTTP status of ``GET /health``: 200 ready, 503 loading. Raises ServerGone if nothing listens."""
        return self._get("/health", timeout=timeout).status_code

    def props(self) -> dict[str, Any]:
        data = self._get_json("/props")
        return data if isinstance(data, dict) else {}

    def slots(self) -> list[dict[str, Any]]:
        data = self._get_json("/slots")
        return data if isinstance(data, list) else []

    def slot_file(self, slot: int, action: str, filename: str, timeout_s: float = SLOT_FILE_TIMEOUT_S) -> SlotFile:
        """``POST /slots/{slot}?action=save|restore`` on a server started with ``--slot-save-path``: the slot's KV
        cache (and its tokens) written to, or read from, ``filename`` in that folder. Raises HTTPStatusError (the
        server's refusal: no folder, a file that does not fit this model or context, a full disk) or ServerGone;
        ClientError for an answer that cannot be true."""
        import httpx2

        if action not in ("save", "restore"):
            raise ValueError(f"slot action {action!r}: use save or restore")
        url = f"{self.base_url}/slots/{int(slot)}?action={action}"
        try:
            resp = httpx2.post(url, json={"filename": filename}, headers=self._headers(),
                               timeout=httpx2.Timeout(timeout_s, connect=self.timeout.connect))
        except httpx2.ConnectError as exc:
            raise ServerGone(f"Could not connect to {self.base_url}: the server is not running.") from exc
        except httpx2.TransportError as exc:
            raise ServerGone(f"The server at {self.base_url} did not {action} its slot ({type(exc).__name__}).") from exc
        if resp.status_code != 200:
            raise _error_from_body(resp.status_code, resp.content)
        try:
            return SlotFile.from_json(resp.json(), saved=action == "save")
        except ValueError as exc:  # not JSON, or ImpossibleNumber
            raise ClientError(f"The server's answer to the slot {action} cannot be read: {exc}") from None

    def metrics(self) -> dict[str, float]:
        """``GET /metrics`` (needs --metrics); note each call resets the server's windowed gauges."""
        resp = self._get("/metrics")
        if resp.status_code != 200:
            raise _error_from_body(resp.status_code, resp.content)
        return parse_prometheus(resp.text)

    def stream_chat(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        extra: dict[str, Any] | None = None,
        stall_s: float | None = STALL_S,
        deadline_s: float | None = None,
    ) -> ChatStream:
        """A streamed chat (see :class:`ChatStream`). ``deadline_s``: how long the whole reply may take; None:
        :func:`reply_deadline` of ``max_tokens`` (no deadline without one), ``math.inf``: none."""
        _check_messages(messages)
        payload: dict[str, Any] = {
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        if temperature is not None:
            payload["temperature"] = temperature
        if seed is not None:
            payload["seed"] = seed
        if extra:
            payload.update(extra)
        if deadline_s is None:
            deadline_s = reply_deadline(max_tokens)
        return ChatStream(self, payload, stall_s, None if deadline_s == math.inf else deadline_s)

    def chat(self, messages: list[dict[str, Any]], **kw: Any) -> ChatResult:
        """Send a chat and wait for the whole reply (streamed underneath, for the timings)."""
        stream = self.stream_chat(messages, **kw)
        for _ in stream:
            pass
        return stream.result
