"""The app's llama-server and its life, Qt-free: the active server and the one kept beside it, and the rules of
starting, restarting, swapping, preloading, replacing, attaching, watching and stopping them
(:class:`Serving`), reporting through typed callbacks (:class:`ServingEvents`); the GUI's adapter turns them
into signals (``ui/engine/server_controller.py``) and holds no rule.

``serving`` is the state and the rules; ``parts`` what it is made of and reports through; ``jobs`` where its
work runs (a thread of its own, or inline in tests); ``beside`` the other mode's server kept loaded;
``attach`` the watch of a server BeeDeck did not start; ``restarts`` what a restart does around its stop and
start and the start times it learns; ``slot_carry`` the steps that keep the conversation's KV cache across
a mode switch's restart.

May import the launcher, the engine wing, machine and the plumbing; nothing above it imports it but the
ui and the commands.
"""

from __future__ import annotations

from beedeck.core.serving.jobs import Inline, Jobs, JobThread
from beedeck.core.serving.parts import READY_TIMEOUT_S, STOP_TIMEOUT_S, Served, ServingEvents, ServingParts
from beedeck.core.serving.restarts import NoSteps, Restart, RestartSteps, StartTimes
from beedeck.core.serving.serving import Replacing, Serving
from beedeck.core.serving.slot_carry import Carried, SlotCarry

__all__ = [
    "READY_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "Carried",
    "Inline",
    "JobThread",
    "Jobs",
    "NoSteps",
    "Replacing",
    "Restart",
    "RestartSteps",
    "Served",
    "Serving",
    "ServingEvents",
    "ServingParts",
    "SlotCarry",
    "StartTimes",
]
