"""PySide6 6.12.0 on Python <= 3.11 drops a reference to None on every void call and aborts after
~5,000 calls (docs/reference/python-stack.md §1.2). This fails cleanly if such a build is installed."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QLabel


def test_no_none_refcount_leak(qapp: object) -> None:
    label = QLabel()
    before = sys.getrefcount(None)
    for _ in range(1000):
        label.setText("x")
    assert sys.getrefcount(None) - before > -50
