"""The one pure function that turns launch settings into llama-server's argument list.

The form, "Copy command", the CLI, the benchmark and the tests all go through :func:`build_argv`.
The argv it returns does NOT start with the binary: the caller (``engine.server``) prepends
``caps.path``. Every setting the engine cannot honour is either dropped or translated (an
:class:`ArgNote` says so) or refused (:class:`LaunchRefused`, one reason per line, with a remedy).
"""

from __future__ import annotations

import ipaddress
import shlex
from dataclasses import dataclass

from beedeck.core.engine.alias import model_alias
from beedeck.core.engine.argv.base import ArgNote, Builder, LaunchRefused
from beedeck.core.engine.argv.rpc import rpc_args
from beedeck.core.engine.argv.spec import speculation
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.slots import chat_slots, doubles_sequences, slot_context

__all__ = ["ArgNote", "LaunchPlan", "LaunchRefused", "build_argv", "is_loopback", "own_origin", "redact"]

SECRET_FLAGS = frozenset({"--api-key"})


def redact(argv: list[str]) -> list[str]:
    """``argv`` with secret values masked, in both spellings: ``--api-key X`` and ``--api-key=X``."""
    out = list(argv)
    for i, arg in enumerate(out):
        flag, eq, _value = arg.partition("=")
        if eq and flag in SECRET_FLAGS:
            out[i] = f"{flag}=********"
        elif arg in SECRET_FLAGS and i + 1 < len(out):
            out[i + 1] = "********"
    return out


@dataclass(frozen=True)
class LaunchPlan:
    """The argument list for llama-server, WITHOUT the binary path (prepend ``caps.path``)."""

    argv: list[str]
    notes: tuple[ArgNote, ...] = ()

    def __repr__(self) -> str:
        # The dataclass repr would print the API key into logs and tracebacks.
        return f"LaunchPlan(argv={self.redacted_argv()!r}, notes={self.notes!r})"

    def redacted_argv(self) -> list[str]:
        """argv with secret values (the API key) masked: for logs and display."""
        return redact(self.argv)

    def command_line(self, binary: str, reveal_secrets: bool = False) -> str:
        """A copy-pasteable POSIX shell line (secrets masked unless asked)."""
        return shlex.join([binary, *(self.argv if reveal_secrets else self.redacted_argv())])

    def pairs(self) -> list[tuple[str, str | None]]:
        """(flag, value) pairs; a switch has value None. Values are recognised as non-flag tokens."""
        out: list[tuple[str, str | None]] = []
        for arg in self.argv:
            if arg.startswith("-") and not _is_number(arg):
                out.append((arg, None))
            elif out and out[-1][1] is None:
                out[-1] = (out[-1][0], arg)
            else:
                out.append(("", arg))
        return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fmt(value: float) -> str:
    return repr(float(value))


def is_loopback(host: str) -> bool:
    """True for 127.x, ::1, localhost and UNIX socket paths; each entry of a comma list must be local."""
    for part in (h.strip() for h in host.split(",")):
        if not part:
            continue
        if part == "localhost" or part.endswith(".sock") or part.startswith("/"):
            continue
        try:
            if not ipaddress.ip_address(part.strip("[]")).is_loopback:
                return False
        except ValueError:
            return False  # a host name other than localhost may resolve to a LAN address
    return True


_FULL_PRECISION = ("f32", "f16", "bf16")


def build_argv(settings: LaunchSettings, caps: EngineCaps) -> LaunchPlan:
    """Turn settings into llama-server arguments for this engine (pure; no file or process access).

    Returns the argv WITHOUT the binary path. Raises :class:`LaunchRefused` when the settings cannot run.
    """
    b = Builder(settings, caps)
    s = settings
    for setting, problem in s.problems():
        b.refuse(setting, f"{problem[0].upper()}{problem[1:]}.", "")
    if not s.target:
        b.refuse("target", "No target model is set.", "Pick a GGUF model file.", code="model_missing")
    b.add("-m", s.target)
    spec_on = speculation(b)
    if s.target:  # /v1/models and every reply name the model by this, not by its path
        b.opt("alias", ("--alias", "-a"), model_alias(s.target))
    _network(b)
    _memory(b, spec_on)
    rpc_args(b, spec_on)
    _chat(b)
    _extra(b)
    if b.refusals:
        raise LaunchRefused(b.refusals)
    return LaunchPlan(b.argv, tuple(b.notes))


def _gpu_layers(b: Builder, setting: str, flags: tuple[str, ...], value: str) -> None:
    symbolic = b.caps.gpu_layers_values
    if not value.isdigit() and value not in ("auto", "all"):
        b.refuse(setting, f"GPU layers must be a number, 'auto' or 'all', not {value!r}.", "")
        return
    if not value.isdigit() and symbolic and value not in symbolic:
        if value == "all":
            b.note(
                setting, "translated", "This engine has no 'all' for GPU layers: passing 999 (every layer)."
            )
            value = "999"
        else:
            b.note(setting, "dropped", f"This engine has no {value!r} for GPU layers: using its default.")
            return
    b.opt(setting, flags, value)


def _network(b: Builder) -> None:
    s = b.s
    if not is_loopback(s.host) and not s.api_key:
        b.refuse("api_key", f"Exposing on the LAN needs an API key: host {s.host} is reachable from other machines.",
                 "Set an API key, or use 127.0.0.1.")
    if b.caps.has("--host"):
        b.add("--host", s.host)
    elif not is_loopback(s.host):
        b.refuse("host", "This engine has no --host option, so it cannot listen on another address.",
                 "Use 127.0.0.1.", code="unknown_argument")
    b.opt(
        "port",
        ("--port",),
        str(s.port),
        refuse=("This engine has no --port option: it is not a usable llama-server.",
                "Pick another llama-server binary."),
    )
    if s.api_key:
        b.opt(
            "api_key",
            ("--api-key",),
            s.api_key,
            refuse=("This engine has no --api-key option, so it cannot require a key.", "Use 127.0.0.1 without a key."),
        )
    _cors(b)


def own_origin(host: str, port: int) -> str:
    """The origin the server's own web UI is served from (a wildcard address: its loopback one)."""
    first = next((h.strip() for h in host.split(",") if h.strip()), "127.0.0.1")
    if first in ("0.0.0.0", "::", "[::]") or first.endswith(".sock") or first.startswith("/"):
        first = "127.0.0.1"
    if ":" in first and not first.startswith("["):
        first = f"[{first}]"
    return f"http://{first}:{port}"


def _cors(b: Builder) -> None:
    """Only the server's own origin may read its answers in a browser. llama-server's default reflects every
    origin with credentials, so any web page the user visits could send a prompt (a text/plain POST needs no
    preflight) and read the reply, /props (the model's path) and /metrics. BeeDeck needs no other origin: its
    app, its CLI and the coding agents are no browsers, and the built-in web UI is served from the server's
    own origin. An engine without the option is the known issue ``cors-reflects-every-origin`` (the guard
    warns); ``--cors-origins`` among the extra arguments is the user's own choice and wins."""
    if any(arg.split("=", 1)[0] == "--cors-origins" for arg in b.s.extra_args) or not b.caps.has("--cors-origins"):
        return
    b.add("--cors-origins", own_origin(b.s.host, b.s.port))
    if b.caps.has("--no-cors-credentials"):
        b.add("--no-cors-credentials")


def _slot_context(b: Builder, spec_on: bool) -> int:
    """The -c value (:func:`beedeck.core.engine.slots.slot_context`, the rule the planner uses too) and its notes."""
    s = b.s
    slot = slot_context(s, b.caps.generation, spec_on)
    if s.ctx_is_total:
        if doubles_sequences(b.caps.generation, spec_on) and s.kv_unified is not True:
            b.note(
                "ctx_size",
                "info",
                f"BeeLlama <= 0.3 splits -c between the slot and its speculation backup: "
                f"the slot gets about {s.ctx_size // 2} tokens. Turn on KV unified or let BeeDeck double -c.",
            )
        return slot.c_arg
    if slot.slots_multiplied:
        b.note(
            "ctx_size",
            "compensated",
            f"Without a unified KV cache each of the {chat_slots(s)} slots gets "
            f"-c / {chat_slots(s)}: passing -c {s.ctx_size * chat_slots(s)} so each gets {s.ctx_size}.",
        )
    if slot.spec_doubled:
        b.note(
            "ctx_size",
            "compensated",
            "BeeLlama <= 0.3 halves the slot context whenever --spec-type is on "
            f"(without --kv-unified): passing -c {slot.c_arg} to give the slot {s.ctx_size} tokens.",
        )
    return slot.c_arg


def _memory(b: Builder, spec_on: bool) -> None:
    s, caps = b.s, b.caps
    slots = chat_slots(s)
    if slots < s.parallel:
        b.note("parallel", "compensated",
               f"One slot while a draft is loaded (-np 1, not {s.parallel}): speculation loses throughput at two or "
               "more parallel slots (llama.cpp PR 27342: 34.1 tok/s with no drafter against 25-26 with DFlash2 or "
               "MTP at 4 slots), so parallel requests (a coding agent's) wait their turn. Baseline or N-gram keep "
               f"the {s.parallel} slots.")
    b.opt("parallel", ("-np", "--parallel"), str(slots))
    if s.kv_unified is not None:
        b.switch("kv_unified", ("--kv-unified", "-kvu") if s.kv_unified else ("--no-kv-unified", "-no-kvu"))
    _gpu_layers(b, "n_gpu_layers", ("-ngl", "--gpu-layers", "--n-gpu-layers"), s.n_gpu_layers)
    if spec_on and s.spec_mode.uses_draft_file and s.draft_n_gpu_layers is not None:
        _gpu_layers(b, "draft_n_gpu_layers", ("--spec-draft-ngl", "-ngld"), s.draft_n_gpu_layers)
    if s.threads is not None:
        b.opt("threads", ("-t", "--threads"), str(s.threads))
    if s.batch_size is not None:
        b.opt("batch_size", ("-b", "--batch-size"), str(s.batch_size))
    if s.ubatch_size is not None:
        b.opt("ubatch_size", ("-ub", "--ubatch-size"), str(s.ubatch_size))
    b.opt("ctx_size", ("--ctx-size", "-c"), str(_slot_context(b, spec_on)))
    _cache_types(b)
    if s.flash_attn not in caps.flash_attn_values and caps.flash_attn_values:
        b.refuse("flash_attn", f"Flash attention {s.flash_attn!r} is not accepted here.",
                 f"Pick one of {', '.join(caps.flash_attn_values)}.")
    else:
        b.opt("flash_attn", ("--flash-attn", "-fa"), s.flash_attn)
    if s.cache_ram is not None:
        b.opt("cache_ram", ("--cache-ram", "-cram"), str(s.cache_ram))
    if s.cache_reuse is not None:
        b.opt("cache_reuse", ("--cache-reuse",), str(s.cache_reuse))


def _cache_types(b: Builder) -> None:
    s, caps = b.s, b.caps
    for setting, value, flag in (
        ("cache_type_k", s.cache_type_k, "--cache-type-k"),
        ("cache_type_v", s.cache_type_v, "--cache-type-v"),
    ):
        default = caps.defaults.get(flag, "f16")
        if value == default:
            continue  # the engine's default needs no flag (the guide's DFlash line passes none)
        if not caps.has(flag):
            b.refuse(setting, f"This engine has no {flag} option, so the KV cache stays {default}.",
                     f"Pick {default}.", code="unsupported_cache_type")
            continue
        if value in caps.cache_types:
            b.add(flag, value)
            continue
        if value.startswith("turbo"):
            alt = "kvarn3/kvarn4 (KVarN) or q4_0/q8_0" if caps.has_kvarn else "q4_0 or q8_0"
            b.refuse(setting, f"KV cache type {value} is TurboQuant, which only BeeLlama <= 0.3 has.", f"Use {alt}.",
                     code="unsupported_cache_type")
        else:
            b.refuse(setting, f"KV cache type {value} is not supported by this engine.",
                     f"Pick one of {', '.join(caps.cache_types)}.", code="unsupported_cache_type")
    if (
        s.cache_type_v not in _FULL_PRECISION
        and not s.cache_type_v.startswith("turbo")
        and s.flash_attn == "off"
    ):
        b.refuse("cache_type_v", f"A quantized V cache ({s.cache_type_v}) needs flash attention.",
                 "Set flash attention to on or auto, or use an f16 V cache.")


def _load_mode(b: Builder) -> None:
    s, caps = b.s, b.caps
    if s.mmap and not s.mlock:
        return  # the default on every engine
    # --load-mode first: BeeLlama >= 0.4 still lists --mlock/--no-mmap, but as deprecated aliases.
    if caps.has("--load-mode"):
        mode = ("mmap+mlock" if s.mmap else "mlock") if s.mlock else "none"
        if caps.load_modes and mode not in caps.load_modes:
            b.drop("mmap", f"--load-mode {mode}")
            return
        b.add("--load-mode", mode)
        old = " ".join(x for x in ("" if s.mmap else "--no-mmap", "--mlock" if s.mlock else "") if x)
        b.note("mmap", "translated", f"{old} is spelled --load-mode {mode} on this engine.")
        return
    if caps.has("--no-mmap") or caps.has("--mlock"):
        if not s.mmap:
            b.switch("mmap", ("--no-mmap",))
        if s.mlock:
            b.switch("mlock", ("--mlock",))
        return
    b.drop("mmap", "--no-mmap/--mlock")


def _chat(b: Builder) -> None:
    s = b.s
    if s.jinja:
        b.switch("jinja", ("--jinja",))
    elif b.caps.has("--no-jinja"):
        b.add("--no-jinja")
    if s.chat_template:
        b.opt(
            "chat_template",
            ("--chat-template",),
            s.chat_template,
            refuse=("This engine has no --chat-template option.", "Pick a model with a built-in chat template."),
        )
    _load_mode(b)
    if s.no_host:
        b.switch("no_host", ("--no-host",))
    if s.metrics:
        b.switch("metrics", ("--metrics",))
    # BeeDeck's log reader wants timestamps and prefixes; engines without the flags still run.
    for flag in ("--log-timestamps", "--log-prefix"):
        b.switch("log", (flag,))
    if s.reasoning is not None:
        b.opt("reasoning", ("--reasoning", "-rea"), s.reasoning)
    for setting, flags, value in (
        ("temp", ("--temp", "--temperature"), s.temp),
        ("top_k", ("--top-k",), s.top_k),
        ("top_p", ("--top-p",), s.top_p),
        ("min_p", ("--min-p",), s.min_p),
        ("repeat_penalty", ("--repeat-penalty",), s.repeat_penalty),
        ("dry_multiplier", ("--dry-multiplier",), s.dry_multiplier),
    ):
        if value is not None:
            b.opt(setting, flags, str(int(value)) if setting == "top_k" else _fmt(value))


def _extra(b: Builder) -> None:
    for arg in b.s.extra_args:
        if arg.startswith("-") and not _is_number(arg):
            name = arg.split("=", 1)[0]
            if not b.caps.has(name):
                b.refuse("extra_args", f"Extra argument {name} is not an option of this engine.",
                         "Remove it (see `llama-server --help` for what this build accepts).", code="unknown_argument")
    b.add(*b.s.extra_args)
