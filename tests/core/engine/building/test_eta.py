"""The build time-left estimate, replayed on four real BeeLlama builds (tests/fixtures/builds).

Each recorded ``.ninja_log`` is fed to the estimate as the builder feeds it (tests/fixtures/
build_replay.py); the bounds are on those recorded builds, not on this machine's timing. Run with ``-s``
to see the error table (benchmarks/build_eta_replay.py prints it beside the estimate this replaced).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.building.eta import (
    CostModel,
    WeightedEta,
    estimate_seconds,
    kind_of,
    list_schedule,
    load_profile,
    planned_outputs,
    shipped_profile,
    step_output,
)
from beedeck.core.engine.building.steps import ProgressTracker
from tests.fixtures.build_replay import (
    BEE_CUDA_H200,
    DRIFTING,
    LOGS,
    MAINLINE_CUDA_H200,
    POINTS,
    description,
    errors,
    held_out_profile,
    jobs_of,
    median_profile,
    merged_profile,
    profiles,
    read_log,
    replay,
)

RESOURCES = Path(__file__).resolve().parents[4] / "resources" / "build-profiles"


def _row(name: str, profile: str, errs: dict[float, float]) -> str:
    return f"{name:34} {profile:8} " + " ".join(f"{int(at * 100):>3} %: {e * 100:+6.1f} %" for at, e in errs.items())


@pytest.mark.parametrize("start_order", [False, True], ids=["dry-run-order", "start-order"])
@pytest.mark.parametrize("name", list(LOGS))
def test_each_recorded_build_is_estimated_within_20_percent_from_its_own_costs(name: str, start_order: bool) -> None:
    """The estimate's model (steps started in Ninja's order on -j slots, the remaining ones list-scheduled)
    given the right costs: Gen B CUDA was +37 % at 10 % and -27 % at 75 % from these same costs when
    finished weight alone was counted (16 kernels of a minute run side by side and count only when they
    end); now every point is within 4 % (Gen B CUDA: +0.0, -0.1, -0.8, -1.3, -1.7 %). The plan as a dry
    run lists it (links last) or as the steps really started: the same within 0.3 %."""
    stem, other, jobs = LOGS[name]
    errs = errors(stem, profiles(stem, other, "cuda" in stem)["own"], jobs, start_order=start_order)
    print(_row(name, "own", errs))
    assert all(abs(e) <= 0.20 for e in errs.values()), errs


@pytest.mark.parametrize("name", list(LOGS))
def test_each_recorded_build_is_estimated_within_20_percent_from_the_shipped_profile(name: str) -> None:
    """What a first build of these releases gets (resources/build-profiles: the CUDA steps the median of the
    H200 builds, the fifth Gen B build held out of it), from 10 % to 75 % of the steps: measured worst 15.8 %
    (Gen A CUDA at 10 %), 14.3 % (the first Gen B build), 16.0 % and 13.0 % (CPU), 6.1 %, 2.0 % (mainline:
    its own costs), 14.8 %, 3.6 % (the fifth, held out), and at 90 % within 21 % (the fourth: -20.9 %)."""
    stem, other, jobs = LOGS[name]
    errs = errors(stem, profiles(stem, other, "cuda" in stem)["shipped"], jobs)
    print(_row(name, "shipped", errs))
    assert all(abs(e) <= 0.20 for at, e in errs.items() if at <= 0.75), errs
    assert abs(errs[0.9]) <= 0.21, errs


HELD_OUT = [name for name, (stem, _o, _j) in LOGS.items() if stem in BEE_CUDA_H200]


@pytest.mark.parametrize("name", HELD_OUT)
def test_each_beellama_cuda_build_from_the_median_of_the_others(name: str) -> None:
    """Leave one out: each BeeLlama build on the H200 estimated from the median of the other builds, as if
    it had never been recorded (what the shipped profile does for a build it has not seen). From 10 % to
    75 %: Gen A 12.8 %, Gen B 20.4 % (the first build, whose fast tail the old single-build profile copied:
    every later build then read 19-26 % short), 6.6 %, 17.6 %, 18.9 %. The profile of the first build alone
    put the later ones 19.3 %, 23.1 %, 26.4 % short (the live estimate on the fourth: -29.4 % at 75 %)."""
    stem, _other, jobs = LOGS[name]
    errs = errors(stem, held_out_profile(stem), jobs)
    print(_row(name, "held out", errs))
    assert all(abs(e) <= 0.21 for at, e in errs.items() if at <= 0.75), errs


def test_a_build_of_the_median_profile_on_a_fresh_lease_is_within_10_percent_live() -> None:
    """The fifth Gen B build ran with the median profile shipped and is in none of it: its live estimate read
    +4.6, -0.7, -2.3, -4.8, -8.1 % (docs/gpu-runs/2026-12-04-h200-download/build-genb5.json), the replay of its
    log +3.6 % at worst; from the first build's costs alone it replays 13.9 % short."""
    stem, first, jobs = LOGS["Gen B CUDA, fifth build (v0.4.3, H200, -j16, held out)"]
    assert stem not in BEE_CUDA_H200
    errs = errors(stem, shipped_profile(cuda=True), jobs)
    assert all(abs(e) <= 0.10 for e in errs.values()), errs
    single = errors(stem, profiles(stem, first, True)["cross"], jobs)
    assert min(single.values()) < -0.13, single  # what the median mended


def test_the_shipped_cuda_profiles_are_the_median_of_the_recorded_builds() -> None:
    """The files are what `python -m tests.fixtures.build_replay --write-profiles` makes from the logs, and
    a mainline tree gets its own build's costs over the BeeLlama median."""
    for name, stems in (("llama-cpp-cuda.json", BEE_CUDA_H200), ("mainline-cuda.json", MAINLINE_CUDA_H200)):
        shipped = load_profile(RESOURCES / name)
        assert shipped == {out: round(cost, 3) for out, cost in median_profile(stems).items()}, name
    assert merged_profile([{"a": 1.0, "b": 5.0}, {"a": 3.0}, {"a": 10.0}]) == {"a": 3.0, "b": 5.0}
    fattn = "ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/fattn.cu.o"
    own = load_profile(RESOURCES / "mainline-cuda.json")[fattn]
    assert shipped_profile(cuda=True, project="mainline")[fattn] == own != shipped_profile(cuda=True)[fattn]


@pytest.mark.parametrize("name", list(DRIFTING))
def test_a_build_on_a_machine_that_slows_as_it_builds_trails_by_at_most_a_quarter(name: str) -> None:
    """The live Gen B build on the GPU (its own samples: -17.4, -14.3, -23.3, -25.5, -27.7 % at 10-90 %; the
    replay of its log: -17.9, -13.8, -21.7, -23.1, -24.0 %): short, never long, and by at most a quarter.
    From the median of the other builds (it held out): -17.6, -6.3, -9.9, -11.9, -12.7 %."""
    stem, other, jobs = DRIFTING[name]
    for label in ("cross", "held out"):
        errs = errors(stem, profiles(stem, other, True)[label], jobs)
        print(_row(name, label, errs))
        assert all(-0.25 <= e <= 0.0 for e in errs.values()), errs


CROSS = [name for name in LOGS if "fourth" not in name and "fifth" not in name]


@pytest.mark.parametrize("name", CROSS)
def test_each_recorded_build_from_the_other_generations_costs(name: str) -> None:
    """An update estimated from the other release's build on the same machine. The schedule is right, the
    costs are not: the two releases' same files differ by 0.9-1.6x (tools/server 1.4x heavier in v0.4.3,
    its fattn-vec kernels 1.75x lighter than v0.1.2's turbo ones), and no rate learnt from the first
    steps can know that. Measured worst: 21.1 % (Gen A CUDA), 23.6 % (Gen B CUDA, at 25 %: before it was
    48 %), 36.9 % (Gen A CPU), 26.1 % (Gen B CPU); held to within 40 %, and within 20 % from 90 %."""
    stem, other, jobs = LOGS[name]
    errs = errors(stem, profiles(stem, other, "cuda" in stem)["cross"], jobs)
    print(_row(name, "cross", errs))
    assert all(abs(e) <= 0.40 for e in errs.values()), errs
    assert abs(errs[0.9]) <= 0.20, errs


@pytest.mark.parametrize("name", list(LOGS))
def test_the_dry_run_estimate_schedules_the_plan_on_its_jobs(name: str) -> None:
    """`engine build --dry-run`'s minutes: the plan scheduled on -j slots from the build's own costs is
    its real wall time within 1 % (the sum over jobs was 3 % short on the CUDA builds: the tail)."""
    stem, other, jobs = LOGS[name]
    steps = read_log(stem)
    assert jobs_of(steps) == jobs  # the fixture read as Ninja ran it: one step per edge, -j at most
    wall = max(s.end for s in steps)
    scheduled = estimate_seconds([s.output for s in steps], profiles(stem, other, "cuda" in stem)["own"], jobs)
    assert abs(scheduled - wall) <= 0.01 * wall, (scheduled, wall)


def test_list_schedule_fills_the_slot_that_frees_first() -> None:
    assert list_schedule([4.0, 4.0, 4.0], 2) == 8.0
    assert list_schedule([1.0, 1.0, 1.0, 1.0], 2, busy=[5.0]) == 5.0  # the free slot takes all four
    assert list_schedule([], 4, busy=[2.0, 5.0]) == 5.0


def test_the_rate_is_learnt_from_the_steps_finished_and_running_steps_count_their_time() -> None:
    """Four 10 s steps (profile) on 2 slots of a machine twice as slow: the first two end at 20 s and the
    other two start then: 20 s left. One of those ending at 25 s brings the rate to 45 / 30; the other,
    started at 20 s, is 5 s into its 15 s."""
    now = [0.0]
    plan = [f"a/CMakeFiles/t.dir/s{i}.cpp.o" for i in range(4)]
    eta = WeightedEta(plan, dict.fromkeys(plan, 10.0), clock=lambda: now[0], jobs=2)
    now[0] = 20.0
    eta.feed(f"[1/4] {description(plan[0])}")
    assert eta.feed(f"[2/4] {description(plan[1])}") == (2, 4, pytest.approx(20.0))
    now[0] = 25.0
    assert eta.feed(f"[3/4] {description(plan[2])}") == (3, 4, pytest.approx(10.0))


def test_a_kernel_family_learns_its_own_rate() -> None:
    """A C++ step as the profile said (10 s), then a kernel 3x its profile cost: the build runs at 2x,
    that kernel's family at (30 + 2 * 30) / (10 + 30) = 2.25x (its three-step prior at the build's rate),
    another family at the build's 2x."""
    now = [0.0]
    d = "g/CMakeFiles/c.dir/template-instances"
    plan = ["a/CMakeFiles/t.dir/s.cpp.o", f"{d}/vec-instance-a.cu.o", f"{d}/vec-instance-b.cu.o",
            f"{d}/mma-instance-a.cu.o"]
    eta = WeightedEta(plan, dict.fromkeys(plan, 10.0), clock=lambda: now[0], jobs=1)
    now[0] = 10.0
    assert eta.feed(f"[1/4] {description(plan[0])}") == (1, 4, pytest.approx(30.0))
    now[0] = 40.0
    assert eta.feed(f"[2/4] {description(plan[1])}") == (2, 4, pytest.approx(22.5 + 20.0))


def test_a_step_past_its_expected_time_is_not_taken_for_done() -> None:
    now = [0.0]
    plan = ["a/CMakeFiles/t.dir/slow.cpp.o", "a/CMakeFiles/t.dir/quick.cpp.o"]
    eta = WeightedEta(plan, dict.fromkeys(plan, 10.0), clock=lambda: now[0], jobs=2)
    now[0] = 10.0
    step = eta.feed(f"[1/2] {description(plan[1])}")
    assert step is not None and step[2] == pytest.approx(0.1 * 10.0)
    now[0] = 30.0  # the other one still runs, 20 s past its 10 s: a tenth of its time is still expected
    assert eta.feed("[2/3] Generating build details from Git") == (2, 3, pytest.approx(1.0))


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
    assert shipped_profile(cuda=True)["ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/fattn.cu.o"] > 10


def test_a_cuda_build_without_a_cuda_profile_is_weighted_by_kind() -> None:
    """The H200 CUDA build of v0.1.2 against the CPU profile alone (no CUDA step known; BeeDeck always has
    its shipped CUDA profile, this is the floor): CUDA kernels weigh 25x a C++ step, so from 60 % on the
    estimate is within 20 % (measured -11.5, -3.1, +2.9 %) where the step count said 2x-4x too much
    (real 64 s left at 60 %, the count said 271 s)."""
    cpu_only = load_profile(RESOURCES / "llama-cpp-cpu.json")
    stem, _other, jobs = LOGS["Gen A CUDA (v0.1.2, H200, -j16)"]
    steps = read_log(stem)
    finished = sorted(steps, key=lambda s: s.end)
    for at in (0.6, 0.75, 0.8):
        weighted, real = replay(steps, cpu_only, jobs, at)
        now = [finished[0].end]
        linear = ProgressTracker(clock=lambda c=now: c[0])
        for i, step in enumerate(finished[: int(at * len(finished)) + 1]):
            now[0] = step.end
            fed = linear.feed(f"[{i + 1}/{len(finished)}] {description(step.output)}")
        assert fed is not None and fed[2] is not None
        assert abs(weighted - real) <= 0.2 * real, (at, real, weighted)
        assert fed[2] > real * 2, (at, real, fed[2])  # the step count's error this replaces


def test_the_points_are_the_issues() -> None:
    assert POINTS == (0.1, 0.25, 0.5, 0.75, 0.9)
