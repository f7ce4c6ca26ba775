"""How long a restart takes, learnt from the starts this machine made: the toggle says it in advance
("about 5 s"), with whether the conversation comes along (:class:`SwitchForecast`), and its progress bar
follows it.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from beedeck.core import paths
from beedeck.core.engine.mode import Mode

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


@dataclass(frozen=True)
class SwitchForecast:
    """What a switch by restart costs here, said before the click (the toggle's tooltips): a start of the running
    target with its draft file or without, as measured (``restart_s``, None: never measured; ``beside``: which
    one is loaded beside the running server already, a switch to it loads nothing), whether the conversation's
    cache comes along per mode key (``keeps``: "" yes, else why not: core/serving/slot_carry.py) and what
    carrying it took last (``carry_s``), and the conversation on the server with this server's prefill rate
    (``tokens``, ``prefill_tps``: what a next reply without the cache reads again, and how fast)."""

    restart_s: Mapping[bool, float | None] = field(default_factory=dict)
    beside: bool | None = None
    keeps: Mapping[Mode, str] = field(default_factory=dict)
    carry_s: float = 0.0
    tokens: int = 0
    prefill_tps: float | None = None

    def line(self, key: Mode, with_draft: bool) -> str:
        """The words for a switch to mode ``key`` (whose server loads a draft file: ``with_draft``)."""
        if self.beside is not None and self.beside == with_draft:
            return "Switching loads nothing: that mode's server is loaded beside this one."
        restart = self.restart_s.get(with_draft)
        keeps = self.keeps.get(key)
        if restart is None:
            head = "Switching restarts the server (its time is measured at the first switch)"
        else:
            head = f"Switching restarts the server: {say_expected(restart + (self.carry_s if keeps == '' else 0.0))} here"
        if not self.tokens:
            return head + "."
        reread = self.tokens / self.prefill_tps if self.prefill_tps else None
        if keeps == "":
            saves = f" ({say_expected(reread)})" if reread else ""
            return f"{head}; the conversation's cache comes along, which saves reading its {self.tokens:,} tokens again{saves}."
        cost = f", {say_expected(reread)} at {self.prefill_tps:,.0f} tokens/s" if reread and self.prefill_tps else ""
        why = f" ({keeps})" if keeps else ""
        return f"{head}; then the next reply reads the conversation again ({self.tokens:,} tokens{cost}){why}."
