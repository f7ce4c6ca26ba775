"""LlamaClient against a local server that speaks llama-server's SSE protocol (tests/fakes/sse_server.py)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck.core.engine.client import (
    ChatDelta,
    HTTPStatusError,
    LlamaClient,
    ReplyOverrun,
    ServerGone,
    Stalled,
    StreamTruncated,
    Timings,
    parse_prometheus,
    reply_deadline,
)
from beedeck.core.engine.client.answers import StreamedReply
from beedeck.core.engine.client.llama import token_cap
from tests.fakes.sse_server import (
    METRICS_SAMPLE,
    FakeLlamaServer,
    SSEScript,
    replay_chunks,
    script_from_capture,
)

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "engines"
MSG = [{"role": "user", "content": "hi"}]


@pytest.fixture
def fake() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(metrics_text=METRICS_SAMPLE) as srv:
        yield srv


def test_timings_from_real_capture() -> None:
    last = replay_chunks(FIXTURES / "mainline-b11434-cpu.chat-stream.sse")[-1]
    t = Timings.from_json(last["timings"])
    assert (t.cache_n, t.prompt_n, t.predicted_n) == (235, 5, 400)
    assert t.predicted_per_second == pytest.approx(70.08, abs=0.01)
    assert t.acceptance is None and t.draft_n == 0
    d = Timings.from_json({"predicted_n": 200, "draft_n": 120, "draft_n_accepted": 90})
    assert d.acceptance == pytest.approx(0.75)
    assert d.accepted_share == pytest.approx(0.45)


def test_streamed_chat_replays_real_capture(fake: FakeLlamaServer) -> None:
    capture = FIXTURES / "beellama-0.1-cuda.chat-stream.sse"
    fake.script = script_from_capture(capture)
    expected = "".join(
        (c["choices"][0]["delta"].get("content") or "") for c in replay_chunks(capture) if c.get("choices")
    )
    stream = LlamaClient(fake.base_url).stream_chat(MSG, max_tokens=400, temperature=0.0, seed=7)
    deltas = list(stream)
    assert all(isinstance(d, ChatDelta) for d in deltas)
    res = stream.result
    assert res.text == expected and len(expected) > 100
    assert res.finish_reason == "length"
    assert res.timings is not None and res.timings.predicted_n == 400
    assert res.usage is not None and res.usage["completion_tokens"] == 400
    assert res.model == "gemma-3-270m-q4_k_m.gguf"
    assert not res.cancelled and res.ttft_s is not None and res.ttft_s >= 0
    body = fake.requests[-1].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (400, 0.0, 7)
    assert "x-conversation-id" not in {k.lower() for k in fake.requests[-1].headers}


def test_reasoning_pings_and_draft_timings(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a", "b\u2028\u0085", "c"], reasoning_tokens=["think"], ping_every_tokens=1,
                            draft_n=10, draft_n_accepted=7)
    res = LlamaClient(fake.base_url).chat(MSG)
    assert (res.text, res.reasoning) == ("ab\u2028\u0085c", "think")  # raw U+2028 inside JSON stays one line
    assert res.timings is not None and res.timings.acceptance == pytest.approx(0.7)


def test_client_rate_matches_paced_server(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=[f"t{i}" for i in range(61)], rate=200.0)
    res = LlamaClient(fake.base_url).chat(MSG)
    assert res.client_tokens_per_s is not None
    assert res.client_tokens_per_s == pytest.approx(200.0, rel=0.15)


def test_cancel_while_read_is_blocked_returns_fast(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=[f"t{i}" for i in range(50)], stall_after=5)
    stream = LlamaClient(fake.base_url).stream_chat(MSG)
    got: list[ChatDelta] = []
    done = threading.Event()
    five = threading.Event()

    def consume() -> None:
        for d in stream:
            got.append(d)
            if len(got) == 5:
                five.set()
        done.set()

    worker = threading.Thread(target=consume)
    worker.start()
    assert fake.stalled.wait(5) and five.wait(5)  # the server is stalled and the client waits in recv()
    t0 = time.perf_counter()
    stream.cancel()
    assert done.wait(2)
    elapsed = time.perf_counter() - t0
    worker.join(2)
    assert elapsed < 0.1, f"cancel took {elapsed * 1000:.0f} ms"
    assert stream.result.cancelled and len(got) == 5
    fake.release_stall()
    assert fake.disconnected.wait(5)  # the server saw the client hang up: that is what stops generation


def test_cancel_before_start_sends_nothing(fake: FakeLlamaServer) -> None:
    stream = LlamaClient(fake.base_url).stream_chat(MSG)
    stream.cancel()
    assert list(stream) == [] and stream.result.cancelled
    assert not [r for r in fake.requests if r.method == "POST"]


def test_cut_connection_is_server_gone(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a"] * 10, cut_after=3)
    with pytest.raises(ServerGone, match="broke in the middle of the reply"):
        LlamaClient(fake.base_url).chat(MSG)


def test_clean_end_without_done_is_truncated(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a"] * 4, end_without_done=True)
    with pytest.raises(StreamTruncated, match="ended early"):
        LlamaClient(fake.base_url).chat(MSG)


def test_in_stream_error_is_http_status_error(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a"] * 4, error_after=2, error_message="Invalid input batch.")
    with pytest.raises(HTTPStatusError, match="Invalid input batch") as info:
        LlamaClient(fake.base_url).chat(MSG)
    assert info.value.status == 500 and info.value.err_type == "server_error"


def test_http_errors_are_parsed(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(status=400, error_message="the request exceeds the available context size",
                            error_type="exceed_context_size_error")
    with pytest.raises(HTTPStatusError) as info:
        LlamaClient(fake.base_url).chat(MSG)
    assert (info.value.status, info.value.err_type) == (400, "exceed_context_size_error")
    assert "longer than the server's context" in str(info.value) and "raise Context in Settings" in str(info.value)


def test_a_stream_that_goes_silent_after_it_began_is_given_up(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a"] * 10, stall_after=3)
    stream = LlamaClient(fake.base_url).stream_chat(MSG, stall_s=0.5)
    got: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(Stalled, match="sent nothing for 0.5 s in the middle of the reply: it looks hung"):
        for delta in stream:
            got.append(delta.content)
    assert got == ["a"] * 3 and time.monotonic() - t0 < 5
    assert stream.result.text == "aaa"  # what arrived is kept for the caller


def test_a_slow_first_token_is_not_a_stall(fake: FakeLlamaServer) -> None:
    """The stall clock starts at the first token: a long prompt may take minutes before it."""
    fake.script = SSEScript(tokens=["a"] * 3, first_token_delay=1.5)
    result = LlamaClient(fake.base_url).chat(MSG, stall_s=0.5)
    assert result.text == "aaa"


def test_wrong_api_key_says_so(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(api_key="right-key")
    with pytest.raises(HTTPStatusError, match="API key is wrong") as info:
        LlamaClient(fake.base_url, api_key="wrong-key").chat(MSG)
    assert info.value.status == 401
    assert "wrong-key" not in str(info.value) and "right-key" not in str(info.value)
    assert LlamaClient(fake.base_url, api_key="right-key").chat(MSG).text
    assert fake.requests[-1].headers["Authorization"] == "Bearer right-key"
    assert "right-key" not in repr(LlamaClient(fake.base_url, api_key="right-key"))


def test_nothing_listening_is_server_gone() -> None:
    with FakeLlamaServer() as srv:
        url = srv.base_url
    client = LlamaClient(url)
    with pytest.raises(ServerGone, match="not running"):
        client.chat(MSG)
    with pytest.raises(ServerGone):
        client.health()


def test_status_routes(fake: FakeLlamaServer) -> None:
    client = LlamaClient(fake.base_url)
    assert client.health() == 200
    fake.health_status = 503
    assert client.health() == 503
    m = client.metrics()
    assert m["spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"}"] == 50
    assert m["predicted_tokens_seconds"] == pytest.approx(522.75)
    assert client.props()["total_slots"] == 1
    assert client.slots()[0]["n_ctx"] == 4096
    fake.metrics_text = None
    with pytest.raises(HTTPStatusError, match="--metrics"):
        client.metrics()


def test_parse_prometheus_skips_comments_and_junk() -> None:
    parsed = parse_prometheus("# HELP x y\nllamacpp:a 1\nb{l=\"v\"} 2.5\nbroken line here\n\n")
    assert parsed == {"a": 1.0, "b{l=\"v\"}": 2.5}


class _Blocks:
    """A response whose body is ``blocks``, each arriving ``gap_s`` after the previous (a fake clock)."""

    def __init__(self, blocks: list[bytes], gap_s: float, clock: list[float]) -> None:
        self.blocks, self.gap_s, self.clock = blocks, gap_s, clock

    def iter_bytes(self) -> Iterator[bytes]:
        for block in self.blocks:
            self.clock[0] += self.gap_s
            yield block


def _read(gap_s: float, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], int]:
    from beedeck.core.engine.client import llama

    clock, pauses = [100.0], []
    monkeypatch.setattr(llama.time, "monotonic", lambda: clock[0])

    def sleep(s: float) -> None:
        pauses.append(s)
        clock[0] += s

    monkeypatch.setattr(llama.time, "sleep", sleep)
    blocks = [f'data: {{"n": {i}}}\n\n'.encode() for i in range(200)]
    lines = list(llama._sse_lines(_Blocks(blocks, gap_s, clock)))  # type: ignore[arg-type]
    return [x for x in lines if x], len(pauses)


def test_a_fast_stream_is_read_in_batches_a_slow_one_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 tokens/s (a chunk every 0.1 ms): the reader pauses so that the next chunks gather, about
    once per READ_COALESCE_S of stream, not once per chunk; at 100 tokens/s it never waits. Nothing is
    lost or reordered either way."""
    from beedeck.core.engine.client import llama

    fast, fast_pauses = _read(0.0001, monkeypatch)
    slow, slow_pauses = _read(0.01, monkeypatch)
    expected = [f'data: {{"n": {i}}}' for i in range(200)]
    assert fast == expected and slow == expected
    assert slow_pauses == 0
    # 200 chunks over 20 ms of stream, plus the pauses themselves: far fewer pauses than chunks.
    assert 1 <= fast_pauses <= 200 * 0.0001 / llama.READ_COALESCE_S + 2


def test_timings_that_cannot_be_true_are_refused_with_the_reason(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a", "b", "c"], rate=100, timings={"draft_n": 3, "draft_n_accepted": 7},
                            draft_n=3, draft_n_accepted=2)
    res = LlamaClient(fake.base_url).chat(MSG)
    assert res.text == "abc" and res.timings is None
    assert res.timings_rejected == "the server's timings cannot be true (draft_n_accepted 7 is more than draft_n 3)"
    assert res.client_tokens_per_s is not None and 0 < res.client_tokens_per_s < 1000  # the client's own clock


def test_a_reply_past_its_max_tokens_is_ended_with_what_arrived_kept(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["bee "], repeat=True)
    stream = LlamaClient(fake.base_url).stream_chat(MSG, max_tokens=100)
    got: list[ChatDelta] = []
    with pytest.raises(ReplyOverrun, match=r"past the reply's cap of 100 tokens \(117 pieces arrived\)"):
        got.extend(stream)
    assert len(got) == 117 == token_cap(100) + 1 and stream.result.text == "bee " * 117 and stream.result.cancelled
    assert fake.disconnected.wait(5)  # hung up: a real server stops generating
    assert token_cap(50) == 66 and token_cap(2048) == 2176  # a margin of 16 tokens or a sixteenth


def test_a_reply_of_pieces_too_long_for_its_tokens_is_ended(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["x" * 200_000], repeat=True)
    with pytest.raises(ReplyOverrun, match="200,000 characters arrived, more than 66 tokens can hold"):
        LlamaClient(fake.base_url).chat(MSG, max_tokens=50)


def test_the_overall_deadline_ends_a_reply_that_trickles(fake: FakeLlamaServer) -> None:
    fake.script = SSEScript(tokens=["a"], repeat=True, rate=20, ping_every_tokens=1)
    t0 = time.monotonic()
    with pytest.raises(ReplyOverrun, match="went on for more than 1 s, BeeDeck's limit for a reply of up to 5,000"):
        LlamaClient(fake.base_url).chat(MSG, max_tokens=5000, deadline_s=1.0)
    assert 1.0 <= time.monotonic() - t0 < 3.0
    assert reply_deadline(None) is None and reply_deadline(2048) == 600 + 2 * 2048


def test_an_in_stream_error_with_a_code_that_is_no_status_is_500() -> None:
    with pytest.raises(HTTPStatusError) as info:
        list(StreamedReply().take({"error": {"code": math.nan, "message": "boom"}}))
    assert info.value.status == 500 and "boom" in str(info.value)


READS = [(3076, 0, 0, 0.0), (3076, 0, 1024, 6939.0), (3076, 0, 2048, 15521.0), (3076, 0, 3076, 26064.0)]


def test_the_prompts_progress_comes_as_deltas_and_is_no_token(fake: FakeLlamaServer) -> None:
    """Asked with ``return_progress`` (as the chat pane asks), llama-server says how far it has read the prompt
    before the first token (issue 37: 13 s of nothing after a long reply). Those deltas carry no text, start no
    stall clock (a slow prompt is not a hung reply) and leave the reply's figures alone."""
    fake.script = SSEScript(tokens=["a"] * 3, first_token_delay=2.8, prompt_reads=READS)  # 0.7 s apart: > stall_s
    stream = LlamaClient(fake.base_url).stream_chat(MSG, extra={"return_progress": True}, stall_s=0.5)
    deltas = list(stream)
    progress = [d.progress for d in deltas if d.progress is not None]
    assert [(p.total, p.cache, p.processed, p.time_ms) for p in progress] == READS
    assert progress[1].to_read == 3076 and progress[1].read == 1024
    assert all(d.content == d.reasoning == "" for d in deltas if d.progress is not None)
    result = stream.result
    assert result.text == "aaa" and result.timings is not None and result.timings.predicted_n == 3
    assert fake.requests[-1].body["return_progress"] is True
    # A server that says nothing of it (not asked, or an older build): only the text
    fake.script = SSEScript(tokens=["a"] * 3, prompt_reads=READS)
    assert all(d.progress is None for d in LlamaClient(fake.base_url).stream_chat(MSG))
    # Numbers that cannot be true are left out, the reply goes on
    fake.script = SSEScript(tokens=["a"] * 2, prompt_reads=[(10, 20, 5, 1.0), (10, 2, 5, -1.0), (10, 2, 11, 1.0)])
    stream = LlamaClient(fake.base_url).stream_chat(MSG, extra={"return_progress": True})
    assert [d.progress for d in stream if d.progress is not None] == [] and stream.result.text == "aa"
