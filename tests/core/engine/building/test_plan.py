"""The dry run's words (core/engine/building/plan.py), one wording for `beedeck engine build --dry-run` and
the setup wizard's build preview (tests/ui/setup/test_build_preview.py runs both on a real CMake tree)."""

from __future__ import annotations

from pathlib import Path

from beedeck.core.engine.building.builder import BuildResult
from beedeck.core.engine.building.plan import minutes_text, plan_lines


def _result(**kw: object) -> BuildResult:
    return BuildResult("id", Path("/b/llama-server"), ["-DGGML_CUDA=ON", "-DGGML_CUDA_KVARN=OFF"], Path("/b/log"), 0.0,
                       targets=["llama-server"], dry_run=True, **kw)  # type: ignore[arg-type]


def test_minutes_from_a_minute_and_a_half_seconds_below() -> None:
    assert minutes_text(89) == "89 s" and minutes_text(90) == "2 min" and minutes_text(1172) == "20 min"


def test_the_plan_says_options_targets_steps_and_minutes_at_this_many_jobs() -> None:
    lines = plan_lines(_result(planned_steps=506, estimate_s=450.0, jobs=16))
    assert lines == ["options: -DGGML_CUDA=ON -DGGML_CUDA_KVARN=OFF", "targets: llama-server",
                     "steps:   506, about 8 min with -j16"]


def test_without_ninja_the_plan_says_how_to_get_a_count() -> None:
    assert "install ninja" in plan_lines(_result())[-1]
    assert plan_lines(_result(planned_steps=12))[-1] == "steps:   12"  # no profile figure: no minutes promised
