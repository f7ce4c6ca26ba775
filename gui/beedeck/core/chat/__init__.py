"""Chat: conversations persisted as they stream (SQLite), and the speculation guard that learns
which mode is fastest per kind of prompt.

May import ``engine``, ``models``, ``machine`` and the plumbing; never ``bench`` or ui.
"""
