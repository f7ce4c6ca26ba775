"""The running engine: server controller, Baseline | DFlash toggle, server log, failure panel, endpoint."""
