"""How long a build has left: progress weighted by what each step costs, not by step count.

Ninja's ``[n/N]`` counts steps, and llama.cpp's steps differ by two orders of magnitude: the ggml C
files take a second, ``tools/server`` and ``common`` (nlohmann/json, cpp-httplib) 20-45 s each, and
they come last. A count-linear estimate therefore said "1 min 30 s left" at 84 % of a 552 s CPU build
(real: 170 s) and "8 min 32 s left" at 23 % of a 1,172 s CUDA build.

:class:`WeightedEta` weighs each planned step (from ``ninja -n``, a dry run) by a cost profile: the
step durations of an earlier build (``.ninja_log``), matched by output path, then by kernel family, then
by folder, then by kind (C, C++, CUDA, link), and replays the rest of the build on Ninja's ``jobs``
slots (a list schedule). A count of finished weight alone missed by +37 % early and -27 % late on the
H200's CUDA build of BeeLlama v0.4.3, even from that build's own costs: 16 kernels of a minute run side
by side and count only when they end, and the last quarter of the steps is a few long template
instances. The rate is learnt from this build's own progress, so the profile only has to get the
*proportions* right. BeeDeck ships profiles measured here (``resources/build-profiles``) and saves every
finished build's own, so a rebuild or an update of the same tree is estimated from its real history.
"""

from __future__ import annotations

import heapq
import json
import os
import re
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from beedeck.core import paths

_STEP = re.compile(r"^\[(\d+)/(\d+)\]\s+(?P<desc>.*)$")
_OBJECT = re.compile(r"Building (?:C|CXX|CUDA|ASM|RC)\S* object (?P<out>\S+)")
_LINK = re.compile(r"Linking \S+ (?:shared library|static library|executable|shared module) (?P<out>\S+)")
PROFILE_FILE = "build-profile.json"
# When nothing is known of a kind, relative to the median known step. CUDA kernels take far longer:
# the median .cu step of the H200 build of BeeLlama v0.1.2 took 24.6 s, its median C++ step 1.0 s.
_KIND_FACTOR = {"c": 0.3, "cxx": 1.0, "cuda": 25.0, "link": 1.0, "other": 0.2}
# How many of its own steps a kernel family's profile costs count for against what its finished members
# took (another release's kernels of a family cost alike to each other, not always to the profile's).
_FAMILY_PRIOR = 3.0
# A running step already past its expected time: the share of that time still expected.
_OVERRUN_LEFT = 0.1


def step_output(description: str) -> str | None:
    """The output file a Ninja step description names (``Building CXX object X.o`` -> ``X.o``)."""
    m = _OBJECT.search(description) or _LINK.search(description)
    return m.group("out") if m else None


def kind_of(output: str) -> str:
    if output.endswith((".c.o", ".c.obj")):
        return "c"
    if output.endswith((".cu.o", ".cu.obj")):
        return "cuda"
    if output.endswith((".o", ".obj")):
        return "cxx"
    if "/" in output or output.endswith((".so", ".a", ".dll", ".lib", ".exe")) or "." not in output:
        return "link"
    return "other"


def folder_of(output: str) -> str:
    return output.split("/CMakeFiles/", 1)[0] if "/CMakeFiles/" in output else "(top)"


def family_of(output: str) -> str:
    """A step's family: its folder plus the file name up to ``-instance`` (the generated kernel variants:
    ``fattn-vec-instance-q6_0-q5_1.cu.o`` and ``fattn-vec-instance-f16-f16.cu.o`` cost alike), else ""."""
    name = output.rsplit("/", 1)[-1]
    if "-instance" not in name:
        return ""
    return folder_of(output) + "/" + name.split("-instance", 1)[0] + "-instance"


def profile_from_ninja_log(log: Path) -> dict[str, float]:
    """{output: seconds} from a Ninja ``.ninja_log`` (v5: start_ms, end_ms, mtime, output, hash)."""
    costs: dict[str, float] = {}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if line.startswith("#") or len(parts) < 4:
            continue
        try:
            costs[parts[3]] = max(0.0, (int(parts[1]) - int(parts[0])) / 1000.0)
        except ValueError:
            continue
    return costs


def save_profile(build_dir: Path, dest: Path) -> bool:
    """Keep a finished build's step costs beside its engine (for the next build's estimate)."""
    log = build_dir / ".ninja_log"
    if not log.is_file():
        return False
    costs = profile_from_ninja_log(log)
    if not costs:
        return False
    paths.atomic_write_text(dest / PROFILE_FILE, json.dumps({"schema": 1, "costs": costs}))
    return True


def load_profile(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in data["costs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def shipped_profile(cuda: bool, project: str = "beellama") -> dict[str, float]:
    """The profile measured here for llama.cpp-family trees: CPU steps; CUDA adds its kernels (the median
    of the BeeLlama builds on the lent H200), and a mainline tree its own build's costs over them (its
    kernels of the same names cost otherwise: BeeLlama's proportions put a mainline build 22 % off)."""
    costs = load_profile(paths.resource_path("build-profiles", "llama-cpp-cpu.json"))
    if cuda:
        costs.update(load_profile(paths.resource_path("build-profiles", "llama-cpp-cuda.json")))
        if project == "mainline":
            costs.update(load_profile(paths.resource_path("build-profiles", "mainline-cuda.json")))
    return costs


class CostModel:
    """Seconds-ish cost of a step: exact output, else its family's median (kernel instances of other
    types), else its folder's, else its kind's."""

    def __init__(self, profile: Mapping[str, float]) -> None:
        self.exact = dict(profile)
        by_folder: dict[str, list[float]] = {}
        by_kind: dict[str, list[float]] = {}
        by_family: dict[str, list[float]] = {}
        for out, cost in profile.items():
            by_folder.setdefault(folder_of(out), []).append(cost)
            by_kind.setdefault(kind_of(out), []).append(cost)
            if family_of(out):
                by_family.setdefault(family_of(out), []).append(cost)
        self.family = {k: statistics.median(v) for k, v in by_family.items()}
        self.folder = {k: statistics.median(v) for k, v in by_folder.items()}
        self.kind = {k: statistics.median(v) for k, v in by_kind.items()}
        self.median = statistics.median(profile.values()) if profile else 1.0

    def cost(self, output: str) -> float:
        if output in self.exact:
            return max(self.exact[output], 0.05)
        if family_of(output) in self.family:
            return max(self.family[family_of(output)], 0.05)
        if folder_of(output) in self.folder:
            return max(self.folder[folder_of(output)], 0.05)
        kind = kind_of(output)
        if kind in self.kind and kind != "link":
            return max(self.kind[kind], 0.05)
        return self.median * _KIND_FACTOR.get(kind, 1.0)


class WeightedEta:
    """Turns Ninja status lines into (done, total, eta_seconds) by replaying the rest of the build as
    Ninja runs it: ``jobs`` parallel slots, steps started in the plan's order.

    ``planned`` are the outputs the build will produce in the order Ninja starts them (a ``ninja -n``
    dry run). Writing to a pipe, Ninja prints a step when it *finishes*; each finish frees a slot and
    Ninja starts the next planned compile in it, so the k-th planned compile started when the
    (k - jobs)-th compile finished (links, a moment each, start whenever their objects are done). That
    gives each finished compile its real duration and each running one its elapsed time. The rate (real seconds per profile second) is learnt from the finished steps, per kernel
    family where its members have finished (another release's kernels of one family cost alike to each
    other, not to the profile's), and the remaining steps are list-scheduled on the slots: the long
    kernels that run late in parallel and the few-job tail count as what they are. Without a plan, the
    estimate falls back to the step count.
    """

    def __init__(self, planned: Iterable[str], profile: Mapping[str, float],
                 clock: Callable[[], float] = time.monotonic, jobs: int | None = None) -> None:
        self.model = CostModel(profile)
        self.order = list(dict.fromkeys(planned))
        self.weights = {out: self.model.cost(out) for out in self.order}
        self.families = {out: family_of(out) for out in self.order}
        self.total_weight = sum(self.weights.values())
        self.jobs = max(1, jobs or os.cpu_count() or 2)
        self.clock = clock
        self.t0: float = clock()
        self.finished: dict[str, float] = {}  # output -> seconds after t0 when it finished
        # Compiles start in the plan's order; a link starts once its objects are done, earlier than its
        # place in a dry run (which lists it after everything that was ready before it), and holds its
        # slot for a moment: so a compile's start is counted among compiles only.
        compiles = [out for out in self.order if kind_of(out) != "link"]
        self.position = {out: i for i, out in enumerate(compiles)}
        self._ends: list[float] = []  # each compile's finish, in order

    def feed(self, line: str) -> tuple[int, int, float | None] | None:
        m = _STEP.match(line)
        if not m:
            return None
        done, total = int(m.group(1)), int(m.group(2))
        elapsed = self.clock() - self.t0
        out = step_output(m.group("desc"))
        if out is not None and out in self.weights and out not in self.finished:
            self.finished[out] = elapsed
            if out in self.position:
                self._ends.append(elapsed)
        if self.finished and elapsed > 0:
            return done, total, self.seconds_left(elapsed)
        if done > 0 and elapsed > 0:
            return done, total, elapsed / done * (total - done)
        return done, total, None

    def _started(self, out: str) -> float | None:
        """When a planned compile started (seconds after t0), None if not yet (or a link)."""
        position = self.position.get(out)
        if position is None:
            return None
        if position < self.jobs:
            return 0.0
        k = position - self.jobs
        return self._ends[k] if k < len(self._ends) else None

    def _rates(self) -> tuple[float, dict[str, tuple[float, float]]]:
        """Real seconds per profile second over all finished steps, and (real, profile) per family."""
        real = cost = 0.0
        family: dict[str, tuple[float, float]] = {}
        for out, end in self.finished.items():
            start = self._started(out)
            if start is None:
                continue  # a link: a moment, not timed
            took = max(0.0, end - start)
            real, cost = real + took, cost + self.weights[out]
            if fam := self.families[out]:
                r, c = family.get(fam, (0.0, 0.0))
                family[fam] = (r + took, c + self.weights[out])
        return (real / cost if cost > 0 else 1.0), family

    def seconds_left(self, elapsed: float) -> float:
        """The rest of the build, ``elapsed`` seconds in: its running and waiting steps on the slots."""
        rate, family = self._rates()

        def seconds(out: str) -> float:
            # A family's own rate, weighed against the build's with a prior of three such steps.
            r, c = family.get(self.families[out], (0.0, 0.0))
            prior = _FAMILY_PRIOR * self.weights[out]
            return self.weights[out] * (r + rate * prior) / (c + prior)

        running: list[float] = []
        waiting: list[float] = []
        for out in self.order:
            if out in self.finished:
                continue
            start = self._started(out)
            if start is None:
                waiting.append(seconds(out))
            elif len(running) < self.jobs:
                expected = seconds(out)  # a step past its expected time is taken to be nearly done
                running.append(max(expected - (elapsed - start), _OVERRUN_LEFT * expected))
            else:
                waiting.append(seconds(out))
        return list_schedule(waiting, self.jobs, running)


def list_schedule(durations: Iterable[float], jobs: int, busy: Iterable[float] = ()) -> float:
    """The wall time of running ``durations`` in order on ``jobs`` slots, each step on the slot that frees
    first (Ninja's way), the slots busy for ``busy`` seconds first."""
    slots = sorted(busy)[:jobs]
    slots += [0.0] * (jobs - len(slots))
    heapq.heapify(slots)
    for d in durations:
        heapq.heappush(slots, heapq.heappop(slots) + d)
    return max(slots)


def estimate_seconds(planned: Iterable[str], profile: Mapping[str, float], jobs: int) -> float:
    """The whole build's wall time at ``jobs`` parallel jobs, from the profile's per-step seconds,
    scheduled as Ninja runs the plan (the long kernels that start late and the few-job tail included).

    A profile's step times were taken with its own build's parallelism, so this is the time on a
    machine of the same per-core speed.
    """
    model = CostModel(profile)
    return list_schedule((model.cost(out) for out in dict.fromkeys(planned)), max(1, jobs))


def planned_outputs(dry_run_output: str) -> list[str]:
    """The outputs named by ``ninja -n`` (one ``[k/N] description`` line per step)."""
    out = []
    for line in dry_run_output.splitlines():
        m = _STEP.match(line.strip())
        if m:
            name = step_output(m.group("desc"))
            if name:
                out.append(name)
    return out
