"""The model alias on the real starter server: without --alias, /v1/models names the model by its full
path (the home folder leaks, clients that map model names break); with BeeDeck's argv, by a short name."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.server import ServerProcess, free_port
from tests.engine.procs import pid_alive

from .conftest import StartServer

pytestmark = pytest.mark.engine


def _get(url: str) -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def _chat_model(base_url: str) -> str:
    body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0.0}
    req = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return str(json.loads(resp.read())["model"])


def test_v1_models_names_the_alias_not_the_path(
    start_server: StartServer, starter_caps: EngineCaps, starter_settings: Callable[..., LaunchSettings],
    starter_engine_path: Path, starter_model_path: Path, tmp_path: Path,
) -> None:
    argv = build_argv(starter_settings(port=free_port()), starter_caps).argv
    at = argv.index("--alias")
    before = ServerProcess(starter_engine_path, argv[:at] + argv[at + 2:], pid_file=tmp_path / "before.pid").start()
    try:
        before.wait_ready(120)
        ids_before = [m["id"] for m in _get(before.base_url + "/v1/models")["data"]]
    finally:
        before.stop(timeout=5.0)
    assert not pid_alive(before.pid)
    assert ids_before == [str(starter_model_path)], "without --alias the server names the model by its path"

    after = start_server()
    after.wait_ready(120)
    ids_after = [m["id"] for m in _get(after.base_url + "/v1/models")["data"]]
    assert ids_after == ["smollm2-135m-instruct.q4_1"]
    assert _chat_model(after.base_url) == "smollm2-135m-instruct.q4_1"
    assert "/" not in ids_after[0]
