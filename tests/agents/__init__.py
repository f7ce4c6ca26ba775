"""Helpers for the real coding-agent tests (tests/engine/test_agents_real.py): the client installer
(clients.py), a recording TCP relay between a client and the real server (relay.py), and BeeDeck's CLI
and each agent run as a user runs them (headless.py)."""
