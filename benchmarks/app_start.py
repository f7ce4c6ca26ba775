"""Cold start to visible window, and the idle cost of the app (not a test: prints numbers).

    .venv/bin/python benchmarks/app_start.py [--runs 5] [--idle-seconds 10] [--importtime 25]
    .venv/bin/python benchmarks/app_start.py --compare /usr/bin/beedeck-gui --compare ".venv/bin/python -m beedeck"

Start time, for the first start (nothing set up: the wizard-or-starter path) and an ordinary one (set up
before, a launch profile saved): from just before the benchmark spawns the interpreter to the first event-loop turn after the
main window is shown (so interpreter start-up, imports, QApplication, the window and its widgets are all
counted), read on the wall clock by both processes. Not psutil's create_time: on Linux it adds the boot
time rounded to the second, so every process looks up to 1 s older than it is (0.35 s on the machine
this was written on: a bare ``python -c pass`` "took" 0.43 s). From source, this checkout's ``gui/`` is
what runs (PYTHONPATH), not whatever ``beedeck`` the interpreter would find first.

Idle: the app with no server (``--no-autostart``) left alone; CPU over a window, and its resident memory.
``--importtime N``: one more cold start under ``-X importtime``, its N slowest imports (cumulative).
Runs offscreen unless QT_QPA_PLATFORM says otherwise.

Goal (issue 22): the window shown <= 0.5 s from a cold start; printed as a ratio (<= 1.00 meets it),
with the load average (other work on the machine slows every figure).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

GOAL_S = 0.5
REPO = Path(__file__).resolve().parents[1]


def goal(median_s: float) -> str:
    return (f"goal {GOAL_S:g} s: ratio {median_s / GOAL_S:.2f} (<= 1.00 meets it); "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


CHILD = r"""
import os, sys, time
from PySide6.QtCore import QTimer
from beedeck.ui.window.app import build_window, create_app
from beedeck.ui.window.theme import apply_theme
app = create_app([sys.argv[0]])
apply_theme(app, "system")
win = build_window(no_autostart=True, background_after_ms=100)  # as app.main does
win.show()
def shown():
    print(f"VISIBLE_AT {time.time():.4f}", flush=True)
    if os.environ.get("BD_EXIT") == "1":
        app.quit()
QTimer.singleShot(0, shown)
app.exec()
"""


# An ordinary start: set up before (first_run_done) and a launch profile saved; written before the timed
# start, by a process of its own.
SET_UP = r"""
import json
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.profile import profile_path
from beedeck.core.settings import AppSettings, save_settings
save_settings(AppSettings(first_run_done=True))
profile_path().write_text(json.dumps({"engine": "/opt/bee/llama-server", "label": "BeeLlama",
                                      "settings": LaunchSettings(target="/m/q.gguf").to_dict()}))
"""


def timed_start(argv: list[str], env: dict[str, str], marker: str, saved: bool = False) -> tuple[float, str]:
    """Seconds from spawning ``argv`` to the window shown (the child prints ``marker`` and the epoch
    time), and the child's stderr. ``saved``: an ordinary start (a profile saved), else the first one."""
    with tempfile.TemporaryDirectory() as home:
        if saved:
            subprocess.run([sys.executable, "-c", SET_UP], env={**env, "BEEDECK_HOME": home}, check=True, timeout=60)
        t0 = time.time()
        done = subprocess.run(argv, env={**env, "BEEDECK_HOME": home, "BD_EXIT": "1"}, capture_output=True,
                              text=True, timeout=120, check=True)
    if marker not in done.stdout:
        raise SystemExit(f"{argv[0]} printed no {marker.strip()!r} line (a build from before app_start.py timed "
                         f"from the spawn? the PYTHONPATH?); it printed: {done.stdout[-300:]!r}")
    return float(done.stdout.split(marker)[1].split()[0]) - t0, done.stderr


def source_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "gui"), env.get("PYTHONPATH", "")) if p)
    return env


def slowest_imports(env: dict[str, str], n: int) -> None:
    """One cold start under -X importtime: its ``n`` slowest imports by cumulative time."""
    _, err = timed_start([sys.executable, "-X", "importtime", "-c", CHILD], env, "VISIBLE_AT ")
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "cumulative" not in line:
            _, self_us, cumulative, name = (part.strip() for part in line.replace("import time:", "|").split("|"))
            rows.append((int(cumulative), int(self_us), name))
    print(f"slowest imports of one cold start (-X importtime, its own overhead included), of {len(rows)}:")
    for cumulative, self_us, name in sorted(rows, reverse=True)[:n]:
        print(f"  {cumulative / 1000:7.1f} ms  (self {self_us / 1000:5.1f})  {name}")


def compare(commands: list[str], runs: int, env: dict[str, str]) -> int:
    """Cold start of each command, interleaved: from spawning it to the window shown (``--measure-start``
    makes the app print when that was)."""
    import shlex

    times: dict[str, list[float]] = {c: [] for c in commands}
    for _ in range(runs):
        for command in commands:
            seconds, _ = timed_start([*shlex.split(command), "--no-autostart", "--measure-start"], env,
                                     "window shown at ")
            times[command].append(seconds)
    for command, values in times.items():
        print(f"{command}: cold start to shown window median {statistics.median(values) * 1000:.0f} ms "
              f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}, n={len(values)}); "
              + goal(statistics.median(values)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--importtime", type=int, default=0, metavar="N",
                    help="also print the N slowest imports of one cold start (-X importtime)")
    ap.add_argument("--compare", metavar="COMMAND", action="append", default=[],
                    help="also time `COMMAND --no-autostart --measure-start` (e.g. an installed /usr/bin/beedeck-gui, "
                         "or 'python -m beedeck.ui.window.app'), interleaved; repeatable")
    args = ap.parse_args()
    if args.compare:  # each command as it is installed: the environment as it is (offscreen unless set)
        return compare(args.compare, args.runs, {"QT_QPA_PLATFORM": "offscreen", **os.environ})
    env = source_env()
    print(f"cold start to visible window, from source ({REPO / 'gui'}):")
    for saved, what in ((False, "first start (nothing set up) "), (True, "ordinary start (profile saved)")):
        times = [timed_start([sys.executable, "-c", CHILD], env, "VISIBLE_AT ", saved)[0] for _ in range(args.runs)]
        print(f"  {what}: median {statistics.median(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}, "
              f"max {max(times) * 1000:.0f}, n={len(times)}); " + goal(statistics.median(times)))
    if args.importtime:
        slowest_imports(env, args.importtime)
    with tempfile.TemporaryDirectory() as home:
        proc = subprocess.Popen([sys.executable, "-c", CHILD], env={**env, "BEEDECK_HOME": home},
                                stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            proc.stdout.readline()
            time.sleep(3.0)  # let start-up work (thread pools, warm-ups) finish
            p = psutil.Process(proc.pid)
            cpu0 = p.cpu_times()
            t0 = time.monotonic()
            time.sleep(args.idle_seconds)
            cpu1 = p.cpu_times()
            used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
            rss = p.memory_info().rss
            print(f"idle: {100 * used / (time.monotonic() - t0):.2f} % of one core over {args.idle_seconds:.0f} s, "
                  f"RSS {rss / 2**20:.0f} MiB")
        finally:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
