"""A synchronous stand-in for ``run_in_background``: views under test finish their jobs at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def run_inline(fn: Callable[[], Any], ok: Callable[[Any], None], err: Callable[[BaseException], None]) -> None:
    try:
        result = fn()
    except Exception as exc:
        err(exc)
        return
    ok(result)
