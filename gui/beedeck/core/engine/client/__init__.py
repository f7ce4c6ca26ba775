"""The llama-server HTTP client: :class:`LlamaClient` (streaming chat with cancel and timings, the
status routes) in ``llama``, what the server's answers become in ``answers`` (the client's errors,
each with what to do, the text check every prompt passes, a reply's timings and result), and the checks
every number a server sends passes before anything uses it in ``numbers``. Outside code
imports from this package; the modules inside import each other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.engine.client.answers import (
    ChatDelta,
    ChatResult,
    ClientError,
    HTTPStatusError,
    InvalidText,
    PromptProgress,
    ReplyOverrun,
    ServerGone,
    SlotFile,
    Stalled,
    StreamTruncated,
    Timings,
    check_text,
)
from beedeck.core.engine.client.llama import (
    STALL_S,
    ChatStream,
    LlamaClient,
    parse_prometheus,
    reply_deadline,
)
from beedeck.core.engine.client.numbers import (
    MAX_COUNT,
    MAX_MS,
    MAX_RATE,
    ImpossibleNumber,
    checked_usage,
    count,
    figure,
)

__all__ = [
    "MAX_COUNT",
    "MAX_MS",
    "MAX_RATE",
    "STALL_S",
    "ChatDelta",
    "ChatResult",
    "ChatStream",
    "ClientError",
    "HTTPStatusError",
    "ImpossibleNumber",
    "InvalidText",
    "PromptProgress",
    "LlamaClient",
    "ReplyOverrun",
    "ServerGone",
    "SlotFile",
    "Stalled",
    "StreamTruncated",
    "Timings",
    "check_text",
    "checked_usage",
    "count",
    "figure",
    "parse_prometheus",
    "reply_deadline",
]
