"""Launch settings, and the one pure function that turns them into llama-server's argument list.

The form, "Copy command", the CLI, the benchmark and the tests all go through :func:`build_argv`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from beedeck.core.probe import EngineCaps


class SpecMode(StrEnum):
    OFF = "off"
    DFLASH = "dflash"
    MODEL_FREE = "model-free"  # n-gram family or BeeLlama's copyspec; the type is LaunchSettings.spec_model_free_type


@dataclass
class LaunchSettings:
    """Everything a llama-server launch needs. Defaults are safe for a single local user."""

    target: str = ""
    draft: str | None = None
    spec_mode: SpecMode = SpecMode.OFF
    spec_model_free_type: str = "ngram-mod"  # ngram-mod, ngram-simple, ngram-map-k, copyspec, ...
    draft_n_max: int | None = None
    draft_n_min: int | None = None
    dflash_cross_ctx: int | None = None  # BeeLlama Gen A only (--spec-dflash-cross-ctx)
    ctx_size: int = 4096  # context tokens promised to the one chat slot
    n_gpu_layers: str = "all"  # a number, "auto" or "all"
    draft_n_gpu_layers: str | None = "all"
    batch_size: int | None = None
    ubatch_size: int | None = None
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"  # on / off / auto
    parallel: int = 1
    kv_unified: bool | None = None  # None: the engine's default
    mmap: bool = True
    mlock: bool = False
    no_host: bool = False
    cache_ram: int | None = None  # MiB of host prompt cache; 0 turns it off
    temp: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    reasoning: str | None = None  # on / off / auto
    jinja: bool = True
    chat_template: str | None = None  # e.g. "gemma" (with jinja=False: a built-in template name)
    host: str = "127.0.0.1"
    port: int = 0  # 0: BeeDeck picks a free port before launch
    api_key: str | None = None
    metrics: bool = True
    extra_args: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec_mode"] = self.spec_mode.value
        data.pop("api_key", None)  # secrets never go into presets or logs
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchSettings:
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in data.items() if k in known}
        if "spec_mode" in clean:
            clean["spec_mode"] = SpecMode(clean["spec_mode"])
        return cls(**clean)


@dataclass(frozen=True)
class ArgNote:
    """One thing build_argv did that the user should know: a dropped, translated or compensated option."""

    setting: str
    kind: str  # "dropped" | "translated" | "compensated" | "info"
    message: str


class LaunchRefused(ValueError):
    """These settings cannot run on this engine; ``reasons`` says why, one line each, with a remedy."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


@dataclass(frozen=True)
class LaunchPlan:
    argv: list[str]
    notes: tuple[ArgNote, ...] = ()


def build_argv(settings: LaunchSettings, caps: EngineCaps) -> LaunchPlan:  # pragma: no cover - replaced below
    raise NotImplementedError
