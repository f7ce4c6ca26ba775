"""Which rebuild cures a build whose CPU code crashed in the smoke test's generation, and why.

Found on a VM whose CPU reports AMX (BeeLlama v0.1.2 and v0.4.3, GCC 12.2): a native build (``-march=native``
defines ``__AMX_INT8__``, so ggml compiles its AMX matrix kernels) puts the weights in an "AMX model buffer" and
dies in warm-up, by SIGILL at the first tile instruction (``tilezero``) with one thread, by SIGSEGV at
``ldtilecfg`` with more. The OS grants AMX (``arch_prctl(ARCH_REQ_XCOMP_PERM)`` succeeds and a correct AMX
program runs); the fault is the tile configuration: GCC 12's ``_tile_loadconfig`` declares an 8-byte memory
operand for a 64-byte structure, so the optimiser drops the stores that fill it and the CPU loads a config
with no tiles (``#UD``) or with stack garbage (``#GP``). The same source built without AMX and with the CPU's
other instructions (AVX-512, VNNI, BF16) generates correctly.

So the cure keeps what runs and drops what crashed: a crash inside AMX code rebuilds with this CPU's own
instruction sets named one by one (``GGML_NATIVE=OFF``, ``GGML_AVX512=ON`` ..., every ``GGML_AMX_*`` OFF: only
the ggml-cpu library recompiles); any other SIGILL rebuilds portable (``GGML_NATIVE=OFF``: ggml's AVX2 baseline).
"""

from __future__ import annotations

import signal
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# A ggml CPU option and the /proc/cpuinfo flags the -m switches it adds need (ggml/src/ggml-cpu/CMakeLists.txt).
ISA_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "GGML_SSE42": ("sse4_2",),
    "GGML_AVX": ("avx",),
    "GGML_AVX2": ("avx2",),
    "GGML_BMI2": ("bmi2",),
    "GGML_FMA": ("fma",),
    "GGML_F16C": ("f16c",),
    "GGML_AVX_VNNI": ("avx_vnni",),
    "GGML_AVX512": ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"),
    "GGML_AVX512_VBMI": ("avx512vbmi",),
    "GGML_AVX512_VNNI": ("avx512_vnni",),
    "GGML_AVX512_BF16": ("avx512_bf16",),
}
AMX_OPTIONS = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Cure:
    """A rebuild: the options to configure with, what it is ("without AMX", "portable") and why."""

    options: list[str]
    label: str
    reason: str


def cpu_flags(text: str | None = None) -> frozenset[str]:
    """The instruction-set flags of this CPU (the first ``flags`` line of /proc/cpuinfo); empty elsewhere."""
    if text is None:
        try:
            text = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def option_value(options: Sequence[str], name: str) -> str | None:
    """The value of ``-DNAME=...`` in ``options`` (the last one wins, as in CMake), or None."""
    found = None
    for opt in options:
        if opt.startswith(f"-D{name}="):
            found = opt.split("=", 1)[1]
    return found


def with_option(options: Sequence[str], name: str, value: str | None) -> list[str]:
    """``options`` with ``-DNAME`` set to ``value`` in place of any earlier one (None: removed)."""
    out: list[str] = []
    placed = value is None
    for opt in options:
        if not opt.startswith(f"-D{name}="):
            out.append(opt)
        elif not placed:
            out.append(f"-D{name}={value}")  # where the first one was
            placed = True
    return out if placed else [*out, f"-D{name}={value}"]


def _signal_name(sig: int | None) -> str:
    try:
        return signal.Signals(sig).name if sig is not None else "a crash"
    except ValueError:
        return f"signal {sig}"


def without_amx(options: Sequence[str], flags: Collection[str], known: Collection[str]) -> list[str] | None:
    """This CPU's own instruction sets as explicit options, AMX off; None when they cannot be named here (no
    /proc/cpuinfo, or a tree without ggml's per-instruction-set options)."""
    if not flags or not all(name in known for name in ("GGML_NATIVE", "GGML_AVX2", "GGML_AMX_INT8")):
        return None
    out = with_option(options, "GGML_NATIVE", "OFF")
    for name, needs in ISA_OPTIONS.items():
        if name in known:
            out = with_option(out, name, "ON" if all(f in flags for f in needs) else "OFF")
    for name in AMX_OPTIONS:
        if name in known:
            out = with_option(out, name, "OFF")
    return out


def portable(options: Sequence[str]) -> list[str]:
    """The AVX2 baseline: ``GGML_NATIVE=OFF`` with no instruction set named (ggml's defaults), AMX off."""
    out = with_option(options, "GGML_NATIVE", "OFF")
    for name in (*ISA_OPTIONS, *AMX_OPTIONS):
        out = with_option(out, name, None)
    return out


def cure_for(options: Sequence[str], *, sig: int | None, amx: bool, flags: Collection[str],
             known: Collection[str]) -> Cure | None:
    """The rebuild for a build (configured with ``options``) that died by ``sig`` in the smoke test's generation,
    ``amx`` when its log showed AMX code in use; None when no rebuild can help (not a CPU fault, or already the
    portable baseline)."""
    name = _signal_name(sig)
    amx_on = option_value(options, "GGML_NATIVE") == "ON" or any(
        option_value(options, a) == "ON" for a in AMX_OPTIONS)
    if amx and amx_on and sig in (int(signal.SIGILL), int(signal.SIGSEGV)):
        kept = without_amx(options, flags, known)
        if kept is not None:
            isa = [n.removeprefix("GGML_") for n in ISA_OPTIONS if option_value(kept, n) == "ON"]
            return Cure(kept, "without AMX", f"its AMX matrix code crashed ({name}) in its first generation, so it "
                        f"was rebuilt without AMX, keeping this CPU's other instructions ({', '.join(isa)})")
        return Cure(portable(options), "portable", f"its AMX matrix code crashed ({name}) in its first generation, "
                    "so it was rebuilt portable (GGML_NATIVE=OFF: the AVX2 baseline, no AMX)")
    if sig != int(signal.SIGILL):
        return None
    if options == portable(options):
        return None  # already the baseline: nothing left to leave out
    return Cure(portable(options), "portable", "it uses CPU instructions this machine does not run (SIGILL in its "
                "first generation), so it was rebuilt portable (GGML_NATIVE=OFF: the AVX2 baseline)")
