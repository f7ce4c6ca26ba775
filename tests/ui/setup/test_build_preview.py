"""The wizard shows the build's dry run before it builds: the real builder on the real mini CMake tree
(tests/fixtures/mini_cmake, with Gen B's ggml/CMakeLists.txt beside it so the FlashAttention choice is
Gen B's), through the run page."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.building import builder
from beedeck.core.engine.registry import EngineRegistry
from beedeck.ui.setup.build_preview import FAILED, HEADING
from beedeck.ui.setup.setup_run_page import RunPage
from beedeck.ui.setup.setup_wizard import SetupWizard
from tests.conftest import FIXTURES
from tests.fakes.fake_nvml import detect_rtx4090 as gpu_detect
from tests.ui.setup.test_setup_wizard import _fake_choice, make_wizard


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The mini tree with BeeLlama v0.4.3's ggml/CMakeLists.txt (read for its FA policy, not built), and an
    nvcc on PATH (CI has no CUDA toolkit: an executable that prints what nvcc 13.0 prints stands in; the
    mini tree compiles no CUDA)."""
    src = tmp_path / "tree"
    shutil.copytree(FIXTURES / "mini_cmake", src)
    (src / "ggml").mkdir()
    shutil.copy(FIXTURES / "builds" / "trees" / "beellama-v0.4.3" / "ggml" / "CMakeLists.txt", src / "ggml")
    bin_dir = tmp_path / "cuda-bin"
    bin_dir.mkdir()
    (bin_dir / "nvcc").write_text("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                                  "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n")
    (bin_dir / "nvcc").chmod(0o755)
    # ...with the cuBLAS CMake needs beside it (the preflight looks for them before it lets CMake run)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cublas_v2.h").write_text("")
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libcublas.so").write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(shutil.which('cmake') or '/usr/bin/cmake').parent}:/usr/bin:/bin")
    return src


def _run_page(qtbot: QtBot, tree: Path, calls: list[dict[str, Any]]) -> tuple[SetupWizard, RunPage]:
    def build_engine(**kw: Any) -> Any:
        # The real builder; the source is the local tree (the wizard's default is BeeLlama's git URL).
        calls.append({**kw, "thread": threading.current_thread()})
        return builder.build_engine(tree, **kw)

    w = make_wizard(qtbot, gpu_detect, build_engine=build_engine, registry=EngineRegistry())
    w.services.recommend = lambda vram, goal, **_kw: _fake_choice()
    w.next()
    w.next()
    run = w.run_page
    qtbot.waitUntil(lambda: run.start_button.isEnabled(), timeout=10_000)
    return w, run


def test_choosing_the_build_shows_its_dry_run_then_the_build_compiles_in_that_folder(
        qtbot: QtBot, tree: Path) -> None:
    calls: list[dict[str, Any]] = []
    w, run = _run_page(qtbot, tree, calls)
    assert run.download_radio.isChecked() and run.preview.isHidden()  # nothing run before the build is picked
    run.build_radio.click()
    qtbot.waitUntil(lambda: run.preview.has_plan(run._build_args()), timeout=60_000)
    text = run.preview.text()
    assert text.startswith(HEADING) and not run.preview.isHidden()
    # What `beedeck engine build --dry-run` prints: the FA choice, the options, the targets, steps and minutes.
    assert "chose: no KVarN kernels" in text and "-DGGML_CUDA_KVARN=OFF" in text
    assert "-DCMAKE_CUDA_ARCHITECTURES=89" in text and "targets: llama-server" in text
    steps = next(line for line in text.splitlines() if line.startswith("steps:"))
    assert int(steps.split()[1].rstrip(",")) >= 2 and f"with -j{run.preview.result.jobs}" in steps
    assert run.start_button.text() == f"Build (about {run.preview.minutes()}) and launch"
    dry = calls[0]
    assert dry["dry_run"] is True and dry["thread"] is not threading.main_thread()  # off the GUI thread
    assert dry["cache_pairs"] == [("f16", "f16")] and dry["gpus"] == [(8, 9)]  # the pick's pair, this GPU
    folder = run.preview.result.log_path.parent
    assert (folder / "build" / "build.ninja").is_file() and not (folder / "build" / "bin" / "llama-server").exists()
    # The build itself: the same arguments, the configured folder compiled.
    engine = next(s for s in run.steps if s.key == "engine")
    left: list[float] = []
    run.runner.eta_changed.connect(left.append)
    run.start_button.click()
    qtbot.waitUntil(lambda: (folder / "build" / "bin" / "llama-server").is_file() or not engine.retry.isHidden(),
                    timeout=120_000)
    qtbot.waitUntil(lambda: not run.runner.is_running(), timeout=60_000)
    build = calls[1]
    assert not build.get("dry_run") and {k: build[k] for k in ("gpus", "cache_pairs", "cpu_only")} == \
        {k: dry[k] for k in ("gpus", "cache_pairs", "cpu_only")}
    assert (folder / "build" / "bin" / "llama-server").is_file()
    assert left and all(x >= 0 for x in left)  # the builder's time left reached the engine step
    # ...compiled and smoke-tested: the mini tree's server is no CUDA engine, and the smoke test says so.
    assert "lists no GPU" in engine.status.text() and not engine.retry.isHidden()
    w.reject()


def test_a_dry_run_that_fails_says_why_and_the_build_waits_for_a_plan(
        qtbot: QtBot, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No working C compiler (CC names one that is not there): the configure fails, the page shows the
    builder's message (where the log is, what to look for) and CMake's own error line; no build starts."""
    monkeypatch.setenv("CC", str(tree / "no-such-cc"))
    calls: list[dict[str, Any]] = []
    w, run = _run_page(qtbot, tree, calls)
    run.build_radio.setChecked(True)  # checked without a click (as when it is the default): no dry run yet
    assert not calls and run.preview.isHidden()
    run.start_button.click()  # the first press makes the plan
    qtbot.waitUntil(lambda: run.preview.text().startswith(FAILED), timeout=60_000)
    text = run.preview.text()
    assert "CMake configure failed; see " in text and "build.log" in text and "CMake Error" in text
    assert "no-such-cc" in text  # CMake names the compiler it could not run
    assert "#d62728" in run.preview.styleSheet()
    assert len(calls) == 1 and calls[0]["dry_run"] is True  # no build was started
    assert run.start_button.isEnabled() and run.start_button.text() == "Set up and launch"
    w.reject()
