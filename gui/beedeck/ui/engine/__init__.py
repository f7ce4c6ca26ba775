"""The running engine: server controller (and the server kept loaded beside it), remote binding, server log,
failure panel, endpoint. The Baseline | <modes> toggle is in ``ui/speculation``."""
