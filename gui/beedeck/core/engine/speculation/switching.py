"""Does this server honour a per-request "no drafts"? Measured, remembered per engine build.

BeeLlama 0.1-0.3 reads ``"speculative.n_max": 0`` per request, so one DFlash server can answer a
baseline reply without a restart. BeeLlama 0.4 and mainline parse those fields inside ``#if 0``: a
request that asks for no drafts still gets them (measured on v0.4.3: 36 of 40 tokens drafted). The
generation name is no proof either way, so BeeDeck asks the server: one short greedy reply as it is,
one asking for no drafts. The second must come back with ``draft_n`` 0 while the first drafted; if
the first drafted nothing the test says nothing (None) and BeeDeck restarts instead, which is always
right. Verdicts are remembered per build (realpath, size, mtime of the binary) and dropped when a
reply contradicts them.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps

NO_DRAFTS: dict[str, Any] = {"speculative.n_max": 0, "speculative.n_min": 0}
CHECK_PROMPT = "Count from 1 to 60, separated by commas, and nothing else."
CHECK_TOKENS = 48


class ChatClient(Protocol):
    def chat(self, messages: list[dict[str, Any]], **kw: Any) -> Any: ...


@dataclass(frozen=True)
class PerRequestVerdict:
    """``honoured``: True / False, or None when the server drafted nothing even when allowed to."""

    honoured: bool | None
    drafted_normally: int
    drafted_when_asked_not_to: int
    checked_at: float

    def describe(self) -> str:
        if self.honoured is None:
            return ("the check was inconclusive (the server drafted nothing on the test reply), so Baseline "
                    "restarts the server without the draft")
        if self.honoured:
            return (f"this engine honours a per-request 'no drafts' (the test reply drafted "
                    f"{self.drafted_normally} tokens, the one asking for none drafted 0)")
        return (f"this engine ignores a per-request 'no drafts' (the reply asking for none still drafted "
                f"{self.drafted_when_asked_not_to} tokens), so Baseline restarts the server without the draft")


def _draft_n(result: Any) -> int:
    timings = getattr(result, "timings", None)
    return int(getattr(timings, "draft_n", 0) or 0)


def check_per_request(client: ChatClient, max_tokens: int = CHECK_TOKENS) -> PerRequestVerdict:
    """Ask a server started WITH a draft whether it honours ``speculative.n_max: 0`` (two short replies)."""
    messages = [{"role": "user", "content": CHECK_PROMPT}]
    common: dict[str, Any] = {"max_tokens": max_tokens, "temperature": 0.0, "seed": 1}
    normal = _draft_n(client.chat(messages, extra={"cache_prompt": False}, **common))
    asked = _draft_n(client.chat(messages, extra={"cache_prompt": False, **NO_DRAFTS}, **common))
    honoured = None if normal == 0 else asked == 0
    return PerRequestVerdict(honoured, normal, asked, time.time())


def _build_key(caps: EngineCaps) -> str | None:
    try:
        real = os.path.realpath(caps.path)
        st = os.stat(real)
    except OSError:
        return None
    return hashlib.sha256(f"{real}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:24]


class PerRequestMemory:
    """Verdicts per engine build, in ``cache_dir()/per-request.json`` (a bad file counts as empty)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.cache_dir() / "per-request.json"

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def get(self, caps: EngineCaps | None) -> bool | None:
        key = _build_key(caps) if caps is not None else None
        entry = self._load().get(key) if key else None
        value = entry.get("honoured") if isinstance(entry, dict) else None
        return value if isinstance(value, bool) else None

    def remember(self, caps: EngineCaps, verdict: PerRequestVerdict) -> None:
        key = _build_key(caps)
        if key is None or verdict.honoured is None:
            return  # an inconclusive check is not worth keeping: check again next time
        data = self._load()
        data[key] = {**asdict(verdict), "engine": caps.path, "generation": caps.generation.value}
        try:
            paths.atomic_write_text(self.path, json.dumps(data, indent=1))
        except OSError:
            pass  # a read-only cache folder only costs a new check next time

    def contradicted(self, caps: EngineCaps, drafted: int) -> None:
        """A reply that asked for no drafts drafted ``drafted`` tokens: this build does not honour it."""
        self.remember(caps, PerRequestVerdict(False, drafted, drafted, time.time()))
