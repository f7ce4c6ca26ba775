"""A llama-server's state, as its process wrapper (``core/engine/server.py``) and the app's serving
(``core/serving``) report it. A module of its own, importing nothing: the window's start path names the
states without loading the process machinery (psutil)."""

from __future__ import annotations

from enum import StrEnum


class ServerState(StrEnum):
    STARTING = "starting"  # process spawned, nothing listening yet
    LOADING = "loading"  # /health answers 503
    READY = "ready"  # /health answers 200
    FAILED = "failed"  # the process died (or never got ready); see .failure
    STOPPED = "stopped"  # not started yet, or stopped on request

    @property
    def running(self) -> bool:
        """Starting, loading or ready: a server is there, or on its way."""
        return self in (ServerState.STARTING, ServerState.LOADING, ServerState.READY)
