"""Speculation modes' rules: which ones this engine and these model files can run (:func:`available_modes`),
the settings for each (:func:`settings_for_mode`), and how a server switches between them.

The modes themselves, with their names, colours and draft kinds, are :class:`beedeck.core.engine.mode.Mode`
and its table: Baseline (no speculation at all), DFlash / EAGLE-3 / DSpark (a separate draft file of that
kind), MTP (the target's own MTP heads, or an ``mtp-`` head-only file as the draft for a target without
heads: mainline runs it as ``--spec-draft-model <file> --spec-type draft-mtp``) and N-gram (``model-free``:
the n-gram family, copyspec).

core.engine sits below core.models, so it never reads a GGUF itself: what the headers say comes in as
:class:`ModelFacts`, which :func:`beedeck.core.models.paircheck.model_facts` builds from them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePath

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.known_issues import parse_version, refused_spec_types
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode

PER_REQUEST = "per-request"
RESTART = "restart"
MTP_HEAD = "mtp"  # the draft kind of a head-only file (core.models.draft_kinds.MTP, sidecars.sidecar_kind)
# Preferred model-free types, best first (copyspec needs n-min 1, which build_argv adds).
MODEL_FREE_ORDER = ("ngram-mod", "ngram-simple", "ngram-map-k", "copyspec", "ngram-cache", "suffix")


@dataclass(frozen=True)
class ModelFacts:
    """What the model files' GGUF headers say; None / False where a header was not read."""

    target_name: str = ""
    mtp_layers: int | None = None  # MTP (NextN) heads inside the target
    draft_name: str = ""
    draft_read: bool = False  # the draft's header was read
    draft_kind: str | None = None  # with draft_read: "dflash", "dflash-draft", "dspark", "eagle3", "mtp" (an MTP
    # head alone), None = ordinary


@dataclass(frozen=True)
class ModeOption:
    """One mode for this engine and these files: ``reason`` says why not, and what to do, when not."""

    key: Mode
    available: bool
    reason: str = ""
    spec_type: str | None = None  # the --spec-type it runs as on this engine (None for baseline)

    @property
    def label(self) -> str:
        """Mode.label: one name per mode everywhere (the engine's n-gram type is ``spec_type``)."""
        return self.key.label


def has_draft(settings: LaunchSettings | None) -> bool:
    """A DFlash profile: the draft is set and the mode is DFlash."""
    return bool(settings and settings.draft and settings.spec_mode == Mode.DFLASH)


def uses_draft(settings: LaunchSettings | None) -> bool:
    """Any draft-file mode (DFlash, EAGLE-3, DSpark) with its draft set."""
    return bool(settings and settings.draft and settings.spec_mode.uses_draft_file)


def switch_path(per_request_honoured: bool | None) -> str:
    """per-request only where this engine build was measured to honour it
    (:mod:`beedeck.core.engine.speculation.switching`), otherwise restart without the draft."""
    return PER_REQUEST if per_request_honoured else RESTART


def engine_label(caps: EngineCaps) -> str:
    """The engine in a user's words, e.g. "BeeLlama v0.1.2" or "mainline llama.cpp (build 11434)"."""
    if caps.generation in (Generation.BEE_A, Generation.BEE_B):
        if caps.release:
            return f"BeeLlama {caps.release}"
        return "BeeLlama 0.1-0.3" if caps.generation == Generation.BEE_A else "BeeLlama 0.4 or later"
    if caps.generation == Generation.MAINLINE:
        return f"mainline llama.cpp (build {caps.build})" if caps.build else "mainline llama.cpp"
    return f"this llama-server ({caps.path})"


# Model-free types known to draft from the request's own tokens alone (mainline common/speculative.cpp: its begin()
# keeps nothing). Every other model-free type may keep what it saw (ngram-mod's table outlives the request).
STATELESS_TYPES = frozenset({"ngram-simple"})


def keeps_across_requests(mode: Mode, spec_type: str | None) -> bool:
    """Whether a server in ``mode`` (model-free type ``spec_type``) may draft from what earlier requests showed it:
    a model-free mode whose n-gram tables live in the server, unless its type is known to keep nothing."""
    return mode == Mode.MODEL_FREE and spec_type not in STATELESS_TYPES


def pick_model_free_type(caps: EngineCaps, wanted: str | None = None) -> str | None:
    """The model-free speculation type to run on this engine (``wanted`` where it can), or None."""
    have = [t for t in caps.model_free_spec_types if t not in refused_spec_types(caps)]
    if wanted and wanted in have:
        return wanted
    return next((t for t in MODEL_FREE_ORDER if t in have), have[0] if have else None)


def parse_spec(text: str) -> tuple[Mode, str | None]:
    """A command line's ``--spec`` word: (mode, model-free type or None). The engines' own spellings
    (draft-mtp, ...) are accepted; any other word is a model-free type for build_argv to judge."""
    word = (text or "off").strip().lower()
    if word in ("off", "none", Mode.BASELINE):
        return Mode.BASELINE, None
    mode = Mode.parse(word.removeprefix("draft-"))
    if mode is not None and mode != Mode.MODEL_FREE:
        return mode, None
    if word == Mode.MODEL_FREE:
        return Mode.MODEL_FREE, None
    return Mode.MODEL_FREE, word


def is_mtp_head_name(path: str | None) -> bool:
    """An ``mtp-*.gguf`` name: how the engines' ``-hf`` downloads (``find_best_mtp``) and BeeDeck's library
    name a head-only file. build_argv sees no headers, so this name is what lets it pass the file."""
    return bool(path) and PurePath(path or "").name.lower().startswith("mtp-")


def keeps_mtp_head(profile: LaunchSettings, facts: ModelFacts | None = None) -> bool:
    """Whether MTP runs with the profile's draft file as its head: an ``mtp-`` file that (where the headers
    were read, ``facts``) is an MTP head alone, for a target without heads of its own."""
    if not is_mtp_head_name(profile.draft):
        return False
    if facts is not None and facts.draft_read:
        return facts.draft_kind == MTP_HEAD and not facts.mtp_layers
    return True


def settings_for_mode(profile: LaunchSettings, mode: Mode, caps: EngineCaps | None = None,
                      facts: ModelFacts | None = None) -> LaunchSettings:
    """The profile's settings in ``mode``; nothing but the speculation changes. Baseline is no
    speculation at all (no draft); model-free loads no draft file either, and MTP only an MTP head file
    (:func:`keeps_mtp_head`, ``facts``: what the headers say). With ``caps``, the model-free type is one
    this engine runs."""
    if mode == Mode.BASELINE:
        return replace(profile, draft=None, spec_mode=Mode.BASELINE)
    if mode == Mode.MTP:
        return replace(profile, draft=profile.draft if keeps_mtp_head(profile, facts) else None,
                       spec_mode=Mode.MTP)
    if mode == Mode.MODEL_FREE:
        kind = pick_model_free_type(caps, profile.spec_model_free_type) if caps is not None else None
        return replace(profile, draft=None, spec_mode=Mode.MODEL_FREE,
                       spec_model_free_type=kind or profile.spec_model_free_type)
    if mode.uses_draft_file:
        return replace(profile, spec_mode=mode)
    return replace(profile, draft=None, spec_mode=mode)  # a mode without a draft file of its own


def engine_spec_type(key: Mode, caps: EngineCaps) -> tuple[str | None, str]:
    """(its --spec-type, "") when this engine runs mode ``key``, else (None, why not and what to do)."""
    label, engine = key.label, engine_label(caps)
    if not caps.has("--spec-type"):
        return None, f"{engine} has no --spec-type option, so it cannot speculate: use BeeLlama or mainline llama.cpp."
    if key == Mode.MODEL_FREE:
        kind = pick_model_free_type(caps)
        return (kind, "") if kind else (None, f"{engine} has no N-gram speculation type that runs safely here.")
    if key == Mode.DFLASH:
        spelling = caps.dflash_spec_type
    else:
        spelling = key.spec_type if key.spec_type in caps.spec_types else None
    if spelling:
        return spelling, ""
    if key == Mode.DFLASH:
        return None, (f"{engine} has no DFlash (its --spec-type accepts {', '.join(caps.spec_types) or 'nothing'}): "
                      "use BeeLlama or mainline llama.cpp b9000 or newer.")
    if caps.generation == Generation.BEE_A:
        return None, (f"{engine} has no {label}: BeeLlama 0.1-0.3 knows only its own DFlash and the n-gram types. "
                      "Use BeeLlama 0.4 or newer, or mainline llama.cpp.")
    return None, (f"{engine} has no {label} (its --spec-type accepts {', '.join(caps.spec_types) or 'nothing'}): "
                  "use a newer build (mainline b11434 and BeeLlama 0.4.3 have it).")


def _draft_reason(key: Mode, caps: EngineCaps | None, settings: LaunchSettings, facts: ModelFacts) -> str:
    """Why the configured draft file cannot run as ``key`` ("" when it can, as far as is known)."""
    label = key.label
    if not settings.draft:
        return (f"No {label} draft model is configured: pick the one made for this target (Settings, or --draft on "
                "the command line).")
    name = facts.draft_name or PurePath(settings.draft).name
    if not facts.draft_read:
        own = settings.spec_mode
        assumed = own if own.uses_draft_file else Mode.DFLASH  # BeeDeck's pairs are DFlash pairs
        return "" if key == assumed else (f"BeeDeck has not read {name}'s header, so it cannot tell whether it is "
                                          f"{key.a_label} draft.")
    kind = facts.draft_kind
    runs_as = Mode.of_draft_kind(kind)
    if runs_as != key:
        what = f"{runs_as.a_label} draft" if runs_as else "an ordinary model, not a speculation draft"
        fix = f"use the {runs_as.label} mode for it" if runs_as else f"pick the {label} draft made for this target"
        return f"{name} is {what}, so it cannot run as {label}: {fix}."
    if caps is None:
        return ""
    if kind == "dflash-draft" and caps.generation != Generation.BEE_A:
        return (f"{name} is in BeeLlama 0.1-0.3's old 'dflash-draft' format, which {engine_label(caps)} cannot "
                "read: download the upstream 'dflash' GGUF of the same draft, or convert it with BeeLlama's "
                "convert-dflash-draft-to-upstream.py.")
    release = parse_version(caps.release) or parse_version(caps.version)
    if kind == "dflash" and caps.generation == Generation.BEE_A and release is not None and release < (0, 2):
        return (f"{name} is in the upstream 'dflash' format, which {engine_label(caps)} cannot read: use a "
                "'dflash-draft' GGUF, or BeeLlama 0.2 or newer.")
    return ""


def _files_reason(key: Mode, caps: EngineCaps | None, settings: LaunchSettings, facts: ModelFacts) -> str:
    if key.uses_draft_file:
        return _draft_reason(key, caps, settings, facts)
    if key == Mode.MTP:
        name = facts.target_name or PurePath(settings.target).name or "the target"
        head = facts.draft_name or PurePath(settings.draft or "").name
        if facts.draft_read and facts.draft_kind != MTP_HEAD and settings.draft and settings.spec_mode == Mode.MTP:
            return (f"{head} is not an MTP head file: in MTP mode the draft field takes only an mtp- head (the "
                    f"target's MTP block alone); clear it to use the heads inside {name}, or pick the mode its "
                    "kind runs as.")
        if facts.draft_read and facts.draft_kind == MTP_HEAD and not facts.mtp_layers:
            if not is_mtp_head_name(settings.draft):
                return (f"{head} is an MTP head file, but BeeDeck passes one to the engine only under the mtp- name "
                        f"the engines' downloads give it: rename it to mtp-{head}.")
            if caps is not None and caps.generation != Generation.MAINLINE:
                return (f"{head} is an MTP head file, which BeeDeck knows only mainline llama.cpp to load as a "
                        f"draft (--spec-draft-model with --spec-type draft-mtp), not {engine_label(caps)}: use a "
                        "mainline engine, or a target with its MTP heads inside.")
            return ""
        if facts.mtp_layers is None:
            if settings.spec_mode == Mode.MTP:
                return ""
            return f"BeeDeck has not read {name}'s header, so it cannot tell whether it has MTP heads."
        if facts.mtp_layers < 1:
            return (f"{name} has no MTP heads (its GGUF declares no nextn_predict_layers): MTP needs a model that "
                    "ships them, such as Qwen3.6 27B, or its mtp- head file as the draft; pick another mode.")
    return ""


def available_modes(caps: EngineCaps | None, settings: LaunchSettings,
                    facts: ModelFacts | None = None) -> list[ModeOption]:
    """Every mode (in :class:`Mode`'s order), available or not, for this engine and these files.

    Without ``caps`` (no engine probed yet) only baseline and the profile's own mode can be available;
    what the headers did not say (``facts`` None or partial) is taken from the profile: a draft that
    was not read is assumed to be of the profile's kind (DFlash when its mode loads no draft), and MTP
    heads that were not counted are assumed only when the profile runs MTP.
    """
    facts = facts or ModelFacts()
    own = settings.spec_mode
    out = [ModeOption(Mode.BASELINE, True)]
    for key in [m for m in Mode if m.speculates]:
        label, files_why = key.label, _files_reason(key, caps, settings, facts)
        if caps is None:  # what the files say first: an engine not probed yet is the weaker reason
            spec_type = settings.spec_model_free_type if key == Mode.MODEL_FREE else None
            probe = "" if key == own else f"BeeDeck has not probed the engine yet, so it cannot tell whether it runs {label}."
            why = files_why or probe
        else:  # an engine that cannot run the mode at all comes first: no file would help
            spec_type, engine_why = engine_spec_type(key, caps)
            if key == Mode.MODEL_FREE and not engine_why:
                spec_type = pick_model_free_type(caps, settings.spec_model_free_type)
            why = engine_why or files_why
        out.append(ModeOption(key, not why, why, spec_type if not why else None))
    return out


def option(options: list[ModeOption], key: Mode) -> ModeOption | None:
    return next((o for o in options if o.key == key), None)
