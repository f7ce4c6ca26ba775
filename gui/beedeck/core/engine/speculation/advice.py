"""Workload-aware advice: which speculation mode runs fastest on this setup for this kind of prompt.

The speculation guard (:mod:`beedeck.core.engine.speculation.spec_guard`) watches one conversation; this module
remembers across runs. It learns from measured figures only (auto-tune points and benchmark replies,
fed through :meth:`WorkloadAdvice.learn`), per *setup* (engine build + target + draft file, see
:func:`setup_key`) and per prompt *kind* (:func:`classify`: code, prose or structured output), and
answers :meth:`WorkloadAdvice.best_mode` only on enough evidence:

- every mode compared needs at least ``min_samples`` figures for that setup and kind;
- at least two modes must have them (one mode alone is not a comparison);
- the winner's median must beat the runner-up's by ``margin`` (3 %), else it is a tie: no advice.

Figures are kept per (setup, kind, mode), the newest ``window`` only, in ``advice.json`` in the data
folder, written atomically. A file that cannot be read is kept aside (``advice.json.corrupt-<time>``)
and :attr:`WorkloadAdvice.problem` says so; learning starts again from nothing.

Mode keys are :data:`beedeck.core.engine.speculation.modes.MODE_KEYS`. Qt-free.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.modes import MODE_KEYS, engine_label, mode_label

log = logging.getLogger(__name__)

CODE, PROSE, STRUCTURED = "code", "prose", "structured"
KINDS = (CODE, PROSE, STRUCTURED)
SCHEMA_VERSION = 1
FILE_NAME = "advice.json"
MIN_SAMPLES = 3
MARGIN = 0.03
WINDOW = 30

_CODE_HINTS = re.compile(
    r"```|\b(def|class|import|return|function|const|let|var|public|static|void|struct|fn|impl|SELECT|"
    r"python|javascript|typescript|rust|golang|java|c\+\+|sql|bash|regex|html|css|"
    r"code|function|method|refactor|bug|compile|script|unit tests?|module)\b"
    r"|[{};]\s*$|=>|::|\w+\(\)",
    re.IGNORECASE | re.MULTILINE,
)
# Asking for data in a fixed shape: a data format counts twice, a word about shaped data once.
_FORMAT_HINTS = re.compile(r"\b(json|jsonl|yaml|yml|toml|csv|tsv|xml|openapi|markdown table)\b", re.IGNORECASE)
_SHAPE_HINTS = re.compile(r"\b(schema|table|records?|key[- ]value pairs?|fields?|columns?|rows?)\b", re.IGNORECASE)


def classify(text: str) -> str:
    """The kind of a prompt: "structured" (asks for or is data in a fixed format), "code" or "prose".

    A cheap heuristic, not a model. Text that parses as a JSON object or array is structured; so is a
    prompt whose data-shape score (a format such as JSON, YAML or CSV counts 2, a word such as
    "records" or "schema" 1) reaches 2 and beats its count of code hints ("a Python function that
    parses JSON" stays code). Otherwise two code hints (a code fence, a language or code word, braces
    at line ends, ``name()``) make it code, and one hint does in a short prompt; anything else is prose.
    """
    stripped = text.strip()
    if stripped[:1] in "[{" and stripped[-1:] in "]}":
        try:
            json.loads(stripped)
            return STRUCTURED
        except ValueError:
            pass
    hits = len(_CODE_HINTS.findall(text))
    shaped = 2 * len(_FORMAT_HINTS.findall(text)) + len(_SHAPE_HINTS.findall(text))
    if shaped >= 2 and shaped > hits:
        return STRUCTURED
    return CODE if hits >= 2 or (hits == 1 and len(text) < 400) else PROSE


def setup_key(caps: EngineCaps, settings: LaunchSettings) -> str:
    """The setup the figures belong to: the engine build, the target file and the draft file (or "-")."""
    target = Path(settings.target).name if settings.target else "-"
    draft = Path(settings.draft).name if settings.draft else "-"
    return f"{engine_label(caps)} | {target} | {draft}"


@dataclass(frozen=True)
class ModeFigure:
    mode: str
    median: float
    n: int


@dataclass(frozen=True)
class Verdict:
    """What the advice knows for one setup and kind: the modes with their medians, best first, and the
    mode it recommends (None, with ``why``, when the evidence is too thin or the top two tie)."""

    setup: str
    kind: str
    figures: tuple[ModeFigure, ...]
    best: str | None
    why: str


class AdviceError(RuntimeError):
    """Bad input to the advice (an unknown mode or kind); the message names the accepted ones."""


class WorkloadAdvice:
    """Learnt figures per setup, prompt kind and mode; see the module docstring for the rules."""

    def __init__(self, path: Path | None = None, *, min_samples: int = MIN_SAMPLES, margin: float = MARGIN,
                 window: int = WINDOW) -> None:
        if min_samples < 1 or window < min_samples or margin < 0:
            raise ValueError("need 1 <= min_samples <= window and margin >= 0")
        self.path = path or paths.data_dir() / FILE_NAME
        self.min_samples, self.margin, self.window = min_samples, margin, window
        self.problem = ""  # a sentence for the user when the file had to be kept aside
        self._lock = threading.Lock()
        self._read_only = False  # set when the file belongs to a newer BeeDeck
        self._data: dict[str, dict[str, dict[str, list[float]]]] = self._load()

    # ---- persistence ----

    def _load(self) -> dict[str, dict[str, dict[str, list[float]]]]:
        if not self.path.exists():
            return {}
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return _validated(raw)
        except _NewerFile as exc:  # a downgrade: the newer BeeDeck's advice stays as it is, unwritten
            self._read_only = True
            self.problem = (f"BeeDeck's learnt speed advice was written by a newer BeeDeck ({exc}): it is left as it "
                            "is, and this session neither uses nor changes it.")
            log.warning("advice: %s", self.problem)
            return {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            try:
                aside = paths.keep_aside(self.path)
            except OSError as move_exc:
                self.problem = (f"BeeDeck's learnt speed advice ({self.path}) could not be read ({exc}) nor moved "
                                f"aside ({move_exc}): it is ignored until the file is removed.")
            else:
                self.problem = (f"BeeDeck's learnt speed advice could not be read ({exc}): it was kept as "
                                f"{aside.name} and learning starts again from the next tune or benchmark.")
            log.warning("advice: %s", self.problem)
            return {}

    def _save(self) -> None:
        if self._read_only:
            return
        doc = {"schema": SCHEMA_VERSION, "kind": "beedeck-advice", "updated": time.time(), "setups": self._data}
        paths.atomic_write_text(self.path, json.dumps(doc, indent=1, sort_keys=True) + "\n")

    # ---- learning ----

    def record(self, setup_key: str, kind: str, mode: str, tokens_per_s: float) -> None:
        """Add one measured generation speed (tokens/s) of ``mode`` on ``setup_key`` for ``kind``."""
        self.record_many(setup_key, [(kind, mode, tokens_per_s)])

    def record_many(self, setup_key: str, figures: Iterable[tuple[str, str, float]]) -> int:
        """Add ``(kind, mode, tokens/s)`` figures in one write; returns how many were kept (speed > 0)."""
        added = 0
        with self._lock:
            setup = self._data.setdefault(setup_key, {})
            for kind, mode, tps in figures:
                _check(kind, mode)
                if not tps > 0:
                    continue
                values = setup.setdefault(kind, {}).setdefault(mode, [])
                values.append(round(float(tps), 3))
                del values[:-self.window]
                added += 1
            if added:
                self._save()
            elif not setup:
                del self._data[setup_key]
        return added

    def learn(self, setup_key: str, samples: Iterable[tuple[str, str, float]]) -> int:
        """Learn from measured replies ``(mode, prompt text, tokens/s)``: each prompt is classified here
        (the shape :func:`beedeck.core.bench.tune.advice_samples` and the benchmark's give)."""
        return self.record_many(setup_key, [(classify(text), mode, tps) for mode, text, tps in samples
                                            if mode in MODE_KEYS])

    # ---- answering ----

    def verdict(self, setup_key: str, kind: str) -> Verdict:
        _check(kind, None)
        with self._lock:
            modes = {m: list(v) for m, v in self._data.get(setup_key, {}).get(kind, {}).items()}
        figs = sorted((ModeFigure(m, statistics.median(v), len(v)) for m, v in modes.items() if v),
                      key=lambda f: -f.median)
        enough = [f for f in figs if f.n >= self.min_samples]
        if len(enough) < 2:
            why = (f"too little evidence: a verdict needs {self.min_samples} figures of at least two modes for "
                   f"{kind} prompts on this setup (have {', '.join(f'{mode_label(f.mode)} {f.n}' for f in figs) or 'none'}); "
                   "run beedeck tune or a benchmark with these prompts")
            return Verdict(setup_key, kind, tuple(figs), None, why)
        top, second = enough[0], enough[1]
        if top.median < second.median * (1 + self.margin):
            why = (f"{mode_label(top.mode)} ({top.median:.1f} tok/s) and {mode_label(second.mode)} ({second.median:.1f} tok/s) are within "
                   f"{100 * self.margin:.0f} % of each other: no mode is clearly faster")
            return Verdict(setup_key, kind, tuple(figs), None, why)
        why = (f"{mode_label(top.mode)} {top.median:.1f} tok/s over {mode_label(second.mode)} {second.median:.1f} tok/s "
               f"({top.median / second.median:.2f}x; medians of {top.n} and {second.n} figures)")
        return Verdict(setup_key, kind, tuple(figs), top.mode, why)

    def best_mode(self, setup_key: str, kind: str) -> str | None:
        """The fastest mode for ``kind`` on this setup, or None without enough evidence or a clear winner."""
        return self.verdict(setup_key, kind).best

    def setups(self) -> list[str]:
        with self._lock:
            return sorted(self._data)

    def kinds(self, setup_key: str) -> list[str]:
        with self._lock:
            return [k for k in KINDS if k in self._data.get(setup_key, {})]

    def forget(self, setup_key: str | None = None) -> None:
        """Drop what was learnt for one setup (all setups with None)."""
        with self._lock:
            if setup_key is None:
                self._data.clear()
            else:
                self._data.pop(setup_key, None)
            self._save()


def _check(kind: str, mode: str | None) -> None:
    if kind not in KINDS:
        raise AdviceError(f"Unknown prompt kind {kind!r}: use one of {', '.join(KINDS)}.")
    if mode is not None and mode not in MODE_KEYS:
        raise AdviceError(f"Unknown speculation mode {mode!r}: use one of {', '.join(MODE_KEYS)}.")


class _NewerFile(ValueError):
    """The advice file was written by a newer BeeDeck."""


def _validated(raw: Any) -> dict[str, dict[str, dict[str, list[float]]]]:
    """The setups of a parsed advice file; ValueError naming what is wrong."""
    if not isinstance(raw, dict) or raw.get("kind") != "beedeck-advice":
        raise ValueError("not a BeeDeck advice file")
    schema = raw.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA_VERSION:
        raise _NewerFile(f"schema {schema}, this BeeDeck reads {SCHEMA_VERSION}")
    if schema != SCHEMA_VERSION:
        raise ValueError(f"schema {schema!r}, this BeeDeck reads {SCHEMA_VERSION}")
    setups = raw.get("setups")
    if not isinstance(setups, dict):
        raise ValueError("'setups' is not an object")
    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for key, kinds in setups.items():
        if not isinstance(kinds, dict):
            raise ValueError(f"setup {key!r} is not an object")
        for kind, modes in kinds.items():
            if kind not in KINDS or not isinstance(modes, dict):
                raise ValueError(f"setup {key!r} has an unknown kind {kind!r}")
            for mode, values in modes.items():
                if mode not in MODE_KEYS or not isinstance(values, list) or not all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
                    raise ValueError(f"setup {key!r}, {kind}: bad figures for {mode!r}")
                out.setdefault(key, {}).setdefault(kind, {})[mode] = [float(v) for v in values]
    return out


def load_advice(path: Path | None = None) -> WorkloadAdvice:
    """The advice from the data folder (or ``path``); check :attr:`WorkloadAdvice.problem` after."""
    return WorkloadAdvice(path)
