"""A local stand-in for llama-server's HTTP API, speaking its streaming protocol byte for byte.

Used where the real engine cannot produce a situation on demand: an exact token rate, a stall in
the middle of a reply, a cut connection, an in-stream error, a wrong API key. Stdlib only; importable
by other tests and the UI benchmark::

    with FakeLlamaServer(SSEScript(tokens=["Hi", " there"], rate=200)) as srv:
        LlamaClient(srv.base_url).chat([{"role": "user", "content": "x"}])

Chunks are framed as llama-server frames them (docs/reference/engine-facts.md §3.7, and the real captures in
tests/fixtures/engines/*.sse): ``data: <json>\\n\\n`` over chunked transfer encoding, a first
``role`` delta, content deltas, a ``finish_reason`` chunk, an optional usage chunk carrying
``timings``, then ``data: [DONE]``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class SSEScript:
    """What the fake does for the next chat request. Change fields between requests as needed."""

    tokens: list[str] = field(default_factory=lambda: [f"tok{i} " for i in range(20)])
    reasoning_tokens: list[str] = field(default_factory=list)  # sent before the content as reasoning_content
    rate: float = 0.0  # tokens per second; 0 = as fast as possible
    first_token_delay: float = 0.0  # seconds of silence before the first token (a long prompt being read)
    # What llama-server says while it reads the prompt, to a request with "return_progress": its
    # prompt_progress objects (total, cache, processed, time_ms), spread over first_token_delay.
    prompt_reads: list[tuple[int, int, int, float]] = field(default_factory=list)
    stall_after: int | None = None  # after N tokens, stop sending (connection stays open) until released
    cut_after: int | None = None  # after N tokens, close the connection without [DONE]
    error_after: int | None = None  # after N tokens, send data: {"error": ...} (as llama-server does)
    end_without_done: bool = False  # finish the HTTP body cleanly but with no finish chunk and no [DONE]
    status: int = 200  # answer the POST with this status and an {"error": ...} body instead of a stream
    error_message: str = "boom"
    error_type: str = "server_error"
    api_key: str | None = None  # if set, requests without "Authorization: Bearer <key>" get 401
    finish_reason: str = "stop"
    draft_n: int = 0
    draft_n_accepted: int = 0
    # True: a request with "speculative.n_max": 0 gets no drafts (BeeLlama 0.1-0.3); False: it is
    # ignored and drafts are reported anyway (BeeLlama >= 0.4 and mainline, where the field is #if 0).
    honours_no_drafts: bool = False
    include_timings: bool = True
    model: str = "fake-model.gguf"
    ping_every_tokens: int = 0  # send ": ping" comment lines, like --sse-ping-interval
    # A lying server: these keys replace the true ones in the last chunk's timings (NaN, -1e9, 1e308 ...).
    timings: dict[str, Any] = field(default_factory=dict)
    repeat: bool = False  # after the tokens, send them again for ever (a server that ignores max_tokens)


@dataclass
class RequestRecord:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


_CHUNK_BASE = {"created": 1796003204, "id": "chatcmpl-fake0000000000000000000000000", "system_fingerprint": "b0-fake",
               "object": "chat.completion.chunk"}


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
    obj = {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], **_CHUNK_BASE, "model": model, **extra}
    return b"data: " + json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


def _endless(pieces: list[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    while True:
        yield from pieces


def replay_chunks(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a captured ``.sse`` file (``[DONE]`` excluded), e.g. to build a script."""
    out = []
    for line in Path(path).read_text().splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            out.append(json.loads(line[6:]))
    return out


def script_from_capture(path: str | Path, rate: float = 0.0) -> SSEScript:
    """An SSEScript that sends the same content tokens and timings as a real captured reply."""
    tokens: list[str] = []
    timings: dict[str, Any] = {}
    finish = "stop"
    model = "fake-model.gguf"
    for obj in replay_chunks(path):
        model = obj.get("model", model)
        for ch in obj.get("choices") or ():
            c = (ch.get("delta") or {}).get("content")
            if c:
                tokens.append(c)
            if ch.get("finish_reason"):
                finish = ch["finish_reason"]
        timings = obj.get("timings", timings)
    return SSEScript(tokens=tokens, rate=rate, finish_reason=finish, model=model,
                     draft_n=int(timings.get("draft_n", 0)), draft_n_accepted=int(timings.get("draft_n_accepted", 0)))


class FakeLlamaServer:
    """The fake server on 127.0.0.1 (a free port), run in a thread; use it as a context manager.

    ``health_status`` answers ``/health`` (set 503 to mimic loading). ``props`` holds keys that replace
    ``/props``' own and ``slots`` (when set) is ``/slots``' answer: a server that lies about itself. ``requests`` records every
    request; ``disconnected`` is set when a client hangs up in the middle of a stream; ``release_stall()``
    lets a stalled stream go on.
    """

    def __init__(self, script: SSEScript | None = None, *, metrics_text: str | None = None) -> None:
        self.script = script or SSEScript()
        self.health_status = 200
        self.metrics_text = metrics_text
        self.props: dict[str, Any] = {}
        self.slots: Any = None
        self.requests: list[RequestRecord] = []
        self.disconnected = threading.Event()
        self.stalled = threading.Event()
        self.streams_finished = threading.Event()
        self._release = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="fake-llama-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeLlamaServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def release_stall(self) -> None:
        self._release.set()

    def __enter__(self) -> FakeLlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- protocol ----

    def stream_bytes(self, script: SSEScript) -> Iterator[bytes | None]:
        """The stream body, piece by piece; ``None`` means "cut the connection here"."""
        model = script.model
        if not script.prompt_reads:
            yield _chunk(model, {"role": "assistant", "content": None})
        for total, cache, processed, time_ms in script.prompt_reads:  # as llama-server frames them
            yield _chunk(model, {"role": "assistant", "content": None}, prompt_progress={
                "total": total, "cache": cache, "processed": processed, "time_ms": time_ms})
            time.sleep(script.first_token_delay / len(script.prompt_reads))
        if script.first_token_delay and not script.prompt_reads:
            time.sleep(script.first_token_delay)
        t0 = time.perf_counter()
        pieces = [("reasoning_content", t) for t in script.reasoning_tokens] + [("content", t) for t in script.tokens]
        for i, (key, tok) in enumerate(_endless(pieces) if script.repeat else pieces):
            if script.stall_after is not None and i == script.stall_after:
                self.stalled.set()
                self._release.wait(60)
            if script.cut_after is not None and i == script.cut_after:
                yield None
                return
            if script.error_after is not None and i == script.error_after:
                err = {"error": {"code": 500, "message": script.error_message, "type": script.error_type}}
                yield b"data: " + json.dumps(err).encode() + b"\n\n"
                return
            if script.rate > 0:
                # Pace against the start time, not per token, so the rate holds on a busy machine.
                due = t0 + i / script.rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            if script.ping_every_tokens and i and i % script.ping_every_tokens == 0:
                yield b": ping\n\n"
            yield _chunk(model, {key: tok})
        if script.end_without_done:
            return
        n = len(pieces)
        gen_s = max(time.perf_counter() - t0, 1e-6)
        timings: dict[str, Any] = {
            "cache_n": 0, "prompt_n": 5, "prompt_ms": 5.0, "prompt_per_token_ms": 1.0, "prompt_per_second": 1000.0,
            "predicted_n": n, "predicted_ms": gen_s * 1000, "predicted_per_token_ms": gen_s * 1000 / max(n, 1),
            "predicted_per_second": n / gen_s,
        }
        if script.draft_n:
            timings["draft_n"] = script.draft_n
            timings["draft_n_accepted"] = script.draft_n_accepted
        timings.update(script.timings)
        yield _chunk(model, {}, script.finish_reason)
        usage = {"completion_tokens": n, "prompt_tokens": 5, "total_tokens": n + 5,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        last = {"choices": [], **_CHUNK_BASE, "model": model, "usage": usage}
        if script.include_timings:
            last["timings"] = timings
        yield b"data: " + json.dumps(last, separators=(",", ":")).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def _record(self, body: Any) -> None:
                fake.requests.append(RequestRecord(self.command, self.path, dict(self.headers.items()), body))

            def _send_json(self, status: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, err_type: str) -> None:
                self._send_json(status, {"error": {"code": status, "message": message, "type": err_type}})

            def _authorized(self) -> bool:
                key = fake.script.api_key
                if key is None or self.path.startswith("/health"):
                    return True
                if self.headers.get("Authorization") == f"Bearer {key}":
                    return True
                self._error(401, "Invalid API Key", "authentication_error")
                return False

            def do_GET(self) -> None:
                self._record(None)
                if self.path.startswith("/health"):
                    if fake.health_status == 200:
                        self._send_json(200, {"status": "ok"})
                    else:
                        self._error(fake.health_status, "Loading model", "unavailable_error")
                    return
                if not self._authorized():
                    return
                if self.path.startswith("/metrics"):
                    if fake.metrics_text is None:
                        self._error(501, "This server does not support metrics endpoint. Start it with `--metrics`",
                                    "not_supported_error")
                        return
                    data = fake.metrics_text.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif self.path.startswith("/props"):
                    self._send_json(200, {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1,
                                          "model_path": fake.script.model, "build_info": "b0-fake", **fake.props})
                elif self.path.startswith("/slots"):
                    slots = [{"id": 0, "n_ctx": 4096, "speculative": False, "is_processing": False}]
                    self._send_json(200, slots if fake.slots is None else fake.slots)
                else:
                    self._error(404, "File Not Found", "not_found_error")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = raw
                self._record(body)
                if not self._authorized():
                    return
                if not self.path.startswith(("/v1/chat/completions", "/chat/completions")):
                    self._error(404, "File Not Found", "not_found_error")
                    return
                script = fake.script
                if script.honours_no_drafts and isinstance(body, dict) and body.get("speculative.n_max") == 0:
                    script = dataclasses.replace(script, draft_n=0, draft_n_accepted=0)
                if not (isinstance(body, dict) and body.get("return_progress") is True):
                    script = dataclasses.replace(script, prompt_reads=[])  # said only when asked
                if script.status != 200:
                    self._error(script.status, script.error_message, script.error_type)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Keep-Alive", "timeout=5, max=100")
                self.end_headers()
                try:
                    for piece in fake.stream_bytes(script):
                        if piece is None:
                            # A hard cut: no terminating zero-length chunk, like a crashed server.
                            self.close_connection = True
                            self.connection.shutdown(2)
                            return
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                    fake.streams_finished.set()
                except (BrokenPipeError, ConnectionResetError, OSError):
                    fake.disconnected.set()
                    self.close_connection = True

        return Handler


METRICS_SAMPLE = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 479
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s.
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 522.75
# HELP llamacpp:spec_decode_num_draft_tokens_total Number of draft tokens generated.
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 120
llamacpp:spec_decode_num_accepted_tokens_total 80
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 50
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 30
"""
