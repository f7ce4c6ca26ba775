"""Does BeeDeck's launcher or client cost anything? (Not a test: prints ratios.)

    .venv/bin/python benchmarks/launcher_overhead.py [RUNS] [TOKENS]

1. Time to ready: the starter profile's argv run by ServerProcess (start + /health polling) vs the
   bare binary polled the same way; interleaved runs, medians, ratio wrapped/bare.
2. Tokens/s seen by LlamaClient's streaming chat vs the server's own timings.predicted_per_second
   (goal >= 0.99), median ratio over RUNS replies of TOKENS tokens (ignore_eos).
"""

from __future__ import annotations

import http.client
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.server import ServerProcess, free_port
from beedeck.core.starter import StarterProfile, starter_engine, starter_model

ENGINE = starter_engine()
MODEL = starter_model()
CAPS = probe_engine(str(ENGINE))
PID = Path(tempfile.mkdtemp()) / "server.pid"


def argv() -> list[str]:
    s = StarterProfile(engine=ENGINE, model=MODEL).settings(port=free_port())
    return build_argv(s, CAPS).argv


def health(port: int) -> int | None:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        c.request("GET", "/health")
        return c.getresponse().status
    except OSError:
        return None
    finally:
        c.close()


def bare(a: list[str]) -> float:
    port = int(a[a.index("--port") + 1])
    t0 = time.monotonic()
    p = subprocess.Popen([str(ENGINE), *a], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        while health(port) != 200:
            if p.poll() is not None:
                raise SystemExit("the bare server died")
            time.sleep(0.01)
        return time.monotonic() - t0
    finally:
        p.terminate()
        p.wait(10)


def wrapped(a: list[str]) -> float:
    sp = ServerProcess(ENGINE, a, pid_file=PID).start()
    try:
        return sp.wait_ready(120)
    finally:
        sp.stop()


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tokens = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    b: list[float] = []
    w: list[float] = []
    for i in range(n):  # interleaved so drift hits both alike
        first, second = (bare, wrapped) if i % 2 else (wrapped, bare)
        for fn in (first, second):
            (b if fn is bare else w).append(fn(argv()))
    print("time to ready, bare    median %.3f s  %s" % (statistics.median(b), [round(x, 3) for x in b]))
    print("time to ready, wrapped median %.3f s  %s" % (statistics.median(w), [round(x, 3) for x in w]))
    print("ratio wrapped/bare %.3f" % (statistics.median(w) / statistics.median(b)))
    sp = ServerProcess(ENGINE, argv(), pid_file=PID).start()
    try:
        sp.wait_ready(120)
        cl = LlamaClient(sp.base_url)
        cl.chat([{"role": "user", "content": "warm up"}], max_tokens=8)
        ratios = []
        for i in range(n):
            r = cl.chat([{"role": "user", "content": f"Write a long story about a lighthouse keeper, part {i}."}],
                        max_tokens=tokens, temperature=0.0, extra={"ignore_eos": True})
            assert r.timings is not None and r.client_tokens_per_s is not None
            ratios.append(r.client_tokens_per_s / r.timings.predicted_per_second)
            print(f"reply {i}: client {r.client_tokens_per_s:.1f} tok/s, server {r.timings.predicted_per_second:.1f}"
                  f" tok/s, n={r.timings.predicted_n}, ratio {ratios[-1]:.4f}")
        print("median client/server tokens/s ratio %.4f" % statistics.median(ratios))
    finally:
        sp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
