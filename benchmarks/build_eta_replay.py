"""The build's time-left estimate replayed on the four recorded builds (not a test: prints numbers).

Each ``.ninja_log`` of tests/fixtures/builds (BeeLlama v0.1.2 = Gen A and v0.4.3 = Gen B, CUDA on the
H200 at -j16 and CPU on the 2-core machine at -j2) is fed to ``WeightedEta`` as the builder feeds it
(tests/fixtures/build_replay.py), estimated from three cost profiles: the build's own, the other
generation's (an update of an earlier build on the same machine) and the shipped one. At 10/25/50/75/90 %
of the steps it prints the estimate's error against the real time left, for the list-scheduling
estimate (now) and for the finished-weight rate it replaced (before: elapsed / finished weight x
weight left), and the dry run's whole-build estimate against the real wall time.

    PYTHONPATH=gui:. .venv/bin/python benchmarks/build_eta_replay.py

Goal: within +-20 % from 10 % of the steps onward (issue 25); prints the worst error per row.
"""

from __future__ import annotations

import time

from tests.fixtures.build_replay import DRIFTING, LOGS, POINTS, Step, errors, profiles, read_log

from beedeck.core.engine.building.eta import CostModel, estimate_seconds

GOAL = 0.20


def before(steps: list[Step], profile: dict[str, float], at: float) -> float:
    """The estimate this replaced: the rate of finished weight since the first finished step."""
    model = CostModel(profile)
    weights = {s.output: model.cost(s.output) for s in steps}
    finished = sorted(steps, key=lambda s: s.end)
    stop = int(at * len(finished))
    done = sum(weights[s.output] for s in finished[: stop + 1])
    elapsed = finished[stop].end - finished[0].end
    real = finished[-1].end - finished[stop].end
    return (elapsed / done * (sum(weights.values()) - done) - real) / real


def cells(errs: list[float]) -> str:
    return " | ".join(f"{e * 100:+.1f} %" for e in errs)


def main() -> None:
    t0 = time.perf_counter()
    head = " | ".join(f"{int(p * 100)} %" for p in POINTS)
    print(f"| build | profile | estimate | {head} | worst | within 20 % |")
    print("| --- | --- | --- |" + " --- |" * (len(POINTS) + 2))
    whole = []
    for name, (stem, other, jobs) in {**LOGS, **DRIFTING}.items():
        steps = read_log(stem)
        wall = max(s.end for s in steps)
        for label, profile in profiles(stem, other, "cuda" in stem).items():
            rows = {"before": [before(steps, profile, at) for at in POINTS],
                    "now": list(errors(stem, profile, jobs).values())}
            for kind, errs in rows.items():
                worst = max(abs(e) for e in errs)
                print(f"| {name} | {label} | {kind} | {cells(errs)} | {worst * 100:.1f} % | "
                      f"{'yes' if worst <= GOAL else 'no'} |")
            whole.append((name, label, estimate_seconds([s.output for s in steps], profile, jobs), wall,
                          sum(CostModel(profile).cost(s.output) for s in steps) / jobs))
    print("\nThe dry run's whole-build estimate (the profile's seconds, scheduled on the build's -j) vs the "
          "real wall time:\n")
    print("| build | profile | scheduled | before (sum / jobs) | real |")
    print("| --- | --- | --- | --- | --- |")
    for name, label, scheduled, wall, summed in whole:
        print(f"| {name} | {label} | {scheduled:.0f} s ({(scheduled - wall) / wall * 100:+.1f} %) | "
              f"{summed:.0f} s ({(summed - wall) / wall * 100:+.1f} %) | {wall:.0f} s |")
    print(f"\n(replayed in {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
