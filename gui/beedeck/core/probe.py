"""What a llama-server binary supports, read from its own ``--version`` and ``--help``.

The contract other modules rely on is :class:`EngineCaps` and :func:`probe_engine`. The parsing
functions (:func:`parse_help`, :func:`parse_version`, :func:`parse_devices`, :func:`caps_from_texts`)
are pure, so tests run them on the real help texts in ``tests/fixtures/engines``.
Layout facts: shared/docs/engine-facts.md §2.1-2.3.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from beedeck.core import paths


class Generation(StrEnum):
    """Which family of llama-server a binary belongs to (shared/docs/engine-facts.md §2.3)."""

    BEE_A = "bee-a"  # BeeLlama <= 0.3: --spec-type dflash, turbo caches, --spec-dflash-cross-ctx
    BEE_B = "bee-b"  # BeeLlama >= 0.4: draft-dflash, KVarN, --load-mode
    MAINLINE = "mainline"  # ggml-org llama.cpp: draft-dflash, --load-mode
    UNKNOWN = "unknown"


class ProbeError(RuntimeError):
    """The file is not a usable llama-server; the message names the problem and the remedy."""


@dataclass(frozen=True)
class EngineCaps:
    """The capability model of one llama-server binary."""

    path: str
    generation: Generation
    version: str = ""  # e.g. "0.6.0-dev" or "8123"
    build: int | None = None
    commit: str = ""
    built_with: str = ""  # the "built with ..." line
    flags: frozenset[str] = field(default_factory=frozenset)  # every option name, negatives included
    spec_types: tuple[str, ...] = ()
    cache_types: tuple[str, ...] = ()
    flash_attn_values: tuple[str, ...] = ()
    gpu_layers_values: tuple[str, ...] = ()  # symbolic values accepted by -ngl, e.g. ("auto", "all")
    defaults: dict[str, str] = field(default_factory=dict)  # long flag -> "(default: X)" text
    # Added by the probe (all optional, so hand-built caps in tests stay short):
    load_modes: tuple[str, ...] = ()  # values of --load-mode, e.g. ("auto", "none", "mmap", ...)
    devices: tuple[str, ...] = ()  # `--list-devices` lines, e.g. "CUDA0: NVIDIA ... (24575 MiB, ...)"
    gpu_backend: str = ""  # "cuda", "vulkan", "metal", ... ; "cpu" when the build has no GPU; "" unknown

    def has(self, flag: str) -> bool:
        return flag in self.flags

    @property
    def dflash_spec_type(self) -> str | None:
        """The --spec-type value that means DFlash on this engine, or None without DFlash."""
        if "dflash" in self.spec_types:
            return "dflash"
        if "draft-dflash" in self.spec_types:
            return "draft-dflash"
        return None

    @property
    def dflash_draft_arch(self) -> str | None:
        """general.architecture a DFlash draft must have for this engine."""
        spec = self.dflash_spec_type
        if spec == "dflash":
            return "dflash-draft"
        if spec == "draft-dflash":
            return "dflash"
        return None

    @property
    def is_bee(self) -> bool:
        return self.generation in (Generation.BEE_A, Generation.BEE_B)

    @property
    def has_turbo(self) -> bool:
        """BeeLlama <= 0.3 TurboQuant KV types (turbo2/3/4, *_tcq)."""
        return any(t.startswith("turbo") for t in self.cache_types)

    @property
    def has_kvarn(self) -> bool:
        """BeeLlama >= 0.4 KVarN KV types."""
        return any(t.startswith("kvarn") for t in self.cache_types)

    @property
    def model_free_spec_types(self) -> tuple[str, ...]:
        """Speculation types that need no draft model (n-gram family, copyspec, ...)."""
        return tuple(
            t for t in self.spec_types if t != "none" and t != "dflash" and not t.startswith("draft-")
        )

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["generation"] = self.generation.value
        data["flags"] = sorted(self.flags)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineCaps:
        known = {f.name for f in dataclasses.fields(cls)}
        clean: dict[str, Any] = {k: v for k, v in data.items() if k in known}
        clean["generation"] = Generation(clean["generation"])
        clean["flags"] = frozenset(clean.get("flags", ()))
        for name in (
            "spec_types",
            "cache_types",
            "flash_attn_values",
            "gpu_layers_values",
            "load_modes",
            "devices",
        ):
            clean[name] = tuple(clean.get(name, ()))
        clean["defaults"] = dict(clean.get("defaults", {}))
        return cls(**clean)


# ----------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class HelpOption:
    """One entry of the ``--help`` option table."""

    names: tuple[str, ...]
    hint: str  # the value hint, e.g. "N", "[on|off|auto]"; "" for a switch
    help_lines: tuple[str, ...]

    @property
    def help(self) -> str:
        return " ".join(line for line in self.help_lines if line)


HELP_COLUMN = 40  # common_arg::to_string() starts the help text at column 40
_CONTINUATION = " " * HELP_COLUMN


def _split_option_part(part: str) -> tuple[tuple[str, ...], str]:
    names: list[str] = []
    hint_parts: list[str] = []
    for token in (t.strip() for t in part.split(", ")):
        if not token:
            continue
        if not hint_parts and token.startswith("-"):
            name, _, rest = token.partition(" ")
            names.append(name)
            if rest.strip():
                hint_parts.append(rest.strip())
        else:
            hint_parts.append(token)
    return tuple(names), ", ".join(hint_parts)


def parse_help(text: str) -> list[HelpOption]:
    """Parse llama.cpp's ``--help`` option table (engine-facts.md §2.1 "Parser recipe")."""
    options: list[HelpOption] = []
    names: tuple[str, ...] | None = None
    hint = ""
    lines: list[str] = []

    def flush() -> None:
        nonlocal names
        if names:
            options.append(HelpOption(names, hint, tuple(lines)))
        names = None

    for raw in text.splitlines():
        line = raw.rstrip("\r\n")
        if names is not None and line.startswith(_CONTINUATION):
            lines.append(line.strip())
            continue
        if line.startswith("-") and not line.startswith("-----"):
            flush()
            # Names+hint up to 37 characters are padded to column 40; longer ones break the line.
            if len(line) > HELP_COLUMN and line[HELP_COLUMN - 3 : HELP_COLUMN] == "   ":
                part, help_text = line[:HELP_COLUMN], line[HELP_COLUMN:]
            else:
                part, help_text = line, ""
            names, hint = _split_option_part(part.rstrip())
            lines = [help_text.strip()] if help_text.strip() else []
            if not names:
                names = None
            continue
        flush()  # a section header, a blank line or anything else ends the option
    flush()
    return options


_VERSION_RE = re.compile(r"^version: (\S+)(?: \(build (\d+), commit (\w+)\)| \((\w+)\))?", re.MULTILINE)
_BUILT_WITH_RE = re.compile(r"^built with (.+)$", re.MULTILINE)


def parse_version(text: str) -> tuple[str, int | None, str, str]:
    """(version, build, commit, built_with) from ``--version`` output; empty parts when absent."""
    version, build, commit = "", None, ""
    m = _VERSION_RE.search(text)
    if m:
        version = m.group(1)
        if m.group(2):
            build, commit = int(m.group(2)), m.group(3)
        else:
            commit = m.group(4) or ""
            if version.isdigit():  # Bee and older mainline: "version: <build> (<commit>)"
                build = int(version)
    w = _BUILT_WITH_RE.search(text)
    return version, build, commit, (w.group(1).strip() if w else "")


def parse_devices(text: str) -> tuple[tuple[str, ...], str]:
    """(device lines, backend) from ``--list-devices``; backend "cpu" when it lists ``(none)``."""
    devices: list[str] = []
    seen_header = False
    for line in text.splitlines():
        if line.strip().startswith("Available devices"):
            seen_header = True
            continue
        if seen_header and line.startswith(" ") and line.strip():
            devices.append(line.strip())
    if not seen_header:
        return (), ""
    real = [d for d in devices if d != "(none)"]
    if not real:
        return (), "cpu"
    m = re.match(r"([A-Za-z]+)", real[0])
    return tuple(real), (m.group(1).lower() if m else "")


def _allowed_values(opt: HelpOption) -> tuple[str, ...]:
    collected: list[str] = []
    inside = False
    for line in opt.help_lines:
        if line.startswith("allowed values:"):
            inside = True
            line = line[len("allowed values:") :]
        elif inside and (not line or line.startswith("(")):
            break
        if inside:
            collected.append(line)
    return tuple(v.strip() for v in ",".join(collected).split(",") if v.strip())


def _hint_values(hint: str) -> tuple[str, ...]:
    """``[on|off|auto]`` / ``{a,b}`` / ``a,b,c`` -> values; a plain placeholder such as ``N`` -> ()."""
    inner = hint.strip().strip("[]{}")
    if not re.search(r"[|,]", inner):
        return ()
    return tuple(v.strip() for v in re.split(r"[|,]", inner) if v.strip())


_DEFAULT_RE = re.compile(r"default:\s*([^)]*)\)")


def _default_of(opt: HelpOption) -> str | None:
    m = _DEFAULT_RE.search(opt.help)
    if not m:
        return None
    return m.group(1).strip().strip("'\"").strip()


def _load_modes(opt: HelpOption) -> tuple[str, ...]:
    modes = [m.group(1) for line in opt.help_lines if (m := re.match(r"- ([\w+]+):", line))]
    return tuple(modes) or _hint_values(opt.hint)


def _generation(
    flags: frozenset[str], spec_types: tuple[str, ...], cache_types: tuple[str, ...]
) -> Generation:
    bee = "--spec-dm-adaptive" in flags or "--spec-dm-controller" in flags
    if bee and ("--spec-dflash-cross-ctx" in flags or "dflash" in spec_types):
        return Generation.BEE_A
    if bee and ("draft-dflash" in spec_types or any(t.startswith("kvarn") for t in cache_types)):
        return Generation.BEE_B
    if not bee and "draft-dflash" in spec_types:
        return Generation.MAINLINE
    return Generation.UNKNOWN


def caps_from_texts(path: str, version_text: str, help_text: str, devices_text: str = "") -> EngineCaps:
    """Build :class:`EngineCaps` from captured outputs; raises :class:`ProbeError` without an option table."""
    options = parse_help(help_text)
    by_name = {name: opt for opt in options for name in opt.names}
    if "--port" not in by_name or not ("-m" in by_name or "--model" in by_name):
        what = (
            "prints no llama.cpp option table" if not options else "is a llama.cpp tool but not llama-server"
        )
        raise ProbeError(
            f"{path} is not llama-server: its --help {what} (no --model/--port options). "
            "Pick the llama-server binary (build/bin/llama-server, llama-server.exe on Windows)."
        )

    def values(flag: str, source: str) -> tuple[str, ...]:
        opt = by_name.get(flag)
        if opt is None:
            return ()
        return _allowed_values(opt) if source == "allowed" else _hint_values(opt.hint)

    spec_types = values("--spec-type", "hint")
    cache_types = values("--cache-type-k", "allowed")
    ngl = by_name.get("--gpu-layers") or by_name.get("-ngl")
    gpu_layers_values = tuple(dict.fromkeys(re.findall(r"'(\w+)'", ngl.help))) if ngl else ()
    load = by_name.get("--load-mode")
    defaults: dict[str, str] = {}
    for opt in options:
        value = _default_of(opt)
        if value is not None:
            for name in opt.names:
                if name.startswith("--"):
                    defaults[name] = value
    flags = frozenset(by_name)
    version, build, commit, built_with = parse_version(version_text)
    devices, backend = parse_devices(devices_text)
    return EngineCaps(
        path=path,
        generation=_generation(flags, spec_types, cache_types),
        version=version,
        build=build,
        commit=commit,
        built_with=built_with,
        flags=flags,
        spec_types=spec_types,
        cache_types=cache_types,
        flash_attn_values=values("--flash-attn", "hint"),
        gpu_layers_values=gpu_layers_values,
        defaults=defaults,
        load_modes=_load_modes(load) if load else (),
        devices=devices,
        gpu_backend=backend,
    )


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
    return p


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
            return dataclasses.replace(cached, path=str(path))
    caps = _probe_uncached(str(p), timeout)
    _memory_cache[key] = caps
    _store_disk(key, caps)
    return dataclasses.replace(caps, path=str(path))
