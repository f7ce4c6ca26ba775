"""Cold start to visible window, and the idle cost of the app (not a test: prints numbers).

    .venv/bin/python benchmarks/app_start.py [--runs 5] [--idle-seconds 10]
    .venv/bin/python benchmarks/app_start.py --compare /usr/bin/beedeck --compare ".venv/bin/python -m beedeck"

Start time: from the interpreter's process creation to the first event-loop turn after the main
window is shown (so imports, QApplication, the window and its widgets are all counted). Idle: the
app with no server (``--no-autostart``) left alone; CPU over a window, and its resident memory.
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

import psutil

GOAL_S = 0.5


def goal(median_s: float) -> str:
    return (f"goal {GOAL_S:g} s: ratio {median_s / GOAL_S:.2f} (<= 1.00 meets it); "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


CHILD = r"""
import os, sys, time
import psutil
t0 = psutil.Process().create_time()
from PySide6.QtCore import QTimer
from beedeck.ui.window.app import build_window, create_app
from beedeck.ui.window.theme import apply_theme
app = create_app([sys.argv[0]])
apply_theme(app, "system")
win = build_window(no_autostart=True)
win.show()
def shown():
    print(f"VISIBLE {time.time() - t0:.4f}", flush=True)
    if os.environ.get("BD_EXIT") == "1":
        app.quit()
QTimer.singleShot(0, shown)
app.exec()
"""


def compare(commands: list[str], runs: int, env: dict[str, str]) -> int:
    """Cold start of each command (process start to shown window, as the app itself measures it)."""
    import shlex

    times: dict[str, list[float]] = {c: [] for c in commands}
    for _ in range(runs):
        for command in commands:
            with tempfile.TemporaryDirectory() as home:
                out = subprocess.run([*shlex.split(command), "--no-autostart", "--measure-start"],
                                     env={**env, "BEEDECK_HOME": home}, capture_output=True, text=True, timeout=120,
                                     check=True).stdout
            times[command].append(float(out.split("window shown ")[1].split()[0]))
    for command, values in times.items():
        print(f"{command}: cold start to shown window median {statistics.median(values) * 1000:.0f} ms "
              f"(min {min(values) * 1000:.0f}, max {max(values) * 1000:.0f}, n={len(values)}); "
              + goal(statistics.median(values)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--compare", metavar="COMMAND", action="append", default=[],
                    help="also time `COMMAND --no-autostart --measure-start` (e.g. an installed /usr/bin/beedeck, "
                         "or 'python -m beedeck'), interleaved; repeatable")
    args = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    if args.compare:
        return compare(args.compare, args.runs, env)
    times = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as home:
            out = subprocess.run([sys.executable, "-c", CHILD], env={**env, "BEEDECK_HOME": home, "BD_EXIT": "1"},
                                 capture_output=True, text=True, timeout=120, check=True).stdout
        times.append(float(out.split("VISIBLE ")[1].split()[0]))
    print(f"cold start to visible window: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}, n={len(times)}); " + goal(statistics.median(times)))
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
