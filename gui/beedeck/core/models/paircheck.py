"""Target + draft + engine compatibility: every rejection says why and what to do; and which
speculation modes these files can run (:func:`modes_for`, the GGUF side of
:func:`beedeck.core.engine.speculation.modes.available_modes`).

Rules: docs/reference/engine-facts.md §5.3 (DFlash drafts), llama.cpp's
``common_speculative_are_compatible`` (ordinary drafts), and docs/reference/dflash-on-cpu.md (which mainline target
architectures expose the layer inputs DFlash reads).
"""

from __future__ import annotations

from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.known_issues import dflash_target_archs
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import ModelFacts, ModeOption, available_modes, option
from beedeck.core.models.draft_kinds import MTP, draft_kind, is_mtp_only, mtp_layers
from beedeck.core.models.gguf.reader import GGUFError, ModelInfo, inspect, iter_token_bytes, tokenizer_digest

# Upstream DFlash (mainline, BeeLlama >= 0.4) reads each target layer's input tensor; only some
# architectures' graphs publish it. The lists live in the known-issue table.
MAINLINE_DFLASH_TARGETS = dflash_target_archs("mainline") or frozenset()
SPEC_VOCAB_MAX_SIZE_DIFFERENCE = 128  # common/speculative.cpp
SPEC_VOCAB_CHECK_START_TOKEN_ID = 5


@dataclass
class PairVerdict:
    """ok is False when any reason is given; warnings do not block a launch."""

    ok: bool
    reasons: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def model_facts(target: ModelInfo | None, draft: ModelInfo | None) -> ModelFacts:
    """What :func:`available_modes` needs from the headers (None for a file that was not read)."""
    return ModelFacts(target_name=target.path.name if target else "",
                      mtp_layers=mtp_layers(target) if target else None,
                      draft_name=draft.path.name if draft else "", draft_read=draft is not None,
                      draft_kind=(draft_kind(draft) or (MTP if is_mtp_only(draft) else None)) if draft else None)


def read_infos(settings: LaunchSettings) -> tuple[ModelInfo | None, ModelInfo | None]:
    """The target's and the draft's headers; None for a file that is missing or unreadable."""
    def read(path: str | None) -> ModelInfo | None:
        if not path or not Path(path).is_file():
            return None
        try:
            return inspect(path)
        except (GGUFError, OSError):
            return None
    return read(settings.target), read(settings.draft)


def modes_for(caps: EngineCaps | None, settings: LaunchSettings, target: ModelInfo | None,
              draft: ModelInfo | None) -> list[ModeOption]:
    """Every speculation mode, available or not (with the reason), for this engine and these files."""
    return available_modes(caps, settings, model_facts(target, draft))


def mode_refusal(caps: EngineCaps | None, s: LaunchSettings, target: ModelInfo | None,
                 draft: ModelInfo | None) -> str | None:
    """Why the chosen mode cannot run with these files, as far as their headers tell (None: it can,
    or nothing was read). The engine's side is build_argv's to say, so it is not repeated here."""
    if s.spec_mode in (Mode.BASELINE, Mode.MODEL_FREE):
        return None
    key = s.spec_mode
    if key == Mode.MTP and target is None:
        return None
    if key != Mode.MTP and (draft is None or not s.draft):
        return None  # no draft: build_argv says so; unread: the header reader will
    chosen = option(modes_for(None, s, target, draft), key)  # the files' verdict alone
    return None if chosen is None or chosen.available else chosen.reason


def _engine_generation(caps: EngineCaps | None) -> Generation | None:
    return None if caps is None else caps.generation


def check_pair(target: ModelInfo, draft: ModelInfo, caps: EngineCaps | None = None) -> PairVerdict:
    """Can ``draft`` speculate for ``target`` on the engine described by ``caps`` (None: any engine)?"""
    reasons: list[str] = []
    warnings: list[str] = []
    tn, dn = target.path.name, draft.path.name
    if target.is_draft:
        reasons.append(f"{tn} is a DFlash draft, not a target model: pick the big model as the target.")
        return PairVerdict(False, reasons, warnings)
    gen = _engine_generation(caps)
    if draft.dflash is None:
        _check_ordinary(target, draft, gen, reasons)
        return PairVerdict(not reasons, reasons, warnings)

    d = draft.dflash
    # 1. draft format vs engine generation
    if caps is not None:
        want = caps.dflash_draft_arch
        if want is None:
            reasons.append(f"This engine ({caps.path}) has no DFlash speculative type: use BeeLlama or a "
                           "recent mainline llama-server.")
        elif d.fmt != want and not (caps.generation == Generation.BEE_A and d.fmt == "dflash"
                                    and "dflash" in caps.spec_types and _bee_reads_upstream(caps)):
            if d.fmt == "dflash-draft":
                reasons.append(f"{dn} is in BeeLlama's old fork format (dflash-draft), which this engine "
                               f"({caps.generation.value}) cannot load: download the upstream 'dflash' GGUF of "
                               "the same draft, or convert it with BeeLlama's convert-dflash-draft-to-upstream.py.")
            else:
                reasons.append(f"{dn} is in the upstream 'dflash' format, which this BeeLlama 0.1 engine cannot "
                               "load: use a 'dflash-draft' GGUF (spiritbuun / Lucebox) or BeeLlama >= 0.4.")
    # 2. hidden size
    if draft.n_embd != target.n_embd:
        reasons.append(f"{dn} was made for a model with hidden size {draft.n_embd}, but {tn} has {target.n_embd}: "
                       "pick the draft trained for this target.")
    if d.n_target_features and target.n_embd and d.n_target_features != len(d.target_layer_ids) * target.n_embd:
        reasons.append(f"{dn} expects {d.n_target_features} target features, but {len(d.target_layer_ids)} layers x "
                       f"{target.n_embd} = {len(d.target_layer_ids) * target.n_embd}: it belongs to another model.")
    # 3. target layer ids
    if not d.target_layer_ids:
        reasons.append(f"{dn} names no target layers (DFlash needs target_layers): the draft file is incomplete.")
    bad = [i for i in d.target_layer_ids if i < 0 or i >= target.n_layer]
    if bad:
        reasons.append(f"{dn} reads target layers {bad}, but {tn} has only {target.n_layer} layers: "
                       "it was made for a deeper model.")
    # 4. vocabulary
    _check_dflash_vocab(target, draft, reasons, warnings)
    # 5. mainline DFlash needs targets that publish layer inputs
    supported = dflash_target_archs(gen.value) if gen is not None else None
    if supported is not None and target.architecture not in supported:
        reasons.append(f"{tn} is a '{target.architecture}' model; upstream DFlash (mainline llama.cpp, BeeLlama >= 0.4) "
                       "reads layer inputs this architecture does not expose, so the server would abort on the "
                       "first chat: use BeeLlama 0.1-0.3 or a supported target (Qwen3.x, Gemma 4, Llama).")
    elif gen is None and target.architecture not in MAINLINE_DFLASH_TARGETS:
        warnings.append(f"'{target.architecture}' targets only work with BeeLlama 0.1-0.3's fork DFlash.")
    # 6. mask token and block size
    if d.mask_token_id is not None and target.vocab_size and d.mask_token_id >= target.vocab_size:
        reasons.append(f"{dn}'s mask token {d.mask_token_id} is outside {tn}'s vocabulary ({target.vocab_size}).")
    if d.block_size < 2:
        reasons.append(f"{dn} has block size {d.block_size}: DFlash drafts need at least 2.")
    # 7. naming heuristic: shapes cannot tell Qwen3.5-27B from Qwen3.6-27B
    tb, dname = (target.basename or target.name).lower(), (draft.name + " " + draft.basename).lower()
    if tb and dname.strip() and tb.split("-")[0] not in dname:
        warnings.append(f"{dn} is named '{draft.name}', which does not mention {target.basename or target.name}: "
                        "make sure it was trained for this target.")
    return PairVerdict(not reasons, reasons, warnings)


def _bee_reads_upstream(caps: EngineCaps) -> bool:
    # BeeLlama 0.2-0.3 read both formats; 0.1.x only its own (docs/reference/engine-facts.md §5.1).
    parts = caps.version.split(".")
    return len(parts) >= 2 and parts[0] == "0" and parts[1].isdigit() and int(parts[1]) >= 2


def _check_dflash_vocab(target: ModelInfo, draft: ModelInfo, reasons: list[str], warnings: list[str]) -> None:
    dn = draft.path.name
    if not draft.vocab_size:
        warnings.append(f"{dn} carries no vocabulary; BeeDeck cannot check it shares {target.path.name}'s.")
        return
    if draft.vocab_size != target.vocab_size:
        reasons.append(f"{dn} has a vocabulary of {draft.vocab_size} tokens but {target.path.name} has "
                       f"{target.vocab_size}: the draft shares the target's LM head, so they must be the same.")
        return
    if draft.tokenizer_model and target.tokenizer_model and draft.tokenizer_model != target.tokenizer_model:
        warnings.append(f"{dn} declares tokenizer '{draft.tokenizer_model}', {target.path.name} '{target.tokenizer_model}'.")
    try:
        dt, tt = tokenizer_digest(draft), tokenizer_digest(target)
        diff = first_difference(target, draft, 0) if dt and tt and dt != tt else None
    except (GGUFError, OSError) as exc:
        reasons.append(f"The token lists could not be compared: {exc}")
        return
    if diff is not None:
        i, a, b = diff
        reasons.append(f"{dn}'s token {i} is {b!r} but {target.path.name}'s is {a!r}: "
                       "the vocabularies differ, so it is a draft for another model family.")


def first_difference(target: ModelInfo, draft: ModelInfo, start: int) -> tuple[int, str, str] | None:
    """The first token id from ``start`` on where the two token lists differ (as far as both go), with both
    texts; None when they agree. Both lists are streamed side by side in bounded chunks, never held whole
    (two lists of 4 million tokens would be half a gigabyte as Python strings)."""
    with closing(iter_token_bytes(target)) as ta, closing(iter_token_bytes(draft)) as tb:
        for i, (a, b) in enumerate(zip(ta, tb, strict=False)):  # as far as both go
            if a != b and i >= start:
                return i, a.decode("utf-8", "replace"), b.decode("utf-8", "replace")
    return None


def _check_ordinary(target: ModelInfo, draft: ModelInfo, gen: Generation | None, reasons: list[str]) -> None:
    tn, dn = target.path.name, draft.path.name
    if draft.is_draft or draft.architecture.startswith("dflash"):
        reasons.append(f"{dn} has DFlash architecture but no DFlash keys: the file is incomplete.")
        return
    if gen == Generation.BEE_A:
        reasons.append(f"{dn} is an ordinary model; BeeLlama 0.1-0.3 would run it as a DFlash drafter with no "
                       "target layers (useless drafts or a crash): use a DFlash draft, or mainline llama.cpp.")
    if draft.tokenizer_model != target.tokenizer_model:
        reasons.append(f"{dn} uses a '{draft.tokenizer_model}' tokenizer and {tn} a '{target.tokenizer_model}' one: "
                       "a draft must share the target's vocabulary type.")
        return
    md_t, md_d = target.metadata, draft.metadata
    for kind in ("bos", "eos"):
        add_t = bool(md_t.get(f"tokenizer.ggml.add_{kind}_token", kind == "bos"))
        add_d = bool(md_d.get(f"tokenizer.ggml.add_{kind}_token", kind == "bos"))
        id_t, id_d = getattr(target, f"{kind}_id"), getattr(draft, f"{kind}_id")
        if add_t != add_d or (add_t and id_t != id_d):
            reasons.append(f"{dn}'s {kind.upper()} token ({id_d}) differs from {tn}'s ({id_t}): llama.cpp refuses "
                           "such a pair; pick a draft from the same model family.")
    if abs(draft.vocab_size - target.vocab_size) > SPEC_VOCAB_MAX_SIZE_DIFFERENCE:
        reasons.append(f"{dn} has {draft.vocab_size} tokens and {tn} {target.vocab_size}: llama.cpp allows a "
                       f"difference of at most {SPEC_VOCAB_MAX_SIZE_DIFFERENCE}; pick a draft from the same family.")
        return
    try:
        diff = first_difference(target, draft, SPEC_VOCAB_CHECK_START_TOKEN_ID)
    except (GGUFError, OSError) as exc:
        reasons.append(f"The token lists could not be compared: {exc}")
        return
    if diff is not None:
        i, a, b = diff
        reasons.append(f"{dn}'s token {i} is {b!r} but {tn}'s is {a!r}: the vocabularies differ, "
                       "so llama.cpp refuses the pair.")
