"""`beedeck connect` to a server whose /health body never ends: peak memory and time (not a test).

    .venv/bin/python benchmarks/hostile_health.py [--cap-gb 4] [--limit-s 30]

A raw socket on 127.0.0.1 answers /health with `{"status":"ok"` and then spaces for ever. The CLI runs
as a child under an address-space cap (so an unbounded read ends in MemoryError, not in the machine's
swap); its RSS is sampled every 50 ms. The goal: a message within a second or two of start-up and a
peak RSS under 100 MB (the read stops at 64 KB). Before issue 20's fix: 0.6 -> 6 GB in 18 s.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

import psutil

GOAL_RSS_MB = 100.0
GOAL_S = 3.0


def endless_health(stop: threading.Event) -> str:
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"status":"ok"')
            block = b" " * 65536
            try:
                while not stop.is_set():
                    conn.sendall(block)
            except OSError:
                pass

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap-gb", type=float, default=4.0, help="address-space cap of the child (default 4)")
    ap.add_argument("--limit-s", type=float, default=30.0, help="give the child this long (default 30)")
    args = ap.parse_args()
    stop = threading.Event()
    url = endless_health(stop)
    cap_kb = int(args.cap_gb * 2**20)
    t0 = time.monotonic()
    child = subprocess.Popen(["bash", "-c", f'ulimit -v {cap_kb}; exec "$0" -m beedeck connect "$1"', sys.executable,
                              url], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    peak = 0
    while child.poll() is None and time.monotonic() - t0 < args.limit_s:
        try:
            peak = max(peak, psutil.Process(child.pid).memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    if child.poll() is None:
        child.kill()
    _, err = child.communicate()
    wall = time.monotonic() - t0
    stop.set()
    last = (err.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:100]
    print(f"exit {child.returncode} after {wall:.2f} s; peak RSS {peak / 2**20:.0f} MiB; last line: {last}")
    print(f"RSS {peak / 2**20 / GOAL_RSS_MB:.2f}x the {GOAL_RSS_MB:.0f} MB goal; time {wall / GOAL_S:.2f}x the "
          f"{GOAL_S:.0f} s goal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
