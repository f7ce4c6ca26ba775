"""The starter's speed in the app vs the bare server, and the first-run time to a reply (not a test:
prints numbers).

    .venv/bin/python benchmarks/starter_app_vs_bare.py [--runs 3] [--app COMMAND]

App: the real window offscreen in a fresh data folder (``beedeck --screenshot``: it starts the starter
profile, sends the prompt and prints the first reply's tokens/s and the time from the window's start).
Bare: the same llama-server command line the starter profile builds (same threads), the same prompt
over HTTP, the server's own ``timings.predicted_per_second``. Runs are interleaved; medians and the
ratio app/bare are printed. ``--app`` runs another BeeDeck command (e.g. an installed
``/usr/bin/beedeck``) instead of ``python -m beedeck``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.server import free_port
from beedeck.core.starter import StarterProfile, starter_engine, starter_model

PROMPT = "Write a Python function that reverses a string."
MAX_TOKENS = 160  # what the screenshot run asks for


def bare_run() -> float:
    engine = starter_engine()
    port = free_port()
    settings = StarterProfile(engine=engine, model=starter_model()).settings(port=port)
    argv = build_argv(settings, probe_engine(str(engine))).argv
    proc = subprocess.Popen([str(engine), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the bare server did not become ready")
            time.sleep(0.05)
        # Streamed, as the app asks for it; the last chunk carries the server's timings.
        body = json.dumps({"messages": [{"role": "user", "content": PROMPT}], "max_tokens": MAX_TOKENS,
                           "stream": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body,
                                     {"Content-Type": "application/json"})
        tps = 0.0
        with urllib.request.urlopen(req, timeout=300) as r:
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data: {"):
                    timings = json.loads(line[6:]).get("timings")
                    if timings:
                        tps = float(timings["predicted_per_second"])
        return tps
    finally:
        proc.terminate()
        proc.wait(10)


def app_run(command: list[str]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as home:
        out = subprocess.run([*command, "--screenshot", str(Path(home) / "shots"), "--screenshot-prompt", PROMPT],
                             env={**os.environ, "BEEDECK_HOME": home, "QT_QPA_PLATFORM": "offscreen"},
                             capture_output=True, text=True, timeout=600, check=False)
        m = re.search(r"first reply: \d+ tokens at ([\d.]+) tokens/s.*?; ([\d.]+) s from the window's start", out.stdout)
        if not m:
            raise SystemExit(f"the app run printed no first reply:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        return float(m.group(1)), float(m.group(2))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--app", default=f"{shlex.quote(sys.executable)} -m beedeck")
    args = ap.parse_args()
    command = shlex.split(args.app)
    bare, app, first = [], [], []
    for i in range(args.runs):
        bare.append(bare_run())
        tps, since_start = app_run(command)
        app.append(tps)
        first.append(since_start)
        print(f"run {i + 1}: bare {bare[-1]:.1f} tokens/s, app {tps:.1f} tokens/s, "
              f"first reply done {since_start:.1f} s after the window started", flush=True)
    b, a = statistics.median(bare), statistics.median(app)
    print(f"starter tokens/s: app {a:.1f} vs bare {b:.1f} (medians of {args.runs}), ratio {a / b:.2f}; "
          f"first run to a complete first reply: median {statistics.median(first):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
