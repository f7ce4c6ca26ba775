"""A llama-server BeeDeck did not start: what it is, and why it cannot be reached when it cannot.

:func:`inspect_server` reads ``/health``, then ``/props`` (the proof that it is llama.cpp, and the API
key check: ``/health`` needs no key, ``/props`` does on both engines), then what is there of
``/v1/models``, ``/slots`` and ``/metrics``. Every way it can fail is a :class:`RemoteError` with a
``kind`` and a message that names the remedy (docs/reference/engine-facts.md §3.1-3.6). The API key
is sent as ``Authorization: Bearer`` and never appears in a message, a repr or a log line.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    pass

# httpx2 is imported where a request is made, not with this module: the window imports this module
# at start, and httpx2 (with ssl) was about a sixth of the cold start (benchmarks/app_start.py).

from beedeck.core.connection import what_happened
from beedeck.core.engine.bounded import BodyTooLarge, Fetched, MiB, bounded_get
from beedeck.core.engine.client import parse_prometheus
from beedeck.core.printable import printable

CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 10.0  # the whole of one answer (connect, headers, body), not one read: see bounded.py
HEALTH_LIMIT = 64 * 1024  # {"status":"ok"} is 15 bytes
BODY_LIMIT = 16 * MiB  # /props with a long chat template, /slots of many slots

# RemoteError kinds: one per remedy.
BAD_URL = "bad-url"
REFUSED = "refused"  # nothing listens on that port
DNS = "dns"  # the host name does not resolve
UNREACHABLE = "unreachable"  # no route, TLS failure, reset
TIMEOUT = "timeout"
KEY_MISSING = "key-missing"
KEY_WRONG = "key-wrong"
NOT_LLAMA = "not-llama"
LOADING = "loading"
HTTP_ERROR = "http-error"
NO_RESTART = "no-restart"  # a restart was asked of a server BeeDeck did not start
IMPOSSIBLE = "impossible"  # it says of itself what cannot be true (a context of -5 tokens, -1 slots)

MAX_CONTEXT = 1 << 24  # tokens per slot: the launch settings' limit, past any model's trained context
MAX_SLOTS = 1 << 16
MAX_MODEL_BYTES = 1 << 50


class RemoteError(RuntimeError):
    """Why a server could not be used. ``kind`` is one of the module's constants; ``message`` says
    what happened and ``remedy`` what to do (the failure panel shows both)."""

    def __init__(self, kind: str, message: str, remedy: str) -> None:
        super().__init__(f"{message} {remedy}")
        self.kind = kind
        self.code = f"remote:{kind}"
        self.message = message
        self.remedy = remedy


def normalize_url(url: str) -> str:
    """``http(s)://host:port[/prefix]`` from what a user types: ``host:port``, a trailing ``/``, or the
    OpenAI base ``…/v1`` that editors use. Raises RemoteError(BAD_URL) for anything else."""
    text = url.strip()
    if not text:
        raise RemoteError(BAD_URL, "No server address was given.", "Enter one such as http://192.168.1.20:8080.")
    if any(ord(c) < 0x21 or 0x7F <= ord(c) <= 0x9F for c in text):
        raise RemoteError(BAD_URL, f"'{printable(url)}' contains a space or a control character.",
                          "Type the address again, e.g. http://192.168.1.20:8080.")
    if "://" not in text:
        text = "http://" + text
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:  # "http://[::1": Invalid IPv6 URL; "host:99999": port out of range
        what = "has an invalid port" if "port" in str(exc).lower() else f"is not a valid address ({exc})"
        remedy = ("Use a port from 1 to 65535." if "port" in str(exc).lower() else
                  "An IPv6 address goes in brackets with its port after them, e.g. http://[::1]:8080.")
        raise RemoteError(BAD_URL, f"'{printable(url)}' {what}.", remedy) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteError(BAD_URL, f"'{printable(url)}' is not an http(s) address.",
                          "Enter one such as http://192.168.1.20:8080 (llama-server's --host and --port).")
    if parts.username or parts.password:
        raise RemoteError(BAD_URL, "The address contains a user name or password.",
                          "Give the server's API key in the key field instead, not inside the URL.")
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class RemoteInfo:
    """What a running llama-server says it is."""

    url: str
    model: str  # the alias the server answers with (often the GGUF path)
    n_ctx: int | None  # context per slot
    n_ctx_train: int | None
    total_slots: int | None
    build_info: str  # "b<N>-<commit>" as /props says ("b0-unknown" for a source-archive build)
    engine: str  # "llama.cpp" or "BeeLlama", as far as the answers tell
    speculative: bool | None  # a slot can speculate (/slots); None where /slots is off
    spec_types: str  # what /props says the default speculation is ("none", "draft-dflash", ...)
    metrics: bool  # /metrics answers (started with --metrics)
    slots: bool  # /slots answers
    needs_key: bool  # /props refused a request without a key
    size_bytes: int | None = None
    seconds: float = 0.0  # how long the inspection took
    notes: tuple[str, ...] = field(default=())

    @property
    def model_name(self) -> str:
        return PurePosixPath(self.model).name or self.model

    @property
    def build_name(self) -> str:
        """:attr:`build_info` in a reader's words: "b11434" for "b11434-unknown" (a build whose commit is not
        known), "build unknown" for "b0-unknown" (a source archive built without its number: CMake found no git),
        "commit ba1fdce" for "b0-ba1fdce"; a build with both, or another form, as the server says it."""
        m = re.fullmatch(r"b(\d+)-(.+)", self.build_info)
        if m is None:
            return self.build_info
        number, commit = int(m.group(1)), m.group(2)
        known_commit = not commit.startswith("unknown")
        if number and known_commit:
            return self.build_info
        if number:
            return f"b{number}"
        return f"commit {commit}" if known_commit else "build unknown"

    def speculation(self) -> str:
        if self.speculative is None:
            return "unknown (the server has /slots off)"
        if not self.speculative:
            return "off"
        return self.spec_types if self.spec_types and self.spec_types != "none" else "on"

    def summary(self) -> str:
        """One line for the status bar: model, context, speculation, engine."""
        ctx = f"{self.n_ctx} tokens" if self.n_ctx else "?"
        return (f"{self.model_name} · context {ctx} · speculation {self.speculation()} · "
                f"{self.engine} {self.build_name}")

    def describe(self) -> list[str]:
        """Lines for ``beedeck connect``."""
        lines = [
            f"server:       {self.url}",
            f"engine:       {self.engine} ({self.build_name})",
            f"model:        {self.model}",
            f"context:      {self.n_ctx or '?'} tokens per slot" + (f" (trained {self.n_ctx_train})"
                                                                 if self.n_ctx_train else ""),
            f"slots:        {self.total_slots if self.total_slots is not None else '?'}",
            f"speculation:  {self.speculation()}",
            f"metrics:      {'yes' if self.metrics else 'no (start it with --metrics for the live gauge)'}",
            f"API key:      {'required' if self.needs_key else 'not required'}",
        ]
        return lines + [f"note:         {n}" for n in self.notes]


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _transport_error(url: str, exc: Exception, waited_s: float = CONNECT_TIMEOUT_S) -> RemoteError:
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    import ssl

    import httpx2

    host = urlsplit(url).hostname or url
    if isinstance(exc, httpx2.TimeoutException) or isinstance(cause, TimeoutError | socket.timeout):
        return RemoteError(TIMEOUT, f"{url} did not answer within {waited_s:g} s.",
                           "Check that the machine is on and that no firewall drops the port; over the internet, "
                           "use an SSH tunnel (ssh -L 8080:127.0.0.1:8080 host) and connect to http://127.0.0.1:8080.")
    if isinstance(cause, socket.gaierror):
        return RemoteError(DNS, f"The host name '{host}' could not be resolved.",
                           "Check the spelling, or use the machine's IP address.")
    if isinstance(cause, ConnectionRefusedError):
        return RemoteError(REFUSED, f"Nothing listens at {url} (connection refused).",
                           "Start llama-server there, check the port, and start it with --host 0.0.0.0 (or the "
                           "LAN address) if it runs on another machine: by default it listens on 127.0.0.1 only.")
    if isinstance(cause, ssl.SSLError):
        return RemoteError(UNREACHABLE, f"The secure connection to {url} failed ({cause}).",
                           "llama-server speaks plain http unless it was built with SSL: try http:// instead.")
    return RemoteError(UNREACHABLE, f"{url} could not be reached: {what_happened(exc, host)}.",
                       "Check the address and the network between the two machines.")


def _dict(value: Any) -> dict[str, Any]:
    """``value`` when the server sent an object there, else {} (a server's JSON types are its own)."""
    return value if isinstance(value, dict) else {}


def _error_type(resp: Fetched) -> tuple[str, str]:
    try:
        err = _dict(_dict(resp.json()).get("error"))
    except ValueError:
        return "", ""
    return printable(err.get("type", "")), printable(err.get("message", ""))


class _Session:
    def __init__(self, url: str, api_key: str | None, connect_timeout: float, read_timeout: float) -> None:

        self.url, self._waits = url, (connect_timeout, read_timeout)
        self._headers = _headers(api_key)

    def get(self, path: str, *, keyless: bool = False, limit: int = BODY_LIMIT) -> Fetched:
        import httpx2

        try:
            return bounded_get(self.url + path, headers={} if keyless else self._headers, limit=limit,
                               deadline_s=self._waits[1], connect_s=self._waits[0])
        except BodyTooLarge:
            raise _not_llama(self.url, f"{path} answered more than {limit // 1024:,} KB") from None
        except (httpx2.TransportError, OSError) as exc:
            waited = self._waits[1] if isinstance(exc, httpx2.ReadTimeout) else self._waits[0]
            raise _transport_error(self.url, exc, waited) from None

    def close(self) -> None:
        pass  # each request had a connection of its own (bounded_get)


def _not_llama(url: str, what: str) -> RemoteError:
    return RemoteError(NOT_LLAMA, f"{url} answers, but not as llama.cpp's llama-server ({what}).",
                       "Check the port: another program (a web server, Ollama, LM Studio) may be listening there. "
                       "BeeDeck connects to llama-server or BeeLlama's llama-server only.")


def _check_health(s: _Session) -> None:
    resp = s.get("/health", limit=HEALTH_LIMIT)
    if resp.status_code == 503:
        _, message = _error_type(resp)
        raise RemoteError(LOADING, f"The server at {s.url} is still loading its model ({message or 'HTTP 503'}).",
                          "Wait until it has loaded, then connect again.")
    if resp.status_code == 404:
        raise _not_llama(s.url, "it has no /health route")
    if resp.status_code in (401, 403):
        return  # a proxy in front that guards every route: /props below tells key from no key
    if resp.status_code != 200:
        raise _not_llama(s.url, f"/health answered HTTP {resp.status_code}")
    try:
        body = resp.json()
    except ValueError:
        raise _not_llama(s.url, "/health did not answer JSON") from None
    if not isinstance(body, dict) or body.get("status") != "ok":
        raise _not_llama(s.url, f"/health answered {printable(resp.text, 80)!r}")


def _check_auth(s: _Session, resp: Fetched, api_key: str | None) -> None:
    if resp.status_code not in (401, 403):
        return
    err_type, _ = _error_type(resp)
    if resp.status_code == 401 and err_type != "authentication_error" and "llama.cpp" not in resp.headers.get("server", ""):
        raise _not_llama(s.url, "it asks for a login that is not llama-server's API key")
    if api_key:
        raise RemoteError(KEY_WRONG, f"The server at {s.url} refused the API key (HTTP {resp.status_code}).",
                          "Enter the key it was started with (--api-key or --api-key-file); a key is "
                          "case-sensitive and has no spaces.")
    raise RemoteError(KEY_MISSING, f"The server at {s.url} needs an API key (HTTP {resp.status_code}).",
                      "Enter the key it was started with (--api-key); BeeDeck keeps it in the system keyring.")


def _props(s: _Session, api_key: str | None) -> dict[str, Any]:
    resp = s.get("/props")
    _check_auth(s, resp, api_key)
    if resp.status_code == 503:
        raise RemoteError(LOADING, f"The server at {s.url} is still loading its model.",
                          "Wait until it has loaded, then connect again.")
    if resp.status_code == 404:
        raise _not_llama(s.url, "it has no /props route")
    if resp.status_code != 200:
        raise RemoteError(HTTP_ERROR, f"The server at {s.url} answered /props with HTTP {resp.status_code}.",
                          "See the server's own log.")
    try:
        props = resp.json()
    except ValueError:
        raise _not_llama(s.url, "/props did not answer JSON") from None
    if not isinstance(props, dict) or not isinstance(props.get("default_generation_settings"), dict):
        raise _not_llama(s.url, "/props lacks default_generation_settings")
    return props


def _optional_json(s: _Session, path: str) -> Any:
    resp = s.get(path)
    if resp.status_code != 200:
        return None
    try:
        return resp.json()
    except ValueError:
        return None


def _engine_name(props: dict[str, Any], slots: Any) -> str:
    params = _dict(_dict(props.get("default_generation_settings")).get("params"))
    bee_keys = ("speculative.dm_controller", "speculative.branch_budget", "speculative.draft_topk")
    slot_params = _dict(slots[0].get("params")) if isinstance(slots, list) and slots and isinstance(slots[0], dict) \
        else {}
    if any(k in params or k in slot_params for k in bee_keys) or "webui" in props:
        return "BeeLlama"
    return "llama.cpp"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _impossible_facts(props: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """What the server says of itself that cannot be true, in the user's words ("context -5 tokens per slot").
    A context of 0 is "not said" (the model's own); a whole number is checked, anything else is ignored
    (the reader below ignores it too)."""
    dgs = _dict(props.get("default_generation_settings"))
    out = []
    for what, holder, key, low, high, unit in (
        ("context", dgs, "n_ctx", 0, MAX_CONTEXT, " tokens per slot"),
        ("slots", props, "total_slots", 1, MAX_SLOTS, ""),
        ("trained context", meta, "n_ctx_train", 0, MAX_CONTEXT, " tokens"),
        ("model size", meta, "size", 0, MAX_MODEL_BYTES, " bytes"),
    ):
        value = _int(holder.get(key))
        if value is not None and not low <= value <= high:
            out.append(f"{what} {value:,}{unit}")
    return out


def _refuse_impossible(url: str, facts: list[str]) -> RemoteError:
    return RemoteError(IMPOSSIBLE, f"The server at {url} reports what cannot be true: {', '.join(facts)}.",
                       "It is broken, or not llama-server, or something between BeeDeck and it rewrites its "
                       "answers: BeeDeck neither uses nor saves it. Check what listens on that port (and any proxy "
                       "before it), then connect again.")


def inspect_server(url: str, api_key: str | None = None, *, connect_timeout: float = CONNECT_TIMEOUT_S,
                   read_timeout: float = READ_TIMEOUT_S) -> RemoteInfo:
    """What the llama-server at ``url`` is. Blocking (seconds at most): run it off the GUI thread.
    Raises :class:`RemoteError` with the kind of failure and its remedy."""
    t0 = time.monotonic()
    base = normalize_url(url)
    s = _Session(base, api_key, connect_timeout, read_timeout)
    try:
        _check_health(s)
        props = _props(s, api_key)
        needs_key = bool(api_key) and s.get("/props", keyless=True, limit=HEALTH_LIMIT).status_code in (401, 403)
        models = _optional_json(s, "/v1/models")
        slots = _optional_json(s, "/slots")
        metrics_resp = s.get("/metrics")
        metrics = metrics_resp.status_code == 200 and bool(parse_prometheus(metrics_resp.text))
    finally:
        s.close()
    # Every value below is the server's to get wrong: an object where one belongs, else nothing;
    # text made printable (it reaches the terminal and the status bar).
    dgs = _dict(props.get("default_generation_settings"))
    params = _dict(dgs.get("params"))
    meta: dict[str, Any] = {}
    model = printable(props.get("model_alias") or props.get("model_path") or "", 500)
    if isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
        first = _dict(models["data"][0])
        model = model or printable(first.get("id", ""), 500)
        meta = _dict(first.get("meta"))
    speculative = None
    if isinstance(slots, list) and slots:
        speculative = any(bool(x.get("speculative")) for x in slots if isinstance(x, dict))
    spec_types = printable(params.get("speculative.types") or params.get("speculative.type") or "")
    impossible = _impossible_facts(props, meta)
    if impossible:
        raise _refuse_impossible(base, impossible)
    notes = []
    if props.get("is_sleeping"):
        notes.append("the server is asleep (--sleep-idle-seconds): the first reply reloads the model")
    if not metrics:
        notes.append("no /metrics: the gauge uses each reply's own timings")
    return RemoteInfo(
        url=base, model=model, n_ctx=_int(dgs.get("n_ctx")) or _int(meta.get("n_ctx")),
        n_ctx_train=_int(meta.get("n_ctx_train")), total_slots=_int(props.get("total_slots")),
        build_info=printable(props.get("build_info", "") or "?"), engine=_engine_name(props, slots),
        speculative=speculative, spec_types=spec_types, metrics=metrics, slots=slots is not None,
        needs_key=needs_key, size_bytes=_int(meta.get("size")), seconds=time.monotonic() - t0, notes=tuple(notes),
    )


def stored_api_key(url: str) -> str | None:
    """The API key a saved remote profile of ``url`` keeps in the keyring (None: none, or a bad URL)."""
    from beedeck.core import secrets

    try:
        return secrets.get_secret(secrets.remote_api_key_name(normalize_url(url)))
    except RemoteError:
        return None


def is_remote_engine(engine: str) -> bool:
    """Whether a profile's ``engine`` is a running server's URL rather than a binary to start."""
    return engine.startswith(("http://", "https://"))


HEALTH_INTERVAL_S = 0.5  # a server BeeDeck did not start: /health this often ...
HEALTH_TIMEOUT_S = 0.6  # ... each answer within this (or a few times the slowest healthy answer, if longer) ...
HEALTH_TIMEOUT_MAX_S = 2.0  # ... but never longer; a miss is confirmed by a second poll at once


def _deadline(healthy: list[float], floor: float) -> float:
    """How long one /health may take: ``floor``, or four times the slowest of the last healthy answers on a
    slow link (a far server over a new connection each poll), at most HEALTH_TIMEOUT_MAX_S."""
    return min(HEALTH_TIMEOUT_MAX_S, max(floor, 4 * max(healthy, default=0.0)))


def watch_health(url: str, stop: threading.Event, interval_s: float = HEALTH_INTERVAL_S, misses: int = 2,
                 api_key: str | None = None, timeout_s: float | None = None,
                 poke: threading.Event | None = None) -> RemoteError | None:
    """Poll ``/health`` until ``stop`` is set (None) or the server has not answered ``misses`` times in
    a row (the RemoteError of the last miss). A miss is checked again at once, so a dead server is noticed
    within one interval and ``misses`` answer deadlines (``timeout_s``, default HEALTH_TIMEOUT_S, longer on
    a slow link: :func:`_deadline`): about 0.5 s for a stopped one, 1.7 s for one that hangs. ``poke`` (set
    by a chat request that failed on this server) polls at once instead of waiting for the next interval.
    A 503 (a model reloading after sleep) is not a miss, nor is a 401/403 from a proxy that guards every
    route (the key goes along, as inspect_server sends it)."""
    import httpx2

    missed = 0
    healthy: list[float] = []  # the last few healthy answers' times
    floor = timeout_s if timeout_s is not None else HEALTH_TIMEOUT_S
    wake = poke or threading.Event()
    while True:
        if missed == 0:  # after a miss: again at once
            wake.wait(interval_s)
            wake.clear()
        if stop.is_set():
            return None
        deadline = _deadline(healthy, floor)
        t0 = time.monotonic()
        try:
            status = bounded_get(url + "/health", headers=_headers(api_key), limit=HEALTH_LIMIT,
                                 deadline_s=deadline).status_code
        except (httpx2.TransportError, OSError, BodyTooLarge) as exc:
            if stop.is_set():
                return None
            err = _transport_error(url, exc, deadline)
            missed += 1
            if missed >= misses:
                return RemoteError(err.kind, f"The server at {url} went away: {err.message}",
                                   "The conversation is kept. Start the server again where it runs, then Connect.")
            continue
        if status in (200, 401, 403, 503):
            missed, healthy = 0, [*healthy[-4:], time.monotonic() - t0]
            continue
        missed += 1
        if missed >= misses:
            return RemoteError(HTTP_ERROR, f"The server at {url} answers /health with HTTP {status}.",
                               "See the server's own log, then Connect again.")
