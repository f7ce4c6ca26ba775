"""Launch settings: everything one llama-server launch needs, engine-neutral, with safe defaults.

:func:`beedeck.core.engine.argv.build_argv` turns them into a given engine's argument list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any


class SpecMode(StrEnum):
    OFF = "off"
    DFLASH = "dflash"
    MODEL_FREE = (
        "model-free"  # n-gram family or BeeLlama's copyspec; the type is LaunchSettings.spec_model_free_type
    )


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
    # The drafter's own context (-cd, BeeLlama Gen A; it defaults to 256 there). BeeLlama >= 0.4 and
    # mainline have no such option: their drafter gets a context as large as the target's.
    draft_ctx_size: int | None = None
    ctx_size: int = 4096  # context tokens promised to the one chat slot
    n_gpu_layers: str = "all"  # a number, "auto" or "all"
    draft_n_gpu_layers: str | None = "all"
    threads: int | None = None  # CPU threads for generation (-t); None: the engine's default
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
    api_key: str | None = field(default=None, repr=False)  # repr goes into logs and tracebacks
    metrics: bool = True
    extra_args: list[str] = field(default_factory=list)
    # True: pass ctx_size to -c as is (the total KV pool), as the guide does. False: ctx_size is what
    # one slot gets, and build_argv compensates for slot splitting (-np, BeeLlama Gen A speculation).
    ctx_is_total: bool = False

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

    @classmethod
    def guide_baseline(cls, target: str) -> LaunchSettings:
        """The guide's baseline server (docs/reference/seed.md step 6), host/port left at BeeDeck's defaults."""
        return cls(
            target=target,
            draft_n_gpu_layers=None,
            ctx_size=32768,
            parallel=1,
            n_gpu_layers="all",
            batch_size=2048,
            ubatch_size=512,
            cache_type_k="q5_0",
            cache_type_v="q4_1",
            flash_attn="on",
            jinja=True,
            metrics=True,
            reasoning="off",
            temp=0.7,
            top_k=64,
            top_p=0.95,
            min_p=0.0,
        )

    @classmethod
    def guide_dflash(cls, target: str, draft: str) -> LaunchSettings:
        """The guide's DFlash server (docs/reference/seed.md step 8). Its f16 caches (it drops the baseline's q5_0/q4_1)
        and ``--ctx-size 32768`` are kept; with ``--kv-unified`` that is the slot's real context."""
        s = cls.guide_baseline(target)
        s.draft = draft
        s.spec_mode = SpecMode.DFLASH
        s.dflash_cross_ctx = 1024
        s.kv_unified = True
        s.draft_n_gpu_layers = "all"
        s.cache_type_k = s.cache_type_v = "f16"
        s.cache_ram = 0
        s.mmap = False
        s.mlock = True
        s.no_host = True
        return s
