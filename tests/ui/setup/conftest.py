"""The wizard's release lookups go to the local GitHub-releases fake serving the recorded listings of
both projects (tests/fixtures/releases), never to api.github.com."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.fake_releases import FakeReleases, recorded_listings


@pytest.fixture(autouse=True)
def releases(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeReleases]:
    yield from recorded_listings(monkeypatch)


@pytest.fixture(autouse=True)
def unreachable_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The wizard reads the catalog's GGUF headers before it recommends: here the Hub is a port nothing
    listens on (offline, from the cache), unless a test names a fake Hub's endpoint."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
        monkeypatch.setenv("HF_ENDPOINT", dead)
        yield dead
