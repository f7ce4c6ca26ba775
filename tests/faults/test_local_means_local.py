"""Faults, round three: a web page the user visits reaches for the local model (docs/reliability.md, "Local
means local").

A page on another origin can send a "simple" request (a ``text/plain`` POST, a GET) to 127.0.0.1 without a
preflight; the browser hands it the answer only when the server's ``Access-Control-Allow-Origin`` names the
page's origin (or ``*``). llama-server's default reflects every origin, with credentials. Here the real
engines, started by the real ``beedeck serve``, get what such a page would send: ``Origin:
https://evil.example`` on a ``text/plain`` POST to /v1/chat/completions, on /props (the model's path: the
user's name and folders) and /metrics, and the preflight a JSON request would need.
"""

from __future__ import annotations

import re
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.engine.conftest import beellama_binary

from .conftest import Beedeck, Child

EVIL = "https://evil.example"
SECRET = "the-local-servers-key"
BODY = b'{"messages":[{"role":"user","content":"Tell me a secret."}],"max_tokens":4}'


def _answer(request: urllib.request.Request) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(request, timeout=120) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read().decode()


def what_a_page_gets(url: str, origin: str = EVIL) -> dict[str, tuple[int, dict[str, str], str]]:
    """The answers to what a page on ``origin`` can send (route -> status, headers, body)."""
    simple = {"Origin": origin, "Content-Type": "text/plain"}
    return {
        "chat": _answer(urllib.request.Request(url + "/v1/chat/completions", BODY, simple, method="POST")),
        "props": _answer(urllib.request.Request(url + "/props", headers={"Origin": origin})),
        "metrics": _answer(urllib.request.Request(url + "/metrics", headers={"Origin": origin})),
        "preflight": _answer(urllib.request.Request(url + "/v1/chat/completions", method="OPTIONS", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, authorization"})),
    }


def readable_by(headers: dict[str, str], origin: str) -> bool:
    """Whether a browser would hand the answer to a page on ``origin``."""
    return headers.get("access-control-allow-origin", "").strip() in (origin, "*")


def with_credentials(headers: dict[str, str]) -> bool:
    return headers.get("access-control-allow-credentials", "").strip().lower() == "true"


def _engine(beedeck: Beedeck, kind: str) -> Path:
    return beedeck.engine if kind == "mainline" else beellama_binary(kind)


def _serve(beedeck: Beedeck, engine: Path, **env: str) -> tuple[Child, str]:
    child = beedeck.spawn("serve", "--engine", str(engine), "--model", str(beedeck.model), "--threads", "1",
                          "--ctx", "2048", **env)
    out = child.wait_text("ready in", timeout=600, stream="out")
    found = re.search(r"ready in [\d.]+ s at (http://\S+)", out)
    assert found, out
    return child, found.group(1)


def _stop(child: Child) -> None:
    child.proc.send_signal(signal.SIGINT)
    assert child.wait(30) == 0, child.stderr()


@pytest.mark.parametrize("kind", ["mainline", "bee-b"])
def test_a_web_page_gets_no_access_to_a_server_beedeck_starts(beedeck: Beedeck, kind: str) -> None:
    child, url = _serve(beedeck, _engine(beedeck, kind))
    for route, (status, headers, _body) in what_a_page_gets(url).items():
        assert not readable_by(headers, EVIL), (kind, route, status, headers)
        assert not with_credentials(headers), (kind, route, headers)
    assert f"--cors-origins {url} --no-cors-credentials" in child.stdout()  # probed in --help, passed to it
    # What BeeDeck needs still works: its own client (no Origin: it is no browser) and the built-in web UI,
    # whose requests come from the server's own origin.
    status, _headers, body = _answer(urllib.request.Request(url + "/v1/chat/completions", BODY, method="POST",
                                                            headers={"Content-Type": "application/json"}))
    assert status == 200 and '"choices"' in body
    own = what_a_page_gets(url, origin=url)["props"]
    assert own[0] == 200 and readable_by(own[1], url)
    done = beedeck.run("chat", "hi", "--url", url, "--max-tokens", "4", timeout=120)
    assert done.returncode == 0 and "tok/s" in done.stdout, done.stderr
    _stop(child)


def test_an_engine_without_a_cors_restriction_is_named_and_a_key_shuts_the_page_out(beedeck: Beedeck) -> None:
    engine = _engine(beedeck, "bee-a")  # BeeLlama v0.1.2: no --cors-origins, every origin reflected
    child, url = _serve(beedeck, engine)
    out = child.stdout()
    assert "--cors-origins" not in out.split("\n", 1)[0]  # the running line: nothing to pass
    assert "note: This engine has no --cors-origins option: any web page you visit can" in out, out
    assert "Set an API key" in out
    open_door = what_a_page_gets(url)
    assert readable_by(open_door["chat"][1], EVIL) and '"choices"' in open_door["chat"][2]  # what the note warns of
    _stop(child)
    child, url = _serve(beedeck, engine, BEEDECK_API_KEY=SECRET)
    assert "no --cors-origins" not in child.stdout()  # the key is the remedy: nothing to warn of
    for route, (status, headers, body) in what_a_page_gets(url).items():
        if route == "preflight":
            continue  # the engine answers every preflight; the request after it meets the key
        assert status == 401 and "choices" not in body and "model_path" not in body, (route, status, body)
        assert readable_by(headers, EVIL)  # still reflected, but all the page can read is "Invalid API Key"
    done = beedeck.run("chat", "hi", "--url", url, "--max-tokens", "4", timeout=120, BEEDECK_API_KEY=SECRET)
    assert done.returncode == 0 and "tok/s" in done.stdout, done.stderr
    _stop(child)
