"""Building llama-server from source: :func:`build_engine` and what it needs.

``builder`` fetches the source, configures and compiles it with CMake, smoke-tests and registers the
binary; ``choice`` which FlashAttention kernels a build compiles for the profile's K/V types; ``eta`` the
time left (the plan list-scheduled on the ``-j`` slots, rates learnt per kernel family); ``plan`` the
lines a dry run prints (CLI ``--dry-run`` and the wizard's plan); ``tools`` the toolchain preflight and
the streamed, cancellable child process. Outside code imports from this package; the modules inside
import each other directly (never this ``__init__``).
"""

from __future__ import annotations

from beedeck.core.engine.building.builder import BEE_REPO, BuildResult, build_engine
from beedeck.core.engine.building.choice import build_lacks_pair
from beedeck.core.engine.building.plan import minutes_text, plan_lines
from beedeck.core.engine.building.tools import BuildCancelled, BuildError, find_nvcc, preflight

__all__ = ["BEE_REPO", "BuildCancelled", "BuildError", "BuildResult", "build_engine", "build_lacks_pair",
           "find_nvcc", "minutes_text", "plan_lines", "preflight"]
