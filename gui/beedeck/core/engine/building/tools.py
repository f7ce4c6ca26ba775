"""What a build needs from the machine: the preflight checks (git, CMake, a compiler, Ninja/make,
nvcc against the driver, disk) and running a tool in its own process group with a cancel that stops
the whole tree.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil

from beedeck.core.engine import spawn
from beedeck.core.secrets import child_env

MIN_CMAKE = (3, 14)  # llama.cpp's cmake_minimum_required
MIN_CMAKE_CUDA = (3, 18)  # CUDA language support (docs/reference/engine-facts.md §6.1)
DISK_NEEDED_CPU, DISK_NEEDED_CUDA = 2 << 30, 8 << 30
STOP_GRACE_S = 5.0

LineCallback = Callable[[str], None]


class BuildError(RuntimeError):
    """The build could not run or failed; the message says why and what to do."""


class BuildCancelled(BuildError):
    """The user cancelled; the build folder is kept so the next build resumes."""


# ------------------------------------------------------------------------------ processes
def run_streaming(argv: Sequence[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
                  on_line: LineCallback | None = None, cancel_event: threading.Event | None = None,
                  log: IO[str] | None = None) -> int:
    """Run ``argv`` in its own process group, streaming merged stdout/stderr line by line.

    On cancel the whole tree (cmake, ninja, every compiler) gets SIGTERM, then SIGKILL after
    ``STOP_GRACE_S``, and :class:`BuildCancelled` is raised once all of it has exited.
    """
    kwargs: dict[str, object] = {}
    if os.name == "nt":
        kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    else:
        kwargs["start_new_session"] = True
    try:
        # Through spawn: a BeeDeck that is killed takes its compilers with it.
        proc = spawn.popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, text=True, errors="replace", bufsize=1, session_guard=True,
                           **kwargs)
    except OSError as exc:
        raise BuildError(f"Could not start {argv[0]}: {exc}. Check that it is installed and on PATH.") from None
    finished = threading.Event()
    cancelled = threading.Event()

    def watch() -> None:
        assert cancel_event is not None
        while not finished.is_set():
            if cancel_event.wait(0.1):
                cancelled.set()
                _stop_group(proc)
                return

    watcher = threading.Thread(target=watch, daemon=True) if cancel_event is not None else None
    if watcher:
        watcher.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\r\n")
            if log is not None:
                log.write(line + "\n")
            if on_line is not None:
                on_line(line)
        rc = proc.wait()
    finally:
        finished.set()
        if watcher:
            watcher.join()
        if proc.poll() is None:
            _stop_group(proc)
    if cancelled.is_set():
        raise BuildCancelled("The build was cancelled; the build folder is kept, so building again resumes.")
    return rc


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """Stop the process, its group and every descendant. Ninja runs each job in a process group of
    its own, so the group alone would miss the compilers; SIGTERM first lets ninja clean up."""
    try:
        leader = psutil.Process(proc.pid)
        tree = [leader, *leader.children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    if os.name != "nt":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for p in tree:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(tree, timeout=STOP_GRACE_S)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=STOP_GRACE_S)
    proc.wait()


# ------------------------------------------------------------------------------ preflight
@dataclass
class Check:
    """One preflight item: what was found and, if not ok, the remedy."""

    name: str
    ok: bool
    found: str
    remedy: str = ""


def _tool_version(argv: list[str], pattern: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False, env=child_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(pattern, out.stdout + out.stderr)
    return tuple(int(x) for x in m.groups()) if m else None


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root:
            cand = Path(root) / "bin" / ("nvcc.exe" if os.name == "nt" else "nvcc")
            if cand.is_file():
                return str(cand)
    return None


def _ver(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def preflight(*, need_git: bool, cuda: bool, driver_cuda: str | None, build_root: Path) -> list[Check]:
    """Check the tools a build needs; every failed item carries a specific remedy."""
    checks: list[Check] = []
    linux_hint = "e.g. `sudo apt install` " if os.name != "nt" else ""
    if need_git:
        git = shutil.which("git")
        checks.append(Check("git", bool(git), git or "not found",
                            "" if git else f"Install git ({linux_hint}git) or build from a local source folder."))
    need = MIN_CMAKE_CUDA if cuda else MIN_CMAKE
    cmake = shutil.which("cmake")
    cv = _tool_version([cmake, "--version"], r"version (\d+)\.(\d+)") if cmake else None
    ok = cv is not None and cv >= need
    checks.append(Check("cmake", ok, f"{cmake} {_ver(cv)}" if cmake and cv else (cmake or "not found"),
                        "" if ok else f"Install CMake >= {_ver(need)} ({linux_hint}cmake, or `pip install cmake`)."))
    cxx_names = [os.environ.get("CXX", "")] + (["cl"] if os.name == "nt" else ["c++", "g++", "clang++"])
    cxx = next((shutil.which(n) for n in cxx_names if n and shutil.which(n)), None)
    checks.append(Check("c++ compiler", bool(cxx), cxx or "not found", "" if cxx else (
        "Install Visual Studio 2022 with 'Desktop development with C++'." if os.name == "nt"
        else f"Install a C/C++ compiler ({linux_hint}build-essential, or g++).")))
    ninja, make = shutil.which("ninja"), shutil.which("make")
    checks.append(Check("build tool", bool(ninja or make), ninja or make or "not found",
                        "" if ninja or make else f"Install Ninja ({linux_hint}ninja-build, or `pip install ninja`)."))
    if cuda:
        checks += cuda_checks(driver_cuda)
    needed = DISK_NEEDED_CUDA if cuda else DISK_NEEDED_CPU
    probe_at = build_root if build_root.exists() else build_root.parent
    free = shutil.disk_usage(probe_at).free
    checks.append(Check("disk", free >= needed, f"{free / 2**30:.1f} GiB free in {probe_at}",
                        "" if free >= needed else f"Free at least {needed / 2**30:.0f} GiB in {probe_at}."))
    return checks


# ------------------------------------------------------------------------------ the CUDA toolkit
def nvcc_top(nvcc: str) -> Path | None:
    """The toolkit folder nvcc itself uses (its ``TOP``, as CMake's FindCUDAToolkit asks it with ``-v``): a
    wrapper script on PATH (``/usr/local/bin/nvcc``) says where the real toolkit is."""
    try:
        out = subprocess.run([nvcc, "-v", "-E", "-x", "cu", os.devnull], capture_output=True, text=True, timeout=30,
                             check=False, env=child_env())
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"^#\$ TOP=(.+)$", out.stdout + out.stderr, re.MULTILINE)
    return Path(m.group(1).strip().strip('"')).resolve() if m else None


def cuda_roots(nvcc: str) -> list[Path]:
    """The toolkit ``nvcc`` belongs to, where CMake looks for cuBLAS: nvcc's own ``TOP``, the folder above its
    ``bin``, and CUDA_PATH / CUDA_HOME."""
    roots = [nvcc_top(nvcc), Path(nvcc).resolve().parent.parent,
             *(Path(v) for v in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")) if v)]
    return list(dict.fromkeys(r for r in roots if r is not None))


def find_cublas(roots: list[Path]) -> Path | None:
    """cuBLAS's header (``cublas_v2.h``, which CMake's FindCUDAToolkit needs for ``CUDA::cublas``) under one
    of ``roots``, when its library is there too; None otherwise."""
    lib_names = ("cublas.lib",) if os.name == "nt" else ("libcublas.so", "libcublas.so.*", "libcublas_static.a")
    for root in roots:
        for inc in [root / "include", *sorted(root.glob("targets/*/include"))]:
            if not (inc / "cublas_v2.h").is_file():
                continue
            lib_dirs = [inc.parent / "lib64", inc.parent / "lib", inc.parent / "lib" / "x64",
                        *sorted(root.glob("lib/*-linux-gnu"))]
            if any(next(d.glob(n), None) for d in lib_dirs if d.is_dir() for n in lib_names):
                return inc / "cublas_v2.h"
    return None


def _version_tuple(text: str | None) -> tuple[int, ...] | None:
    nums = re.findall(r"\d+", text or "")[:2]
    return tuple(int(x) for x in nums) if nums else None


def toolkit_remedy(driver_cuda: str | None, nvcc_version: tuple[int, ...] | None = None) -> str:
    """What to install for a CUDA build (the package, the CUDA version the driver runs) and the way around it.
    ``nvcc_version``: nvcc is there but its libraries (cuBLAS) are not."""
    drv = _version_tuple(driver_cuda)
    no_driver = ("no NVIDIA driver answered, so BeeDeck cannot tell which CUDA version this machine runs: install "
                 "the driver first (`nvidia-smi` shows the CUDA version it supports)")
    if nvcc_version is not None and (drv is None or nvcc_version <= drv):
        tag = f"{nvcc_version[0]}-{nvcc_version[1]}"
        what = (f"Install the rest of the CUDA Toolkit {_ver(nvcc_version)} beside nvcc, its cuBLAS (on Debian/Ubuntu "
                f"NVIDIA's apt package libcublas-dev-{tag}, or the whole cuda-toolkit-{tag})")
        what += f"; and {no_driver}" if drv is None else f" (the driver supports CUDA {_ver(drv)})"
    elif os.name == "nt":
        what = (f"Install the NVIDIA CUDA Toolkit{f' {_ver(drv)} or older' if drv else ''} from "
                f"developer.nvidia.com/cuda-downloads and reopen the terminal" + ("" if drv else f"; {no_driver}"))
    else:
        tag = f"{drv[0]}-{drv[1]}" if drv else "X-Y"
        what = (f"Install the NVIDIA CUDA Toolkit {f'{_ver(drv)} or older (the driver supports CUDA {_ver(drv)})' if drv else 'X.Y'}: "
                f"on Debian/Ubuntu NVIDIA's apt package cuda-toolkit-{tag}, or the distribution's nvidia-cuda-toolkit "
                "if its version is not newer; then put its nvcc on PATH or set CUDA_PATH (BeeDeck looks there, in "
                "CUDA_HOME and in /usr/local/cuda)" + ("" if drv else f". X.Y: {no_driver}"))
    return (f"{what}. Or skip the build: `beedeck engine download` installs a prebuilt CUDA llama-server for this "
            "driver; or build a CPU engine (--cpu).")


def cuda_checks(driver_cuda: str | None) -> list[Check]:
    """The CUDA toolkit a CUDA build needs, checked before CMake runs: nvcc (not newer than the driver's CUDA)
    and cuBLAS beside it (without it CMake stops at "CUDA::cublas")."""
    nvcc = find_nvcc()
    nv = _tool_version([nvcc, "--version"], r"release (\d+)\.(\d+)") if nvcc else None
    if not nvcc or nv is None:
        return [Check("nvcc", False, "not found", toolkit_remedy(driver_cuda))]
    drv = _version_tuple(driver_cuda)
    ok = drv is None or drv >= nv
    checks = [Check("nvcc", ok, f"{nvcc} (CUDA {_ver(nv)}; driver supports {driver_cuda or 'unknown'})",
                    "" if ok else (
        f"nvcc is CUDA {_ver(nv)} but the driver only supports CUDA {driver_cuda}, so the built "
        f"engine would not load its GPU backend: update the NVIDIA driver "
        f"({'>= 580' if nv[0] >= 13 else '>= 525'}) or install a CUDA Toolkit <= {driver_cuda}."))]
    roots = cuda_roots(nvcc)
    header = find_cublas(roots)
    checks.append(Check("cuBLAS", header is not None, str(header) if header else (
        f"not found: nvcc {_ver(nv)} is there but no cublas_v2.h with its library under "
        f"{', '.join(str(r) for r in roots)}, so CMake would stop at CUDA::cublas"),
        "" if header else toolkit_remedy(driver_cuda, nv)))
    return checks

