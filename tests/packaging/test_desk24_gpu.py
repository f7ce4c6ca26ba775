"""packaging/gpu-check/desk24_gpu.py, the 24 GB desk on the GPU machine, rehearsed end to end on this CPU machine
as the lead runs it there (one process per engine, its JSON and Markdown under --out): the recommendation from the
fake hub's metadata-only Gemma 4 31B, the start through the serving, the fill, the round trips with and without the
slot carried and the acceptance after a restore, on the starter engine with the synthetic sticky pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.engine

SCRIPT = REPO / "packaging" / "gpu-check" / "desk24_gpu.py"


def test_the_harness_rehearses_every_step_and_the_carried_slot_shows(tmp_path: Path, starter_engine_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "BEEDECK_GPU_WORK": str(tmp_path / "work"), "PYTHONPATH": f"{REPO / 'gui'}{os.pathsep}{REPO}"}
    done = subprocess.run([sys.executable, str(SCRIPT), "measure", "--rehearse", "--engine", str(starter_engine_path),
                           "--label", "ml", "--out", str(out)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rec = json.loads((out / "desk24-ml.json").read_text())
    primary = rec["recommendation"]["answer"]["primary"]  # what the 24 GB card is offered, from the headers
    assert primary["target_file"] == "gemma-4-31B-it-Q4_K_M.gguf" and primary["settings"]["ctx_size"] > 32_000
    assert rec["fill"]["tokens"] == 4096 - 64 and rec["first_start"]["ready_s"] > 0
    trips = {t["name"]: t for t in rec["round_trips"]}
    before, carried = trips["before: no slot carried"], trips["slot carried"]
    for a, b in zip(before["switches"], carried["switches"], strict=True):
        assert a["next_turn"]["prompt_n"] > 1000 and a["carried"] is None  # the whole conversation read again
        assert b["next_turn"]["prompt_n"] <= 17 and b["carried"]["kind"] == "restored" and b["restore_s"] > 0
        assert b["phases"]["listening to ready"] is not None and b["phases"]["before the first log line"] >= 0
    assert "draft load" in trips["slot carried, -lv 4 (the fine split)"]["switches"][1]["phases"]
    for key in ("restored", "read_again"):
        replies = rec["acceptance"][key]["replies"]
        assert len(replies) == 3 and all(r["draft_n"] > 0 and r["accepted"] == r["draft_n"] for r in replies)
    md = (out / "desk24-ml.md").read_text()
    assert "| slot carried |" in md and "acceptance after a switch into DFlash, cache restored" in md
