"""What kind of speculation a GGUF brings: a separate draft (DFlash in either format, DSpark, EAGLE-3)
or MTP heads inside a target. The engine's ``--spec-type`` for each is in :data:`SPEC_TYPE_OF_KIND`.

Sources: mainline b11434 ``src/llama-arch.cpp`` (architectures ``dflash`` and ``eagle3``; DSpark is a
``dflash`` file with the ``markov_w1`` / ``conf_proj`` tensors), ``common/speculative.cpp`` (the spec
types), BeeLlama 0.1-0.3's own ``dflash-draft`` architecture (docs/reference/engine-facts.md), and
MTP heads counted by ``<arch>.nextn_predict_layers`` (``src/llama-model.cpp``).
"""

from __future__ import annotations

from beedeck.core.models.gguf.reader import ModelInfo

DFLASH, DFLASH_LEGACY, DSPARK, EAGLE3, MTP = "dflash", "dflash-draft", "dspark", "eagle3", "mtp"

# The spec type each kind runs as, spelled as the engines that have it (BeeLlama 0.1-0.3 knows only
# its own "dflash" with a "dflash-draft" file).
SPEC_TYPE_OF_KIND = {DFLASH: "draft-dflash", DSPARK: "draft-dspark", EAGLE3: "draft-eagle3", MTP: "draft-mtp"}


def draft_kind(info: ModelInfo) -> str | None:
    """The kind of a separate draft file, or None for an ordinary model (a target)."""
    arch = info.architecture
    if arch == "eagle3":
        return EAGLE3
    if arch == "dflash-draft":
        return DFLASH_LEGACY
    if arch == "dflash":
        names = {t.name for t in info.tensors}
        return DSPARK if {"markov_w1", "markov_w1.weight"} & names or \
            bool(info.metadata.get("dflash.has_confidence_head")) else DFLASH
    return None


def is_mtp_only(info: ModelInfo) -> bool:
    """A file with MTP heads and no trunk layers: an ``mtp-`` sidecar, not a model on its own
    (mainline's loader tells them apart the same way, ``src/models/qwen35.cpp`` ``mtp_only``)."""
    return mtp_layers(info) > 0 and info.n_layer > 0 and not any(t.name.startswith("blk.0.") for t in info.tensors)


def mtp_layers(info: ModelInfo) -> int:
    """How many MTP (NextN) prediction heads a target carries inside its own file (0: none)."""
    value = info.metadata.get(f"{info.architecture}.nextn_predict_layers", 0)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def is_dflash2(info: ModelInfo) -> bool:
    """A DFlash file with DFlash2's path selector (``dflash.selector_rank`` or ``selector_*`` tensors,
    docs/reference/engine-facts.md §5.1): it runs a fixed trained block, loads from BeeLlama v0.4.4."""
    return draft_kind(info) == DFLASH and ("dflash.selector_rank" in info.metadata
                                           or any(t.name.startswith("selector") for t in info.tensors))
