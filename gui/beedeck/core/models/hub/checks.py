"""What BeeDeck does not take from the Hub on trust: the time an answer takes, and a copy on disk
that has not shown the Hub's sha256 (hub/client.py builds every path from the Hub's answers through
``paths.safe_join``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.download import OfflineError


def api_timeout() -> float:
    """Seconds one Hub API answer may take between two reads: huggingface_hub's own HF_HUB_ETAG_TIMEOUT
    (default 10). The whole call gets three times that (:func:`within_deadline`)."""
    try:
        return max(0.1, float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or 10.0))
    except ValueError:
        return 10.0


def within_deadline(call: Callable[[], Any], what: str) -> Any:
    """``call()`` with an overall deadline. huggingface_hub's timeouts are per read: a Hub (or proxy)
    that sends its answer a byte at a time would keep the call going for ever. Past the deadline the
    call is left to end on its daemon thread (its own timeout ends it) and OfflineError is raised."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="hub-api", daemon=True).start()
    limit = 3 * api_timeout()
    if not done.wait(limit):
        raise OfflineError(f"The Hugging Face Hub did not answer {what} within {limit:g} s: check the network "
                           "connection or proxy (HF_ENDPOINT), then retry.")
    if "error" in box:
        raise box["error"]
    return box["value"]


def verified_copy(path: Path, sha256: str) -> bool:
    """Whether ``path`` has this sha256: hashed once, then remembered by size + mtime (in BeeDeck's cache
    folder, not the shared Hub cache), so a file corrupted in place, same size or not, is caught by the
    next check without every check re-reading gigabytes."""
    try:
        st = path.stat()
    except OSError:
        return False
    key = hashlib.sha256(str(path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    stamp = paths.cache_dir() / "verified" / f"{key}.json"
    mark = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256.lower()}
    with contextlib.suppress(OSError, ValueError):
        if json.loads(stamp.read_text(encoding="utf-8")) == mark:
            return True
    try:
        if paths.sha256_file(path) != sha256.lower():
            return False
    except OSError:
        return False
    with contextlib.suppress(OSError):  # a read-only cache only costs a hash next time
        paths.atomic_write_text(stamp, json.dumps(mark))
    return True
