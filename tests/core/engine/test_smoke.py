"""smoke: a new engine must load a tiny model and generate (the real starter engine and model), and an engine
whose CPU code cannot run here is caught by its death (a real SIGILL / SIGSEGV, tests/fakes/crashing_engine.py)."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import pytest

from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.smoke import SMOKE_TOKENS, check_generation, smoke_engine
from tests.fakes.crashing_engine import crashing_engine


def _no_server_left() -> None:
    left = [p for p in psutil.Process().children(recursive=True) if "llama-server" in " ".join(p.cmdline())]
    assert left == [], f"a smoke-test server outlived its check: {left}"


@pytest.mark.engine
def test_the_starter_engine_generates_from_the_starter_model(starter_engine_path: Path,
                                                             starter_model_path: Path) -> None:
    check = check_generation(starter_engine_path, probe_engine(str(starter_engine_path)), starter_model_path)
    assert check.ok, check.message
    assert 0 < check.tokens <= SMOKE_TOKENS and check.signal is None and not check.cpu_fault
    assert check.message.startswith(f"generated {check.tokens} tokens from {starter_model_path.name} in ")
    _no_server_left()


@pytest.mark.engine
def test_the_whole_smoke_test_probes_then_generates(starter_engine_path: Path, starter_model_path: Path) -> None:
    smoke, check = smoke_engine(starter_engine_path, expect_gpu=False, prober=probe_engine,
                                locate=lambda: starter_model_path)
    assert smoke.ok and check is not None and check.ok
    assert "answers --help/--version; backend cpu; generated" in smoke.message and smoke.backend == "cpu"


def test_without_a_model_generation_is_not_tried_and_the_result_says_so(starter_engine_path: Path,
                                                                        tmp_path: Path) -> None:
    smoke, check = smoke_engine(starter_engine_path, expect_gpu=False, prober=probe_engine, locate=None)
    assert smoke.ok and check is None and smoke.message.endswith("; generation not tried: no test model was given")

    def missing() -> Path:
        raise LookupError("run `make install`")

    smoke, check = smoke_engine(starter_engine_path, expect_gpu=False, prober=probe_engine, locate=missing)
    assert check is None and "generation not tried: the test model is not here (run `make install`)" in smoke.message
    smoke, _ = smoke_engine(starter_engine_path, expect_gpu=False, prober=probe_engine,
                            locate=lambda: tmp_path / "gone.gguf")
    assert f"the test model {tmp_path / 'gone.gguf'} is missing" in smoke.message


def test_an_engine_that_dies_by_sigill_in_warm_up_is_a_cpu_fault_with_the_remedy(
        starter_engine_path: Path, starter_model_path: Path, tmp_path: Path) -> None:
    engine = crashing_engine(tmp_path / "ill", starter_engine_path)
    check = check_generation(engine, probe_engine(str(engine)), starter_model_path)
    assert not check.ok and check.signal == int(signal.SIGILL) and check.cpu_fault and not check.amx
    assert check.message.startswith("llama-server crashed with SIGILL: this build uses CPU instructions this machine "
                                    "does not run.")
    assert "`beedeck engine build --no-native`" in check.message and "`beedeck engine download`" in check.message
    assert any("warming up the model" in line for line in check.log_tail)
    _no_server_left()
    # What the registry records: not ready, and why.
    smoke, _ = smoke_engine(engine, expect_gpu=False, prober=probe_engine, locate=lambda: starter_model_path)
    assert not smoke.ok
    assert smoke.message.startswith(f"llama-server answers --help but failed a {SMOKE_TOKENS}-token generation: "
                                    "llama-server crashed with SIGILL")


def test_a_crash_inside_amx_code_is_a_cpu_fault_whatever_the_signal(
        starter_engine_path: Path, starter_model_path: Path, tmp_path: Path) -> None:
    segv = crashing_engine(tmp_path / "amx-segv", starter_engine_path, signal="SEGV", amx=True)
    check = check_generation(segv, probe_engine(str(segv)), starter_model_path)
    assert check.signal == int(signal.SIGSEGV) and check.amx and check.cpu_fault
    assert "while running AMX matrix code (its log shows an AMX buffer)" in check.message
    ill = crashing_engine(tmp_path / "amx-ill", starter_engine_path, amx=True)
    check = check_generation(ill, probe_engine(str(ill)), starter_model_path)
    assert check.cpu_fault and "(its AMX matrix code: its log shows an AMX buffer)" in check.message
    # A SIGSEGV elsewhere is a plain crash: no rebuild would cure it.
    plain = crashing_engine(tmp_path / "segv", starter_engine_path, signal="SEGV")
    check = check_generation(plain, probe_engine(str(plain)), starter_model_path)
    assert check.signal == int(signal.SIGSEGV) and not check.amx and not check.cpu_fault
    _no_server_left()
