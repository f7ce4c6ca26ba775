"""One recommended configuration (:class:`Choice`) and a recommendation (:class:`Recommendation`), with
what ranks them: parameters and bits per weight counted from the GGUF headers, and the goal's score.
Shared by the catalog's recommender (:mod:`from_catalog`, :mod:`catalog_plan`) and a Hub repo's
(:mod:`from_repo`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.planner import MemoryPlan
from beedeck.core.models.recommend.mode_choice import ModeChoice

GOALS = ("quality", "speed", "context")
MIN_CTX = 32768  # the guide's context; quality and speed goals want at least this


def quant_bits(quant: str) -> float:
    """Rough bits per weight of a quant name, for ordering and embedding-size estimates."""
    q = quant.upper().removeprefix("UD-")
    for prefix, bits in (("IQ4_XS", 4.25), ("Q3", 3.9), ("Q4_K_S", 4.5), ("Q4", 4.8), ("Q5_K_S", 5.5),
                         ("Q5", 5.7), ("Q6", 6.56), ("Q8", 8.5), ("BF16", 16), ("F16", 16)):
        if q.startswith(prefix):
            return bits
    return 4.5


@dataclass
class Choice:
    """One concrete configuration: files, engine generation, settings and its memory plan."""

    pair_id: str
    title: str
    generation: Generation
    target_repo: str
    target_file: str
    target_quant: str
    draft_repo: str | None
    draft_file: str | None
    draft_quant: str | None
    settings: LaunchSettings
    plan: MemoryPlan | None
    score: tuple[float, ...] = ()
    target_path: Path | None = None  # set when both files are on disk already (a sidecar pair)
    draft_path: Path | None = None
    draft_kind: str = ""  # a live_plan kind: dflash, dflash2, dspark, eagle3, mtp (its own head), mtp-head...
    sized_from: str = ""  # "headers @ <revision>" when planned from headers read from the Hub (hub.sizing)
    download_bytes: int | None = None  # target + draft bytes, when the headers' file list gave them
    mode: ModeChoice | None = None  # the fast path chosen for this pair and engine, with its evidence
    cost_tokens: int | None = None  # context the drafter costs against no speculation at the same cache

    def summary(self) -> str:
        if self.pair_id == "starter":
            return f"{self.title} ({self.target_file}), {self.settings.ctx_size} context on the CPU"
        tail = (f"{self.settings.ctx_size:,} context, K/V cache {self.settings.cache_type_k}/"
                f"{self.settings.cache_type_v}")
        if self.draft_file is None:  # the target's own MTP head (the title names it), or no speculation
            return f"{self.title}: {self.target_quant}, {tail} ({self.generation.value})"
        on_disk = " (both on disk)" if self.draft_path is not None else ""
        return (f"{self.title}: {self.target_quant} + {self.draft_quant} draft{on_disk}, {tail}, "
                f"-ub {self.settings.ubatch_size} ({self.generation.value})")


@dataclass
class Recommendation:
    primary: Choice
    runner_up: Choice | None
    reasons: list[str] = field(default_factory=list)

    @property
    def plan(self) -> MemoryPlan | None:
        return self.primary.plan


def params_of(info: ModelInfo) -> tuple[float, float]:
    """(total, active) billions of parameters, counted from the header's tensor table: every tensor's
    elements; an MoE's expert tensors (``*_exps``) count for active at ``expert_used_count / expert_count``."""
    total = experts = 0
    for t in info.tensors:
        n = _elements(t.dims)
        total += n
        if "_exps" in t.name:
            experts += n
    md = info.metadata
    used, count = md.get(f"{info.architecture}.expert_used_count"), md.get(f"{info.architecture}.expert_count")
    share = (int(used) / int(count)) if isinstance(used, int) and isinstance(count, int) and count > 0 else 1.0
    active = total - experts + experts * share
    if total == 0:  # no tensor table (a hand-made ModelInfo): the name's size label, else the file size
        return _local_params(info)
    return total / 1e9, active / 1e9


def bits_of(info: ModelInfo) -> float:
    """Bits per weight of a file, from its header: its tensor bytes over its parameters."""
    elems = sum(_elements(t.dims) for t in info.tensors)
    return info.tensor_bytes * 8 / elems if elems else quant_bits(info.file_type or "Q4_K_M")


def _elements(dims: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def _local_params(info: ModelInfo) -> tuple[float, float]:
    """(total, active) billions of parameters: from general.size_label ("27B", "35B-A3B"), else the file size."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)B(?:-A(\d+(?:\.\d+)?)B)?", info.size_label.strip(), re.IGNORECASE)
    if m:
        return float(m[1]), float(m[2] or m[1])
    total = info.file_size * 8 / quant_bits(info.file_type or "Q4_K_M") / 1e9
    return total, total


def score(goal: str, total: float, active: float, bits: float, dbits: float, cache_rank: int, ctx: int,
           on_disk: float = 0.0) -> tuple[float, ...]:
    """``bits``/``dbits``: the target's and the draft's bits per weight (their headers' bytes over parameters)."""
    # A common rule of thumb (not a measurement): an MoE model is worth about sqrt(total x active)
    # dense parameters, so a 35B-A3B ranks below a dense 27B.
    params = (total * active) ** 0.5
    good_quant = 1.0 if bits >= 4.25 else 0.0
    enough = 1.0 if ctx >= MIN_CTX else 0.0
    first = on_disk  # a pair already on disk (a sidecar draft) beats any download (1: current engines, 0.5: Gen A)
    bits = round(bits, 2)
    if goal == "quality":
        return (first, enough, round(params, 1), bits, -cache_rank, round(dbits, 2), ctx)
    if goal == "speed":
        # Decoding is memory-bound: fewer bytes read per token is faster; then prefer the bigger model.
        return (first, enough, good_quant, -round(active * bits), params, -cache_rank, ctx)
    return (first, float(ctx >= 4 * MIN_CTX), good_quant, round(params, 1), ctx, bits)
