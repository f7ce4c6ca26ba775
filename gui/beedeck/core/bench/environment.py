"""The environment a benchmark ran in (engine, GPUs, system, models, settings), for its JSON report."""

from __future__ import annotations

import platform
import sys
import time
from pathlib import Path
from typing import Any

from beedeck import __version__
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.machine.hardware import detect
from beedeck.core.models.gguf.reader import inspect


def _model_facts(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    facts: dict[str, Any] = {"path": path, "file": Path(path).name}
    try:
        info = inspect(path)
        facts.update(architecture=info.architecture, name=info.name, quant=info.file_type,
                     size_bytes=info.file_size, n_layer=info.n_layer, n_embd=info.n_embd)
    except Exception as exc:  # a report must still be written for a file the reader cannot parse
        facts["error"] = str(exc)
    return facts


def _server_facts(url: str, api_key: str | None) -> dict[str, Any]:
    """What a server started outside BeeDeck says of itself (/props): its build and model."""
    from beedeck.core.engine.client import ClientError, LlamaClient

    try:
        props = LlamaClient(url, api_key).props()
    except (ClientError, OSError, ValueError) as exc:
        return {"error": str(exc)}
    settings = props.get("default_generation_settings") or {}
    return {"build_info": str(props.get("build_info") or ""), "model_path": str(props.get("model_path") or ""),
            "n_ctx": settings.get("n_ctx"), "total_slots": props.get("total_slots")}


def collect_environment(engine: str | Path | None, caps: EngineCaps | None, settings: LaunchSettings | None,
                        url: str | None = None, api_key: str | None = None) -> dict[str, Any]:
    """Engine, GPU, system, models and launch settings (never the API key) for the JSON report."""
    hw = detect()
    env: dict[str, Any] = {
        "beedeck": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "gpus": [{"name": g.name, "memory_total": g.memory_total, "cuda_arch": g.cuda_arch} for g in hw.gpus],
        "gpu_driver": hw.driver_version, "gpu_note": hw.reason,
        "cpu_cores": hw.system.cpu_cores_logical, "ram_total": hw.system.ram_total,
    }
    if url is not None:
        env["server_url"] = url
        env["server"] = _server_facts(url, api_key)
    if engine is not None:
        env["engine"] = {"path": str(engine)}
    if caps is not None:
        env["engine"] = {"path": caps.path, "generation": caps.generation.value, "version": caps.version,
                         "build": caps.build, "commit": caps.commit, "built_with": caps.built_with,
                         "gpu_backend": caps.gpu_backend, "devices": list(caps.devices)}
    if settings is not None:
        env["settings"] = settings.to_dict()
        env["models"] = {k: v for k, v in (("target", _model_facts(settings.target)),
                                            ("draft", _model_facts(settings.draft))) if v is not None}
    return env
