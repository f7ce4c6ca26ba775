"""Probe a llama-server binary: run its ``--help``, ``--version`` and ``--list-devices`` (each in its
own process group, killed on a timeout), parse them into :class:`EngineCaps`, and cache the result
by (realpath, size, mtime).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import RELEASE_SIDECAR, EngineCaps, ProbeError
from beedeck.core.engine.help_text import caps_from_texts, parse_devices, parse_help
from beedeck.core.secrets import child_env

# ------------------------------------------------------------------------------------ running it


@dataclass(frozen=True)
class _Run:
    returncode: int
    stdout: str
    stderr: str


def _tail(text: str, lines: int = 12, chars: int = 1500) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])[-chars:]


def _run(path: str, arg: str, timeout: float) -> _Run:
    """Run ``path arg`` (an argument list, no shell) in its own process group, killed on timeout."""
    popen_kwargs: dict[str, Any] = {}
    if sys.platform == "win32":
        popen_kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
    else:
        popen_kwargs["start_new_session"] = True  # so a timeout can kill the whole group
    try:
        proc = subprocess.Popen(
            [path, arg],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),  # no secret of BeeDeck's in an engine's environment
            **popen_kwargs,
        )
    except PermissionError as exc:
        raise ProbeError(
            f"{path} cannot be run ({exc.strerror}): make it executable (chmod +x) or pick another file."
        ) from None
    except OSError as exc:
        raise ProbeError(
            f"{path} cannot be run ({exc.strerror or exc}): it is not a program for this system. "
            "Pick a llama-server built for this OS and CPU."
        ) from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        raise ProbeError(
            f"{path} {arg} did not finish within {timeout:g} s, so BeeDeck stopped it (killed its process group). "
            "A llama-server answers this at once: the file is probably not llama-server, or the machine is "
            "overloaded. Pick the llama-server binary or try again."
        ) from None
    return _Run(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        if sys.platform == "win32":
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _check_exit(path: str, arg: str, run: _Run) -> None:
    if run.returncode == 0:
        return
    tail = _tail(run.stderr or run.stdout)
    if run.returncode < 0:
        try:
            why = f"was killed by signal {signal.Signals(-run.returncode).name}"
        except ValueError:
            why = f"was killed by signal {-run.returncode}"
        remedy = "The build is probably broken or built for a newer CPU: rebuild it or pick another engine."
    else:
        why = f"exited with status {run.returncode}"
        remedy = "Pick a working llama-server."
    if (
        "error while loading shared libraries" in tail
        or "Library not loaded" in tail
        or ".dll" in tail.lower()
    ):
        remedy = (
            "It cannot find its shared libraries (libllama/libggml): keep the binary next to the .so/.dll files "
            "of its build folder, or rebuild it."
        )
    details = f" Its output ends with:\n{tail}" if tail else ""
    raise ProbeError(f"{path} {arg} {why}. {remedy}{details}")


def _validate_path(path: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise ProbeError(f"{p} does not exist: pick the llama-server binary (e.g. build/bin/llama-server).")
    if p.is_dir():
        raise ProbeError(
            f"{p} is a folder: pick the llama-server binary inside it (e.g. {p / 'llama-server'})."
        )
    if sys.platform != "win32" and not os.access(p, os.X_OK):
        raise ProbeError(f"{p} is not executable: run `chmod +x {p}` or pick the llama-server binary.")
    return p.absolute()  # "bin/llama-server" or "llama-server" in the current folder, never a PATH lookup


def _probe_uncached(path: str, timeout: float) -> EngineCaps:
    help_run = _run(path, "--help", timeout)
    options_found = bool(parse_help(help_run.stdout))
    if not options_found:
        _check_exit(path, "--help", help_run)  # a crash explains itself better than "no option table"
    version_run = _run(path, "--version", timeout)
    devices_text = ""
    caps = caps_from_texts(path, version_run.stdout + "\n" + version_run.stderr, help_run.stdout)
    if caps.has("--list-devices"):
        try:
            dev_run = _run(path, "--list-devices", timeout)
            devices_text = dev_run.stdout if dev_run.returncode == 0 else ""
        except ProbeError:
            devices_text = ""  # the device list is a nice-to-have; a hang here must not fail the probe
        if devices_text:
            devices, backend = parse_devices(devices_text)
            caps = dataclasses.replace(caps, devices=devices, gpu_backend=backend)
    return caps


# ----------------------------------------------------------------------------------------- caching

_CACHE_SCHEMA = 1
_memory_cache: dict[tuple[str, int, int], EngineCaps] = {}


def _cache_key(p: Path) -> tuple[str, int, int]:
    real = os.path.realpath(p)
    st = os.stat(real)
    return real, st.st_size, st.st_mtime_ns


def _cache_file(real: str) -> Path:
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return paths.cache_dir() / "probe" / f"{digest}.json"


def _load_disk(key: tuple[str, int, int]) -> EngineCaps | None:
    try:
        data = json.loads(_cache_file(key[0]).read_text(encoding="utf-8"))
        if data.get("schema") != _CACHE_SCHEMA or tuple(data.get("key", ())) != key:
            return None
        return EngineCaps.from_dict(data["caps"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing or corrupt cache: probe again


def _store_disk(key: tuple[str, int, int], caps: EngineCaps) -> None:
    data = {"schema": _CACHE_SCHEMA, "key": list(key), "caps": caps.to_dict()}
    try:
        paths.atomic_write_bytes(_cache_file(key[0]), json.dumps(data, indent=1).encode("utf-8"))
    except OSError:
        pass  # a read-only cache folder only costs a re-probe next time


def clear_probe_cache(disk: bool = True) -> None:
    """Forget remembered probes (memory, and the files under the cache folder when ``disk``)."""
    _memory_cache.clear()
    if disk:
        folder = paths.cache_dir() / "probe"
        for f in folder.glob("*.json") if folder.is_dir() else ():
            f.unlink(missing_ok=True)


def probe_engine(path: str, timeout: float = 15.0, use_cache: bool = True) -> EngineCaps:
    """Probe a llama-server binary: run ``--help``, ``--version`` and ``--list-devices`` (each with
    ``timeout`` seconds) and parse them. Results are cached by (realpath, size, mtime_ns) in memory and
    under ``paths.cache_dir()/probe``. Raises :class:`ProbeError` with a remedy when it is not usable.
    """
    p = _validate_path(str(path))
    key = _cache_key(p)
    if use_cache:
        cached = _memory_cache.get(key) or _load_disk(key)
        if cached is not None:
            _memory_cache[key] = cached
            return dataclasses.replace(cached, path=str(path), release=release_of(p))
    caps = _probe_uncached(str(p), timeout)
    _memory_cache[key] = caps
    _store_disk(key, caps)
    return dataclasses.replace(caps, path=str(path), release=release_of(p))


# ----------------------------------------------------------------------------------------- release


def sidecar_path(binary: str | Path) -> Path:
    return Path(str(binary) + RELEASE_SIDECAR)


def release_of(binary: str | Path) -> str:
    """The release recorded beside ``binary`` by BeeDeck's builder or downloader ("" when none)."""
    try:
        data = json.loads(sidecar_path(binary).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    release = data.get("release") if isinstance(data, dict) else None
    return release if isinstance(release, str) else ""


def write_release(binary: str | Path, release: str, **info: str) -> None:
    """Record which release ``binary`` was built or downloaded from (a JSON sidecar beside it)."""
    if release:
        paths.atomic_write_text(sidecar_path(binary), json.dumps({"release": release, **info}, indent=1))
