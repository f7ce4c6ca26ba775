"""core/engine/bounded.py: a GET that stops at its size limit and at its deadline (the hostile
servers of the fault suite, tests/faults/test_hostile_network.py, drive it through the CLI)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import httpx2
import pytest

from beedeck.core.engine.bounded import BodyTooLarge, bounded_get


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = {"/big": b"x" * 100_000, "/nested": b"[" * 100_000, "/ok": b'{"status": "ok"}'}[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def base() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_whole_answer_within_its_limits_comes_back(base: str) -> None:
    got = bounded_get(base + "/ok", limit=100, deadline_s=10)
    assert got.status_code == 200 and got.json() == {"status": "ok"}


def test_a_body_past_the_limit_raises_body_too_large(base: str) -> None:
    with pytest.raises(BodyTooLarge, match="more than 65,536 bytes"):
        bounded_get(base + "/big", limit=65_536, deadline_s=10)


def test_json_nested_too_deep_is_a_value_error_not_a_recursion_error(base: str) -> None:
    with pytest.raises(ValueError, match="nests too deep"):
        bounded_get(base + "/nested", deadline_s=10).json()


def test_nothing_listening_is_a_transport_error(base: str) -> None:
    with pytest.raises(httpx2.ConnectError):
        bounded_get("http://127.0.0.1:1/x", deadline_s=5)
