"""A TCP relay between a real client and the real llama-server: it copies bytes both ways unchanged
and keeps a copy, so a test can show which requests the client sent and what the server answered.
Nothing is parsed or altered on the way (this is not a fake: the server answers every byte).
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Recording:
    """What went through, per connection: the client's bytes and the server's."""

    sent: list[bytearray] = field(default_factory=list)
    received: list[bytearray] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def requests(self) -> list[str]:
        """The request lines the client sent ("POST /v1/messages"), in order."""
        with self.lock:
            blobs = [bytes(b) for b in self.sent]
        out = []
        for blob in blobs:
            out += [m.group(1).decode() for m in re.finditer(rb"(?:^|\r\n)((?:GET|POST|PUT|DELETE) \S+) HTTP/1", blob)]
        return out

    def reply_texts(self) -> list[str]:
        """The model's text in every response: chat-completion content (whole or streamed deltas),
        Anthropic text blocks / text_delta, Responses API output_text deltas. One string per response body."""
        with self.lock:
            blobs = [bytes(b).decode("utf-8", "replace") for b in self.received]
        texts = []
        for blob in blobs:
            for body in re.split(r"HTTP/1\.[01] \d{3}", blob):
                parts: list[str] = []
                for obj in _json_objects(body):
                    parts += _texts(obj)
                if "".join(parts).strip():
                    texts.append("".join(parts))
        return texts


def _json_objects(body: str) -> Iterator[object]:
    for line in body.splitlines():
        line = line.strip()
        if line.startswith("data:"):
            line = line[5:].strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _texts(obj: object) -> list[str]:
    if not isinstance(obj, dict):
        return []
    out: list[str] = []
    for choice in obj.get("choices") or []:
        if isinstance(choice, dict):
            for key in ("delta", "message"):
                part = choice.get(key)
                if isinstance(part, dict) and isinstance(part.get("content"), str):
                    out.append(part["content"])
    delta = obj.get("delta")
    if isinstance(delta, dict) and delta.get("type") == "text_delta":
        out.append(str(delta.get("text", "")))
    if obj.get("type") == "response.output_text.delta" and isinstance(delta, str):
        out.append(delta)
    if obj.get("type") == "message":
        out += [str(b.get("text", "")) for b in obj.get("content") or [] if isinstance(b, dict) and b.get("type") == "text"]
    return out


def _pump(src: socket.socket, dst: socket.socket, record: bytearray, lock: threading.Lock) -> None:
    try:
        while chunk := src.recv(65536):
            with lock:
                record += chunk
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@contextmanager
def relay(upstream_port: int) -> Iterator[tuple[int, Recording]]:
    """A relay on a free 127.0.0.1 port to 127.0.0.1:``upstream_port``: yields (port, recording)."""
    rec = Recording()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()
    threads: list[threading.Thread] = []
    conns: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", upstream_port))
            conns.extend((client, server))
            sent, received = bytearray(), bytearray()
            with rec.lock:
                rec.sent.append(sent)
                rec.received.append(received)
            for a, b, r in ((client, server, sent), (server, client, received)):
                t = threading.Thread(target=_pump, args=(a, b, r, rec.lock), daemon=True)
                t.start()
                threads.append(t)

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    try:
        yield listener.getsockname()[1], rec
    finally:
        stop.set()
        acceptor.join(2)
        listener.close()
        for c in conns:
            try:
                c.close()
            except OSError:
                pass
        for t in threads:
            t.join(2)
