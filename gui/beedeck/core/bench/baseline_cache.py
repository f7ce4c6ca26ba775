"""The baseline, measured once and kept (issue 36): every speed-up BeeDeck shows is against a server with no
draft loaded (a "draft loaded, not drafting" server is no baseline: an idle drafter still runs on every batch),
and on a 24 GB card measuring it costs a restart and a full benchmark pass each time. So the A/B keeps it.

A kept baseline is keyed by what decides its speed: the GPUs, the engine build (its file as it is), the target
file (its size and time: a new download is another file), the context and KV types, every other launch setting
but the speculation's (``advice.settings_digest``), and what the comparison rule needs alike on both sides
(core/engine/speculation/comparison.py): the same prompts with their budgets, temperature, seed, request
fields, repetitions and warm-ups. Any of them changes, the key changes, and the baseline is measured again;
``fresh`` measures it again anyway. The kept figures say when they were measured (``ModeRun.measured_at``), and
the report and the speed dock say so, with their age.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.bench.results import ModeRun, Sample, keyed, unkeyed
from beedeck.core.bench.suites import BenchSuite
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.advice import settings_digest

SCHEMA = 1
KEEP = 64  # setups kept; the oldest go first


def _file(path: str | None) -> str:
    """A file as it is now: its path, size and modification time (another build or download is another file)."""
    if not path:
        return "-"
    try:
        st = os.stat(path)
    except OSError:
        return f"{path} (missing)"
    return f"{path} {st.st_size} {st.st_mtime_ns}"


def _suite_digest(suite: BenchSuite, reps: int, warmup: int) -> str:
    spec = {"prompts": [(p.id, p.messages(), suite.max_tokens_for(p)) for p in suite.prompts],
            "temperature": suite.temperature, "seed": suite.seed, "extra": suite.extra, "reps": reps, "warmup": warmup}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BaselineKey:
    """What a kept baseline's speed depends on (see the module)."""

    gpus: str
    engine: str
    target: str
    ctx: int
    kv: str
    setup: str
    suite: str

    def text(self) -> str:
        return json.dumps([getattr(self, f.name) for f in fields(self)])


def baseline_key(engine: str | Path, caps: EngineCaps, settings: LaunchSettings, suite: BenchSuite, reps: int,
                 warmup: int, gpus: Sequence[str]) -> BaselineKey:
    """The key of the baseline ``settings`` (the profile without speculation) measures with ``suite``."""
    build = f"{_file(str(engine))} {caps.version} {caps.release}"
    return BaselineKey(", ".join(gpus) or "no GPU", build, _file(settings.target), settings.ctx_size,
                       f"{settings.cache_type_k}/{settings.cache_type_v}", settings_digest(settings),
                       _suite_digest(suite, reps, warmup))


@dataclass(frozen=True)
class KeptBaseline:
    """A baseline measured earlier: how it was served (``run``, its ``measured_at`` set) and its replies."""

    run: ModeRun
    samples: list[Sample]

    @property
    def measured_at(self) -> float:
        return self.run.measured_at or 0.0


class BaselineCache:
    """Kept baselines in a small JSON file (a damaged or foreign one is started over, never trusted)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else paths.cache_dir() / "baselines.json"
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        kept = data.get("baselines") if isinstance(data, dict) and data.get("schema") == SCHEMA else None
        return kept if isinstance(kept, dict) else {}

    def get(self, key: BaselineKey) -> KeptBaseline | None:
        """The baseline kept for ``key``; None when none is, or what is kept cannot be read."""
        with self._lock:
            entry = self._load().get(key.text())
        if not isinstance(entry, dict):
            return None
        try:
            run = ModeRun(**unkeyed(entry["run"]))
            samples = [Sample(**unkeyed(s)) for s in entry["samples"]]
        except (TypeError, KeyError, ValueError):
            return None
        if run.measured_at is None or not samples:
            return None
        return KeptBaseline(run, samples)

    def put(self, key: BaselineKey, run: ModeRun, samples: Sequence[Sample], measured_at: float | None = None) -> None:
        """Keep a baseline just measured (its replies, how it was served); a cache that cannot be written only
        means it is measured again next time."""
        stamp = measured_at if measured_at is not None else time.time()
        entry = {"run": {**keyed(run), "measured_at": stamp}, "samples": [keyed(s) for s in samples]}
        with self._lock:
            kept = self._load()
            kept[key.text()] = entry
            newest = sorted(kept, key=lambda k: kept[k].get("run", {}).get("measured_at") or 0, reverse=True)[:KEEP]
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                paths.atomic_write_text(self.path, json.dumps({"schema": SCHEMA, "baselines": {k: kept[k] for k in newest}}))
            except OSError:
                pass
