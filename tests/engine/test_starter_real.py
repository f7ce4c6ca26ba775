"""The starter's first hour on the real engine: SmolLM2-135M with the starter profile's sampling
(core/starter.py STARTER_SAMPLING: DRY without sequence breakers, over the whole context) ends its
replies on its own, where at the model card's sampling alone it ran to the 2,048-token cap on all three
of the guide's coding prompts (measured: benchmarks/starter_loops.py), and the prompt chips it offers
get whole answers."""

from __future__ import annotations

import json

import pytest

from beedeck.core.engine.client import LlamaClient
from beedeck.core.starter import STARTER_PROMPTS
from tests.conftest import FIXTURES

from .conftest import StartServer

pytestmark = pytest.mark.engine

CAP = 2048  # the cap the replies ran into
GUIDE = {p["id"]: p["text"] for p in json.loads((FIXTURES / "seed-bench-prompts.json").read_text())["prompts"]}


@pytest.mark.timeout(300)
def test_the_starters_reply_to_a_guide_coding_prompt_ends_on_its_own(start_server: StartServer) -> None:
    proc = start_server()
    proc.wait_ready(120)
    client = LlamaClient(proc.base_url)
    # As the chat asks: no sampling fields in the request, the profile's are the server's defaults.
    stream = client.stream_chat([{"role": "user", "content": GUIDE["linked-list"]}], max_tokens=CAP, seed=1)
    for _ in stream:
        pass
    r = stream.result
    assert r.timings is not None
    print(f"linked-list: {r.timings.predicted_n} tokens, finish {r.finish_reason}")
    assert r.finish_reason == "stop" and r.timings.predicted_n < CAP, r.text[-400:]
    assert "class" in r.text  # an answer to the question, not an empty stop


@pytest.mark.timeout(300)
def test_the_prompt_chips_get_whole_answers(start_server: StartServer) -> None:
    proc = start_server()
    proc.wait_ready(120)
    client = LlamaClient(proc.base_url)
    for label, prompt in STARTER_PROMPTS:
        stream = client.stream_chat([{"role": "user", "content": prompt}], max_tokens=512, seed=1)
        for _ in stream:
            pass
        r = stream.result
        assert r.timings is not None
        print(f"{label}: {r.timings.predicted_n} tokens, finish {r.finish_reason}")
        assert r.finish_reason == "stop" and len(r.text.split()) >= 5, (label, r.text[-300:])
