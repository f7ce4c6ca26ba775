"""The build time-left estimate against two real BeeLlama builds (tests/fixtures/builds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.build_eta import (
    CostModel,
    WeightedEta,
    kind_of,
    load_profile,
    planned_outputs,
    profile_from_ninja_log,
    shipped_profile,
    step_output,
)
from beedeck.core.engine.builder import ProgressTracker

BUILDS = Path(__file__).resolve().parents[2] / "fixtures" / "builds"


def _finish_order(log: Path) -> list[tuple[float, str]]:
    rows = []
    for line in log.read_text().splitlines()[1:]:
        start, end, _mtime, out, _hash = line.split("\t")
        rows.append((int(end) / 1000.0, out))
    return sorted(rows)


def _description(out: str) -> str:
    kind = kind_of(out)
    if kind == "link":
        return f"Linking CXX shared library {out}"
    return f"Building {'C' if kind == 'c' else 'CUDA' if kind == 'cuda' else 'CXX'} object {out}"


def _replay(tracker: WeightedEta | ProgressTracker, steps: list[tuple[float, str]], clock: list[float],
            at: float) -> tuple[float, float]:
    """Feed the steps that finished until fraction ``at``; (estimated, real) seconds left then."""
    n = len(steps)
    stop = int(at * n)
    estimate = None
    for i, (end, out) in enumerate(steps[: stop + 1]):
        clock[0] = end
        step = tracker.feed(f"[{i + 1}/{n}] {_description(out)}")
        assert step is not None
        estimate = step[2]
    assert estimate is not None
    return estimate, steps[-1][0] - steps[stop][0]


@pytest.mark.parametrize(("profile_of", "build"), [("v0.4.3", "v0.1.2"), ("v0.1.2", "v0.4.3")])
def test_weighted_estimate_tracks_a_real_build_where_the_step_count_does_not(profile_of: str, build: str) -> None:
    profile = profile_from_ninja_log(BUILDS / f"beellama-{profile_of}-cpu.ninja_log")
    steps = _finish_order(BUILDS / f"beellama-{build}-cpu.ninja_log")
    rows = []
    for at in (0.1, 0.23, 0.4, 0.6, 0.7, 0.84):
        clock = [steps[0][0]]
        weighted, real = _replay(WeightedEta([o for _, o in steps], profile, clock=lambda c=clock: c[0]),
                                 steps, clock, at)
        clock = [steps[0][0]]
        linear, _ = _replay(ProgressTracker(clock=lambda c=clock: c[0]), steps, clock, at)
        rows.append((at, real, weighted, linear))
    for at, real, weighted, _linear in rows:
        # The other version's step times get the proportions within a factor of 1.6 at every point.
        assert real / 1.6 <= weighted <= real * 1.6, (at, real, weighted)
    # ...and its worst miss is smaller than the step count's, which is off by 2-3x late in the build,
    # where the heavy server files come last.
    assert max(abs(w - r) for _, r, w, _ in rows) < max(abs(li - r) for _, r, _, li in rows)
    at, real, _weighted, linear = rows[4]
    assert at == 0.7 and linear < real / 2  # the old estimate's flaw: under half the real time left


def test_descriptions_name_their_outputs_and_kinds() -> None:
    assert step_output("Building CXX object tools/server/CMakeFiles/x.dir/server.cpp.o") == \
        "tools/server/CMakeFiles/x.dir/server.cpp.o"
    assert step_output("Linking CXX executable bin/llama-server") == "bin/llama-server"
    assert step_output("Generating build details from Git") is None
    assert [kind_of(o) for o in ("a/CMakeFiles/t.dir/x.c.o", "a/CMakeFiles/t.dir/k.cu.o",
                                 "a/CMakeFiles/t.dir/y.cpp.o", "bin/libggml.so")] == ["c", "cuda", "cxx", "link"]
    dry = "[1/3] Building C object a/CMakeFiles/t.dir/x.c.o\n[2/3] Linking C shared library bin/libx.so\nninja: no work\n"
    assert planned_outputs(dry) == ["a/CMakeFiles/t.dir/x.c.o", "bin/libx.so"]


def test_unknown_steps_borrow_their_folders_or_kinds_cost() -> None:
    model = CostModel({"tools/server/CMakeFiles/s.dir/a.cpp.o": 40.0, "ggml/src/CMakeFiles/g.dir/b.c.o": 1.0})
    assert model.cost("tools/server/CMakeFiles/s.dir/new.cpp.o") == 40.0  # same folder
    assert model.cost("common/CMakeFiles/c.dir/x.c.o") == 1.0  # same kind (C)
    assert model.cost("ggml/src/ggml-cuda/CMakeFiles/c.dir/k.cu.o") > model.median  # CUDA: heavier


def test_the_shipped_profile_covers_a_llama_cpp_tree() -> None:
    costs = shipped_profile(cuda=False)
    assert len(costs) > 300 and costs["tools/server/CMakeFiles/server-context.dir/server-context.cpp.o"] > 10


def test_a_cuda_build_without_a_cuda_profile_is_weighted_by_kind() -> None:
    """The H200 CUDA build replayed against the CPU profile alone (what a first CUDA build of an
    unknown tree gets): CUDA kernels weigh 25x a C++ step, so the second half of the estimate is right
    where the step count said 4x too much (real 64 s left at 60 %, the count said 271 s)."""
    cpu_only = load_profile(Path(__file__).resolve().parents[3] / "resources" / "build-profiles" / "llama-cpp-cpu.json")
    steps = _finish_order(BUILDS / "beellama-v0.1.2-cuda-h200.ninja_log")
    rows = []
    for at in (0.4, 0.6, 0.8):
        clock = [steps[0][0]]
        weighted, real = _replay(WeightedEta([o for _, o in steps], cpu_only, clock=lambda c=clock: c[0]),
                                 steps, clock, at)
        clock = [steps[0][0]]
        linear, _ = _replay(ProgressTracker(clock=lambda c=clock: c[0]), steps, clock, at)
        rows.append((at, real, weighted, linear))
        assert real / 2 <= weighted <= real * 1.6, (at, real, weighted)
        assert linear > real * 2, (at, real, linear)  # the step count's error this replaces
    assert shipped_profile(cuda=True)["ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/fattn.cu.o"] > 10


def _errors(steps: list[tuple[float, str]], profile: dict[str, float]) -> dict[float, float]:
    out = {}
    for at in (0.1, 0.25, 0.5, 0.75):
        clock = [steps[0][0]]
        weighted, real = _replay(WeightedEta([o for _, o in steps], profile, clock=lambda c=clock: c[0]),
                                 steps, clock, at)
        out[at] = (weighted - real) / real
    return out


def test_the_gen_a_cuda_build_is_estimated_within_20_percent_from_the_gen_b_profile() -> None:
    """The H200 CUDA build of BeeLlama v0.1.2, estimated from the step costs of the v0.4.3 CUDA build
    (another generation, other kernels: the families and folders carry over): within 20 % at 10, 25,
    50 and 75 % of the steps (measured: +19, +6, 0, +1 %)."""
    profile = {**shipped_profile(cuda=False), **profile_from_ninja_log(BUILDS / "beellama-v0.4.3-cuda-h200.ninja_log")}
    errors = _errors(_finish_order(BUILDS / "beellama-v0.1.2-cuda-h200.ninja_log"), profile)
    assert all(abs(e) <= 0.20 for e in errors.values()), errors


def test_the_gen_b_cuda_build_from_the_gen_a_profile_as_the_h200_run_saw_it() -> None:
    """The v0.4.3 CUDA build (506 steps, 459 s) replayed against the v0.1.2 profile, what its first build
    got: the replay gives what the live run printed (+14, +49, -2, -34 % at 10/25/50/75 %, the kernels it
    finishes in parallel late count as done only when they end). Outside the 20 % goal; this holds the
    estimate to no worse while the shipped profile now carries the v0.4.3 costs too."""
    old = load_profile(BUILDS.parent.parent.parent / "resources" / "build-profiles" / "llama-cpp-cuda.json")
    gen_a_only = {k: v for k, v in old.items() if k in profile_from_ninja_log(BUILDS / "beellama-v0.1.2-cuda-h200.ninja_log")}
    errors = _errors(_finish_order(BUILDS / "beellama-v0.4.3-cuda-h200.ninja_log"), {**shipped_profile(cuda=False),
                                                                                       **gen_a_only})
    assert all(abs(e) <= 0.55 for e in errors.values()), errors
    assert abs(errors[0.5]) <= 0.10
