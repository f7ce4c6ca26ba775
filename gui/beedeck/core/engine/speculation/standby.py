"""Keep the other mode loaded: a Baseline | DFlash switch that costs no load when memory allows.

BeeLlama >= 0.4 and mainline ignore per-request speculation, so a switch starts the target again with or
without its draft (core/engine/speculation/restart.py makes that start as short as it gets: 3.9-5.0 s for a 19 GB
target on an H200, most of it copying the weights to the GPU). Where the GPU (and the host) has room for
the other mode's server beside the running one, the switch starts it on a second port and keeps the first
one loaded: every later switch between the two is a change of the port the chat talks to, no load at all.

The decision (:func:`beedeck.core.launcher.standby_preflight`) is the launch preflight's memory check (the planner's figures for the other mode's settings)
against the memory free *now*, with the running server loaded, less a margin, so a switch never pushes the
running server out of memory. A 24 GB card with a 19 GB target never has that room: it restarts.
"""

from __future__ import annotations

GiB = 1024**3
# How a mode switch went (Serving.last_switch, core/serving/serving.py).
RESTARTED = "restarted"  # stopped the server, started the other mode's
LOADED_BESIDE = "loaded beside"  # loaded the other mode's server beside the running one, which stays loaded
SWAPPED = "swapped"  # the other mode's server was loaded already: the chat talks to it again
MARGIN_FRACTION = 0.05  # of each GPU's free memory (and the host's): fragmentation, the CUDA context, a spike
MARGIN_MIN = GiB // 2  # at least this much is left free on every device


def with_margin(free: int) -> int:
    """What a second server may plan to use of ``free`` bytes."""
    return max(0, free - max(MARGIN_MIN, int(free * MARGIN_FRACTION)))


def free_now() -> tuple[list[int] | None, int | None]:
    """Each NVIDIA GPU's free bytes now (None: none found) and the host's available bytes now: one
    detection (it never raises; without NVML or a driver it finds no GPU, and the host is judged alone)."""
    from beedeck.core.machine import hardware

    report = hardware.detect()
    return [g.memory_free for g in report.gpus] or None, report.system.ram_available
