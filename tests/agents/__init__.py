"""Helpers for the real coding-agent tests (tests/engine/test_agents_real.py): the client installer
(clients.py) and a recording TCP relay between a client and the real server (relay.py)."""
