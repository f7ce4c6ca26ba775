"""How many sequences the engine makes and what ``-c`` BeeDeck passes so each chat slot gets the context the
profile asks for: one rule for ``build_argv`` (the command line) and the memory planner (what it costs).

BeeLlama 0.1-0.3 creates the target context with ``n_parallel × 2`` sequences whenever speculation is on,
draft file or not (``speculative.type != NONE || has_dft()`` in its ``server-context.cpp`` ``load_model``:
the extra ones are recurrent-state backup cells, docs/reference/memory-model.md §1.3). Without a unified KV
cache every sequence gets ``-c / n_seq``, so BeeDeck multiplies ``-c`` by the slots and, there, by 2.
"""

from __future__ import annotations

from dataclasses import dataclass

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings


@dataclass(frozen=True)
class SlotContext:
    """``c_arg``: the ``-c`` value passed; ``n_seq``: the sequences the engine creates; ``per_slot``: the
    context each slot sees (``c_arg`` on a unified cache, else ``c_arg // n_seq`` before padding)."""

    c_arg: int
    n_seq: int
    per_slot: int
    slots_multiplied: bool  # -c was multiplied by the slots (no unified KV, more than one slot)
    spec_doubled: bool  # the engine doubles the sequences for speculation (BeeLlama 0.1-0.3)


def doubles_sequences(generation: Generation, spec_on: bool) -> bool:
    """BeeLlama 0.1-0.3 makes twice the sequences whenever speculation is on (any --spec-type, or a draft)."""
    return spec_on and generation == Generation.BEE_A


def slot_context(settings: LaunchSettings, generation: Generation, spec_on: bool) -> SlotContext:
    """The one slot-context rule (see the module docstring). ``settings.ctx_is_total``: -c is passed as given
    (the slots share it as the engine splits it); 0 means the model's own context, passed as 0."""
    slots = max(1, settings.parallel)
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
