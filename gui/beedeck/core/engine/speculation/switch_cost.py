"""How long a restart takes, learnt from the starts this machine made: the toggle says it in advance
("about 5 s") and its progress bar follows it.

A start's cost is keyed by what decides it: the engine binary and the model files (with their sizes:
a new download of the same name is another file) and whether it was a first start (the file read
from disk) or a switch (the file in the page cache, core/engine/speculation/restart.py). The estimate is the
median of the last few starts of that key; nothing is guessed for a key never started.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths

KEEP = 5  # starts remembered per key


def _size(path: str | None) -> int:
    try:
        return os.stat(path).st_size if path else 0
    except OSError:
        return -1


@dataclass(frozen=True)
class StartKey:
    engine: str
    target: str
    draft: str | None
    switch: bool  # a restart right after a start of the same target (page cache warm)

    def text(self) -> str:
        return json.dumps([self.engine, self.target, _size(self.target), self.draft, _size(self.draft), self.switch])


class SwitchCosts:
    """Seconds per start, remembered in a small JSON file (a damaged one is simply started over)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.cache_dir() / "start-times.json"
        self._lock = threading.Lock()
        self._data: dict[str, list[float]] | None = None

    def _load(self) -> dict[str, list[float]]:
        if self._data is None:
            try:
                raw = json.loads(self.path.read_text(encoding="utf-8"))
                self._data = {str(k): [float(x) for x in v][-KEEP:] for k, v in raw.items() if isinstance(v, list)}
            except (OSError, ValueError, TypeError, AttributeError):
                self._data = {}
        return self._data

    def record(self, key: StartKey, seconds: float) -> None:
        if not seconds > 0:
            return
        with self._lock:
            data = self._load()
            data.setdefault(key.text(), []).append(round(float(seconds), 3))
            data[key.text()] = data[key.text()][-KEEP:]
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                paths.atomic_write_text(self.path, json.dumps(data))
            except OSError:
                pass  # a read-only cache only means no estimate next time

    def expected(self, key: StartKey) -> float | None:
        """The median of this key's last starts, else None (never started: nothing to promise)."""
        with self._lock:
            seen = self._load().get(key.text())
        return statistics.median(seen) if seen else None


def say_expected(seconds: float | None) -> str:
    """ "about 5 s" / "about 1 min 10 s" / "" (unknown)."""
    if seconds is None:
        return ""
    if seconds < 60:
        return f"about {max(1, round(seconds))} s"
    return f"about {int(seconds // 60)} min {round(seconds % 60)} s"
