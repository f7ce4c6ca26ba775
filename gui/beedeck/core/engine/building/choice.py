"""What a CUDA build compiles, read from the source tree: the FlashAttention K/V pairs a default build
has, and which options compile only the kernels the user's cache types need.

The FA kernels are most of a CUDA build's time, and each engine family selects them its own way:

- mainline llama.cpp (a ``GGML_CUDA_FA_QUANTS`` list): a default set of four pairs, more by name;
- BeeLlama Gen B (0.4.x, ``GGML_CUDA_KVARN_DEFAULT_PAIRS``): a fixed default matrix of 50 vector
  pairs derived from 15 KVarN pairs, the KVarN kernels behind ``GGML_CUDA_KVARN`` (ON by default),
  everything else only with ``GGML_CUDA_FA_ALL_QUANTS`` (688 steps, 45-50 min on 16 cores);
- BeeLlama Gen A (0.1-0.3) and older trees: f16/q4_0/q8_0/bf16 plus the turbo pairs.

The default set is computed from the tree's own CMake text (never assumed from a version), so a
release that changes its matrix is read as it is.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

Pair = tuple[str, str]

_TURBO = ("turbo2", "turbo3", "turbo4", "turbo3_tcq", "turbo2_tcq")
# K/V pairs whose CUDA FlashAttention kernels exist without GGML_CUDA_FA_ALL_QUANTS in Gen A trees
# and older mainline (engine-facts §1.3).
CLASSIC_FA_PAIRS: frozenset[Pair] = frozenset(
    {("f16", "f16"), ("q4_0", "q4_0"), ("q8_0", "q8_0"), ("bf16", "bf16")}
    | {(t, t) for t in _TURBO}
    | {(t, "q8_0") for t in _TURBO}
    | {("q8_0", t) for t in _TURBO}
    | {("turbo4", "turbo3"), ("turbo3", "turbo4"), ("turbo2", "turbo3"), ("turbo3", "turbo2"),
       ("turbo4", "turbo3_tcq"), ("turbo3", "turbo3_tcq")}
)
# Types mainline's GGML_CUDA_FA_QUANTS list accepts (ggml/cmake/common.cmake).
FA_QUANTS_TYPES = frozenset({"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "bf16", "f16"})
ML_DEFAULT_FA_QUANTS = ("q4_0-q4_0", "q8_0-q8_0", "f16-f16", "bf16-bf16")


@dataclass(frozen=True)
class FaPolicy:
    """How a tree selects its FA kernels. ``style``: "list" (mainline), "kvarn" (Gen B), "classic"."""

    style: str
    default_pairs: frozenset[Pair]
    options: frozenset[str] = frozenset()  # the option names the tree declares

    def covers(self, pair: Pair) -> bool:
        k, v = pair[0].lower(), pair[1].lower()
        return (k, v) in self.default_pairs or (k == v and k in ("f32",))


@dataclass
class FaChoice:
    """The FA-related CMake options for a set of cache pairs, and why."""

    options: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def _cmake_text(src: Path) -> str:
    try:
        return (src / "ggml" / "CMakeLists.txt").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def kvarn_default_pairs(text: str) -> list[tuple[int, int]]:
    """The (K bits, V bits) of ``set(GGML_CUDA_KVARN_DEFAULT_PAIRS k8-v8 ...)`` in a Gen B CMake file."""
    m = re.search(r"set\(\s*GGML_CUDA_KVARN_DEFAULT_PAIRS\s+([^)]*)\)", text)
    if not m:
        return []
    return [(int(k), int(v)) for k, v in re.findall(r"k(\d+)-v(\d+)", m.group(1))]


def gen_b_default_pairs(text: str) -> frozenset[Pair]:
    """Gen B's default FA matrix, as ``ggml_cuda_get_fattn_vec_default_pairs`` computes it, plus the
    KVarN pairs (``kvarnK``/``kvarnV``) that ``GGML_CUDA_KVARN`` compiles by default."""
    types: dict[int, list[str]] = {}
    for bits, names in re.findall(r"set\(\s*_types_(\d+)\s+([^)]*)\)", text):
        # Instance files spell q2_0 as "q2_0s"; the cache type is q2_0.
        types[int(bits)] = [n.removesuffix("s") if n.endswith("_0s") else n for n in names.split()]
    base = re.search(r"set\(\s*_pairs\s+([^)]*)\)", text)
    pairs: set[Pair] = set()
    if base:
        for item in base.group(1).split():
            if ":" in item:
                k, v = item.split(":", 1)
                pairs.add((k, v))
    for kb, vb in kvarn_default_pairs(text):
        pairs.add((f"kvarn{kb}", f"kvarn{vb}"))
        ks, vs = types.get(kb, []), types.get(vb, [])
        for ki, k in enumerate(ks):
            for vi, v in enumerate(vs):
                if kb == vb and ki > vi:
                    continue
                pairs.add((k, v))
    return frozenset(pairs)


def read_policy(src: Path, options: Collection[str] | None = None) -> FaPolicy:
    """The FA policy of the tree at ``src`` (its ggml/CMakeLists.txt)."""
    text = _cmake_text(src)
    opts = frozenset(options or re.findall(r"^\s*option\s*\(\s*([A-Za-z0-9_]+)", text, re.MULTILINE))
    if "GGML_CUDA_KVARN_DEFAULT_PAIRS" in text:
        return FaPolicy("kvarn", gen_b_default_pairs(text), opts)
    if re.search(r"^\s*set\s*\(\s*GGML_CUDA_FA_QUANTS\b", text, re.MULTILINE) or "GGML_CUDA_FA_QUANTS" in opts:
        ml = frozenset(tuple(p.split("-", 1)) for p in ML_DEFAULT_FA_QUANTS)
        return FaPolicy("list", ml, opts | {"GGML_CUDA_FA_QUANTS"})  # type: ignore[arg-type]
    return FaPolicy("classic", CLASSIC_FA_PAIRS, opts)


def choose_fa(policy: FaPolicy, cache_pairs: Collection[Pair] | None, *, all_quants: bool = False) -> FaChoice:
    """The FA options for ``cache_pairs`` (target and draft K/V types; None: not known).

    Unknown pairs build the tree's default set (it covers f16 and q8_0 everywhere), never everything:
    ALL_QUANTS only when a named pair needs it, or on request.
    """
    c = FaChoice()
    pairs = sorted({(k.lower(), v.lower()) for k, v in cache_pairs or ()})
    missing = [p for p in pairs if not policy.covers(p)]
    if all_quants:
        c.options.append("-DGGML_CUDA_FA_ALL_QUANTS=ON")
        c.reasons.append("every K/V pair's FlashAttention kernels, as asked (the longest build)")
        return c
    if cache_pairs is None:
        c.reasons.append("no cache types given: the engine's default FlashAttention set "
                         f"({len(policy.default_pairs)} K/V pairs, f16 and q8_0 among them)")
    if missing and policy.style == "list" and all(t in FA_QUANTS_TYPES for p in missing for t in p):
        wanted = list(ML_DEFAULT_FA_QUANTS) + [f"{k}-{v}" for k, v in missing]
        c.options.append(f"-DGGML_CUDA_FA_QUANTS={';'.join(wanted)}")
        c.reasons.append("FlashAttention kernels for the default pairs plus " + ", ".join(f"{k}/{v}" for k, v in missing))
    elif missing:
        c.options.append("-DGGML_CUDA_FA_ALL_QUANTS=ON")
        c.reasons.append("every K/V pair's kernels, because " + ", ".join(f"{k}/{v}" for k, v in missing)
                         + " is outside this engine's default set (the longest build)")
    elif pairs:
        c.reasons.append("the default FlashAttention set, which has " + ", ".join(f"{k}/{v}" for k, v in pairs))
    if policy.style == "kvarn" and "GGML_CUDA_KVARN" in policy.options and cache_pairs is not None \
            and not any(t.startswith("kvarn") for p in pairs for t in p):
        c.options.append("-DGGML_CUDA_KVARN=OFF")
        c.reasons.append("no KVarN kernels: no cache type here is kvarn (rebuild with --cache-type kvarn4/kvarn4 "
                         "to use them)")
    return c


def build_lacks_pair(build_options: Collection[str], pair: Pair) -> str | None:
    """Why an engine built with ``build_options`` has no kernel for K/V ``pair``, or None (as far as its
    recorded options tell: a pair outside a default set is only known to the tree)."""
    opts = set(build_options)
    k, v = pair[0].lower(), pair[1].lower()
    if "-DGGML_CUDA_FA_ALL_QUANTS=ON" in opts or "-DGGML_CUDA=ON" not in opts:
        return None
    if "-DGGML_CUDA_KVARN=OFF" in opts and (k.startswith("kvarn") or v.startswith("kvarn")):
        return (f"this engine was built without KVarN kernels (-DGGML_CUDA_KVARN=OFF), so {k}/{v} cannot run: "
                f"rebuild it with `beedeck engine build --cache-type {k}/{v}`")
    listed = next((o.split("=", 1)[1] for o in opts if o.startswith("-DGGML_CUDA_FA_QUANTS=")), None)
    if listed is not None and f"{k}-{v}" not in listed.split(";"):
        return (f"this engine's FlashAttention kernels cover {listed.replace(';', ', ')}, not {k}-{v}: rebuild it "
                f"with `beedeck engine build --cache-type {k}/{v}`")
    return None
