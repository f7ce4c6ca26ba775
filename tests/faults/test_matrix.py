"""docs/reliability.md lists every fault test: the matrix cannot drift from the suite."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import REPO

DOC = REPO / "docs" / "reliability.md"


def fault_tests() -> list[str]:
    names = []
    for module in sorted(Path(__file__).parent.glob("test_*.py")):
        if module.name == Path(__file__).name:
            continue
        tree = ast.parse(module.read_text(encoding="utf-8"))
        names += [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    return names


def test_every_fault_test_has_a_row_and_every_row_a_test() -> None:
    doc = DOC.read_text(encoding="utf-8")
    in_doc = set(re.findall(r"`(test_\w+)", doc))
    tests = set(fault_tests())
    assert len(tests) >= 30
    assert tests - in_doc == set(), "fault tests missing from docs/reliability.md"
    assert in_doc - tests == set(), "docs/reliability.md names tests that do not exist"
