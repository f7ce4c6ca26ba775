"""Each LaunchSettings field declared once: section, label, tooltip (what it does and what it costs),
widget kind, and the engine rule that decides whether the probed engine supports it. Qt-free, so the
rules are tested without widgets.
"""

from __future__ import annotations

from dataclasses import dataclass

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import DEFAULT_PORT, RANGES
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import engine_spec_type

SECTIONS = ("Models", "Speculation", "Context & KV cache", "GPU & loading", "Sampling", "Server")


@dataclass(frozen=True)
class FieldSpec:
    """One form row. kind: path, text, secret, args, combo, tristate, cache, layers, int, float, bool.

    Numbers take their range from :data:`RANGES` (the one table LaunchSettings.check() uses), so every
    value a profile may hold can be shown and read back. ``optional``: None is allowed and shown as
    ``special`` (default "engine default") one step below the range, so the lowest real value (e.g.
    1 CPU thread) stays a real value. ``special`` on a non-optional number names its lowest value
    (e.g. port 0 = BeeDeck's default port).
    """

    name: str
    section: str
    label: str
    tooltip: str
    kind: str
    choices: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()  # what a combo shows for each choice (default: the choice itself)
    minimum: int = 0
    maximum: int = 1 << 30
    step: int = 1
    optional: bool = False  # None allowed: shown as ``special`` below the range
    special: str = ""
    placeholder: str = ""


M, S, C, G, P, N = SECTIONS
FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("target", M, "Target model", "The model you chat with (a GGUF file). Its size decides most of the "
              "memory use.", "path", placeholder="/path/to/model.gguf"),
    FieldSpec("draft", M, "Draft model", "The draft trained for this target (a DFlash, EAGLE-3 or DSpark GGUF; "
              "BeeDeck reads which from its header). It guesses tokens the target then checks: faster replies "
              "for ~1-2 GB more VRAM.", "path", optional=True, placeholder="/path/to/dflash-draft.gguf"),
    FieldSpec("spec_mode", S, "Speculation", "Baseline: plain decoding. DFlash: a DFlash draft proposes a block of "
              "tokens (fastest on code, needs the draft made for this target). EAGLE-3 / DSpark: an EAGLE-3 or "
              "DSpark draft (BeeLlama >= 0.4, mainline). MTP: the target's own MTP heads, no draft file (models "
              "that ship them, such as Qwen3.6; often best on prose). N-gram: lookups in the context "
              "(no extra memory, helps on repetitive text such as code edits). The line below says which of "
              "them this engine and these files can run; the toolbar toggle switches between them.", "combo",
              choices=tuple(m.value for m in Mode), labels=tuple(m.label for m in Mode)),
    FieldSpec("spec_model_free_type", S, "N-gram type", "Which draft-free method guesses tokens. "
              "ngram-mod is a good default; copyspec (BeeLlama) copies spans it has seen.", "combo"),
    FieldSpec("draft_n_max", S, "Max draft tokens", "Most tokens proposed per step (--spec-draft-n-max). "
              "More can mean more speed when guesses are right, and wasted work when they are not.", "int",
              optional=True),
    FieldSpec("draft_n_min", S, "Min draft tokens", "Fewest tokens proposed per step (--spec-draft-n-min).",
              "int", optional=True),
    FieldSpec("dflash_cross_ctx", S, "DFlash cross context", "How many recent target tokens the draft "
              "attends to (--spec-dflash-cross-ctx). Larger guesses better and costs a little VRAM.", "int",
              step=256, optional=True),
    FieldSpec("draft_ctx_size", S, "Draft context", "The drafter's own context (-cd). BeeLlama 0.1-0.3 "
              "sets 256 for DFlash when empty; BeeLlama >= 0.4 and mainline give the drafter a context as "
              "large as the target's, which the memory bar counts.", "int", step=256, optional=True),
    FieldSpec("draft_ubatch_size", S, "Draft micro-batch", "The drafter's own physical batch (-ubd, "
              "BeeLlama >= 0.4.7, default 128): 64 used about 400 MiB less than 256 on a 4090 at 96k context "
              "with DFlash2. Empty: the engine's default.", "int", step=64, optional=True),
    FieldSpec("draft_cache_type", S, "Draft KV cache", "The drafter's own KV cache type, K and V "
              "(--spec-draft-type-k/v, BeeLlama >= 0.4.4). KVarN works for drafts with their own cache (MTP, "
              "DFlash, EAGLE-3); Gemma 4's MTP shares the target's cache: set the target's type instead.", "combo",
              choices=("engine default", "f16", "q8_0", "q5_0", "q4_0", "kvarn5", "kvarn4"), optional=True),
    FieldSpec("draft_n_gpu_layers", S, "Draft GPU layers", "Draft layers on the GPU (--spec-draft-ngl). "
              "Keep 'all': a draft on the CPU is usually slower than no speculation.", "layers",
              choices=("all", "auto", "0", "engine default"), optional=True),
    FieldSpec("ctx_size", C, "Context (tokens)", "How much text one chat can hold. The KV cache grows "
              "linearly with it: watch the memory bar. The lowest value, 0, takes the model's own context.",
              "int", step=1024, special="model's own"),
    FieldSpec("ctx_is_total", C, "Context is the total pool", "Pass the context to -c as is (the guide's "
              "way). Off: BeeDeck gives each slot the full context and adjusts -c for slots and speculation.",
              "bool"),
    FieldSpec("cache_type_k", C, "K cache type", "Precision of the attention keys. q8_0 halves the f16 "
              "cache at almost no quality cost; 4-bit and TurboQuant types save more, with some loss.",
              "cache"),
    FieldSpec("cache_type_v", C, "V cache type", "Precision of the attention values. A quantized V cache "
              "needs flash attention.", "cache"),
    FieldSpec("flash_attn", C, "Flash attention", "Faster attention with less memory; required for a "
              "quantized V cache. auto lets the engine decide.", "combo"),
    FieldSpec("kv_unified", C, "Unified KV cache", "One KV pool shared by all slots (--kv-unified). "
              "BeeLlama 0.1-0.3 needs it on with DFlash, or each slot gets half the context.", "tristate",
              choices=("engine default", "on", "off"), optional=True),
    FieldSpec("parallel", C, "Parallel slots", "How many requests run at once (-np). Each extra slot "
              "multiplies KV memory; 1 is right for one user.", "int"),
    FieldSpec("cache_ram", C, "Host prompt cache (MiB)", "RAM for reusing earlier prompts (--cache-ram); "
              "0 turns it off to save system memory, -1 sets no limit.", "int", step=1024, optional=True),
    FieldSpec("cache_reuse", C, "Prompt cache reuse (tokens)", "Reuse chunks of at least this many tokens "
              "of the previous prompt by shifting the KV cache (--cache-reuse): a coding agent's next turn "
              "repeats most of its prompt, so its first token comes sooner. 256 suits agents; 0 is off.",
              "int", step=64, optional=True),
    FieldSpec("n_gpu_layers", G, "GPU layers", "Target layers on the GPU (-ngl). 'all' is fastest; fewer "
              "layers fit a small GPU but every CPU layer slows decoding a lot.", "layers",
              choices=("all", "auto", "0")),
    FieldSpec("threads", G, "CPU threads", "Threads for the layers that run on the CPU (-t). On a machine "
              "with few cores leave one free for the desktop: llama.cpp's threads wait on each other, so one "
              "busy core can slow every token. 'engine default' (below 1) leaves -t out.", "int", optional=True),
    FieldSpec("batch_size", G, "Batch size", "Logical batch for prompt processing (-b). Bigger reads long "
              "prompts faster and needs a larger compute buffer.", "int", step=256, optional=True),
    FieldSpec("ubatch_size", G, "Micro-batch size", "Physical batch (-ub): the compute buffer scales with "
              "it. 512 is a good default; 256 saves VRAM.", "int", step=64, optional=True),
    FieldSpec("mmap", G, "Memory-map the model", "Read the model through mmap: quick start, pages can be "
              "swapped out. Off loads it fully into RAM first.", "bool"),
    FieldSpec("mlock", G, "Lock in RAM", "Keep the model in RAM so the OS never swaps it out (--mlock). "
              "Needs enough free RAM (and a memlock limit that allows it).", "bool"),
    FieldSpec("no_host", G, "No host buffer", "Skip the pinned host copy of GPU weights (--no-host): "
              "saves system RAM when everything is on the GPU.", "bool"),
    FieldSpec("temp", P, "Temperature", "Randomness of the reply. Lower is more focused; speculation "
              "accepts more tokens at low temperature.", "float", optional=True),
    FieldSpec("top_k", P, "Top-k", "Sample only from the k most likely tokens.", "int", optional=True),
    FieldSpec("top_p", P, "Top-p", "Sample from the smallest set of tokens whose probability adds up to p.",
              "float", optional=True),
    FieldSpec("min_p", P, "Min-p", "Drop tokens less likely than min-p times the best one.", "float",
              optional=True),
    FieldSpec("repeat_penalty", P, "Repeat penalty", "Make tokens seen in the last 64 less likely (1.0 = off). "
              "Small models loop without it; much above 1.1 it starts to avoid the words code repeats.", "float",
              optional=True),
    FieldSpec("dry_multiplier", P, "DRY multiplier", "Penalise repeating a sequence the reply already holds "
              "(DRY sampling; 0 = off, 0.8 is common). Stops a small model's loops.", "float", optional=True),
    FieldSpec("reasoning", P, "Reasoning", "Thinking mode for models that have one (--reasoning). On "
              "gives the draft richer context but makes replies longer.", "combo",
              choices=("engine default", "on", "off", "auto"), optional=True),
    FieldSpec("jinja", P, "Use the model's template", "Format chats with the model's own Jinja template "
              "(--jinja). Off: use a built-in template by name.", "bool"),
    FieldSpec("chat_template", P, "Chat template", "Override the chat format, e.g. 'gemma' or 'chatml' "
              "(--chat-template). Leave empty to use the model's.", "text", optional=True,
              placeholder="model's own"),
    FieldSpec("host", N, "Listen address", "127.0.0.1 keeps the server on this machine. Any other "
              "address exposes it on your network and needs an API key.", "text"),
    FieldSpec("port", N, "Port", f"TCP port of the OpenAI-compatible endpoint. The lowest value is BeeDeck's "
              f"default port, {DEFAULT_PORT}, so editors keep one URL; when another program holds the port, "
              "BeeDeck uses a free one for that run and says so.", "int", special=f"{DEFAULT_PORT} (default)"),
    FieldSpec("api_key", N, "API key", "Clients must send this key (--api-key). Never written to presets, "
              "settings or logs.", "secret", optional=True, placeholder="none"),
    FieldSpec("metrics", N, "Metrics endpoint", "Expose /metrics (Prometheus). Cheap; BeeDeck reads it "
              "for the speed gauge.", "bool"),
    FieldSpec("extra_args", N, "Extra arguments", "Anything else for llama-server, as on a command line. "
              "Each option is checked against this engine's --help.", "args",
              placeholder="--flag value …"),
)

# field -> (flags, any of which makes it supported; why not, when none is there)
_RULES: dict[str, tuple[tuple[str, ...], str]] = {
    "dflash_cross_ctx": (("--spec-dflash-cross-ctx",), "--spec-dflash-cross-ctx exists only in BeeLlama 0.1-0.3"),
    "draft_ctx_size": (("--spec-draft-ctx-size", "-cd"), "this engine has no -cd: its drafter gets a context as "
                       "large as the target's (BeeLlama >= 0.4, mainline)"),
    "draft_n_max": (("--spec-draft-n-max",), "this engine has no --spec-draft-n-max"),
    "draft_ubatch_size": (("--spec-draft-ubatch-size", "-ubd"), "-ubd exists only in BeeLlama >= 0.4.7"),
    "draft_cache_type": (("--spec-draft-type-k",), "this engine has no --spec-draft-type-k (BeeLlama >= 0.4.4)"),
    "draft_n_min": (("--spec-draft-n-min",), "this engine has no --spec-draft-n-min"),
    "draft_n_gpu_layers": (("--spec-draft-ngl", "-ngld"), "this engine has no --spec-draft-ngl"),
    "draft": (("--spec-draft-model", "-md"), "this engine cannot load a draft model"),
    "spec_mode": (("--spec-type",), "this engine has no --spec-type, so no speculative decoding"),
    "spec_model_free_type": (("--spec-type",), "this engine has no --spec-type"),
    "kv_unified": (("--kv-unified", "-kvu"), "this engine has no --kv-unified"),
    "cache_ram": (("--cache-ram", "-cram"), "this engine has no host prompt cache (--cache-ram)"),
    "cache_reuse": (("--cache-reuse",), "this engine has no --cache-reuse"),
    "cache_type_k": (("--cache-type-k",), "this engine has no --cache-type-k: the K cache stays f16"),
    "cache_type_v": (("--cache-type-v",), "this engine has no --cache-type-v: the V cache stays f16"),
    "flash_attn": (("--flash-attn", "-fa"), "this engine has no --flash-attn"),
    "parallel": (("-np", "--parallel"), "this engine has no -np"),
    "threads": (("-t", "--threads"), "this engine has no -t"),
    "batch_size": (("-b", "--batch-size"), "this engine has no -b"),
    "ubatch_size": (("-ub", "--ubatch-size"), "this engine has no -ub"),
    "mmap": (("--no-mmap", "--load-mode"), "this engine cannot turn mmap off"),
    "mlock": (("--mlock", "--load-mode"), "this engine has no --mlock"),
    "no_host": (("--no-host",), "--no-host exists only in newer builds"),
    "temp": (("--temp", "--temperature"), "this engine has no --temp"),
    "top_k": (("--top-k",), "this engine has no --top-k"),
    "top_p": (("--top-p",), "this engine has no --top-p"),
    "min_p": (("--min-p",), "this engine has no --min-p"),
    "repeat_penalty": (("--repeat-penalty",), "this engine has no --repeat-penalty"),
    "dry_multiplier": (("--dry-multiplier",), "this engine has no --dry-multiplier"),
    "reasoning": (("--reasoning", "-rea"), "this engine has no --reasoning switch"),
    "jinja": (("--jinja",), "this engine has no --jinja"),
    "chat_template": (("--chat-template",), "this engine has no --chat-template"),
    "host": (("--host",), "this engine has no --host: it listens on 127.0.0.1 only"),
    "api_key": (("--api-key",), "this engine has no --api-key"),
    "metrics": (("--metrics",), "this engine has no --metrics endpoint"),
}


def value_range(spec: FieldSpec) -> tuple[float, float]:
    """The lowest and highest real value of a number field (:data:`RANGES`, else the spec's own)."""
    if spec.name in RANGES:
        low, high = RANGES[spec.name][:2]
        return low, high
    return spec.minimum, spec.maximum


def _engine_name(caps: EngineCaps) -> str:
    return f"{caps.generation.value} {caps.version}".strip()


def field_reason(name: str, caps: EngineCaps | None) -> str | None:
    """Why the engine cannot honour field ``name`` (or ``spec_mode:<value>``); None when it can.
    With no engine picked, everything is allowed (build_argv checks again at launch)."""
    if caps is None:
        return None
    if name.startswith("spec_mode:"):
        value = name.split(":", 1)[1]
        key = Mode.parse(value)
        if key == Mode.BASELINE:
            return None
        base = field_reason("spec_mode", caps)
        if base:
            return base
        if key is None:
            return f"{value!r} is not a speculation mode BeeDeck knows."
        if key == Mode.MODEL_FREE:  # any type the engine lists: the type's own combo marks the unsafe ones
            return None if caps.model_free_spec_types else (
                f"This engine ({_engine_name(caps)}) has no N-gram speculation types.")
        return engine_spec_type(key, caps)[1] or None
    rule = _RULES.get(name)
    if rule is None or any(caps.has(f) for f in rule[0]):
        return None
    return f"{rule[1][0].upper()}{rule[1][1:]} (this engine: {_engine_name(caps)})."


def cache_type_reason(cache_type: str, caps: EngineCaps | None, flag: str = "--cache-type-k") -> str | None:
    """Why this KV cache type cannot be used with the engine; None when it can."""
    if caps is None or cache_type in caps.cache_types:
        return None
    if not caps.cache_types and cache_type == caps.defaults.get(flag, "f16"):
        return None
    if cache_type.startswith("turbo"):
        return f"{cache_type} is TurboQuant, which exists only in BeeLlama 0.1-0.3 (this engine: {_engine_name(caps)})."
    if cache_type.startswith("kvarn"):
        return f"{cache_type} is KVarN, which exists only in BeeLlama 0.4+ (this engine: {_engine_name(caps)})."
    return f"{cache_type} is not in this engine's {flag} list ({', '.join(caps.cache_types) or 'none'})."
