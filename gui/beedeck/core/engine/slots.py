"""How many sequences the engine makes and what ``-c`` BeeDeck passes so each chat slot gets the context the
profile asks for: one rule for ``build_argv`` (the command line) and the memory planner (what it costs).

BeeLlama 0.1-0.3 creates the target context with ``n_parallel × 2`` sequences whenever speculation is on,
draft file or not (``speculative.type != NONE || has_dft()`` in its ``server-context.cpp`` ``load_model``:
the extra ones are recurrent-state backup cells, docs/reference/memory-model.md §1.3). Without a unified KV
cache every sequence gets ``-c / n_seq``, so BeeDeck multiplies ``-c`` by the slots and, there, by 2.

One slot whenever a draft is loaded (:func:`chat_slots`): speculation loses throughput at two or more parallel
slots (llama.cpp PR 27342, Strix Halo: 34.1 tok/s without a drafter against 25-26 with DFlash2 or MTP at 4
slots), and an idle drafter still runs on every batch. A coding agent's parallel requests then wait their
turn on the one slot; Baseline and N-gram keep the slots the profile asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode


@dataclass(frozen=True)
class SlotContext:
    """``c_arg``: the ``-c`` value passed; ``n_seq``: the sequences the engine creates; ``per_slot``: the
    context each slot sees (``c_arg`` on a unified cache, else ``c_arg // n_seq`` before padding)."""

    c_arg: int
    n_seq: int
    per_slot: int
    slots_multiplied: bool  # -c was multiplied by the slots (no unified KV, more than one slot)
    spec_doubled: bool  # the engine doubles the sequences for speculation (BeeLlama 0.1-0.3)


def loads_draft(settings: LaunchSettings) -> bool:
    """A draft file (DFlash, EAGLE-3, DSpark) or the target's MTP heads run beside the target."""
    if settings.spec_mode == Mode.MTP:
        return True
    return settings.spec_mode.uses_draft_file and bool(settings.draft)


def chat_slots(settings: LaunchSettings) -> int:
    """The slots (``-np``) a launch runs: one whenever a draft is loaded (see the module), else the profile's."""
    return 1 if loads_draft(settings) else max(1, settings.parallel)


def doubles_sequences(generation: Generation, spec_on: bool) -> bool:
    """BeeLlama 0.1-0.3 makes twice the sequences whenever speculation is on (any --spec-type, or a draft)."""
    return spec_on and generation == Generation.BEE_A


def slot_context(settings: LaunchSettings, generation: Generation, spec_on: bool) -> SlotContext:
    """The one slot-context rule (see the module docstring). ``settings.ctx_is_total``: -c is passed as given
    (the slots share it as the engine splits it); 0 means the model's own context, passed as 0."""
    slots = chat_slots(settings)
    doubled = doubles_sequences(generation, spec_on)
    n_seq = slots * 2 if doubled else slots
    unified = settings.kv_unified is True
    c_arg = settings.ctx_size
    multiplied = spec_doubled = False
    if not settings.ctx_is_total and not unified and c_arg:
        if slots > 1:
            c_arg *= slots
            multiplied = True
        if doubled:
            c_arg *= 2
            spec_doubled = True
    per_slot = c_arg if unified else c_arg // n_seq
    return SlotContext(c_arg, n_seq, per_slot, multiplied, spec_doubled)
