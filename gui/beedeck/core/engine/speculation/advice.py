"""Workload-aware advice: which speculation mode runs fastest on this setup for this kind of prompt.

The speculation guard (:mod:`beedeck.core.engine.speculation.spec_guard`) watches one conversation; this module
remembers across runs. It learns from measured figures only (auto-tune points and benchmark replies,
fed through :meth:`WorkloadAdvice.learn`), per *setup* (engine build + target + draft file + every other
setting apart from the speculation, see :func:`setup_key`), per prompt *kind* (:func:`classify`: code, prose
or structured output) and per prompt (each figure keeps a short hash of the prompt it answered), and answers
:meth:`WorkloadAdvice.best_mode` only by BeeDeck's one rule for ratios
(:mod:`beedeck.core.engine.speculation.comparison`):

- two modes are compared only on the prompts both answered, with ``min_runs`` runs of every such prompt;
- the winner's whole 95 % interval over every other mode must lie above ``1 + margin`` (3 %), else there is
  no advice, and the verdict says why (too few runs, different prompts, or within the noise).

Figures are kept per (setup, kind, mode, prompt), the newest ``window`` only, in ``advice.json`` in the data
folder, written atomically. Schema 1 files (figures without their prompts) are read as figures of no known
prompt: shown, never compared. A file that cannot be read is kept aside (``advice.json.corrupt-<time>``)
and :attr:`WorkloadAdvice.problem` says so; learning starts again from nothing.

Modes are :class:`beedeck.core.engine.mode.Mode`, stored as their values. Qt-free.
"""

from __future__ import annotations

import hashlib
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
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.comparison import MIN_RUNS, Comparison, Evidence, compare
from beedeck.core.engine.speculation.modes import engine_label

log = logging.getLogger(__name__)

CODE, PROSE, STRUCTURED = "code", "prose", "structured"
KINDS = (CODE, PROSE, STRUCTURED)
SCHEMA_VERSION = 2
FILE_NAME = "advice.json"
MIN_SAMPLES = MIN_RUNS  # runs of every compared prompt, per mode (the rule's minimum)
MARGIN = 0.03
WINDOW = 30  # newest figures kept per prompt and mode
UNKNOWN_PROMPT = ""  # a schema-1 figure: its prompt was not recorded, so it is never compared
# Settings that make up the speculation itself (and the server's address): they may differ between the
# modes a setup compares; every other setting must be the same (the rule's "apart from the mode").
_SPECULATION_FIELDS = ("target", "draft", "spec_mode", "spec_model_free_type", "draft_n_max", "draft_n_min",
                       "dflash_cross_ctx", "draft_ctx_size", "draft_n_gpu_layers", "draft_ubatch_size",
                       "draft_cache_type", "host", "port", "api_key", "metrics")
Figures = dict[str, dict[str, dict[Mode, dict[str, list[float]]]]]  # setup -> kind -> mode -> prompt -> tok/s

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
    """The setup the figures belong to: the engine build, the target file, the draft file (or "-") and a
    digest of every other setting apart from the speculation (threads, context, sampling...), so figures
    measured with other settings are never compared as if only the mode differed."""
    target = Path(settings.target).name if settings.target else "-"
    draft = Path(settings.draft).name if settings.draft else "-"
    return f"{engine_label(caps)} | {target} | {draft} | settings {settings_digest(settings)}"


def settings_digest(settings: LaunchSettings) -> str:
    """8 hex digits of the settings apart from the speculation (:data:`_SPECULATION_FIELDS`)."""
    rest = {k: v for k, v in settings.to_dict().items() if k not in _SPECULATION_FIELDS}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:8]


def prompt_key(text: str) -> str:
    """The key a prompt's figures are filed under: 12 hex digits of its text (the text is not stored)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class ModeFigure:
    mode: Mode
    median: float
    n: int


@dataclass(frozen=True)
class Verdict:
    """What the advice knows for one setup and kind: the modes with their medians, best first, and the
    mode it recommends (None, with ``why``, when the evidence is too thin or the top two tie)."""

    setup: str
    kind: str
    figures: tuple[ModeFigure, ...]
    best: Mode | None
    why: str


class AdviceError(RuntimeError):
    """Bad input to the advice (an unknown mode or kind); the message names the accepted ones."""


class WorkloadAdvice:
    """Learnt figures per setup, prompt kind, mode and prompt; see the module docstring for the rules."""

    def __init__(self, path: Path | None = None, *, min_samples: int = MIN_SAMPLES, margin: float = MARGIN,
                 window: int = WINDOW) -> None:
        if min_samples < 2 or window < min_samples or margin < 0:
            raise ValueError("need 2 <= min_samples <= window and margin >= 0 (an interval needs 2 runs at least)")
        self.path = path or paths.data_dir() / FILE_NAME
        self.min_samples, self.margin, self.window = min_samples, margin, window
        self.problem = ""  # a sentence for the user when the file had to be kept aside
        self._lock = threading.Lock()
        self._read_only = False  # set when the file belongs to a newer BeeDeck
        self._data: Figures = self._load()

    # ---- persistence ----

    def _load(self) -> Figures:
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

    def record(self, setup_key: str, kind: str, mode: Mode, tokens_per_s: float, prompt: str = UNKNOWN_PROMPT) -> None:
        """Add one measured generation speed (tokens/s) of ``mode`` on ``setup_key`` for ``kind``, answering
        the prompt filed under ``prompt`` (:func:`prompt_key`; "" for a prompt not known: never compared)."""
        self.record_many(setup_key, [(kind, mode, tokens_per_s, prompt)])

    def record_many(self, setup_key: str, figures: Iterable[tuple[str, Mode, float, str]]) -> int:
        """Add ``(kind, mode, tokens/s, prompt key)`` figures in one write; returns how many were kept (speed > 0)."""
        added = 0
        with self._lock:
            setup = self._data.setdefault(setup_key, {})
            for kind, mode, tps, prompt in figures:
                _check(kind)
                if not tps > 0:
                    continue
                values = setup.setdefault(kind, {}).setdefault(mode, {}).setdefault(prompt, [])
                values.append(round(float(tps), 3))
                del values[:-self.window]
                added += 1
            if added:
                self._save()
            elif not setup:
                del self._data[setup_key]
        return added

    def learn(self, setup_key: str, samples: Iterable[tuple[Mode, str, float]]) -> int:
        """Learn from measured replies ``(mode, prompt text, tokens/s)``: each prompt is classified and filed
        by :func:`prompt_key` here (the shape :func:`beedeck.core.bench.advice_feed` gives)."""
        return self.record_many(setup_key, [(classify(text), mode, tps, prompt_key(text)) for mode, text, tps in samples])

    # ---- answering ----

    def evidence(self, setup_key: str, kind: str, mode: Mode) -> Evidence:
        """``mode``'s figures for ``kind`` on this setup as the rule's evidence (prompts known only)."""
        with self._lock:
            by_prompt = self._data.get(setup_key, {}).get(kind, {}).get(mode, {})
            return Evidence({p: list(v) for p, v in by_prompt.items() if p != UNKNOWN_PROMPT and v})

    def comparison(self, setup_key: str, kind: str, mode: Mode, reference: Mode) -> Comparison:
        """``mode``'s speed over ``reference``'s for ``kind`` on this setup, by the rule."""
        _check(kind)
        return compare(self.evidence(setup_key, kind, reference), self.evidence(setup_key, kind, mode),
                       min_runs=self.min_samples)

    def verdict(self, setup_key: str, kind: str) -> Verdict:
        _check(kind)
        with self._lock:
            modes = {m: [x for v in by_prompt.values() for x in v]
                     for m, by_prompt in self._data.get(setup_key, {}).get(kind, {}).items()}
        figs = tuple(sorted((ModeFigure(m, statistics.median(v), len(v)) for m, v in modes.items() if v),
                            key=lambda f: -f.median))
        if len(figs) < 2:
            why = (f"too little evidence: a verdict compares two modes on the same {kind} prompts on this setup "
                   f"(have {', '.join(f'{f.mode.label} {f.n}' for f in figs) or 'none'}); run beedeck tune or a "
                   "benchmark with these prompts")
            return Verdict(setup_key, kind, figs, None, why)
        top = figs[0]
        against = [(f, self.comparison(setup_key, kind, top.mode, f.mode)) for f in figs[1:]]
        thin = next(((f, c) for f, c in against if not c.shown), None)
        if thin is not None:
            f, c = thin
            why = (f"too little like-for-like evidence: {top.mode.label} against {f.mode.label} on "
                   f"{kind} prompts: {c.why_not} (a verdict needs {self.min_samples} runs of the same prompts in both "
                   "modes); run beedeck tune or a benchmark with these prompts")
            return Verdict(setup_key, kind, figs, None, why)
        close = next(((f, c) for f, c in against if not c.above(1 + self.margin)), None)
        if close is not None:
            f, c = close
            why = (f"{top.mode.label} is not clearly faster than {f.mode.label}: {c.text()}, within the "
                   f"noise or {100 * self.margin:.0f} % of each other")
            return Verdict(setup_key, kind, figs, None, why)
        f, c = against[0]
        why = f"{top.mode.label} {top.median:.1f} tok/s over {f.mode.label} {f.median:.1f} tok/s ({c.text()})"
        return Verdict(setup_key, kind, figs, top.mode, why)

    def best_mode(self, setup_key: str, kind: str) -> Mode | None:
        """The fastest mode for ``kind`` on this setup, or None without like-for-like evidence of a clear winner."""
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


def _check(kind: str) -> None:
    if kind not in KINDS:
        raise AdviceError(f"Unknown prompt kind {kind!r}: use one of {', '.join(KINDS)}.")


class _NewerFile(ValueError):
    """The advice file was written by a newer BeeDeck."""


def _validated(raw: Any) -> Figures:
    """The setups of a parsed advice file (schema 1 read as figures of no known prompt); ValueError naming
    what is wrong."""
    if not isinstance(raw, dict) or raw.get("kind") != "beedeck-advice":
        raise ValueError("not a BeeDeck advice file")
    schema = raw.get("schema")
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > SCHEMA_VERSION:
        raise _NewerFile(f"schema {schema}, this BeeDeck reads {SCHEMA_VERSION}")
    if schema not in (1, SCHEMA_VERSION):
        raise ValueError(f"schema {schema!r}, this BeeDeck reads 1 and {SCHEMA_VERSION}")
    setups = raw.get("setups")
    if not isinstance(setups, dict):
        raise ValueError("'setups' is not an object")
    out: Figures = {}
    for key, kinds in setups.items():
        if not isinstance(kinds, dict):
            raise ValueError(f"setup {key!r} is not an object")
        for kind, modes in kinds.items():
            if kind not in KINDS or not isinstance(modes, dict):
                raise ValueError(f"setup {key!r} has an unknown kind {kind!r}")
            for word, values in modes.items():
                by_prompt = {UNKNOWN_PROMPT: values} if schema == 1 else values
                mode = Mode.parse(word)
                if mode is None or not isinstance(by_prompt, dict) or not all(
                        isinstance(p, str) and _figures_ok(v) for p, v in by_prompt.items()):
                    raise ValueError(f"setup {key!r}, {kind}: bad figures for {word!r}")
                out.setdefault(key, {}).setdefault(kind, {})[mode] = {p: [float(x) for x in v]
                                                                      for p, v in by_prompt.items()}
    return out


def _figures_ok(values: Any) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values)


def load_advice(path: Path | None = None) -> WorkloadAdvice:
    """The advice from the data folder (or ``path``); check :attr:`WorkloadAdvice.problem` after."""
    return WorkloadAdvice(path)
