"""Full-size pairs meet each real engine family's checks before launch: the metadata-only Gemma 4 31B
Q4_K_M (18.7 GB, zero weights, sparse) with its DFlash Q5_K_M draft (1.1 GB) in each draft format.

The loads themselves ran on the CUDA builds of BeeLlama v0.4.3 and v0.1.2 on an H200
(docs/gpu-runs/2026-12-01-h200-fullsize: plan within 0.1 % of the engine's buffers). On this 2-core,
23 GiB machine BeeDeck's launch refuses the pair and says why: its weights would sit in host memory.
"""

from __future__ import annotations

import pytest

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.server import ServerFailed
from beedeck.core.launcher import launch
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.fixtures import meta_gguf as mg

pytestmark = pytest.mark.engine

FULL = PERSISTENT / "fullsize"


def _settings(fmt: str) -> LaunchSettings:
    target, draft = mg.gemma4_pair(FULL, "Q4_K_M", fmt)
    assert target.stat().st_size > 18e9 and 1.0e9 < draft.stat().st_size < 1.2e9
    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size, s.threads, s.mmap, s.mlock, s.no_host = 2048, 1, True, False, False
    return s


def test_the_full_size_pair_in_its_format_is_refused_only_for_host_memory(real_engine: RealEngine) -> None:
    """The right format passes every layout and guard check; what stops it is the 23 GiB host."""
    with pytest.raises(ServerFailed, match="host memory") as info:
        launch(real_engine.path, real_engine.caps, _settings("dflash-draft" if real_engine.kind == "bee-a" else "dflash"))
    assert "GiB" in info.value.failure.message and info.value.failure.remedy


def test_a_draft_in_the_other_format_is_refused_before_launch(real_engine: RealEngine) -> None:
    """The fork format on an upstream engine (and the reverse on Gen A) never reaches the engine."""
    with pytest.raises(ServerFailed) as info:
        launch(real_engine.path, real_engine.caps, _settings("dflash" if real_engine.kind == "bee-a" else "dflash-draft"))
    assert info.value.failure.code == "wrong_draft_format"
