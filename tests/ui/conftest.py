"""Fixtures for the pytest-qt tests: a chat store in the test's BEEDECK_HOME and the fake llama-server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.client import LlamaClient
from tests.fakes.sse_server import FakeLlamaServer, SSEScript


@pytest.fixture
def store() -> Iterator[ChatStore]:
    s = ChatStore()
    yield s
    s.close()


@pytest.fixture
def fake_server() -> Iterator[FakeLlamaServer]:
    srv = FakeLlamaServer(SSEScript(tokens=["Hello", ",", " world", "!"], rate=0))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client(fake_server: FakeLlamaServer) -> LlamaClient:
    return LlamaClient(fake_server.base_url)
