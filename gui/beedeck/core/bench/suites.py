"""Benchmark suites: named lists of prompts plus the request settings every mode shares.

Built-in suites live in ``resources/suites`` (seed = the guide's three prompts); users can write
their own JSON file, validated here with a message that names the bad field and the fix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from beedeck.core import paths


class BenchError(ValueError):
    """The benchmark cannot run as asked; the message says why and what to do."""


class SuiteError(BenchError):
    """A suite file is not valid; the message names the file, the place and the fix."""


@dataclass(frozen=True)
class BenchPrompt:
    """One prompt of a suite; ``category`` (code, json, prose, ...) feeds the speculation guard."""

    id: str
    text: str
    category: str = "code"
    system: str | None = None
    max_tokens: int | None = None  # None: the suite's
    # Earlier turns ({"role": "user"|"assistant", "content": ...}) between the system prompt and
    # ``text``: a coding agent's conversation, whose prefix the previous request already sent.
    history: tuple[tuple[str, str], ...] = ()  # (role, content) pairs

    def messages(self) -> list[dict[str, str]]:
        out = [{"role": "system", "content": self.system}] if self.system else []
        return [*out, *({"role": role, "content": content} for role, content in self.history), {"role": "user", "content": self.text}]


@dataclass(frozen=True)
class BenchSuite:
    """A named list of prompts plus the request settings every mode shares."""

    name: str
    prompts: tuple[BenchPrompt, ...]
    max_tokens: int = 1200
    temperature: float = 0.7
    seed: int = 42
    extra: dict[str, Any] = field(default_factory=dict)  # more request fields, e.g. {"top_k": 1}
    description: str = ""
    source: str = ""  # where it came from: "builtin:seed" or a file path
    reference: dict[str, Any] | None = None  # the guide's numbers (seed suite only)

    def max_tokens_for(self, prompt: BenchPrompt) -> int:
        return prompt.max_tokens if prompt.max_tokens is not None else self.max_tokens

    def with_overrides(self, max_tokens: int | None = None, temperature: float | None = None) -> BenchSuite:
        """A copy with a shorter reply budget (every prompt) or another temperature."""
        s = self
        if max_tokens is not None:
            s = replace(s, max_tokens=max_tokens, prompts=tuple(replace(p, max_tokens=None) for p in s.prompts))
        if temperature is not None:
            s = replace(s, temperature=temperature)
        return s

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": 1, "name": self.name, "description": self.description, "source": self.source,
            "request": {"max_tokens": self.max_tokens, "temperature": self.temperature, "seed": self.seed,
                        **self.extra},
            "prompts": [{k: [{"role": r, "content": c} for r, c in v] if k == "history" else v for k, v in vars(p).items() if v is not None and v != ()}
                        for p in self.prompts],
            **({"reference": self.reference} if self.reference else {}),
        }


BUILTIN_SUITES = ("seed", "prose", "json", "code-edit", "agent")
_RESERVED = {"messages", "stream", "stream_options", "cache_prompt"}


def _need(cond: bool, where: str, problem: str, fix: str) -> None:
    if not cond:
        raise SuiteError(f"{where}: {problem}: {fix}.")


def _history(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    _need(isinstance(raw, list), where, "is not a list", 'write [{"role": "user", "content": "..."}, ...]')
    for i, turn in enumerate(raw):
        _need(isinstance(turn, dict) and turn.get("role") in ("user", "assistant")
              and isinstance(turn.get("content"), str), f"{where}[{i}]", "is not a user or assistant turn",
              'write {"role": "user", "content": "..."} or {"role": "assistant", ...}')
    return tuple((str(t["role"]), str(t["content"])) for t in raw)


def suite_from_dict(data: Any, source: str) -> BenchSuite:
    """Validate a suite's JSON object; raises :class:`SuiteError` naming the bad field and the fix."""
    _need(isinstance(data, dict), source, "the file is not a JSON object", 'write {"name": ..., "prompts": [...]}')
    req = data.get("request", {})
    _need(isinstance(req, dict), f"{source} request", "is not an object", 'write {"max_tokens": 400, ...}')
    max_tokens = req.get("max_tokens", 1200)
    _need(type(max_tokens) is int and max_tokens > 0, f"{source} request.max_tokens",
          f"{max_tokens!r} is not a positive whole number", "use e.g. 400")
    temperature = req.get("temperature", 0.7)
    _need(isinstance(temperature, int | float) and not isinstance(temperature, bool) and 0 <= temperature <= 5,
          f"{source} request.temperature", f"{temperature!r} is not a number from 0 to 5", "use e.g. 0.7 (0 = greedy)")
    seed = req.get("seed", 42)
    _need(type(seed) is int, f"{source} request.seed", f"{seed!r} is not a whole number", "use e.g. 42")
    bad = _RESERVED & set(req)
    _need(not bad, f"{source} request", f"{', '.join(sorted(bad))} is set by the benchmark itself", "remove it")
    extra = {k: v for k, v in req.items() if k not in ("max_tokens", "temperature", "seed")}
    prompts_raw = data.get("prompts")
    _need(isinstance(prompts_raw, list) and bool(prompts_raw), f"{source} prompts",
          "is missing or empty", 'add a list like [{"id": "p1", "text": "Write ..."}]')
    assert isinstance(prompts_raw, list)
    prompts: list[BenchPrompt] = []
    seen: set[str] = set()
    for i, p in enumerate(prompts_raw):
        where = f"{source} prompts[{i}]"
        if isinstance(p, str):
            p = {"id": f"p{i + 1}", "text": p}
        _need(isinstance(p, dict), where, "is neither text nor an object", 'write {"id": "p1", "text": "..."}')
        text = p.get("text")
        _need(isinstance(text, str) and bool(text.strip()), f"{where}.text", "is missing or empty", "add the prompt text")
        pid = str(p.get("id", f"p{i + 1}"))
        _need(pid not in seen, f"{where}.id", f"{pid!r} is used twice", "give every prompt its own id")
        seen.add(pid)
        pmax = p.get("max_tokens")
        _need(pmax is None or (type(pmax) is int and pmax > 0), f"{where}.max_tokens",
              f"{pmax!r} is not a positive whole number", "use e.g. 400 or leave it out")
        system = p.get("system", data.get("system"))  # a suite-wide "system": the prefix every prompt shares
        _need(system is None or isinstance(system, str), f"{where}.system", "is not text", "write a string")
        prompts.append(BenchPrompt(pid, str(text), str(p.get("category", "code")), system, pmax,
                                   _history(p.get("history", []), f"{where}.history")))
    name = data.get("name") or Path(source).stem
    ref = data.get("reference")
    return BenchSuite(str(name), tuple(prompts), int(max_tokens), float(temperature), int(seed), extra,
                      str(data.get("description", "")), source, ref if isinstance(ref, dict) else None)


def load_suite(name_or_path: str | Path) -> BenchSuite:
    """A built-in suite by name (``seed``, ``prose``, ``json``, ``code-edit``) or a user's JSON file."""
    key = str(name_or_path)
    if key in BUILTIN_SUITES:
        path, source = paths.resource_path("suites", f"{key}.json"), f"builtin:{key}"
    else:
        path, source = Path(key).expanduser(), str(Path(key).expanduser())
        if not path.is_file():
            raise SuiteError(
                f"{key}: no such suite file, and not a built-in suite: use one of "
                f"{', '.join(BUILTIN_SUITES)}, or the path of a JSON suite file."
            )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SuiteError(f"{source}: not valid JSON ({exc}): fix the file (a JSON linter shows where).") from None
    except OSError as exc:
        raise SuiteError(f"{source}: cannot be read ({exc.strerror}): check the path and permissions.") from None
    return suite_from_dict(data, source)
