"""Launch settings: everything one llama-server launch needs, engine-neutral, with safe defaults.

:func:`beedeck.core.engine.argv.build_argv` turns them into a given engine's argument list.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from beedeck.core.engine.mode import Mode

# The port the app's server listens on when a profile says 0. One that no popular local-LLM tool
# uses (llama-server 8080, LM Studio 1234, Ollama 11434, Jan 1337, koboldcpp 5001, and 8000), so
# editor integrations can keep one URL. The CLI's serve/chat/bench keep 0 = any free port.
DEFAULT_PORT = 8477


class SettingsError(ValueError):
    """A launch setting has the wrong type or is out of range; the message names it and the fix."""


# Allowed ranges of the numeric settings (inclusive; None means "the engine's default" where the
# field is optional). One table for the form, the CLI, saved profiles and build_argv.
# field: (lowest, highest, what it counts, the name the form and the CLI show)
RANGES: dict[str, tuple[float, float, str, str]] = {
    "ctx_size": (0, 1 << 24, "context tokens (0 = the model's own)", "Context size (--ctx)"),
    "port": (0, 65535, f"a TCP port (0 = BeeDeck's choice: {DEFAULT_PORT} in the app, any free one in the CLI)",
             "Port (--port)"),
    "threads": (1, 1024, "CPU threads", "Threads (--threads)"),
    "batch_size": (1, 1 << 20, "tokens per batch", "Batch size"),
    "ubatch_size": (1, 1 << 20, "tokens per micro-batch", "Micro-batch size"),
    "draft_ubatch_size": (1, 1 << 20, "draft tokens per micro-batch", "Draft micro-batch size (-ubd)"),
    "parallel": (1, 256, "chat slots", "Parallel slots"),
    "draft_n_max": (0, 256, "draft tokens", "Draft max (--draft-max)"),
    "draft_n_min": (0, 256, "draft tokens", "Draft min"),
    "dflash_cross_ctx": (1, 1 << 20, "tokens", "DFlash cross context"),
    "draft_ctx_size": (0, 1 << 24, "tokens", "Draft context size"),
    "cache_ram": (-1, 1 << 24, "MiB (-1 = no limit, 0 = off)", "Prompt cache RAM"),
    "cache_reuse": (0, 1 << 20, "tokens (0 = off)", "Prompt cache reuse (--cache-reuse)"),
    "temp": (0.0, 5.0, "a temperature", "Temperature"),
    "top_k": (0, 1 << 20, "tokens", "Top-k"),
    "top_p": (0.0, 1.0, "a probability", "Top-p"),
    "min_p": (0.0, 1.0, "a probability", "Min-p"),
    "repeat_penalty": (0.0, 5.0, "a penalty (1.0 = off)", "Repeat penalty"),
    "dry_multiplier": (0.0, 5.0, "a multiplier (0 = off)", "DRY multiplier"),
}


def _type_ok(annotation: str, value: Any) -> bool:
    optional = annotation.endswith("| None")
    base = annotation.removesuffix(" | None").strip()
    if value is None:
        return optional
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if base == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base == "bool":
        return isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    if base == "list[str]":
        return isinstance(value, list) and all(isinstance(x, str) for x in value)
    if base == "Mode":
        return isinstance(value, str) and Mode.from_setting(value) is not None
    return True


@dataclass
class LaunchSettings:
    """Everything a llama-server launch needs. Defaults are safe for a single local user."""

    target: str = ""
    draft: str | None = None
    # How it speculates, stored as Mode.setting (profile.json and presets: Baseline is "off")
    spec_mode: Mode = Mode.BASELINE
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
    # The drafter's own physical ubatch (BeeLlama >= 0.4.7 --spec-draft-ubatch-size / -ubd); None: the engine's
    # default (passed only where the probe found the flag: core/engine/argv/spec.py)
    draft_ubatch_size: int | None = None
    # The drafter's own KV cache type, K and V (--spec-draft-type-k/v, BeeLlama >= 0.4.4: KVarN for owned draft
    # caches, field notes §1); None: the engine's default (f16)
    draft_cache_type: str | None = None
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    flash_attn: str = "auto"  # on / off / auto
    parallel: int = 1
    kv_unified: bool | None = None  # None: the engine's default
    mmap: bool = True
    mlock: bool = False
    no_host: bool = False
    cache_ram: int | None = None  # MiB of host prompt cache; 0 turns it off
    # Smallest chunk (tokens) of an earlier prompt reused by shifting the KV cache (--cache-reuse): an
    # agent's next turn repeats most of its prompt. None: the engine's default (0, off).
    cache_reuse: int | None = None
    temp: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    min_p: float | None = None
    repeat_penalty: float | None = None  # --repeat-penalty; None: the engine's default (1.0, off)
    dry_multiplier: float | None = None  # --dry-multiplier (DRY: penalises repeating sequences); None: off
    reasoning: str | None = None  # on / off / auto
    jinja: bool = True
    chat_template: str | None = None  # e.g. "gemma" (with jinja=False: a built-in template name)
    host: str = "127.0.0.1"
    port: int = 0  # 0: the app uses DEFAULT_PORT (a free one when it is taken), the CLI any free port
    api_key: str | None = field(default=None, repr=False)  # repr goes into logs and tracebacks
    metrics: bool = True
    extra_args: list[str] = field(default_factory=list)
    # llama.cpp RPC workers whose devices hold part of the target, "host:port" each (core/engine/rpc/workers.py)
    rpc_workers: list[str] = field(default_factory=list)
    # True: pass ctx_size to -c as is (the total KV pool), as the guide does. False: ctx_size is what
    # one slot gets, and build_argv compensates for slot splitting (-np, BeeLlama Gen A speculation).
    ctx_is_total: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["spec_mode"] = self.spec_mode.setting
        data.pop("api_key", None)  # secrets never go into presets or logs
        return data

    @classmethod
    def from_dict(cls, data: Any) -> LaunchSettings:
        """Settings from saved JSON: every known field type-checked and range-checked (unknown keys
        are ignored, so a newer BeeDeck's profile still loads). Raises SettingsError naming the field."""
        if not isinstance(data, dict):
            raise SettingsError(f"the launch settings are a {type(data).__name__}, not an object")
        clean: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            if not _type_ok(str(f.type), value):
                raise SettingsError(f"'{f.name}' is {value!r} ({type(value).__name__}), which is not a valid "
                                    f"{str(f.type).replace(' | None', ' (or empty)')}")
            clean[f.name] = Mode.from_setting(value) if f.name == "spec_mode" else value
        settings = cls(**clean)
        problems = settings.check()
        if problems:
            raise SettingsError("; ".join(problems))
        return settings

    def check(self) -> list[str]:
        """Every out-of-range value, each with its allowed range (empty when all are fine)."""
        return [problem for _, problem in self.problems()]

    def problems(self) -> list[tuple[str, str]]:
        """:meth:`check`'s texts, each with the field it is about (the launch form shows it under that field)."""
        out = []
        for name, (low, high, what, label) in RANGES.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                shown = f"{low:g}..{high:g}" if high < 1 << 20 else f"{low:,}..{high:,}"  # the real limit
                out.append((name, f"{label} is {value!r}: it must be {shown} ({what})"))
        if (self.batch_size is not None and self.ubatch_size is not None
                and self.ubatch_size > self.batch_size):
            out.append(("ubatch_size", f"ubatch size {self.ubatch_size} is larger than batch size {self.batch_size}: "
                        "the micro-batch must fit in the batch"))
        if self.draft_n_min is not None and self.draft_n_max is not None and self.draft_n_min > self.draft_n_max:
            out.append(("draft_n_min", f"draft n min {self.draft_n_min} is above draft n max {self.draft_n_max}"))
        if not self.target.strip() and self.target:
            out.append(("target", "the target model path is only spaces"))
        return out

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
        s.spec_mode = Mode.DFLASH
        s.dflash_cross_ctx = 1024
        s.kv_unified = True
        s.draft_n_gpu_layers = "all"
        s.cache_type_k = s.cache_type_v = "f16"
        s.cache_ram = 0
        s.mmap = False
        s.mlock = True
        s.no_host = True
        return s
