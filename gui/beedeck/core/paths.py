"""Where BeeDeck keeps its files: one place that knows dev, installed and frozen layouts.

``BEEDECK_HOME`` (used by tests and portable installs) puts config, data and cache under one folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

from beedeck import APP_NAME


def _home() -> Path | None:
    value = os.environ.get("BEEDECK_HOME")
    return Path(value).expanduser() if value else None


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir() -> Path:
    home = _home()
    return _ensure(home / "config" if home else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)))


def data_dir() -> Path:
    home = _home()
    return _ensure(home / "data" if home else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)))


def cache_dir() -> Path:
    home = _home()
    return _ensure(home / "cache" if home else Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)))


def state_dir() -> Path:
    """Run-time state: pid files, logs."""
    home = _home()
    return _ensure(home / "state" if home else Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)))


def models_dir() -> Path:
    return _ensure(data_dir() / "models")


def engines_dir() -> Path:
    return _ensure(data_dir() / "engines")


def resource_path(*parts: str) -> Path:
    """A file under ``resources/``, in a source checkout, an installed wheel or a PyInstaller bundle."""
    candidates = []
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        candidates.append(Path(frozen_root) / "resources")
    candidates.append(Path(__file__).resolve().parents[3] / "resources")  # checkout: gui/beedeck/core
    candidates.append(Path(sys.prefix) / "share" / APP_NAME / "resources")
    for root in candidates:
        if root.is_dir():
            return root.joinpath(*parts)
    return candidates[0].joinpath(*parts)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write a file so that a crash leaves either the old or the new content, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
