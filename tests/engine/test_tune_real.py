"""`beedeck tune` on the real mainline CPU llama-server with the synthetic sticky pair (real DFlash
drafts, 100 % accepted): from a deliberately poor start (draft max 1) it must find a configuration
measurably faster, within its budget, with the baseline's text, and save it as the profile.

Kept short for the shared 2-core machine: one prompt, 64 tokens, a 25 s budget. A second run is
interrupted with Ctrl-C (SIGINT) while its first candidate is measured: it stops the server, reports
the points measured so far and exits 130.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from beedeck.clicmd.bench import synthetic_bench_pair
from tests.conftest import PERSISTENT, REPO

pytestmark = pytest.mark.engine

BUDGET_S = 25.0


@pytest.mark.timeout(240)
def test_cli_tune_beats_a_poor_start_on_the_synthetic_pair_and_saves_it(
    starter_engine_path: Path, beedeck_home: Path, tmp_path: Path, record_property: Any,
) -> None:
    target, draft = synthetic_bench_pair(PERSISTENT / "synth-bench")
    suite = tmp_path / "one.json"
    suite.write_text(json.dumps({"name": "one", "request": {"max_tokens": 64, "temperature": 0, "seed": 7},
                                 "prompts": [{"id": "py", "text": "Write python code for the deck."}]}))
    out = tmp_path / "out"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO / "gui")}
    proc = subprocess.run(
        [sys.executable, "-m", "beedeck", "tune", "--engine", str(starter_engine_path), "--target", str(target),
         "--draft", str(draft), "--draft-max", "1", "--threads", "1", "--suite", str(suite),
         "--budget", f"{BUDGET_S:.0f}s", "--out", str(out), "--json", "--save-profile"],
        capture_output=True, text=True, env=env, timeout=220, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    points = data["points"]
    base, start = points[0], points[1]
    best = points[data["best_index"]]
    line = (f"baseline {base['gen_tps']['median']:.1f} tok/s; start (draft max 1) {start['gen_tps']['median']:.1f} "
            f"tok/s; best {best['label']} {best['gen_tps']['median']:.1f} tok/s, "
            f"{data['best_vs_start']['ratio'] if data['best_vs_start'] else 0:.2f}x the start "
            f"(95 % CI {data['best_vs_start']['ci_low'] if data['best_vs_start'] else 0:.2f}-"
            f"{data['best_vs_start']['ci_high'] if data['best_vs_start'] else 0:.2f}); "
            f"{len(points)} points in {data['elapsed_s']:.0f} s")
    print(line)
    record_property("tune_synthetic", line)
    # The plan was shown before the search, then with the time per point once it was measured.
    assert "Plan: " in proc.stderr and "per point" in proc.stderr
    # The baseline is a server without speculation; the start and every candidate draft.
    assert base["role"] == "baseline" and base["settings"]["spec_mode"] == "off" and "--spec-type" not in base["argv"]
    assert start["role"] == "start" and start["settings"]["draft_n_max"] == 1 and start["acceptance"] == 1.0
    assert data["improved"] is True, data["verdict"]
    assert best["settings"]["draft_n_max"] > 1 and best["status"] == "measured"
    assert data["best_vs_start"]["ci_low"] > 1.02 and best["vs_baseline"]["ci_low"] > 1.0
    assert best["identical"] == best["compared"] > 0  # greedy + lossless: the baseline's text
    assert "Best: " in data["verdict"] and "x the start (95 % CI" in data["verdict"]
    # The budget rule: no point started after the estimate said it would end past the budget.
    assert data["elapsed_s"] <= BUDGET_S + max(p["seconds"] for p in points)
    assert sorted(p.name for p in out.iterdir()) == ["tune.csv", "tune.json", "tune.md", "tune.png"]
    assert len((out / "tune.csv").read_text().splitlines()) == len(points) + 1
    saved = json.loads((beedeck_home / "config" / "profile.json").read_text())
    assert saved["engine"] == str(starter_engine_path)
    assert saved["settings"]["draft_n_max"] == best["settings"]["draft_n_max"]
    assert saved["settings"]["spec_mode"] == "dflash" and saved["settings"]["draft"] == str(draft)
    # The speed advice learnt the baseline and, measured with the same settings apart from the mode, the best
    # point when it changed only the speculation, else the start (threads=2 would be another setup).
    assert "learnt 6 figures" in data["advice"], data["advice"]
    advice = json.loads((beedeck_home / "data" / "advice.json").read_text())
    (key, kinds), = advice["setups"].items()
    assert f"| {target.name} | {draft.name} | settings " in key and set(kinds["code"]) == {"baseline", "dflash"}
    taught = best if "threads" not in best["changes"] else start
    assert sorted(v for p in kinds["code"]["dflash"].values() for v in p) == sorted(
        round(s["gen_tps"], 3) for s in taught["samples"])


@pytest.mark.timeout(240)
def test_cli_tune_ctrl_c_stops_the_server_and_reports_what_was_measured(
    starter_engine_path: Path, beedeck_home: Path, tmp_path: Path,
) -> None:
    import psutil

    target, draft = synthetic_bench_pair(PERSISTENT / "synth-bench")
    out = tmp_path / "out"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO / "gui")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "beedeck", "tune", "--engine", str(starter_engine_path), "--target", str(target),
         "--draft", str(draft), "--draft-max", "1", "--threads", "1", "--suite", "seed", "--max-tokens", "64",
         "--budget", "10m", "--out", str(out), "--json", "--no-charts"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    servers: set[int] = set()
    err = b""
    try:
        os.set_blocking(proc.stderr.fileno(), False)  # type: ignore[union-attr]
        deadline = time.monotonic() + 180
        # Interrupt while the first candidate is measured: the baseline and the start are done by then.
        while b"point 3/" not in err and time.monotonic() < deadline and proc.poll() is None:
            chunk = proc.stderr.read() or b""  # type: ignore[union-attr]
            err += chunk
            servers |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
            time.sleep(0.1)
        assert b"point 3/" in err, err.decode(errors="replace")[-2000:]
        servers |= {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
        proc.send_signal(signal.SIGINT)
        stdout, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (err + rest).decode(errors="replace")[-3000:]
    data = json.loads(stdout)
    assert data["cancelled"] is True and "The search was cancelled" in " ".join(data["notes"])
    roles = [p["role"] for p in data["points"]]
    assert roles[:2] == ["baseline", "start"] and data["points"][0]["gen_tps"]["median"] > 0
    assert data["points"][1]["gen_tps"]["median"] > 0  # what was measured before Ctrl-C is reported
    assert sorted(p.name for p in out.iterdir()) == ["tune.csv", "tune.json", "tune.md"]
    assert servers and not [pid for pid in servers if psutil.pid_exists(pid)
                            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE], "a server outlived Ctrl-C"
