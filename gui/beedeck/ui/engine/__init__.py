"""The running engine: the server controller (the Qt face of ``core/serving``: its events as signals), remote
binding, server log, failure panel, endpoint. The Baseline | <modes> toggle is in ``ui/speculation``."""
