"""The one slot-context rule build_argv and the planner share (core/engine/slots.py)."""

from __future__ import annotations

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.slots import chat_slots, doubles_sequences, loads_draft, slot_context

BEE_A, BEE_B, ML = Generation.BEE_A, Generation.BEE_B, Generation.MAINLINE


@pytest.mark.parametrize(("generation", "spec_on", "doubled"), [
    (BEE_A, True, True), (BEE_A, False, False), (BEE_B, True, False), (ML, True, False)])
def test_only_beellama_0_1_to_0_3_doubles_and_only_while_speculating(generation: Generation, spec_on: bool,
                                                                    doubled: bool) -> None:
    assert doubles_sequences(generation, spec_on) is doubled


def test_model_free_on_gen_a_without_unified_kv() -> None:
    s = LaunchSettings(target="t.gguf", spec_mode=Mode.MODEL_FREE, ctx_size=4096)
    slot = slot_context(s, BEE_A, spec_on=True)
    assert (slot.c_arg, slot.n_seq, slot.per_slot, slot.spec_doubled, slot.slots_multiplied) == (8192, 2, 4096, True, False)


def test_slots_and_speculation_multiply() -> None:
    s = LaunchSettings(target="t.gguf", ctx_size=4096, parallel=3)
    slot = slot_context(s, BEE_A, spec_on=True)
    assert (slot.c_arg, slot.n_seq, slot.per_slot) == (24576, 6, 4096) and slot.slots_multiplied
    assert slot_context(s, ML, spec_on=True).c_arg == 12288


def test_a_unified_cache_or_a_total_context_is_passed_as_given() -> None:
    unified = LaunchSettings(target="t.gguf", ctx_size=4096, parallel=2, kv_unified=True)
    slot = slot_context(unified, BEE_A, spec_on=True)
    assert (slot.c_arg, slot.n_seq, slot.per_slot) == (4096, 4, 4096)
    total = LaunchSettings(target="t.gguf", ctx_size=4096, ctx_is_total=True)
    slot = slot_context(total, BEE_A, spec_on=True)
    assert (slot.c_arg, slot.per_slot) == (4096, 2048)  # the engine splits it: the slot gets half
    assert slot_context(LaunchSettings(target="t.gguf", ctx_size=0), BEE_A, True).c_arg == 0  # the model's own


@pytest.mark.parametrize(("mode", "draft", "slots"), [
    (Mode.BASELINE, None, 4), (Mode.MODEL_FREE, None, 4), (Mode.DFLASH, "d.gguf", 1),
    (Mode.DFLASH, None, 4), (Mode.EAGLE3, "e.gguf", 1), (Mode.DSPARK, "s.gguf", 1), (Mode.MTP, None, 1)])
def test_one_slot_whenever_a_draft_is_loaded(mode: Mode, draft: str | None, slots: int) -> None:
    s = LaunchSettings(target="t.gguf", draft=draft, spec_mode=mode, ctx_size=4096, parallel=4)
    assert loads_draft(s) is (slots == 1) and chat_slots(s) == slots
    assert slot_context(s, ML, spec_on=mode != Mode.BASELINE).c_arg == 4096 * slots  # -c follows the slots run
