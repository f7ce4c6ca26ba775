"""A server BeeDeck did not start, in the serving (core/serving/serving.py, core/serving/attach.py): attached
instead of launched (the real ``inspect_server`` against the protocol-level fake llama-server), never restarted,
disconnected without being stopped, and watched: one that goes away is reported like one that crashed, at
once when a chat request to it failed."""

from __future__ import annotations

import time
from pathlib import Path

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.remote import KEY_WRONG, NO_RESTART, RemoteError
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.switch_cost import SwitchCosts
from beedeck.core.serving import Inline, Serving, ServingParts
from tests.core.serving.test_serving import Heard
from tests.fakes.sse_server import FakeLlamaServer


def _serving(tmp_path: Path, health_interval_s: float = 0.2, **parts: object) -> tuple[Serving, Heard]:
    heard = Heard()
    made = ServingParts(health_interval_s=health_interval_s, costs=SwitchCosts(tmp_path / "t.json"), **parts)
    return Serving(made, jobs=Inline(), events=heard.events()), heard


def test_a_running_server_is_attached_never_restarted_and_left_running(tmp_path: Path) -> None:
    fake = FakeLlamaServer().start()
    s, heard = _serving(tmp_path)
    assert s.start_if_idle(fake.base_url, LaunchSettings())
    assert s.is_remote() and s.state == ServerState.READY and s.proc is None
    assert heard.ready == [fake.base_url] and heard.attached[0].url == fake.base_url
    assert heard.log[-2:] == ["ready", "attached"] and any("connected to" in line for line in heard.lines)
    s.restart(LaunchSettings())
    assert heard.failed[-1].code == f"remote:{NO_RESTART}" and s.state == ServerState.READY
    s.stop()
    assert s.state == ServerState.STOPPED and s.base_url == "" and s.remote is None
    assert heard.log[-1] == "stopped" and "(it keeps running)" in heard.lines[-1]
    assert [r.path for r in fake.requests if r.method == "POST"] == []  # nothing was asked of it but what it is
    heard.failure.clear()
    fake.stop()
    assert not heard.failure.wait(1.0)  # the watch ended with the disconnect: its going away is no failure


def test_a_refused_connect_is_a_failure(tmp_path: Path) -> None:
    def refuse(url: str, key: str | None) -> object:
        raise RemoteError(KEY_WRONG, "The server refused the API key (HTTP 401).", "Enter the key.")

    s, heard = _serving(tmp_path, inspect=refuse)
    s.start("http://127.0.0.1:1", LaunchSettings(api_key="k"))
    assert s.state == ServerState.FAILED and s.remote is None and heard.failed[0].code == f"remote:{KEY_WRONG}"
    assert heard.states == [ServerState.STARTING, ServerState.FAILED]


def test_a_server_that_goes_away_is_reported_like_a_crash(tmp_path: Path) -> None:
    fake = FakeLlamaServer().start()
    s, heard = _serving(tmp_path)
    s.start(fake.base_url, LaunchSettings())
    fake.stop()
    assert heard.failure.wait(5), "the watch did not notice"
    assert heard.failed[0].code == "remote:refused" and s.state == ServerState.FAILED and s.remote is None
    assert s.base_url == ""


def test_a_failed_request_checks_the_server_at_once(tmp_path: Path) -> None:
    """Issue 22: the watch polls every 10 s here; only the failed reply can tell so soon."""
    fake = FakeLlamaServer().start()
    s, heard = _serving(tmp_path, health_interval_s=10.0)
    s.start(fake.base_url, LaunchSettings())
    fake.stop()
    t0 = time.monotonic()
    s.request_failed("The server closed the connection.")
    assert heard.failure.wait(5) and time.monotonic() - t0 < 2.0
    assert heard.failed[0].code == "remote:refused"
    s.request_failed()  # nothing attached any more: nothing to check
