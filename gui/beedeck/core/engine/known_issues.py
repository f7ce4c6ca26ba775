"""The known-issue table: what crashes or fails on which engine, and what to tell the user.

One data file, ``resources/known-issues.json``, read by both halves of the guard:

- before launch, :mod:`beedeck.core.models.guard` runs each applicable row's ``check`` against the
  model files and the settings, and refuses (or warns about) a launch that would fail;
- after a crash, :func:`explain_log` matches each row's ``log`` pattern against the dead server's
  last lines, so the user reads the engine's own reason instead of a bare signal name.

``docs/known-issues.md`` is :func:`markdown_table` of the same file (a test keeps them in sync).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps

SEVERITIES = ("refuse", "warn")
BACKENDS = ("any", "cpu", "cuda")
ENGINES = ("bee-a", "bee-b", "mainline")


class KnownIssueError(ValueError):
    """The table file is malformed; the message names the row and the field."""


class _Fields(dict[str, str]):
    """str.format_map mapping that keeps an unknown {field} as is (the docs' generic form)."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


@dataclass(frozen=True)
class KnownIssue:
    """One row of the table."""

    id: str
    code: str  # the ServerFailure code it is reported under (wrong_draft_format, unsupported_cache_type, ...)
    engines: tuple[str, ...]
    versions: str
    backend: str
    severity: str
    check: str
    log: str
    message: str
    remedy: str
    source: str
    params: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)  # for fields a log line does not name

    def applies_to(self, caps: EngineCaps) -> bool | None:
        """True/False for this engine; None when the row has a version range and the engine's release
        is unknown (the guard then only warns)."""
        if caps.generation.value not in self.engines:
            return False
        if self.backend != "any" and (caps.gpu_backend or "cpu") != self.backend:
            return False
        if not self.versions:
            return True
        release = parse_version(caps.release) or parse_version(caps.version)
        if release is None:
            return None
        return in_range(release, self.versions)

    def render(self, fields: Mapping[str, Any], *, use_defaults: bool = True) -> tuple[str, str]:
        """(message, remedy) with ``{field}`` placeholders filled in (from ``defaults`` where missing)."""
        base = dict(self.defaults) if use_defaults else {}
        values = _Fields({**base, **{k: str(v) for k, v in fields.items() if v is not None}})
        return self.message.format_map(values), self.remedy.format_map(values)


def parse_version(text: str) -> tuple[int, ...] | None:
    """"v0.4.3" / "0.4.3" / "0.4.5-dev" -> (0, 4, 3) / (0, 4, 5); build numbers and "0"/"unknown" -> None."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:-[\w.]+)?", (text or "").strip())
    if not m:
        return None
    return tuple(int(x) for x in m.groups() if x is not None)


def in_range(version: tuple[int, ...], spec: str) -> bool:
    """``spec`` is comma-separated clauses such as ``>=0.1,<0.4``; every clause must hold."""
    ops = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b}
    for clause in (c.strip() for c in spec.split(",") if c.strip()):
        m = re.fullmatch(r"(<=|>=|==|<|>)\s*v?([\d.]+)", clause)
        if not m:
            raise KnownIssueError(f"version range clause {clause!r} is not like '<0.4' or '>=0.1'")
        bound = tuple(int(x) for x in m.group(2).split("."))
        width = max(len(bound), len(version))
        a, b = version + (0,) * (width - len(version)), bound + (0,) * (width - len(bound))
        if not ops[m.group(1)](a, b):
            return False
    return True


def _row(data: Any, where: str) -> KnownIssue:
    if not isinstance(data, dict):
        raise KnownIssueError(f"{where} is not an object")

    def need(name: str, kind: type) -> Any:
        value = data.get(name)
        if not isinstance(value, kind):
            raise KnownIssueError(f"{where}.{name} is missing or not a {kind.__name__}")
        return value

    issue = KnownIssue(
        id=need("id", str), code=str(data.get("code") or "known_issue"), engines=tuple(need("engines", list)), versions=str(data.get("versions", "")),
        backend=need("backend", str), severity=need("severity", str), check=str(data.get("check", "")),
        log=str(data.get("log", "")), message=need("message", str), remedy=need("remedy", str),
        source=need("source", str), params=dict(data.get("params", {})),
        defaults={str(k): str(v) for k, v in dict(data.get("defaults", {})).items()},
    )
    if not set(issue.engines) <= set(ENGINES) or not issue.engines:
        raise KnownIssueError(f"{where}.engines must be a non-empty list of {', '.join(ENGINES)}")
    if issue.backend not in BACKENDS:
        raise KnownIssueError(f"{where}.backend must be one of {', '.join(BACKENDS)}")
    if issue.severity not in SEVERITIES:
        raise KnownIssueError(f"{where}.severity must be one of {', '.join(SEVERITIES)}")
    if not issue.check and not issue.log:
        raise KnownIssueError(f"{where} has neither a check nor a log pattern: it could never fire")
    if issue.log:
        re.compile(issue.log)
    if issue.versions:
        in_range((0,), issue.versions)  # validates the clauses
    return issue


def parse_table(data: Any, source: str = "known-issues.json") -> tuple[KnownIssue, ...]:
    """Validate the table's JSON; raises :class:`KnownIssueError` naming the bad row and field."""
    if not isinstance(data, dict) or not isinstance(data.get("issues"), list):
        raise KnownIssueError(f"{source}: expected an object with an 'issues' list")
    rows = tuple(_row(item, f"{source} issues[{i}]") for i, item in enumerate(data["issues"]))
    ids = [r.id for r in rows]
    if len(set(ids)) != len(ids):
        raise KnownIssueError(f"{source}: an issue id is used twice")
    return rows


@cache
def load_table() -> tuple[KnownIssue, ...]:
    """The shipped table (read once)."""
    path = paths.resource_path("known-issues.json")
    return parse_table(json.loads(path.read_text(encoding="utf-8")), str(path))


DFLASH_TARGET_ROW = "upstream-dflash-target-arch"


def dflash_target_archs(generation: str) -> frozenset[str] | None:
    """Target architectures this generation's DFlash can feed; None when it reads every graph
    (BeeLlama 0.1-0.3's fork DFlash). From the table's upstream-dflash-target-arch row."""
    row = next((r for r in load_table() if r.id == DFLASH_TARGET_ROW), None)
    archs = row.params.get("archs", {}).get(generation) if row is not None else None
    return frozenset(archs) if archs is not None else None


def refused_spec_types(caps: EngineCaps) -> frozenset[str]:
    """Speculation types a refusing row rules out on this engine (offer them nowhere)."""
    out: set[str] = set()
    for row in load_table():
        if row.check == "spec_type_in" and row.severity == "refuse" and row.applies_to(caps):
            out.update(row.params.get("types", ()))
    return frozenset(out)


@dataclass(frozen=True)
class Explanation:
    """A known issue recognised in a log: the row and its rendered words."""

    issue: KnownIssue
    message: str
    remedy: str
    line: str  # the log line that matched


def explain_log(lines: Iterable[str], caps: EngineCaps | None = None,
                table: tuple[KnownIssue, ...] | None = None,
                context: Mapping[str, str] | None = None) -> Explanation | None:
    """The first known issue whose ``log`` pattern matches one of ``lines`` (prefixes stripped).

    With ``caps``, rows for other engines are skipped; without, every row is tried (the patterns
    are specific to the failure, not to the engine). ``context`` holds fields the log tells only
    across lines (``role``: "draft" or "model", the load that failed; ``arch``: its architecture;
    ``engine``: the engine's name): a row whose ``params.role`` names another role is skipped, and the
    fields fill the row's placeholders. ``said`` is always the matched text itself.
    """
    ctx = dict(context or {})
    rows = [r for r in (table if table is not None else load_table()) if r.log]
    if caps is not None:
        rows = [r for r in rows if r.applies_to(caps) is not False]
    rows = [r for r in rows if not r.params.get("role") or r.params.get("role") == ctx.get("role")]
    text_lines = list(lines)
    for row in rows:
        pattern = re.compile(row.log)
        for line in text_lines:
            m = pattern.search(line)
            if m:
                fields = {**ctx, "said": m.group(0), **{k: v for k, v in m.groupdict().items() if v is not None}}
                message, remedy = row.render(fields)
                return Explanation(row, message, remedy, line)
    return None


def markdown_table(table: tuple[KnownIssue, ...] | None = None) -> str:
    """The table for people: docs/known-issues.md and ``beedeck engine known-issues``."""
    rows = table if table is not None else load_table()
    out = [
        "# Known engine issues",
        "",
        "Generated from `resources/known-issues.json` by `beedeck engine known-issues --markdown`; BeeDeck",
        "checks each row before a launch (refusing, or warning, when the model files and settings meet its",
        "condition) and recognises it in a crashed server's log. `bee-a` is BeeLlama 0.1-0.3, `bee-b`",
        "BeeLlama 0.4 and later.",
        "",
        "| id | engines | versions | backend | action | what happens | what to do | seen in |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        message, remedy = r.render({}, use_defaults=False)
        cells = [r.id, ", ".join(r.engines), r.versions or "all", r.backend, r.severity, message, remedy, r.source]
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(out) + "\n"
