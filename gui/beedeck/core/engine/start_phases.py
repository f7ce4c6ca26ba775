"""Where a server start's seconds go, from the engine's own log timestamps (``--log-timestamps``, which
build_argv always passes): the fit pass, the model's header and mapping, the weights copied to the device, the
context (KV cache, graph reserve), the warm-up, the draft's load, the slots; and, with the arrival times of the
lines on BeeDeck's clock, what comes before the engine's first line (the process start) and after it listens
(BeeDeck's health poll). A mode switch's restart is measured with it (issue 36: the toggle's seconds, the
restart cut to what the hardware needs): ``benchmarks/restart_phases.py`` here, the GPU harness on a 24 GB card.

Mainline and BeeLlama >= 0.4 print the finer marks (``load_tensors``, ``llama_context: constructing``) only at
``-lv 4``; at the default verbosity the model's load is one phase ("load") and the warm-up starts at the
thread-pool's line. A mark that is not in the log leaves its phase out; nothing is guessed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# (the phase a line starts, what the line holds), in the order a start prints them
MARKS: tuple[tuple[str, str], ...] = (
    ("load", "load_model: loading model"),
    ("fit pass", "fitting params to device memory"),
    ("header and mapping", "llama_model_loader: loaded meta data"),
    ("weights to the device", "load_tensors: loading model tensors"),
    ("context (KV cache, graph reserve)", "llama_context: constructing"),
    ("warm-up", "threadpool init"),
    ("warm-up", "warming up the model"),
    ("draft load", "loading draft model"),
    ("slots", "initializing, n_slots"),
    ("listening", "listening on"),
)
_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")


def engine_seconds(line: str) -> float | None:
    """The engine's own timestamp of a log line ("0.02.704.291 I ..." is 2.704291 s after its log began)."""
    m = _STAMP.match(line)
    if m is None:
        return None
    minutes, seconds, ms, us = (int(g) for g in m.groups())
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


@dataclass(frozen=True)
class StartPhases:
    """A start's phases in order (name, seconds) on the engine's clock, ``listening_s`` when it listened; with
    BeeDeck's clock, ``before_log_s`` (spawn to the first line: exec, libraries, the backends' init) and
    ``after_listening_s`` (the line to ready: the health poll)."""

    phases: tuple[tuple[str, float], ...]
    listening_s: float | None
    before_log_s: float | None = None
    after_listening_s: float | None = None

    def seconds(self, name: str) -> float:
        return sum(s for n, s in self.phases if n == name)

    def as_dict(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {"before the first log line": self.before_log_s}
        for name, s in self.phases:
            out[name] = round((out.get(name) or 0.0) + s, 3)
        out["listening to ready"] = self.after_listening_s
        return {k: (round(v, 3) if v is not None else None) for k, v in out.items()}

    def text(self) -> str:
        """"load 2.50 s, draft load 0.45 s, slots 0.01 s" (phases under 5 ms left out)."""
        return ", ".join(f"{n} {s:.2f} s" for n, s in self.as_dict().items() if s is not None and s >= 0.005)


def start_phases(lines: Sequence[str], arrivals: Sequence[float] | None = None, spawned: float | None = None,
                 ready: float | None = None) -> StartPhases:
    """The phases of one start from its log ``lines``; ``arrivals`` (each line's arrival on BeeDeck's monotonic
    clock), ``spawned`` and ``ready`` (the same clock) add what the engine's clock cannot see."""
    marks: dict[str, float] = {}
    first_stamp: float | None = None
    first_arrival: float | None = None
    listening_arrival: float | None = None
    for i, line in enumerate(lines):
        t = engine_seconds(line)
        if t is None:
            continue
        if first_stamp is None:
            first_stamp = t
            first_arrival = arrivals[i] if arrivals is not None else None
        for name, text in MARKS:
            if text in line and name not in marks:  # first occurrences: the target's, not the draft's own load
                marks[name] = t
                if name == "listening" and arrivals is not None:
                    listening_arrival = arrivals[i]
        if "listening" in marks:
            break
    ordered = sorted(marks.items(), key=lambda kv: kv[1])
    phases = tuple((name, nxt - t) for (name, t), (_, nxt) in zip(ordered, ordered[1:], strict=False))
    before = first_arrival - spawned - (first_stamp or 0.0) if first_arrival is not None and spawned is not None else None
    after = ready - listening_arrival if ready is not None and listening_arrival is not None else None
    return StartPhases(phases, marks.get("listening"), before, after)
