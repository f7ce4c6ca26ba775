"""Sidecar drafts: draft GGUFs that sit next to their target, and whether each can serve it.

The convention (docs/reference/anchors.md, Refresh §6 "Sidecar convention"; mainline b11434
``common/download.cpp`` ``find_best_{mtp,dflash,eagle3,dspark}`` and ``common/preset.cpp``
``draft_prefixes``): ``dflash-<model>.gguf``, ``dspark-<model>.gguf``, ``eagle3-<model>.gguf`` and
``mtp-<model>.gguf`` inside the model's own GGUF repo or folder, e.g.
``ggml-org/Qwen3.8-27B-GGUF/mtp-Qwen3.8-27B-Q4_0.gguf``. An ``mtp-`` file is the target's MTP head
alone (``convert_hf_to_gguf.py --mtp``): the target's own architecture with
``nextn_predict_layers`` set and only the NextN block (plus embeddings and head), which mainline
runs as ``draft-mtp`` when it is the ``--spec-draft-model`` (it looks for
``blk.{block_count-1}.nextn.eh_proj.weight``, ``common/speculative.cpp``). Standalone draft repos
(``Qwen3.6-27B-DFlash-Q4_K_M.gguf``) are sidecars too once they sit in the target's folder.

The header decides, never the name (engine-facts.md §5.1 "Name confusion"). The engine-independent
checks (hidden size, target layers, vocabulary; engine-facts.md §5.3) are
:func:`beedeck.core.models.paircheck.check_pair`'s; this module adds which engine generations load
each kind, the MTP head's shape, EAGLE-3's keys, and which of several quants to offer (:func:`pick`,
mainline's own rule for ``-hf`` sidecars).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.known_issues import dflash_target_archs
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import engine_label, engine_spec_type
from beedeck.core.models.draft_kinds import (
    DFLASH,
    DFLASH_LEGACY,
    DSPARK,
    EAGLE3,
    MTP,
    SPEC_TYPE_OF_KIND,
    draft_kind,
    is_mtp_only,
    mtp_layers,
)
from beedeck.core.models.gguf.reader import ArrayInfo, ModelInfo
from beedeck.core.models.paircheck import check_pair

GENERATIONS = ("bee-a", "bee-b", "mainline")
ENGINE_NAMES = {"bee-a": "BeeLlama 0.1-0.3", "bee-b": "BeeLlama >= 0.4", "mainline": "mainline llama.cpp"}
# Which engine generations load each kind (engine-facts.md §5.1, anchors.md Refresh §5): upstream
# DFlash (and DFlash2, same architecture) on BeeLlama >= 0.4 and mainline; the fork format on
# BeeLlama 0.1-0.3; DSpark, EAGLE-3 and MTP drafts as separate files only on mainline as far as the
# sources say.
KIND_ENGINES: dict[str, tuple[str, ...]] = {
    DFLASH: ("bee-b", "mainline"), DFLASH_LEGACY: ("bee-a",), DSPARK: ("mainline",), EAGLE3: ("mainline",),
    MTP: ("mainline",),
}
KIND_LABELS = {DFLASH: "DFlash", DFLASH_LEGACY: "DFlash, BeeLlama fork format", DSPARK: "DSpark",
               EAGLE3: "EAGLE-3", MTP: "MTP head", "": "unknown draft"}
# The speculation mode (core.engine.speculation.modes keys) each kind runs as.
KIND_ORDER = (DFLASH, DFLASH_LEGACY, DSPARK, EAGLE3, MTP)  # which kind to offer first when several serve
# Architectures whose mainline graph has an MTP decoder (b11434: grep -l DECODER_MTP src/models/*.cpp,
# mapped to their GGUF names in src/llama-arch.cpp).
MTP_TARGET_ARCHS = frozenset({
    "bailingmoe3", "cohere2moe", "deepseek2", "deepseek32", "deepseek4", "glm-dsa", "glm4moe", "glm5-next",
    "hy_v3", "mimo2", "nemotron_h_moe", "qwen35", "qwen35moe", "qwen3next", "qwen4exp", "step35",
})
LUCEBOX_ARCH = "gemma4-dflash-draft"  # anchors.md Refresh §6: only Lucebox loads it
SIDECAR_PREFIXES = ("dflash-", "dspark-", "eagle3-", "mtp-")
_REMEDY_WORDS = ("use ", "pick ", "download", "convert")


def is_draft_architecture(arch: str) -> bool:
    """A header-only test: architectures that are drafts, never targets (the fork ``*dflash-draft`` ones too)."""
    return arch in ("dflash", "eagle3") or arch.endswith("dflash-draft")


def sidecar_kind(info: ModelInfo) -> str:
    """dflash / dflash-draft / dspark / eagle3 / mtp, or "" for a draft architecture no engine here knows."""
    kind = draft_kind(info)
    if kind is not None:
        return kind
    return MTP if is_mtp_only(info) else ""


def quant_bits(quant: str) -> int:
    """The bit count in a quant name (``Q4_K_M`` 4, ``IQ4_XS`` 4, ``Q8_0`` 8, ``BF16`` 16; 0 when it has
    none): mainline's ``extract_quant_bits`` (``common/download.cpp``), which ranks sidecars."""
    m = re.search(r"\d+", quant)
    return int(m[0]) if m else 0


@dataclass
class Sidecar:
    """One draft found next to a target, and for each engine generation whether it can serve it."""

    path: Path
    kind: str  # see sidecar_kind; "" when the architecture is unknown to every BeeDeck engine
    architecture: str
    quant: str
    size: int
    filename: str = ""  # relative to its Hub repo when it is in the Hub cache, else the base name
    # generation -> "" when that engine can run it, else why not and what to do
    engines: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # engine-independent: it belongs to another model
    warnings: list[str] = field(default_factory=list)
    variant: str = ""  # "DFlash2" when the dflash file has DFlash2's selector tensors

    @property
    def usable_on(self) -> list[str]:
        return [g for g in GENERATIONS if not self.problems and not self.engines.get(g, "?")]

    @property
    def usable(self) -> bool:
        return bool(self.usable_on)

    def usable_for(self, generation: str) -> bool:
        return generation in self.usable_on

    def reason(self, generation: str | None = None) -> str:
        """One line: why it cannot serve the target (on ``generation``, or on any engine); "" if it can."""
        if self.problems:
            return self.problems[0] + (f" ({len(self.problems) - 1} more problem(s))" if len(self.problems) > 1 else "")
        if generation is not None:
            return self.engines.get(generation, "")
        return "" if self.usable else next((r for r in self.engines.values() if r), "")

    def reason_on(self, caps: EngineCaps) -> str:
        """Why this probed engine cannot run it ("" when it can): the files first, then an engine without
        the mode at all, then the engine generation's draft formats."""
        runs_as = Mode.of_draft_kind(self.kind)
        if self.problems or runs_as is None:
            return self.reason()
        _spelling, why = engine_spec_type(runs_as, caps)
        if why:
            return why
        return self.engines.get(caps.generation.value, "") or (
            "" if caps.generation.value in GENERATIONS else
            f"BeeDeck cannot tell which draft formats {engine_label(caps)} loads.")

    def verdict(self) -> str:
        """One line for the library: where it runs, why not elsewhere, and the first warning."""
        if not self.usable:
            return f"not usable: {self.reason()}"
        text = "usable on " + ", ".join(ENGINE_NAMES[g] for g in self.usable_on)
        others = [g for g in GENERATIONS if g not in self.usable_on]
        if others:
            text += f"; not on {', '.join(ENGINE_NAMES[g] for g in others)}: {self.engines[others[0]]}"
        return text + "".join(f" (warning: {w})" for w in self.warnings[:1])

    @property
    def label(self) -> str:
        return self.variant or KIND_LABELS.get(self.kind, self.kind)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "file": self.filename or self.path.name, "kind": self.kind or None,
            "label": self.label, "architecture": self.architecture, "quant": self.quant, "size": self.size,
            "usable": self.usable, "usable_on": self.usable_on, "reason": self.reason() or None,
            "engines": {g: (r or None) for g, r in self.engines.items()}, "problems": self.problems,
            "warnings": self.warnings,
        }


def order_key(side: Sidecar, target_quant: str) -> tuple[int, int, int, int, str]:
    """Sort key among the drafts of one target: usable first, DFlash before the other kinds, then the
    quant mainline would pick for ``-hf`` (the same name as the target's, else the closest bit count)."""
    kind_rank = KIND_ORDER.index(side.kind) if side.kind in KIND_ORDER else len(KIND_ORDER)
    exact = 0 if target_quant and side.quant.upper() == target_quant.upper() else 1
    diff = abs(quant_bits(side.quant) - quant_bits(target_quant))
    return (0 if side.usable else 1, kind_rank, exact, diff, side.path.name)


def pick(sides: Sequence[Sidecar], target_quant: str, generation: str | None = None,
         kinds: Sequence[str] | None = None) -> Sidecar | None:
    """The draft to offer for a target: usable (on ``generation`` when given), of ``kinds`` when given,
    first by :func:`order_key`; None when none is."""
    ok = [s for s in sides if (s.usable_for(generation) if generation else s.usable)
          and (kinds is None or s.kind in kinds)]
    return min(ok, key=lambda s: order_key(s, target_quant)) if ok else None


def unreadable(path: Path, filename: str, kind: str, error: str) -> Sidecar:
    """A draft next to the target whose file cannot be inspected."""
    return Sidecar(path, kind, "", "", 0, filename, {g: "" for g in GENERATIONS},
                   [f"{path.name} cannot be read ({error}): download it again."])


def check_sidecar(target: ModelInfo, draft: ModelInfo, filename: str = "") -> Sidecar:
    """Can ``draft`` (found next to ``target``) speculate for it, and on which engine generations?"""
    kind = sidecar_kind(draft)
    side = Sidecar(draft.path, kind, draft.architecture, draft.file_type, draft.file_size,
                   filename or draft.path.name, {g: "" for g in GENERATIONS})
    dn = draft.path.name
    if not kind:
        if draft.architecture == LUCEBOX_ARCH:
            side.problems.append(
                f"{dn} uses Lucebox's '{LUCEBOX_ARCH}' architecture, which only the Lucebox engine loads, no "
                "BeeDeck engine: download the upstream 'dflash' GGUF of the Gemma 4 draft (e.g. "
                "Anbeeld/gemma-4-31B-it-DFlash-GGUF).")
        else:
            side.problems.append(
                f"{dn} has architecture '{draft.architecture}', a draft format no BeeDeck engine loads "
                "(BeeLlama and mainline read 'dflash', 'dflash-draft', 'eagle3' and MTP heads): use an upstream "
                "'dflash' GGUF of this draft.")
        return side
    if kind == DFLASH and ("dflash.selector_rank" in draft.metadata
                           or any(t.name.startswith("selector") for t in draft.tensors)):
        side.variant = "DFlash2"
    for gen in GENERATIONS:
        if gen not in KIND_ENGINES[kind]:
            side.engines[gen] = _engine_reason(kind, gen, dn)
    if kind == EAGLE3:
        _check_eagle3(target, draft, side)
        return side
    if kind == MTP and not _check_mtp(target, draft, side):
        return side
    # DFlash (either format), DSpark, or an MTP head (an ordinary model file to paircheck): the
    # engine-independent checks, hidden size, target layers and vocabulary first.
    verdict = check_pair(target, draft)
    side.problems += [_with_remedy(r, target) for r in verdict.reasons]
    side.warnings += verdict.warnings
    if kind != MTP:
        _check_dflash_target(target, draft, kind, side)
    return side


def _with_remedy(problem: str, target: ModelInfo) -> str:
    if any(w in problem.lower() for w in _REMEDY_WORDS):
        return problem
    model = target.basename or target.name or target.path.name
    return (f"{problem.rstrip('.')}. Use the draft made for {model}: the model's own repo (dflash-/mtp- files) "
            "or a draft repo from BeeDeck's catalog.")


def _engine_reason(kind: str, gen: str, dn: str) -> str:
    name = ENGINE_NAMES[gen]
    if kind == DFLASH_LEGACY:
        return (f"{dn} is in BeeLlama's old fork format (dflash-draft), which {name} cannot load: convert it with "
                "BeeLlama's scripts/convert-dflash-draft-to-upstream.py --verify, or download the upstream 'dflash' "
                "GGUF of the same draft.")
    if kind == DFLASH:
        return (f"{dn} is in the upstream 'dflash' format; BeeLlama 0.1-0.3 runs its own fork format (only 0.2-0.3 "
                "also read this one): use BeeLlama >= 0.4 or mainline llama.cpp.")
    article = "an" if KIND_LABELS[kind][0] in "AEIMO" else "a"  # "an MTP head", "an EAGLE-3"
    return (f"{dn} is {article} {KIND_LABELS[kind]} draft (--spec-type {SPEC_TYPE_OF_KIND[kind]}), which BeeDeck knows "
            f"only mainline llama.cpp to run, not {name}: use a mainline engine.")


def _check_dflash_target(target: ModelInfo, draft: ModelInfo, kind: str, side: Sidecar) -> None:
    """Per engine: upstream DFlash reads layer inputs only some target architectures publish."""
    dn, tn = draft.path.name, target.path.name
    for gen in KIND_ENGINES[kind]:
        archs = dflash_target_archs(gen)
        if archs is not None and target.architecture not in archs and not side.engines[gen]:
            side.engines[gen] = (f"{tn} is a '{target.architecture}' model, whose layer inputs {ENGINE_NAMES[gen]}'s "
                                 "DFlash cannot read (the server would abort on the first chat): use BeeLlama 0.1-0.3 "
                                 "with a fork-format draft, or a supported target (Qwen3.x, Gemma 4, Llama).")
    if kind == DSPARK and target.architecture == "gemma4" and not side.engines["mainline"]:
        side.engines["mainline"] = (f"{dn} is a DSpark draft for Gemma 4, which mainline llama.cpp does not run yet "
                                    "(PRs #25549, #29226 are open): use a DFlash draft for this model.")


def _array(info: ModelInfo, key: str) -> list[int]:
    v = info.metadata.get(key)
    return [int(x) for x in (v.values or ())] if isinstance(v, ArrayInfo) else []


def _check_eagle3(target: ModelInfo, draft: ModelInfo, side: Sidecar) -> None:
    # mainline src/models/eagle3.cpp: eagle3.target_layers (exactly 3) and eagle3.target_hidden_size.
    dn, tn = draft.path.name, target.path.name
    hidden = draft.metadata.get("eagle3.target_hidden_size")
    if hidden is not None and target.n_embd and int(hidden) != target.n_embd:
        side.problems.append(f"{dn} was made for a model with hidden size {int(hidden)}, but {tn} has {target.n_embd}: "
                             "it belongs to another model; use the EAGLE-3 draft made for this one.")
    layers = _array(draft, "eagle3.target_layers")
    if len(layers) != 3:
        side.problems.append(f"{dn} names {len(layers)} target layers; EAGLE-3 needs exactly 3 (mainline refuses it): "
                             "download the draft again.")
    elif max(layers) > target.n_layer:
        side.problems.append(f"{dn} reads target layer {max(layers)}, but {tn} has {target.n_layer}: it was made for "
                             "a deeper model; use the EAGLE-3 draft made for this one.")
    if draft.vocab_size and target.vocab_size and draft.vocab_size != target.vocab_size:
        side.problems.append(f"{dn} has a vocabulary of {draft.vocab_size} tokens but {tn} has {target.vocab_size}: "
                             "it belongs to another model family; use the EAGLE-3 draft made for this one.")


def _check_mtp(target: ModelInfo, draft: ModelInfo, side: Sidecar) -> bool:
    """The MTP head's own checks; False when it is plainly another model's (skip the vocabulary)."""
    dn, tn = draft.path.name, target.path.name
    if draft.architecture != target.architecture:
        side.problems.append(f"{dn} is the MTP head of a '{draft.architecture}' model, but {tn} is "
                             f"'{target.architecture}': it belongs to another model; use the mtp- file from "
                             f"{tn}'s own repo.")
        return False
    if target.architecture not in MTP_TARGET_ARCHS:
        side.engines["mainline"] = (f"mainline llama.cpp has no MTP graph for '{target.architecture}' models: use a "
                                    "DFlash draft for this model.")
    if draft.n_embd != target.n_embd or draft.n_layer != target.n_layer:
        side.problems.append(f"{dn} is the MTP head of a model with {draft.n_layer} layers x {draft.n_embd}, but {tn} "
                             f"has {target.n_layer} x {target.n_embd}: it belongs to another size of this family; "
                             f"use the mtp- file from {tn}'s own repo.")
        return False
    if mtp_layers(target):
        side.warnings.append(f"{tn} carries its own MTP head: {dn} is not needed (--spec-type draft-mtp alone uses it).")
    return True
