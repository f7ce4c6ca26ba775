"""llama-server's argument list from launch settings: :func:`build_argv` and what it says back.

``build`` is the one pure function (the network flags with the CORS restriction, memory, cache-type, load and
chat flags); ``base``
the builder its per-topic helpers write into, with :class:`ArgNote`, :class:`LaunchRefused` and
its :data:`Refusal` (code, message, remedy, setting);
``spec`` a speculation mode's flags on each engine; ``rpc`` the ``--rpc`` workers. Outside code
imports from this package; the modules inside import each other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.engine.argv.base import ArgNote, LaunchRefused, Refusal, merged
from beedeck.core.engine.argv.build import (
    SECRET_FLAGS,
    LaunchPlan,
    build_argv,
    is_loopback,
    own_origin,
    redact,
)
from beedeck.core.engine.argv.rpc import layers_for_workers

__all__ = ["SECRET_FLAGS", "ArgNote", "LaunchPlan", "LaunchRefused", "Refusal", "build_argv", "is_loopback",
           "layers_for_workers", "merged", "own_origin", "redact"]
