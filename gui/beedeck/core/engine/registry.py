"""The engine registry: every llama-server BeeDeck knows, side by side, with one default.

Each engine lives in ``paths.engines_dir()/<id>/manifest.json`` (written atomically). Built and
downloaded engines keep their files in that folder, so removing them deletes the folder; an
``existing`` engine (a binary the user already had) and the ``starter`` engine (owned by its pip
package) only lose their manifest folder, never the binary. ``registry.json`` next to the engine
folders holds the default. A manifest that cannot be read is renamed ``manifest.json.corrupt-<time>``
and reported in :attr:`EngineRegistry.warnings`; it is never deleted silently.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps, ProbeError
from beedeck.core.engine.probe import probe_engine

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
REGISTRY = "registry.json"
SCHEMA = 1
STARTER_ID = "starter"
STARTER_NAME = "Starter engine (mainline llama.cpp, CPU)"  # the one name the app shows for it

Prober = Callable[[str], EngineCaps]
ModelLocator = Callable[[], Path]  # the tiny model a new engine must generate from; raises LookupError if absent


class Origin(StrEnum):
    """Where an engine came from; decides which files ``remove`` may delete."""

    BUILT = "built"
    DOWNLOADED = "downloaded"
    EXISTING = "existing"
    STARTER = "starter"


class EngineError(RuntimeError):
    """A registry operation failed; the message says why and what to do."""


@dataclass
class SmokeResult:
    """The result of checking that a freshly built or downloaded engine really works."""

    ok: bool
    message: str
    backend: str = ""  # "cpu", "cuda", ... as --list-devices shows it
    devices: list[str] = field(default_factory=list)
    checked_at: float = 0.0


@dataclass
class EngineRecord:
    """One registered engine (the content of its manifest.json)."""

    id: str
    origin: Origin
    binary: str
    name: str = ""
    version: str = ""
    build: int | None = None
    commit: str = ""
    generation: str = "unknown"
    source: str = ""  # git URL@ref, source folder, release asset URL, or the user's path
    build_options: list[str] = field(default_factory=list)
    caps: dict[str, Any] | None = None
    smoke: SmokeResult | None = None
    created: float = 0.0
    schema: int = SCHEMA
    binary_stamp: str = ""  # size:mtime of the binary when it was probed (an update in place changes it)

    @property
    def owns_files(self) -> bool:
        """True when the engine's folder holds files BeeDeck made (built or downloaded)."""
        return self.origin in (Origin.BUILT, Origin.DOWNLOADED)

    @property
    def ready(self) -> bool:
        return self.smoke is None or self.smoke.ok

    def engine_caps(self) -> EngineCaps | None:
        return EngineCaps.from_dict(self.caps) if self.caps else None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["origin"] = self.origin.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EngineRecord:
        known = {f.name for f in dataclasses.fields(cls)}
        clean = {k: v for k, v in data.items() if k in known}
        clean["origin"] = Origin(clean["origin"])
        if clean.get("smoke") is not None:
            clean["smoke"] = SmokeResult(**clean["smoke"])
        if not isinstance(clean.get("id"), str) or not isinstance(clean.get("binary"), str):
            raise ValueError("manifest lacks id or binary")
        return cls(**clean)


def binary_stamp(binary: str | Path) -> str:
    try:
        st = Path(binary).stat()
    except OSError:
        return ""
    return f"{st.st_size}:{st.st_mtime_ns}"


def caps_fields(caps: EngineCaps) -> dict[str, Any]:
    """The record fields that come from a probe."""
    return {
        "binary_stamp": binary_stamp(caps.path),
        "version": caps.version,
        "build": caps.build,
        "commit": caps.commit,
        "generation": caps.generation.value,
        "caps": json.loads(json.dumps(caps.to_dict())),  # tuples -> lists, as it reads back from disk
    }


def smoke_test(binary: str | Path, *, expect_gpu: bool, prober: Prober = probe_engine) -> SmokeResult:
    """Probe ``binary`` and, for a GPU build, insist that ``--list-devices`` shows a GPU.

    The point is to catch the silent CPU fallback (a CUDA build whose backend library did not load,
    or a driver too old for it) before the engine is marked ready.
    """
    now = time.time()
    try:
        caps = prober(str(binary))
    except ProbeError as exc:
        return SmokeResult(False, str(exc), checked_at=now)
    devices = list(caps.devices)
    if expect_gpu and caps.gpu_backend in ("", "cpu"):
        return SmokeResult(
            False,
            f"{Path(binary).name} runs but lists no GPU (`--list-devices` shows "
            f"{', '.join(devices) or '(none)'}), so it would silently run on the CPU. Check that the "
            "NVIDIA driver is installed and new enough for this build's CUDA version, and that the "
            "CUDA runtime libraries sit next to the binary; or build/download a CPU engine instead.",
            backend=caps.gpu_backend,
            devices=devices,
            checked_at=now,
        )
    what = f"{caps.generation.value} {caps.version or ''}".strip()
    backend = caps.gpu_backend or "unknown"
    return SmokeResult(True, f"{what} answers --help/--version; backend {backend}", backend, devices, now)


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.").lower()
    return slug[:60] or "engine"


class EngineRegistry:
    """All engines under one folder (``paths.engines_dir()`` unless ``root`` is given).

    ``prober`` is :func:`probe_engine` unless a test passes its own. ``smoke_model`` finds the tiny model a
    freshly built or downloaded engine must generate from before it is registered ready (the app and the CLI
    pass the starter model's locator; this wing may not import the starter); None: generation is not tried,
    and the smoke result says so.
    """

    def __init__(self, root: Path | None = None, prober: Prober = probe_engine,
                 smoke_model: ModelLocator | None = None) -> None:
        self.root = Path(root) if root is not None else paths.engines_dir()
        self.root.mkdir(parents=True, exist_ok=True)
        self.prober = prober
        self.smoke_model = smoke_model
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ folders and manifests
    def engine_dir(self, engine_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", engine_id) or engine_id in (".", ".."):
            raise EngineError(f"'{engine_id}' is not a valid engine id: use letters, digits, '.', '_' or '-'.")
        return self.root / engine_id

    def unique_id(self, base: str) -> str:
        """``base`` slugified, with ``-2``, ``-3`` ... appended until no engine folder has that name."""
        slug = _slug(base)
        candidate, n = slug, 1
        while (self.root / candidate).exists():
            n += 1
            candidate = f"{slug}-{n}"
        return candidate

    def _read(self, folder: Path) -> EngineRecord | None:
        path = folder / MANIFEST
        if not path.is_file():
            return None
        try:
            record = EngineRecord.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            try:
                aside = paths.keep_aside(path)
                kept = f"kept as {aside}"
            except OSError as move_exc:
                kept = f"could not be moved aside either ({move_exc})"
            msg = (
                f"The engine manifest {path} could not be read ({exc}); it was {kept}. "
                f"Re-add the engine (`beedeck engine add BIN`) or delete the folder {folder} if it is unwanted."
            )
            log.warning(msg)
            self.warnings.append(msg)
            return None
        if record.id != folder.name:
            record.id = folder.name  # a copied folder: the folder name is the truth
        return record

    def save(self, record: EngineRecord) -> EngineRecord:
        """Write ``record``'s manifest atomically (creating its folder)."""
        if not record.created:
            record.created = time.time()
        folder = self.engine_dir(record.id)
        folder.mkdir(parents=True, exist_ok=True)
        paths.atomic_write_text(folder / MANIFEST, json.dumps(record.to_dict(), indent=1, sort_keys=True))
        return record

    # ------------------------------------------------------------------ queries
    def list(self) -> list[EngineRecord]:
        records = []
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir()):
            record = self._read(folder)
            if record is not None:
                records.append(record)
        return sorted(records, key=lambda r: (r.created, r.id))

    def get(self, engine_id: str) -> EngineRecord:
        record = self._read(self.engine_dir(engine_id))
        if record is None:
            known = ", ".join(r.id for r in self.list()) or "none"
            raise EngineError(f"No engine '{engine_id}' is registered (known: {known}). See `beedeck engine list`.")
        return record

    def find_by_binary(self, binary: str | Path) -> EngineRecord | None:
        target = Path(binary).resolve()
        for record in self.list():
            if Path(record.binary).resolve() == target:
                return record
        return None

    # ------------------------------------------------------------------ default
    def _registry_file(self) -> Path:
        return self.root / REGISTRY

    def _load_registry(self) -> dict[str, Any]:
        path = self._registry_file()
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
            return data
        except (OSError, ValueError) as exc:
            try:
                kept = f"kept as {paths.keep_aside(path)}"
            except OSError as move_exc:
                kept = f"could not be moved aside either ({move_exc})"
            msg = f"{path} could not be read ({exc}); it was {kept}. Choose the default engine again."
            log.warning(msg)
            self.warnings.append(msg)
            return {}

    def default_id(self) -> str | None:
        value = self._load_registry().get("default")
        return value if isinstance(value, str) else None

    def default(self) -> EngineRecord | None:
        """The chosen default; else the newest ready engine; else None."""
        chosen = self.default_id()
        records = self.list()
        for record in records:
            if record.id == chosen:
                return record
        ready = [r for r in records if r.ready]
        return ready[-1] if ready else None

    def set_default(self, engine_id: str) -> EngineRecord:
        record = self.get(engine_id)
        data = self._load_registry()
        data["default"] = record.id
        data["schema"] = SCHEMA
        paths.atomic_write_text(self._registry_file(), json.dumps(data, indent=1, sort_keys=True))
        return record

    # ------------------------------------------------------------------ changes
    def add_existing(self, binary: str | Path, *, name: str = "", origin: Origin = Origin.EXISTING,
                     engine_id: str | None = None) -> EngineRecord:
        """Probe a llama-server the user already has and register it (the file stays where it is)."""
        path = Path(binary).expanduser()
        try:
            caps = self.prober(str(path))
        except ProbeError as exc:
            raise EngineError(f"{path} was not added: {exc}") from None
        resolved = str(path.resolve())
        same = self.find_by_binary(resolved)
        if same is not None:
            # Adding the same binary twice refreshes its capabilities instead of making a twin.
            for key, value in caps_fields(caps).items():
                setattr(same, key, value)
            return self.save(same)
        base = name or f"{caps.generation.value}-{caps.build or caps.version or path.parent.name}"
        record = EngineRecord(
            id=engine_id or self.unique_id(base),
            origin=origin,
            binary=resolved,
            name=name or f"{path.name} ({path.parent})",
            source=resolved,
            **caps_fields(caps),
        )
        return self.save(record)

    def reprobe(self, engine_id: str) -> EngineRecord:
        """Probe the engine's binary again (after an update in place) and store the new capabilities."""
        record = self.get(engine_id)
        try:
            caps = self.prober(record.binary)
        except ProbeError as exc:
            raise EngineError(f"Engine '{engine_id}' no longer works: {exc}") from None
        for key, value in caps_fields(caps).items():
            setattr(record, key, value)
        return self.save(record)

    def remove(self, engine_id: str) -> EngineRecord:
        """Unregister an engine. Built/downloaded files are deleted; a user's own binary never is."""
        record = self.get(engine_id)
        folder = self.engine_dir(engine_id)
        if record.owns_files:
            shutil.rmtree(folder)
        else:
            # Only BeeDeck's own bookkeeping lives in the folder; the binary is elsewhere.
            binary = Path(record.binary).resolve()
            if folder.resolve() in binary.parents:
                raise EngineError(
                    f"Engine '{engine_id}' ({record.origin.value}) has its binary inside {folder}; "
                    "not deleting a user's file. Move the binary out first."
                )
            shutil.rmtree(folder)
        data = self._load_registry()
        if data.get("default") == engine_id or record.origin is Origin.STARTER:
            if data.get("default") == engine_id:
                data.pop("default")
            if record.origin is Origin.STARTER:
                data["starter_removed"] = True  # do not bring it back on the next start
            paths.atomic_write_text(self._registry_file(), json.dumps(data, indent=1, sort_keys=True))
        return record

    def ensure_starter(self, locate: Callable[[], Path]) -> EngineRecord | None:
        """Register the starter engine once; None when it is not installed.

        ``locate`` finds its binary (``beedeck.core.starter.starter_engine``) and raises LookupError
        when the ``starter`` extra is missing.
        """
        if self._load_registry().get("starter_removed"):
            return None
        try:
            binary = locate()
        except LookupError as exc:
            log.info("no starter engine: %s", exc)
            return None
        existing = self._read(self.root / STARTER_ID)
        if (existing is not None and Path(existing.binary) == Path(binary).resolve() and existing.caps
                and existing.binary_stamp == binary_stamp(existing.binary)):
            return existing  # else new, moved, or updated in place (the app upgraded): probe it again
        record = self.add_existing(binary, name=STARTER_NAME, origin=Origin.STARTER,
                                   engine_id=STARTER_ID)
        if record.id != STARTER_ID:  # the same binary was already added by hand: keep that entry
            return record
        if self.default_id() is None:
            self.set_default(STARTER_ID)
        return record
