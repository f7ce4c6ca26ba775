"""Issue 37's claims that depend on the engine, on the real starter engine (mainline llama.cpp b11434,
SmolLM2-135M, the starter profile's sampling): N-gram answers a prompt chip as the chat asks it and drafts
nothing (the tester's "0 draft tokens over 735 chat tokens"); the speed dock then says "drafted nothing"
instead of a ratio (it showed "N-gram 45.6 tok/s · ×1.30"), and the guard says so after three such
replies, with no percentage. The one-run benchmark case on a real engine: tests/engine/test_bench_real.py."""

from __future__ import annotations

import pytest

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.chat.speed import ModeFigures
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.spec_guard import SpecGuard, classify_prompt
from beedeck.core.starter import STARTER_PROMPTS

from .conftest import StartServer

pytestmark = pytest.mark.engine


def _ask(client: LlamaClient, prompt: str, seed: int, mode: str) -> ReplyFacts:
    stream = client.stream_chat([{"role": "user", "content": prompt}], max_tokens=160, seed=seed)  # as the chat asks
    for _ in stream:
        pass
    return ReplyFacts.from_result(stream.result, Mode.MODEL_FREE if mode == Mode.MODEL_FREE else Mode.BASELINE)


@pytest.mark.timeout(420)
def test_the_starters_n_gram_drafts_nothing_and_the_dock_and_the_guard_say_so(start_server: StartServer) -> None:
    base = start_server()
    base.wait_ready(120)
    ngram = start_server(spec_mode=Mode.MODEL_FREE)  # the starter's N-gram: ngram-mod, the engine's defaults
    ngram.wait_ready(120)
    assert "ngram-mod" in ngram.argv
    figures, guard = ModeFigures(), SpecGuard(confirm=3)
    b = _ask(LlamaClient(base.base_url), STARTER_PROMPTS[0][1], 1, Mode.BASELINE)
    assert b.tps and b.tokens
    figures.record(Mode.BASELINE, b.tps, drafted=b.draft_n)
    told = None
    # The three chips, one reply each, as a new user tries them (all three are code to the guard). The same
    # prompt asked again would draft: ngram-mod remembers the server's earlier replies.
    for _label, prompt in STARTER_PROMPTS:
        assert classify_prompt(prompt) == "code"
        facts = _ask(LlamaClient(ngram.base_url), prompt, 1, Mode.MODEL_FREE)
        assert facts.tps and facts.tokens and facts.tokens > 20  # a whole answer, not an empty reply
        assert facts.draft_n == 0, f"N-gram drafted {facts.draft_n} tokens here: the starter's note is wrong now"
        figures.record(Mode.MODEL_FREE, facts.tps, drafted=facts.draft_n)
        lines = figures.lines()
        assert lines[-1] == f"N-gram {facts.tps:.1f} tok/s (last reply) · drafted nothing" and "×" not in "".join(lines)
        told = guard.observe(Mode.MODEL_FREE, facts.tps, classify_prompt(prompt), facts.draft_n) or told
    assert told is not None and told.comparison is None
    assert told.message.startswith("N-gram drafted nothing in your last 3 code replies") and "%" not in told.message
