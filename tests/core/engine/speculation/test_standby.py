"""The other mode kept loaded beside the running server (core/engine/speculation/standby.py): the margin, and the
decision as the launch preflight makes it (core/launcher.py ``standby_preflight``) at full size: the memory an
H200 had free with the DFlash server loaded (docs/gpu-runs/2026-12-02-h200-standby) and a 24 GB card's."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import settings_for_mode
from beedeck.core.engine.speculation.standby import MARGIN_MIN, with_margin
from beedeck.core.launcher import standby_preflight
from beedeck.core.models.planner import GiB
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import MAINLINE, help_stdout


def standby_refusal(caps: EngineCaps, settings: LaunchSettings, **free: object) -> str | None:
    """Why the server cannot stay loaded beside the running one (None: it can)."""
    checked = standby_preflight(caps, settings, **free)  # type: ignore[arg-type]
    assert len(checked.refusals) <= 1 and all(r.code == "standby" for r in checked.refusals)
    return checked.refusals[0].message if checked.refusals else None


@pytest.fixture(scope="module")
def ml() -> EngineCaps:
    return caps_from_texts("/e/ml/llama-server", "version: 11434 (515e85511)", help_stdout(MAINLINE))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory, ml: EngineCaps) -> LaunchSettings:
    """The Baseline server of the guide's Gemma 4 31B Q4_K_M profile (metadata-only: 18.7 GB, sparse)."""
    target, draft = mg.gemma4_pair(tmp_path_factory.mktemp("g4"), "Q4_K_M", "dflash")
    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size = 32768
    return settings_for_mode(s, Mode.BASELINE, ml)


def test_the_margin_keeps_at_least_half_a_gib_or_five_percent() -> None:
    assert with_margin(100 * GiB) == 95 * GiB
    assert with_margin(4 * GiB) == 4 * GiB - MARGIN_MIN
    assert with_margin(GiB // 4) == 0


def test_an_h200_with_the_dflash_server_loaded_keeps_baseline_beside_it(ml: EngineCaps, baseline: LaunchSettings) -> None:
    """116 GiB free beside the DFlash server (measured: 124.8e9 bytes) hold the 22 GiB Baseline server."""
    assert baseline.spec_mode == Mode.BASELINE and baseline.draft is None
    assert standby_refusal(ml, baseline, gpu_free=[124_808_986_624], ram_available=132 * 10**9) is None


def test_a_24_gb_card_restarts_and_says_why(ml: EngineCaps, baseline: LaunchSettings) -> None:
    """A 24 GB card with the 23 GiB DFlash server loaded has under 1 GiB left: no second 19 GB target."""
    why = standby_refusal(ml, baseline, gpu_free=[int(0.8 * GiB)], ram_available=64 * GiB)
    assert why is not None and "more memory than is free beside the running server" in why and "CUDA0" in why


def test_unknown_host_memory_rpc_workers_and_auto_layers_refuse(ml: EngineCaps, baseline: LaunchSettings) -> None:
    from dataclasses import replace

    assert standby_refusal(ml, baseline, gpu_free=None, ram_available=None) == "the host's free memory is unknown"
    assert "RPC" in str(standby_refusal(ml, replace(baseline, rpc_workers=["10.0.0.2:50052"]), gpu_free=[80 * GiB],
                                        ram_available=64 * GiB))
    assert "auto" in str(standby_refusal(ml, replace(baseline, n_gpu_layers="auto"), gpu_free=[80 * GiB],
                                         ram_available=64 * GiB))


def test_a_cpu_only_host_judges_ram_alone(ml: EngineCaps, tmp_path: Path) -> None:
    small = LaunchSettings(target=str(mg.tiny_model(tmp_path / "t.gguf")), n_gpu_layers="0")
    assert standby_refusal(ml, small, gpu_free=None, ram_available=8 * GiB) is None
    assert "host memory" in str(standby_refusal(ml, small, gpu_free=None, ram_available=1024))
