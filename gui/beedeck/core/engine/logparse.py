"""Reading llama-server's log: why a launch failed, and how much memory it took.

Strings come from docs/reference/engine-facts.md §4 and the mainline source (``tools/server``,
``src/``, ``common/arg.cpp``, ``ggml/src/gguf.cpp``). Both engines' log styles are handled: Bee
Gen A prints bare lines; mainline (and Bee >= 0.4) prefix ``M.SS.mmm.uuu`` timestamps and a level.
"""

from __future__ import annotations

import re
import signal as _signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.known_issues import explain_log

_TS_PREFIX = re.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3} ")
_LEVEL_PREFIX = re.compile(r"^[IWED] ")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_prefix(line: str) -> str:
    """One log line without colour codes, the mainline timestamp and the level letter."""
    line = _ANSI.sub("", line.rstrip("\r\n"))
    line = _TS_PREFIX.sub("", line, count=1)
    return _LEVEL_PREFIX.sub("", line, count=1)


@dataclass
class ServerFailure:
    """Why a llama-server launch failed: a stable ``code``, a message, and what the user can do."""

    code: str  # port_in_use, model_missing, not_gguf, wrong_draft_format, wrong_model_layout, unsupported_architecture,
    # dflash_target_unsupported, out_of_memory, unknown_argument, bad_value, crashed_signal, exited, timeout
    message: str
    remedy: str
    exit_code: int | None = None
    log_tail: list[str] = field(default_factory=list)
    issue: str = ""  # the known-issue table row that explains it (resources/known-issues.json), if any
    setting: str = ""  # a refusal before the start (core.launcher.preflight): the launch setting it is about

    def __str__(self) -> str:
        return f"{self.message} {self.remedy}".strip()


class ServerFailed(RuntimeError):
    """The server could not start or died; ``failure`` holds the code, message, remedy and log tail."""

    def __init__(self, failure: ServerFailure) -> None:
        super().__init__(str(failure))
        self.failure = failure


def as_failure(failure: object) -> ServerFailure:
    """Whatever stopped a server, as the one :class:`ServerFailure` the GUI is told of: a ServerFailure as it
    is; a :class:`ServerFailed` its failure (a launch refused for several reasons lists them, a line each); an
    error with ``code``/``message``/``remedy`` (``RemoteError``: ``code`` "remote:<kind>") keeps them; any
    other exception is its own message."""
    if isinstance(failure, ServerFailure):
        return failure
    reasons = getattr(failure, "reasons", None)  # a LaunchRefused of several refusals: each on a line of its own
    if isinstance(failure, ServerFailed) and reasons and len(reasons) > 1:
        return ServerFailure(failure.failure.code, "These settings cannot run on this engine.",
                             "\n".join(f"• {r}" for r in reasons))
    if isinstance(failure, ServerFailed):
        return failure.failure
    message = getattr(failure, "message", None)
    if isinstance(message, str):
        return ServerFailure(str(getattr(failure, "code", "") or ""), message, str(getattr(failure, "remedy", "") or ""))
    return ServerFailure("", str(failure), "")


_BIND = re.compile(r"couldn't bind HTTP server socket(?:, hostname: (?P<host>\S+?), port: (?P<port>\d+))?")
_OPEN = re.compile(r"failed to open GGUF file '(?P<path>[^']*)' \((?P<why>[^)]*)\)")
_MAGIC = re.compile(r"invalid magic characters")
_ARCH = re.compile(r"unknown model architecture: '(?P<arch>[^']*)'")
_INVALID_ARG = re.compile(r"error: invalid argument: (?P<arg>\S+)")
_BAD_VALUE = re.compile(r"error while handling argument \"(?P<arg>[^\"]+)\": (?P<why>.*)")
_REMOVED = re.compile(r"the argument has been removed")
_OOM = re.compile(
    r"cudaMalloc failed: out of memory|CUDA error: out of memory|failed to allocate buffer for kv cache|"
    r"failed to allocate compute|unable to allocate \S+ buffer|failed to allocate \S+ buffer of size|"
    r"ErrorOutOfDeviceMemory|std::bad_alloc"
)
_LOAD_FAIL = re.compile(r"failed to load (?:draft )?model|error loading model: (?P<why>.*)")
_ERROR_LINE = re.compile(r"GGML_ASSERT|\berror\b|\bfailed\b|terminate called|what\(\):|Segmentation|Aborted",
                         re.IGNORECASE)
# Lines that say "error"/"failed" but are routine: the memory fit's dry run prints them on every start.
_NOT_AN_ERROR = re.compile(r"this warning is normal|fit params to free device memory|failed to measure")
_DRAFT_FAIL = re.compile(r"failed to load draft model, '(?P<path>[^']*)'")
_MODEL_PATH = re.compile(r"loading model '(?P<path>[^']*)'")


def _first(lines: Sequence[str], pattern: re.Pattern[str]) -> re.Match[str] | None:
    for line in lines:
        m = pattern.search(line)
        if m:
            return m
    return None


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _last_error(lines: Sequence[str]) -> str:
    """The engine's last error line (an assertion, an ``error``/``failed`` line), shortened."""
    for line in reversed(lines):
        if _ERROR_LINE.search(line) and not _NOT_AN_ERROR.search(line):
            text = line.strip()
            return text if len(text) <= 240 else text[:237] + "..."
    return ""


_ARCH_LINE = re.compile(r"(?:print_info|llm_load_print_meta): arch\s*= (?P<arch>\S+)|"
                        r"general\.architecture\s+str\s+= (?P<kv>\S+)")
_LOAD_ERROR = re.compile(r"error loading model|missing tensor '|' not found|wrong number of tensors|has wrong shape")
_DRAFT_ARCHS = frozenset({"dflash", "dflash-draft", "eagle3"})
_FAMILY = {"bee-a": "BeeLlama 0.1-0.3", "bee-b": "BeeLlama 0.4+", "mainline": "mainline llama.cpp"}


def engine_label(caps: EngineCaps | None) -> str:
    """"BeeLlama 0.1-0.3 (v0.1.2)", "mainline llama.cpp (build 11434)", or "this engine" when unknown."""
    if caps is None or caps.generation.value not in _FAMILY:
        return "this engine"
    which = caps.release or (f"build {caps.build}" if caps.build else "")
    return _FAMILY[caps.generation.value] + (f" ({which})" if which else "")


def load_context(lines: Sequence[str], caps: EngineCaps | None = None) -> dict[str, str]:
    """What the log says across lines about a load that failed: ``arch`` (the architecture of the model
    being loaded when the error came), ``role`` ("draft" or "model") and ``engine`` (:func:`engine_label`).
    A draft is told by the server's "failed to load draft model" or by a draft architecture."""
    arch = ""
    for line in lines:
        if m := _ARCH_LINE.search(line):
            arch = m.group("arch") or m.group("kv") or arch
        elif _LOAD_ERROR.search(line):
            break
    draft = _first(lines, _DRAFT_FAIL)
    role = "draft" if arch in _DRAFT_ARCHS or draft else "model"
    if role == "draft" and (not arch or arch not in _DRAFT_ARCHS) and draft:
        # Mainline prints no "arch =" line below -lv 4: the draft file's header names it.
        arch = gguf_architecture(draft.group("path")) or arch
    context = {"engine": engine_label(caps), "role": role}
    if arch:
        context["arch"] = arch
    return context


def gguf_architecture(path: str) -> str:
    """``general.architecture`` when it is a GGUF file's first key (GGUF writers put it first); "" otherwise."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return ""
    if len(head) < 32 or head[:4] != b"GGUF":
        return ""
    key_len = int.from_bytes(head[24:32], "little")
    key_end = 32 + key_len
    if key_len > 256 or head[32:key_end] != b"general.architecture" or len(head) < key_end + 12:
        return ""
    if int.from_bytes(head[key_end:key_end + 4], "little") != 8:  # GGUF_TYPE_STRING
        return ""
    val_len = int.from_bytes(head[key_end + 4:key_end + 12], "little")
    value = head[key_end + 12:key_end + 12 + val_len]
    return value.decode("utf-8", "replace") if 0 < val_len <= 64 and len(value) == val_len else ""


_Said = tuple[str, str, str]  # (code, message, remedy) of a failure the log explains


def _fail(code: str, message: str, remedy: str) -> _Said:
    return code, message, remedy


def classify_failure(lines: Iterable[str], exit_code: int | None, signal: int | None = None,
                     caps: EngineCaps | None = None) -> ServerFailure:
    """Turn the end of a dead server's log plus its exit status into a specific failure with a remedy.

    ``signal`` is the number of the signal that killed the process (``-returncode`` on POSIX), if any;
    ``caps`` (the engine) narrows the known issues considered to that engine's.
    """
    clean = [strip_prefix(x) for x in lines]
    tail = clean[-40:]
    if signal is None and exit_code is not None and exit_code < 0:
        signal = -exit_code
    # The engine's own words first: a known issue (resources/known-issues.json) explains itself.
    context = load_context(clean, caps)
    if known := explain_log(clean, caps, context=context):  # the whole log: the fit pass meets a bad setting early
        return ServerFailure(known.issue.code, known.message, known.remedy, exit_code, tail, issue=known.issue.id)
    said = (_said_of_options(clean) or _said_of_model(clean) or (_said_of_signal(signal, tail, uses_amx(clean)) if signal else None)
            or _said_of_exit(clean, tail, exit_code))
    return ServerFailure(*said, exit_code, tail)


def _said_of_options(clean: list[str]) -> _Said | None:
    """The command line or the port: an unknown option, a bad value, a port in use."""
    if m := _INVALID_ARG.search("\n".join(clean)):
        arg = m.group("arg")
        return _fail(
            "unknown_argument",
            f"This llama-server does not know the option {arg}.",
            f"Remove {arg} from the extra arguments, or pick an engine build that has it (check `llama-server --help`).",
        )
    if m := _first(clean, _BAD_VALUE):
        arg, why = m.group("arg"), m.group("why").strip()
        if _REMOVED.search(why):
            why = "this engine removed the option"
        return _fail(
            "bad_value",
            f"llama-server rejected the value of {arg}: {why}.",
            f"Fix the value of {arg} (see `llama-server --help` for what it accepts).",
        )
    if m := _first(clean, _BIND):
        where = f"{m.group('host')}:{m.group('port')}" if m.group("port") else "the chosen port"
        return _fail(
            "port_in_use",
            f"llama-server could not listen on {where} because another program already uses that port.",
            "Pick another port (0 lets BeeDeck choose a free one) or stop the program that holds it.",
        )
    return None


def _said_of_model(clean: list[str]) -> _Said | None:
    """The model: an architecture the engine lacks, a file it cannot open or read, memory it cannot get."""
    if m := _first(clean, _ARCH):
        arch = m.group("arch")
        return _fail(
            "unsupported_architecture",
            f"This llama-server does not support the model architecture '{arch}'.",
            "Update the engine to a newer build, or pick a model this engine supports.",
        )
    if m := _first(clean, _OPEN):
        path, why = m.group("path"), m.group("why")
        if "No such file" in why:
            return _fail(
                "model_missing",
                f"The model file {path} does not exist.",
                "Check the path, or download the model again.",
            )
        return _fail(
            "model_missing",
            f"llama-server could not open {path} ({why}).",
            "Check that the file exists and is readable by your user.",
        )
    if _first(clean, _MAGIC):
        m2 = _first(clean, _MODEL_PATH)
        name = f" {m2.group('path')}" if m2 else ""
        return _fail(
            "not_gguf",
            f"The model file{name} is not a GGUF file (wrong magic bytes).",
            "Pick a .gguf file, or convert / download the model's GGUF version.",
        )
    if _first(clean, _OOM):
        return _fail(
            "out_of_memory",
            "The engine ran out of memory while loading the model or allocating its caches.",
            "Lower the context size, use a smaller quantisation or KV-cache type, or offload fewer layers to the GPU.",
        )
    return None


# What a death by SIGILL means, in the words the builder, the download and a launch all use.
CPU_INSTRUCTIONS = "this build uses CPU instructions this machine does not run"
PORTABLE_REMEDY = ("Rebuild it portable (`beedeck engine build --no-native`) or download the portable build "
                   "(`beedeck engine download`).")
_AMX = re.compile(r"\bAMX model buffer size\b|memory_breakdown_print: \|\s+- AMX\s")


def uses_amx(lines: Iterable[str]) -> bool:
    """Whether the log shows ggml's AMX matrix code in use: weights in an ``AMX`` model buffer (compiled in alone,
    ``AMX_INT8 = 1`` in system_info, is not enough: a model type AMX does not take never reaches it)."""
    return any(_AMX.search(line) for line in lines)


def _said_of_signal(signal: int, tail: list[str], amx: bool = False) -> _Said:
    """A crash: the signal, and the engine's last error line when it printed one. SIGILL is an instruction the
    CPU refused; a crash in a build that runs AMX code says so (a compiler bug there crashes on SIGILL or SIGSEGV)."""
    name = _signal_name(signal)
    said = _last_error(tail)
    detail = f" right after it said: {said}" if said else ""
    amx_note = " (its AMX matrix code: its log shows an AMX buffer)" if amx else ""
    if signal == int(_signal.SIGILL):
        return _fail("crashed_signal", f"llama-server crashed with SIGILL: {CPU_INSTRUCTIONS}{amx_note}.",
                     PORTABLE_REMEDY)
    if amx and signal == int(_signal.SIGSEGV):
        return _fail("crashed_signal", f"llama-server crashed with SIGSEGV{detail} while running AMX matrix code "
                     "(its log shows an AMX buffer), which crashes so on some machines and compilers.",
                     PORTABLE_REMEDY)
    if signal == int(_signal.SIGKILL):
        remedy = "It was killed from outside (perhaps the system ran out of memory): check free RAM and retry."
    elif said:
        remedy = ("That line is the engine's own reason: change the setting it names, or try another "
                  "engine build.")
    else:
        remedy = "This is an engine bug or an unsupported setting: see the log, try other settings or another engine build."
    return _fail("crashed_signal", f"llama-server crashed with {name}{detail}.", remedy)


def _said_of_exit(clean: list[str], tail: list[str], exit_code: int | None) -> _Said:
    """An exit without a crash: a load that failed, a stop asked from outside, or the last line as it is."""
    if _first(clean, _DRAFT_FAIL) or _first(clean, _LOAD_FAIL):
        m = _first(clean, _LOAD_FAIL)
        why = (m.group("why") or "").strip() if m else ""
        return _fail(
            "not_gguf",
            "llama-server failed to load the model" + (f": {why}." if why else "."),
            "Check that the file is a complete, valid GGUF model (download it again if it was cut short).",
        )
    if any("cleaning up before exit" in x for x in tail):
        return _fail(
            "exited",
            "llama-server shut down because something outside BeeDeck asked it to stop (a stop signal).",
            "Start it again; if it keeps stopping, look for another program or service that ends it.",
        )
    code_txt = "" if exit_code is None else f" with status {exit_code}"
    last = next((x for x in reversed(clean) if x.strip()), "")
    return _fail(
        "exited",
        f"llama-server stopped{code_txt}" + (f"; its last line was: {last}" if last else "."),
        "Read the server log for the reason.",
    )


# ---- memory -------------------------------------------------------------------------------------


@dataclass
class DeviceMemory:
    """MiB used on one device (or host buffer type such as ``CPU_Mapped``), summed over models."""

    model_mib: float = 0.0
    kv_mib: float = 0.0
    compute_mib: float = 0.0
    recurrent_mib: float = 0.0

    @property
    def total_mib(self) -> float:
        return self.model_mib + self.kv_mib + self.compute_mib + self.recurrent_mib


@dataclass
class BreakdownRow:
    """One row of the engine's ``memory breakdown [MiB]`` table (free/total/unaccounted: devices only)."""

    name: str
    self_mib: int
    model_mib: int
    context_mib: int
    compute_mib: int
    total_mib: int | None = None
    free_mib: int | None = None
    unaccounted_mib: int | None = None


@dataclass
class MemoryReport:
    """What the log said about memory. Mainline prints the buffer lines only at ``-lv 4``."""

    devices: dict[str, DeviceMemory] = field(default_factory=dict)
    breakdown: dict[str, BreakdownRow] = field(default_factory=dict)  # the last table printed wins
    n_ctx_slot: int | None = None

    @property
    def empty(self) -> bool:
        return not self.devices and not self.breakdown

    def device(self, name: str) -> DeviceMemory:
        return self.devices.setdefault(name, DeviceMemory())


_BUF = re.compile(
    r"^(?P<src>load_tensors|llama_kv_cache|llama_memory_recurrent|sched_reserve|llama_context):\s+"
    r"(?P<dev>\S+)\s+(?P<kind>model|KV|RS|compute) buffer size =\s*(?P<mib>[\d.]+) MiB"
)
_BD_GPU = re.compile(
    r"memory_breakdown_print: \|\s+- (?P<name>.+?)\s+\|\s*(?P<total>-?\d+) = (?P<free>-?\d+) \+ \(\s*(?P<self>-?\d+) ="
    r"\s*(?P<model>-?\d+) \+\s*(?P<ctx>-?\d+) \+\s*(?P<comp>-?\d+)\) \+\s*(?P<un>-?\d+) \|"
)
_BD_OTHER = re.compile(
    r"memory_breakdown_print: \|\s+- (?P<name>.+?)\s+\|\s*(?P<self>-?\d+) =\s*(?P<model>-?\d+) \+"
    r"\s*(?P<ctx>-?\d+) \+\s*(?P<comp>-?\d+)\s*\|"
)
_NCTX_SLOT = re.compile(r"n_ctx_slot = (?P<n>\d+)|new slot, n_ctx = (?P<m>\d+)")


def _ready(line: str) -> bool:
    """The server's ready line, "model loaded" (mainline ``srv  llama_server:``, BeeLlama ``main:``); not
    "listening", which some builds print before they load the model."""
    return line.endswith(": model loaded")


def parse_memory(lines: Iterable[str]) -> MemoryReport:
    """Per-device model / KV / compute MiB from the load log, plus the exit memory table if present.

    Only the buffer lines up to the ready line count: each is one buffer reserved at load (a DFlash drafter
    reserves its graph twice, two real buffers), while a reservation after it replaces one of them: mainline
    reserves the target's compute graph again on the first request (the synthetic DFlash pair on the CPU:
    21.02 MiB at load, 22.02 MiB on the first request), which would otherwise be counted twice."""
    rep = MemoryReport()
    loading = True
    for raw in lines:
        line = strip_prefix(raw)
        if loading and _ready(line):
            loading = False
        if m := _BUF.match(line):
            if not loading:
                continue  # a reservation made while serving replaces a buffer counted above
            dev = rep.device(m.group("dev"))
            mib = float(m.group("mib"))
            kind = m.group("kind")
            if kind == "model":
                dev.model_mib += mib
            elif kind == "KV":
                dev.kv_mib += mib
            elif kind == "RS":
                dev.recurrent_mib += mib
            else:
                dev.compute_mib += mib
            continue
        if "memory_breakdown_print" in line:
            if m := _BD_GPU.search(line):
                name = m.group("name").strip()
                rep.breakdown[name] = BreakdownRow(
                    name, int(m.group("self")), int(m.group("model")), int(m.group("ctx")), int(m.group("comp")),
                    int(m.group("total")), int(m.group("free")), int(m.group("un")),
                )
            elif m := _BD_OTHER.search(line):
                name = m.group("name").strip()
                rep.breakdown[name] = BreakdownRow(
                    name, int(m.group("self")), int(m.group("model")), int(m.group("ctx")), int(m.group("comp"))
                )
            continue
        if m := _NCTX_SLOT.search(line):
            rep.n_ctx_slot = int(m.group("n") or m.group("m"))
    return rep


_LISTEN = re.compile(r"listening on https?://(?P<host>[^\s:/]+|\[[^\]]+\]):(?P<port>\d+)")


def listening_port(line: str) -> int | None:
    """The port from a ``listening on http://H:P`` line (the real port when launched with --port 0)."""
    m = _LISTEN.search(line)
    return int(m.group("port")) if m else None
