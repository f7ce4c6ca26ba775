"""llama.cpp's RPC workers: ``workers`` starts and addresses the engine's own ``ggml-rpc-server`` (a model
spread over several machines; the protocol has no authentication, so workers stay on loopback unless
asked), ``probe`` asks the main engine what the workers lend (``llama-server --rpc A,B --list-devices``).
Outside code imports from this package; the modules inside import each other directly (never this
``__init__``).
"""

from __future__ import annotations

from beedeck.core.engine.rpc.probe import (
    RpcDevice,
    classify_probe,
    parse_devices,
    probe_workers,
    restate,
    with_rpc_reason,
)
from beedeck.core.engine.rpc.workers import (
    BAD_ADDRESS,
    DEFAULT_WORKER_PORT,
    NO_AUTH_WARNING,
    NO_RPC,
    NO_WORKER_BINARY,
    NOT_LOOPBACK,
    PROBE_FAILED,
    PROBE_TIMEOUT_S,
    RPC_BINARIES,
    STOP_TIMEOUT_S,
    UNREACHABLE,
    VERSION,
    WORKER_FAILED,
    RpcError,
    Worker,
    WorkerProcess,
    is_loopback,
    parse_workers,
    require_worker_binary,
    start_worker,
    worker_argv,
    worker_binary,
)

__all__ = [
    "BAD_ADDRESS",
    "DEFAULT_WORKER_PORT",
    "NOT_LOOPBACK",
    "NO_AUTH_WARNING",
    "NO_RPC",
    "NO_WORKER_BINARY",
    "PROBE_FAILED",
    "PROBE_TIMEOUT_S",
    "RPC_BINARIES",
    "RpcDevice",
    "RpcError",
    "STOP_TIMEOUT_S",
    "UNREACHABLE",
    "VERSION",
    "WORKER_FAILED",
    "Worker",
    "WorkerProcess",
    "classify_probe",
    "is_loopback",
    "parse_devices",
    "parse_workers",
    "probe_workers",
    "require_worker_binary",
    "restate",
    "start_worker",
    "with_rpc_reason",
    "worker_argv",
    "worker_binary",
]
