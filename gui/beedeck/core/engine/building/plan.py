"""What a dry run of a build says: the lines `beedeck engine build --dry-run` prints, and the setup
wizard shows before the user starts a build (one wording for both)."""

from __future__ import annotations

from beedeck.core.engine.building.builder import BuildResult


def minutes_text(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def plan_lines(result: BuildResult) -> list[str]:
    """The CMake options, the targets, and the step count with the estimated time at this many jobs."""
    lines = [f"options: {' '.join(result.options)}", f"targets: {' '.join(result.targets)}"]
    if result.planned_steps:
        est = f", about {minutes_text(result.estimate_s)} with -j{result.jobs}" if result.estimate_s is not None else ""
        lines.append(f"steps:   {result.planned_steps}{est}")
    else:
        lines.append("steps:   unknown (no Ninja: install ninja for a step count and an estimate)")
    return lines
