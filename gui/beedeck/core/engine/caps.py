"""The capability model of one llama-server binary: which family it is and what it accepts.

Built by :mod:`beedeck.core.engine.help_text` from the binary's own ``--help``/``--version`` and
cached by :mod:`beedeck.core.engine.probe`. Facts: docs/reference/engine-facts.md §2.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Generation(StrEnum):
    """Which family of llama-server a binary belongs to (docs/reference/engine-facts.md §2.3)."""

    BEE_A = "bee-a"  # BeeLlama <= 0.3: --spec-type dflash, turbo caches, --spec-dflash-cross-ctx
    BEE_B = "bee-b"  # BeeLlama >= 0.4: draft-dflash, KVarN, --load-mode
    MAINLINE = "mainline"  # ggml-org llama.cpp: draft-dflash, --load-mode
    UNKNOWN = "unknown"


class ProbeError(RuntimeError):
    """The file is not a usable llama-server; the message names the problem and the remedy."""


RELEASE_SIDECAR = ".beedeck.json"  # <binary>.beedeck.json: {"release": "v0.4.3", ...}


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
    draft_cache_types: tuple[str, ...] = ()  # --spec-draft-type-k's allowed values (KVarN from BeeLlama ~0.4.7)
    flash_attn_values: tuple[str, ...] = ()
    gpu_layers_values: tuple[str, ...] = ()  # symbolic values accepted by -ngl, e.g. ("auto", "all")
    defaults: dict[str, str] = field(default_factory=dict)  # long flag -> "(default: X)" text
    # Added by the probe (all optional, so hand-built caps in tests stay short):
    load_modes: tuple[str, ...] = ()  # values of --load-mode, e.g. ("auto", "none", "mmap", ...)
    devices: tuple[str, ...] = ()  # `--list-devices` lines, e.g. "CUDA0: NVIDIA ... (24575 MiB, ...)"
    gpu_backend: str = ""  # "cuda", "vulkan", "metal", ... ; "cpu" when the build has no GPU; "" unknown
    # The release it was built from ("v0.4.3"), from the sidecar BeeDeck's builder or downloader writes
    # beside the binary (RELEASE_SIDECAR): a source-archive build reports "version: 0 (unknown)".
    release: str = ""

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
            "draft_cache_types",
            "flash_attn_values",
            "gpu_layers_values",
            "load_modes",
            "devices",
        ):
            clean[name] = tuple(clean.get(name, ()))
        clean["defaults"] = dict(clean.get("defaults", {}))
        return cls(**clean)
