"""A mode switch that keeps the conversation, on the real engines through BeeDeck's own restart
(core/serving: Serving.restart with its SlotCarry steps), with the synthetic sticky DFlash pair.

A conversation of about 3,000 tokens on Baseline, then Baseline -> DFlash -> Baseline: after each switch the
next turn's ``timings`` show the restore (``cache_n`` the whole conversation, ``prompt_n`` only the new turn) on
every engine family (all three have ``--slot-save-path``; the profile's KV cache is unified, as BeeDeck's
recommendations make it), and the drafter drafts from the first reply after a restore into DFlash (the sticky
pair: every draft accepted). Where the cache cannot be carried (BeeLlama v0.1.2 without a unified cache keeps
two streams with speculation on, one without: the engine would refuse the file), the switch restarts as
before, the next turn reads the conversation again, and the user is told so once.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.client import LlamaClient, Timings
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.ports import free_port
from beedeck.core.engine.speculation.modes import settings_for_mode
from beedeck.core.engine.speculation.switch_cost import SwitchCosts
from beedeck.core.serving import Inline, Serving, ServingEvents, ServingParts, SlotCarry
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.engine.procs import pid_alive
from tests.fixtures import synth_gguf as sg

pytestmark = pytest.mark.engine

SYNTH = PERSISTENT / "synth"
LONG = "The deck keeps the bees. " * 200  # about 1,200 tokens of the synthetic vocabulary


@dataclass
class Chat:
    """A conversation sent in full each turn, as the chat pane sends it."""

    serving: Serving
    messages: list[dict[str, str]] = field(default_factory=list)

    def turn(self, text: str, max_tokens: int = 24) -> Timings:
        self.messages.append({"role": "user", "content": text})
        reply = LlamaClient(self.serving.base_url, timeout=300.0).chat(self.messages, max_tokens=max_tokens,
                                                                      temperature=0.0, seed=7)
        self.messages.append({"role": "assistant", "content": reply.text})
        assert reply.timings is not None
        return reply.timings


@dataclass
class Served:
    serving: Serving
    carry: SlotCarry
    lines: list[str]
    profile: LaunchSettings
    pids: list[int] = field(default_factory=list)

    def switch(self, mode: str) -> None:
        self.serving.restart(settings_for_mode(self.profile, mode, self.serving.caps))
        assert self.serving.is_running(), self.lines[-30:]
        self.pids.append(self.serving.proc.pid)


def _profile(engine: RealEngine, unified: bool = True) -> LaunchSettings:
    target = sg.cached_target(SYNTH, sticky=True)
    draft = sg.cached_draft(SYNTH, target, sticky=True, fmt="bee" if engine.kind == "bee-a" else "mainline")
    return LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, ctx_size=4096,
                          draft_n_max=15, threads=1, flash_attn="auto", temp=0.0, top_k=1, n_gpu_layers="0",
                          draft_n_gpu_layers="0", kv_unified=unified)


def _served(tmp_path: Path, engine: RealEngine, unified: bool = True) -> Iterator[Served]:
    lines: list[str] = []
    carry = SlotCarry(tmp_path / "slots")
    serving = Serving(ServingParts(costs=SwitchCosts(tmp_path / "times.json"), restart_steps=carry, default_port=free_port()),
                      jobs=Inline(), events=ServingEvents(line=lines.append))
    serving.standby = False  # the 24 GB case: no room beside, every switch restarts
    profile = _profile(engine, unified)
    out = Served(serving, carry, lines, profile)
    try:
        serving.start(str(engine.path), settings_for_mode(profile, Mode.BASELINE, engine.caps), engine.caps)
        assert serving.is_running(), lines[-30:]
        out.pids.append(serving.proc.pid)
        yield out
    finally:
        serving.shutdown()
        assert not [p for p in out.pids if pid_alive(p)], "a llama-server outlived its test"
        assert not list((tmp_path / "slots").glob("*.bin")) if (tmp_path / "slots").exists() else True, \
            "a conversation's cache file was left behind"


@pytest.fixture
def served(tmp_path: Path, real_engine: RealEngine) -> Iterator[Served]:
    yield from _served(tmp_path, real_engine)


def test_a_switch_keeps_the_conversation_where_the_engine_can(served: Served, real_engine: RealEngine,
                                                              record_property: Any) -> None:
    chat = Chat(served.serving)
    first = chat.turn(LONG)
    assert first.prompt_n > 1000 and first.draft_n == 0
    chat.turn("And the honey?")
    conversation = len(chat.messages)
    rows = []
    for mode in (Mode.DFLASH, Mode.BASELINE):
        served.switch(mode)
        carried = served.carry.last
        assert carried is not None and carried.kind == "restored", served.lines[-20:]
        assert carried.tokens >= first.prompt_n and "kept the conversation's cache" in served.serving.restart_note
        replies = [chat.turn(f"Next {i}.") for i in range(3 if mode == Mode.DFLASH else 1)]
        t = replies[0]
        assert t.cache_n >= carried.tokens - 64 and t.prompt_n < 100, (t, carried)  # the new turn, not the chat
        assert served.serving.reply_read(t.prompt_n, t.cache_n) == ""  # the promise held: nothing more to say
        if mode == Mode.DFLASH:  # what the drafter lacks after a restore: nothing, with the sticky pair
            assert all(r.draft_n > 0 and r.draft_n_accepted == r.draft_n for r in replies), replies
        rows.append(f"{mode}: {carried.tokens} tokens carried, {carried.size / 1e6:.1f} MB, save {carried.save_s:.3f} s, "
                    f"restore {carried.restore_s:.3f} s; next turn prompt_n {t.prompt_n} cache_n {t.cache_n} "
                    f"({t.prompt_ms:.0f} ms); drafted/accepted {[(r.draft_n, r.draft_n_accepted) for r in replies]}")
    assert len(chat.messages) == conversation + 8
    print(f"\n{real_engine.kind}:\n" + "\n".join(rows))
    record_property("slot_carry", " | ".join(rows))


def test_where_the_cache_cannot_be_carried_the_switch_says_so_once(tmp_path: Path, bee_a_path: Path) -> None:
    """BeeLlama v0.1.2 without a unified KV cache: two streams with speculation on, one without. Nothing is
    saved (the engine would refuse the file), the switch restarts as before, the next turn reads the
    conversation again, and the user is told once; the log says it at every switch."""
    from beedeck.core.engine.probe import probe_engine

    engine = RealEngine("bee-a", bee_a_path, probe_engine(str(bee_a_path)))
    for served in _served(tmp_path, engine, unified=False):
        chat = Chat(served.serving)
        first = chat.turn(LONG)
        served.switch(Mode.DFLASH)
        note = served.serving.restart_note
        assert "cannot be kept across this switch (its cache has 1 stream in one mode and 2 in the other" in note, note
        assert "turn on KV unified" in note and served.carry.last is not None and served.carry.last.kind == "unavailable"
        after = chat.turn("Go on.")
        assert after.cache_n == 0 and after.prompt_n > first.prompt_n and after.draft_n > 0  # read again, as said
        served.switch(Mode.BASELINE)
        assert served.serving.restart_note == ""  # told once per engine
        assert sum("cannot be kept across this switch" in line for line in served.lines) == 2


def test_without_the_carry_the_next_turn_reads_the_conversation_again(tmp_path: Path, upstream_engine: RealEngine,
                                                                      record_property: Any) -> None:
    """The same switch with NoSteps (BeeDeck before this change): the measurement the carry is against."""
    from beedeck.core.serving import NoSteps

    serving = Serving(ServingParts(costs=SwitchCosts(tmp_path / "t.json"), restart_steps=NoSteps(), default_port=free_port()),
                      jobs=Inline())
    serving.standby = False
    profile = _profile(upstream_engine)
    try:
        serving.start(str(upstream_engine.path), settings_for_mode(profile, Mode.BASELINE, upstream_engine.caps),
                      upstream_engine.caps)
        chat = Chat(serving)
        first = chat.turn(LONG)
        serving.restart(settings_for_mode(profile, Mode.DFLASH, serving.caps))
        after = chat.turn("Go on.")
        assert after.cache_n == 0 and after.prompt_n > first.prompt_n, after
        record_property("no_carry", f"next turn prompt_n {after.prompt_n} ({after.prompt_ms:.0f} ms)")
    finally:
        serving.shutdown()


def _complete(serving: Serving, ids: list[int]) -> dict[str, Any]:
    """One turn sent as token ids (the tiny model has no chat template): its ``timings``."""
    body = json.dumps({"prompt": ids, "n_predict": 1, "cache_prompt": True}).encode()
    req = urllib.request.Request(f"{serving.base_url}/completion", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        timings: dict[str, Any] = json.loads(r.read())["timings"]
    return timings


def test_a_restored_cache_on_a_sliding_window_model_is_used_or_found_out_said_and_not_saved_again(
        tmp_path: Path, real_engine: RealEngine) -> None:
    """Issue 36, measured at 24 GB on Gemma 4 31B: mainline b11434 reads the whole conversation again after a
    restore into a model with sliding-window layers, even a turn that continues it exactly; BeeLlama (0.1.2, 0.4.3)
    uses it. The same here with a small real Gemma 3 on the CPU. Where the engine uses it, the next turn reads only
    the new tokens and nothing more is said; where it does not, the turn's own figures show it, the user is told,
    and the next switch neither saves it nor promises it (its forecast says why before the click)."""
    from beedeck.core.engine.caps import Generation
    from beedeck.core.serving.slot_carry import SWA_REREAD
    from tests.fixtures.meta_gguf import tiny_swa_model

    carry = SlotCarry(tmp_path / "slots", known_rules=False)  # what the engine does, measured here
    serving = Serving(ServingParts(costs=SwitchCosts(tmp_path / "times.json"), restart_steps=carry,
                                   default_port=free_port()), jobs=Inline())
    serving.standby = False
    caps = real_engine.caps
    profile = LaunchSettings(target=str(tiny_swa_model(tmp_path / "swa.gguf")), spec_mode=Mode.BASELINE,
                             ctx_size=2048, threads=1, n_gpu_layers="0", kv_unified=True)
    conv = [300 + (i * 37) % 600 for i in range(400)]
    try:
        serving.start(str(real_engine.path), profile, caps)
        assert _complete(serving, conv)["prompt_n"] == 400
        more = _complete(serving, conv := conv + [500] * 8)
        assert more["cache_n"] == 400 and more["prompt_n"] == 8  # one server: the cache is used
        serving.restart(settings_for_mode(profile, Mode.MODEL_FREE, caps))
        assert carry.last is not None and carry.last.kind == "restored" and carry.last.tokens == 408
        after = _complete(serving, conv := conv + [600] * 8)  # continues the restored tokens exactly
        said = serving.reply_read(after["prompt_n"], after["cache_n"])
        why, _ = serving.keeps_conversation(settings_for_mode(profile, Mode.BASELINE, caps))
        if caps.generation != Generation.MAINLINE:  # BeeLlama: the conversation comes along
            assert after["cache_n"] == 408 and after["prompt_n"] == 8, after
            assert said == "" and why == "", (said, why)
            return
        assert after["cache_n"] == 0 and after["prompt_n"] == 416, after  # the engine read it all again
        assert said.startswith("the engine did not use the conversation's cache restored at the switch: this reply "
                               "read all 416 tokens again"), said
        assert why.startswith("the engine did not use the cache restored at the last switch"), why
        serving.restart(settings_for_mode(profile, Mode.BASELINE, caps))
        assert carry.last is not None and carry.last.kind == "unavailable" and not list((tmp_path / "slots").glob("*.bin"))
        # The rule BeeDeck ships says so before the first switch: the launch plan saw the sliding window.
        carry.known_rules = True
        why, _ = serving.keeps_conversation(settings_for_mode(profile, Mode.MODEL_FREE, caps))
        assert why == SWA_REREAD, why
    finally:
        serving.shutdown()
