"""Launch presets for the launch form: the guide's lines, BeeLlama's quickstart combos, and the
user's own presets as JSON files in ``config_dir()/presets/`` (written atomically; the API key is
never saved). Qt-free, so the rules are easy to test.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuiltinPreset:
    """A preset that keeps the current model files and replaces the rest."""

    name: str
    description: str
    make: Callable[[LaunchSettings], LaunchSettings]
    needs_turbo: bool = False  # TurboQuant caches: BeeLlama 0.1-0.3 only

    def unavailable_reason(self, caps: EngineCaps | None) -> str | None:
        if self.needs_turbo and caps is not None and not caps.has_turbo:
            return (f"{self.name} uses TurboQuant KV caches, which exist only in BeeLlama 0.1-0.3 "
                    f"(this engine: {caps.generation.value} {caps.version}).")
        return None


def _bee_combo(cur: LaunchSettings, ctk: str, ctv: str) -> LaunchSettings:
    # BeeLlama <= 0.3 quickstart (docs/reference/engine-facts.md §9.2), tested on a 24 GB RTX 3090.
    s = LaunchSettings.guide_dflash(cur.target, cur.draft or "")
    s.ctx_size, s.batch_size, s.ubatch_size = 122800, 2048, 256
    s.cache_type_k, s.cache_type_v = ctk, ctv
    s.reasoning, s.temp, s.top_k, s.top_p, s.min_p = "on", 0.6, 20, None, 0.0
    s.host, s.port = cur.host, cur.port
    return s


def _keep_network(make: Callable[[LaunchSettings], LaunchSettings]) -> Callable[[LaunchSettings], LaunchSettings]:
    def wrapped(cur: LaunchSettings) -> LaunchSettings:
        s = make(cur)
        s.host, s.port = cur.host, cur.port
        return s
    return wrapped


BUILTIN_PRESETS: tuple[BuiltinPreset, ...] = (
    BuiltinPreset("Guide: baseline",
                  "The guide's baseline server: 32k context, q5_0/q4_1 KV cache, flash attention, no speculation.",
                  _keep_network(lambda c: LaunchSettings.guide_baseline(c.target))),
    BuiltinPreset("Guide: DFlash",
                  "The guide's DFlash server: 32k context, f16 KV cache, unified KV, draft on the GPU, "
                  "model locked in RAM.",
                  _keep_network(lambda c: LaunchSettings.guide_dflash(c.target, c.draft or ""))),
    BuiltinPreset("BeeLlama: precision",
                  "BeeLlama 0.1-0.3 quickstart: turbo4 K / turbo3_tcq V cache, 122,800 context on 24 GB.",
                  lambda c: _bee_combo(c, "turbo4", "turbo3_tcq"), needs_turbo=True),
    BuiltinPreset("BeeLlama: speed / VRAM",
                  "BeeLlama 0.1-0.3 speed combo: turbo3_tcq K / turbo2_tcq V cache (pair with a Q4_K_M or "
                  "IQ4_XS target).",
                  lambda c: _bee_combo(c, "turbo3_tcq", "turbo2_tcq"), needs_turbo=True),
)


def presets_dir() -> Path:
    folder = paths.config_dir() / "presets"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _file_for(name: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.").lower() or "preset"
    return presets_dir() / f"{slug}.json"


def save_preset(name: str, settings: LaunchSettings) -> Path:
    """Store ``settings`` as a user preset (the API key is left out). Returns the file."""
    name = name.strip()
    if not name:
        raise ValueError("A preset needs a name: type one.")
    data: dict[str, Any] = {"name": name, "schema_version": 1, "settings": settings.to_dict()}
    data["settings"].pop("api_key", None)
    path = _file_for(name)
    paths.atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True))
    return path


def load_presets() -> dict[str, LaunchSettings]:
    """User presets by name; unreadable files are skipped with a log line (never deleted)."""
    out: dict[str, LaunchSettings] = {}
    for path in sorted(presets_dir().glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            out[str(data["name"])] = LaunchSettings.from_dict(dict(data["settings"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("preset %s skipped: %s", path.name, exc)
    return out


def delete_preset(name: str) -> bool:
    path = _file_for(name)
    if path.exists():
        path.unlink()
        return True
    return False
