"""Full-size pairs load on each real engine family: the metadata-only Gemma 4 31B Q4_K_M (18.7 GB,
zero weights, sparse) with its DFlash Q5_K_M draft (1.1 GB) in the format that family reads, through
BeeDeck's own launch (guard, argv) on the CPU builds. What a load proves: the engine's loader accepts
every tensor name and shape of the catalog's layouts, target and draft, and the DFlash context builds.

Kept light for a 2-core CI machine: mmap without warm-up or repacking, so the weights are never
read (the holes of the sparse file stay holes); one small context. The CUDA builds of the same
files: docs/gpu-runs/2026-12-01-h200-fullsize.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.server import ServerFailed
from beedeck.core.launcher import launch
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.fixtures import meta_gguf as mg

pytestmark = pytest.mark.engine

FULL = PERSISTENT / "fullsize"


def _settings(target: Path, draft: Path) -> LaunchSettings:
    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size, s.threads, s.mmap, s.mlock, s.no_host = 2048, 1, True, False, False
    s.extra_args = ["--no-warmup", "--no-repack"]
    return s


def test_the_full_size_gemma_pair_loads_on_every_family(real_engine: RealEngine) -> None:
    fmt = "dflash-draft" if real_engine.kind == "bee-a" else "dflash"
    target, draft = mg.gemma4_pair(FULL, "Q4_K_M", fmt)
    assert target.stat().st_size > 18e9 and 1.0e9 < draft.stat().st_size < 1.2e9
    proc = launch(real_engine.path, real_engine.caps, _settings(target, draft))
    try:
        proc.wait_ready(timeout=300)
        with urllib.request.urlopen(f"{proc.base_url}/props", timeout=30) as r:
            props = json.loads(r.read())
        log = "\n".join(proc.log_lines())
    finally:
        proc.stop()
    assert "Gemma-4-31B" in json.dumps(props) or "gemma-4-31B" in json.dumps(props)
    assert "missing tensor" not in log and "wrong shape" not in log
    # The draft was loaded as a DFlash drafter by this engine (its own words differ per family).
    assert "dflash" in log.lower()


def test_a_draft_in_the_other_format_is_refused_before_launch(real_engine: RealEngine) -> None:
    """The fork format on an upstream engine (and the reverse on Gen A) never reaches the engine."""
    fmt = "dflash" if real_engine.kind == "bee-a" else "dflash-draft"
    target, draft = mg.gemma4_pair(FULL, "Q4_K_M", fmt)
    with pytest.raises(ServerFailed) as info:
        launch(real_engine.path, real_engine.caps, _settings(target, draft))
    assert info.value.failure.code == "wrong_draft_format"
