"""Chat: conversations persisted as they stream (SQLite), a reply's facts, the gauge's live rate and
the fast mode per card class. The speculation guard and the per-prompt-kind advice it once held live
in ``engine/speculation/`` with speculation's other rules.

May import ``engine``, ``models``, ``machine`` and the plumbing; never ``bench`` or ui.
"""
