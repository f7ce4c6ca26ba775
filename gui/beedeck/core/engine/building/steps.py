"""A build folder's steps: CMake's configure and compile, streamed, cancellable, with progress and time left.

:class:`Steps` runs them for :func:`beedeck.core.engine.building.builder.build_engine` (the first build and a
rebuild with other options in the same folder); :class:`ProgressTracker` reads Ninja's ``[n/N]`` and make's
``[ x%]`` when no cost profile plans the build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from beedeck.core.engine.building.eta import WeightedEta, planned_outputs
from beedeck.core.engine.building.tools import BuildError, LineCallback, run_streaming
from beedeck.core.secrets import child_env

ProgressCallback = Callable[[int, int, float | None], None]  # done, total, eta seconds

_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")
_MAKE = re.compile(r"^\[\s*(\d{1,3})%\]")


class ProgressTracker:
    """Turns build output lines into (done, total, eta_s); Ninja ``[n/N]`` and make ``[ x%]``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.start: tuple[float, int] | None = None
        self.last: tuple[int, int] | None = None

    def feed(self, line: str) -> tuple[int, int, float | None] | None:
        m = _NINJA.match(line) or _MAKE.match(line)
        if not m:
            return None
        done, total = (int(m.group(1)), int(m.group(2))) if m.re is _NINJA else (int(m.group(1)), 100)
        now = self.clock()
        if self.start is None:
            self.start = (now, done)
        self.last = (done, total)
        t0, d0 = self.start
        eta = (now - t0) / (done - d0) * (total - done) if done > d0 and now > t0 else None
        return done, total, eta


def find_binary(build_dir: Path) -> Path | None:
    exe = "llama-server.exe" if os.name == "nt" else "llama-server"
    return next((c for c in (build_dir / "bin" / exe, build_dir / "bin" / "Release" / exe) if c.is_file()), None)


@dataclass
class Steps:
    """A build folder's configure and compile steps, with the callbacks of the build that runs them."""

    src_dir: Path
    build_dir: Path
    log_path: Path
    targets: list[str]
    jobs: int
    on_line: LineCallback | None
    on_progress: ProgressCallback | None
    cancel_event: threading.Event | None

    def configure(self, options: list[str], log: IO[str]) -> list[str]:
        """CMake's configure step; the Ninja steps the compile will run ([] without Ninja)."""
        generator, cached_gen = _configure(self.src_dir, self.build_dir, options, self.on_line, self.cancel_event,
                                           log, self.log_path)
        return _planned_steps(self.build_dir, self.targets) if generator or cached_gen == "Ninja" else []

    def compile(self, planned: list[str], profile: dict[str, float], log: IO[str]) -> None:
        build = ["cmake", "--build", str(self.build_dir), "--config", "Release", "--target", *self.targets,
                 "-j", str(self.jobs)]
        log.write("$ " + " ".join(build) + "\n")
        tracker: ProgressTracker | WeightedEta = WeightedEta(planned, profile, jobs=self.jobs) if planned \
            else ProgressTracker()
        _compile(build, tracker, self.on_line, self.on_progress, self.cancel_event, log, self.log_path)

    def binary(self) -> Path:
        """The llama-server the compile made; BuildError when there is none."""
        binary = find_binary(self.build_dir)
        if binary is None:
            raise BuildError(f"The build finished but no llama-server was found under {self.build_dir}; see "
                             f"{self.log_path}.")
        return binary


def _configure(src_dir: Path, build_dir: Path, options: list[str], on_line: LineCallback | None,
               cancel_event: threading.Event | None, log: IO[str], log_path: Path) -> tuple[list[str], str | None]:
    """CMake's configure step; returns the generator asked for and the one the folder was made with."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    cached_gen = _cached_generator(build_dir)
    if cached_gen and generator and cached_gen != "Ninja":
        generator = []  # keep the generator the build folder was made with (resume)
    configure = ["cmake", "-S", str(src_dir), "-B", str(build_dir), *generator, *options]
    log.write("$ " + " ".join(configure) + "\n")
    if run_streaming(configure, on_line=on_line, cancel_event=cancel_event, log=log) != 0:
        raise BuildError(f"CMake configure failed; see {log_path} (the lines above 'CMake Error' name the "
                         "missing piece).")
    return generator, cached_gen


def _compile(build: list[str], tracker: ProgressTracker | WeightedEta, on_line: LineCallback | None,
             on_progress: ProgressCallback | None, cancel_event: threading.Event | None, log: IO[str],
             log_path: Path) -> None:
    """The compile step, its lines fed to the time-left estimate."""

    def line_seen(line: str) -> None:
        if on_line is not None:
            on_line(line)
        step = tracker.feed(line)
        if step is not None and on_progress is not None:
            on_progress(*step)

    if run_streaming(build, on_line=line_seen, cancel_event=cancel_event, log=log) != 0:
        raise BuildError(f"Compiling llama-server failed; see {log_path} (search for 'error:'). Building again "
                         "resumes where it stopped.")


def _planned_steps(build_dir: Path, targets: Sequence[str] = ("llama-server",)) -> list[str]:
    """The outputs ``cmake --build --target ...`` will produce: a Ninja dry run (< 1 s)."""
    ninja = shutil.which("ninja")
    if ninja is None:
        return []
    try:
        out = subprocess.run([ninja, "-C", str(build_dir), "-n", *targets], capture_output=True, text=True,
                             timeout=60, check=False, env=child_env())
    except (OSError, subprocess.SubprocessError):
        return []
    return planned_outputs(out.stdout) if out.returncode == 0 else []


def _cached_generator(build_dir: Path) -> str | None:
    cache = build_dir / "CMakeCache.txt"
    text = cache.read_text(encoding="utf-8", errors="replace") if cache.is_file() else ""
    m = re.search(r"^CMAKE_GENERATOR:INTERNAL=(.*)$", text, re.MULTILINE)
    return m.group(1).strip() if m else None
