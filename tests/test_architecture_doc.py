"""docs/architecture.md's "Where do I change X?" table names files that exist (issue 21 item 5): each
backticked path in it is opened, relative to gui/beedeck/ (core/, ui/, clicmd/...) or to the checkout
(resources/, tests/, benchmarks/, packaging/, docs/); a bare file name is looked up in the folder of the
path named before it in the same row."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "gui" / "beedeck"
DOC = REPO / "docs" / "architecture.md"
TOP = ("resources/", "tests/", "benchmarks/", "packaging/", "docs/", "gui/", ".ci/")


def _table_rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Where do I change X?", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|") and not line.startswith("| ---")][1:]


def _paths(row: str) -> list[Path]:
    out: list[Path] = []
    folder: Path | None = None
    for name in re.findall(r"`([^`\s]+)`", row):
        name = name.split("::", 1)[0].rstrip(":,")
        if not re.search(r"\.(py|json|md|toml|txt|jinja|sh)$|/$", name):
            continue  # a function, a flag, a command
        if "/" in name:
            path = (REPO if name.startswith(TOP) else PACKAGE) / name
        elif folder is not None:
            path = folder / name
        else:
            continue
        folder = path.parent
        out.append(path)
    return out


def test_the_table_has_rows_and_every_path_it_names_exists() -> None:
    rows = _table_rows()
    assert len(rows) >= 20, rows[:3]
    named = [p for row in rows for p in _paths(row)]
    assert len(named) >= 40
    missing = sorted({str(p.relative_to(REPO)) for p in named if not p.exists()})
    assert not missing, f"docs/architecture.md's 'Where do I change X?' names paths that do not exist: {missing}"


def test_a_path_that_does_not_exist_is_caught() -> None:
    row = "| x | `core/engine/building/builder.py`, `no_such_module.py`; `resources/none.json` |"
    assert [p.exists() for p in _paths(row)] == [True, False, False]
