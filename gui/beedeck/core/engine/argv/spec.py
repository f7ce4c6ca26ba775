"""The speculation part of :func:`beedeck.core.engine.argv.build_argv`: each mode's flags on each engine.

- DFlash: ``--spec-draft-model D --spec-type dflash`` (BeeLlama 0.1-0.3) / ``draft-dflash`` (BeeLlama >= 0.4,
  mainline);
- EAGLE-3 and DSpark: ``--spec-draft-model D --spec-type draft-eagle3`` / ``draft-dspark``, plus, for
  DSpark, ``--spec-draft-p-min 0``: DSpark reads that threshold as its confidence cut-off and a draft
  without a confidence head refuses any other value ("DSpark draft has no confidence head: please set
  --spec-draft-p-min 0", mainline ``common/speculative.cpp``);
- MTP: ``--spec-type draft-mtp``; no draft file when the heads are inside the target, or
  ``--spec-draft-model <mtp- head file>`` before it for a target without heads (mainline b11434 loads the
  head alone as the drafter; :func:`beedeck.core.engine.speculation.modes.settings_for_mode` keeps only such a file);
- model-free: ``--spec-type <type>`` (n-gram family, BeeLlama's copyspec).

BeeLlama 0.1-0.3 has no EAGLE-3, DSpark or MTP: those are refused with a reason naming the engine.
"""

from __future__ import annotations

from pathlib import PurePath

from beedeck.core.engine.argv.base import Builder
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import engine_spec_type, keeps_mtp_head

P_MIN_FLAGS = ("--spec-draft-p-min", "--draft-p-min")


def speculation(b: Builder) -> bool:
    """Add the speculation flags; True when speculation is on."""
    s, caps = b.s, b.caps
    if s.spec_mode == Mode.BASELINE:
        if s.draft:
            b.note("draft", "info", "The draft model is not loaded because speculative decoding is off.")
        return False
    if not caps.has("--spec-type"):
        b.refuse("spec_mode", "This engine has no --spec-type option, so it cannot do speculative decoding.",
                 "Use BeeLlama or a recent mainline llama.cpp, or turn speculation off.", code="unknown_argument")
        return False
    ok, n_min = _model_free(b) if s.spec_mode == Mode.MODEL_FREE else _with_model(b)
    if not ok:
        return False
    if s.draft_n_max is not None:
        b.opt("draft_n_max", ("--spec-draft-n-max",), str(s.draft_n_max))
    if s.draft_ubatch_size is not None:  # BeeLlama >= 0.4.7: the drafter's own ubatch (default 128)
        b.opt("draft_ubatch_size", ("--spec-draft-ubatch-size", "-ubd"), str(s.draft_ubatch_size))
    if s.draft_cache_type is not None and caps.draft_cache_types and s.draft_cache_type not in caps.draft_cache_types:
        b.note("draft_cache_type", "dropped", f"--spec-draft-type-k {s.draft_cache_type} left out: this engine's "
               f"drafter cache takes {', '.join(caps.draft_cache_types)}; it keeps its default.")
    elif s.draft_cache_type is not None:  # both sides: setting one only makes BeeLlama promote the other, warning
        b.opt("draft_cache_type", ("--spec-draft-type-k",), s.draft_cache_type)
        if caps.has("--spec-draft-type-k"):
            b.opt("draft_cache_type", ("--spec-draft-type-v",), s.draft_cache_type)
    if n_min is not None:
        b.opt("draft_n_min", ("--spec-draft-n-min",), str(n_min))
    if (
        s.spec_mode == Mode.DFLASH
        and caps.generation == Generation.BEE_A
        and (s.batch_size is None or s.ubatch_size is None)
    ):
        b.note("batch_size", "info", "BeeLlama caps -b/-ub to 256/64 for DFlash when they are not given.")
    return True


def _with_model(b: Builder) -> tuple[bool, int | None]:
    """DFlash, EAGLE-3, DSpark and MTP: (False, None) when refused, else (True, the minimum draft to pass)."""
    s, caps = b.s, b.caps
    key = s.spec_mode
    label = key.label
    spelling, why = engine_spec_type(key, caps)
    if spelling is None:
        b.refuse("spec_mode", f"{why[0].upper()}{why[1:]}", "Or pick another speculation mode.",
                 code="unknown_argument")
    needs_file = key.uses_draft_file
    if needs_file and not s.draft:
        b.refuse("draft", f"{label} needs a draft model.", f"Pick the {label} draft GGUF made for this target.",
                 code="model_missing")
    if spelling is None or (needs_file and not s.draft):
        return False, None
    if needs_file:
        assert s.draft is not None
        b.add("--spec-draft-model", s.draft, "--spec-type", spelling)
    elif s.draft and keeps_mtp_head(s):
        b.add("--spec-draft-model", s.draft, "--spec-type", spelling)
        b.note("draft", "info", f"MTP drafts with the head file {PurePath(s.draft).name} (the target's MTP block "
               "alone), loaded as the draft model.")
    else:
        if s.draft:
            b.note("draft", "info", "The draft model is not loaded: MTP drafts with the heads inside the target.")
        b.add("--spec-type", spelling)
    if key == Mode.DFLASH and spelling != "dflash":
        b.note("spec_mode", "translated",
               f"DFlash is spelled --spec-type {spelling} on this engine (BeeLlama <= 0.3 spelled it dflash).")
    if needs_file and s.draft_ctx_size is not None:
        if b.first("--spec-draft-ctx-size", "-cd"):
            b.opt("draft_ctx_size", ("--spec-draft-ctx-size", "-cd"), str(s.draft_ctx_size))
        else:
            b.drop("draft_ctx_size", "--spec-draft-ctx-size", " (its drafter gets a context as large as the target's)")
    if key == Mode.DFLASH and s.dflash_cross_ctx is not None:
        if caps.has("--spec-dflash-cross-ctx"):
            b.add("--spec-dflash-cross-ctx", str(s.dflash_cross_ctx))
        else:
            b.drop("dflash_cross_ctx", "--spec-dflash-cross-ctx", " (only BeeLlama <= 0.3 has it)")
    if key == Mode.DSPARK and not any(a.split("=", 1)[0] in P_MIN_FLAGS for a in s.extra_args):
        b.opt("draft_p_min", P_MIN_FLAGS, "0")
        b.note("draft_p_min", "info", "DSpark reads --spec-draft-p-min as its confidence cut-off: passing 0 "
               "(every drafted token is tried; a draft without a confidence head accepts nothing else).")
    return True, s.draft_n_min


def _model_free(b: Builder) -> tuple[bool, int | None]:
    s, caps = b.s, b.caps
    kind = s.spec_model_free_type
    if kind not in caps.model_free_spec_types:
        b.refuse("spec_model_free_type", f"This engine has no N-gram speculation type {kind!r}.",
                 f"Pick one of {', '.join(caps.model_free_spec_types) or '(none)'}.")
        return False, None
    if s.draft:
        b.note("draft", "info", f"The draft model is not loaded: {kind} needs none.")
    b.add("--spec-type", kind)
    n_min = s.draft_n_min
    if kind == "copyspec" and (n_min is None or n_min < 1):
        n_min = 1
        b.note(
            "draft_n_min",
            "compensated",
            "copyspec runs away with a minimum draft of 0 (it re-decodes one "
            "token until the context is full): passing --spec-draft-n-min 1.",
        )
    elif caps.generation == Generation.BEE_A and (n_min is None or n_min < 1):
        # Measured on v0.1.2, greedy, starter and synthetic models, with and without tools
        # (tests/engine/test_toolcalls_generated_real.py): ngram-simple and ngram-cache filled the
        # context and cut the reply short or garbled it (a tool call's arguments cut to '{"city":'),
        # suffix and recycle aborted (common/sampling.cpp:724); with a minimum of 1 all matched no speculation.
        n_min = 1
        b.note(
            "draft_n_min",
            "compensated",
            f"BeeLlama 0.1-0.3 runs away on an empty {kind} draft with a minimum draft of 0 (it re-decodes "
            "until the context is full, cutting the reply short, or aborts): passing --spec-draft-n-min 1.",
        )
    return True, n_min
