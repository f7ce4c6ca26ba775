"""The llama-server HTTP client: :class:`LlamaClient` (streaming chat with cancel and timings, the
status routes) in ``llama``, and what the server's answers become in ``answers`` (the client's errors,
each with what to do, the text check every prompt passes, a reply's timings and result). Outside code
imports from this package; the modules inside import each other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.engine.client.answers import (
    ChatDelta,
    ChatResult,
    ClientError,
    HTTPStatusError,
    InvalidText,
    ServerGone,
    Stalled,
    StreamTruncated,
    Timings,
    check_text,
)
from beedeck.core.engine.client.llama import STALL_S, ChatStream, LlamaClient, parse_prometheus

__all__ = [
    "STALL_S",
    "ChatDelta",
    "ChatResult",
    "ChatStream",
    "ClientError",
    "HTTPStatusError",
    "InvalidText",
    "LlamaClient",
    "ServerGone",
    "Stalled",
    "StreamTruncated",
    "Timings",
    "check_text",
    "parse_prometheus",
]
