"""What a llama-server binary supports, read from its own ``--version`` and ``--help``.

The contract other modules rely on is :class:`EngineCaps` and :func:`probe_engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


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


def probe_engine(path: str, timeout: float = 15.0) -> EngineCaps:  # pragma: no cover - replaced below
    raise NotImplementedError
