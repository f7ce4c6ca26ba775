"""LlamaClient and the CLI against the real mainline llama-server with Gemma 3 270M (CPU)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from beedeck.cli import main
from beedeck.core.engine.client import ChatDelta, LlamaClient, ServerGone
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerState

from .conftest import StartServer

pytestmark = pytest.mark.engine

HELLO = [{"role": "user", "content": "Write a short poem about the sea."}]
LIST_PROMPT = (
    "Repeat this list exactly, three times:\n"
    "apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, nectarine\n"
    "apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, nectarine\n"
    "apple, banana, cherry, date, elderberry, fig, grape, honeydew, kiwi, lemon, mango, nectarine\n"
)


def test_streamed_chat_with_timings(start_server: StartServer) -> None:
    proc = start_server()
    proc.wait_ready(120)
    client = LlamaClient(proc.base_url)
    assert client.health() == 200
    stream = client.stream_chat(HELLO, max_tokens=48, temperature=0.0, seed=1)
    deltas = list(stream)
    res = stream.result
    assert deltas and all(isinstance(d, ChatDelta) for d in deltas)
    assert res.text == "".join(d.content for d in deltas) and res.text.strip()
    assert res.finish_reason in ("length", "stop")
    t = res.timings
    assert t is not None and res.usage is not None
    assert t.predicted_n == res.usage["completion_tokens"]
    assert 0 < t.predicted_n <= 48 and t.prompt_n > 0 and t.predicted_per_second > 0
    assert res.ttft_s is not None and res.ttft_s > 0
    assert res.client_tokens_per_s is not None and res.client_tokens_per_s > 0
    m = client.metrics()
    assert m["tokens_predicted_total"] >= t.predicted_n
    assert client.props()["total_slots"] == 1
    assert client.slots()[0]["n_ctx"] == 8192


def test_cancel_mid_stream_is_fast_and_frees_the_slot(start_server: StartServer) -> None:
    lines: list[str] = []
    proc = start_server(on_line=lines.append)
    proc.wait_ready(120)
    client = LlamaClient(proc.base_url)
    stream = client.stream_chat(HELLO, max_tokens=3000, temperature=0.0)
    got: list[ChatDelta] = []
    some = threading.Event()
    done = threading.Event()

    def consume() -> None:
        for d in stream:
            got.append(d)
            if len(got) == 5:
                some.set()
        done.set()

    worker = threading.Thread(target=consume)
    worker.start()
    assert some.wait(60)
    t0 = time.perf_counter()
    stream.cancel()
    assert done.wait(5)
    elapsed = time.perf_counter() - t0
    worker.join(5)
    assert elapsed < 0.1, f"cancel took {elapsed * 1000:.0f} ms"
    assert stream.result.cancelled and stream.result.finish_reason is None
    # The server noticed the hang-up and freed the slot: the next request is served at once.
    res = client.chat(HELLO, max_tokens=8, temperature=0.0)
    assert res.timings is not None and res.timings.predicted_n > 0
    assert any("cancel task" in x for x in lines)


def test_server_killed_mid_stream_then_clean_restart(start_server: StartServer) -> None:
    proc = start_server()
    proc.wait_ready(120)
    stream = LlamaClient(proc.base_url).stream_chat(HELLO, max_tokens=3000, temperature=0.0)
    with pytest.raises(ServerGone, match="broke in the middle of the reply"):
        for i, _ in enumerate(stream):
            if i == 3:
                assert proc.pid is not None
                os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait_exit(10) is not None
    assert proc.state == ServerState.FAILED and proc.failure is not None
    assert proc.failure.code == "crashed_signal" and "SIGKILL" in proc.failure.message
    again = start_server()
    again.wait_ready(120)
    assert again.pid != proc.pid
    assert LlamaClient(again.base_url).chat(HELLO, max_tokens=8).text


def test_ngram_mod_drafts_on_a_repetitive_prompt(start_server: StartServer) -> None:
    proc = start_server(spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-mod")
    proc.wait_ready(120)
    assert "--spec-type" in proc.argv and "ngram-mod" in proc.argv
    client = LlamaClient(proc.base_url)
    # The engine's drafting, at neutral sampling: the starter profile's anti-loop penalties (DRY across
    # lines, a repeat penalty) make the model avoid copying the list, and no n-gram then matches.
    res = client.chat([{"role": "user", "content": LIST_PROMPT}], max_tokens=200, temperature=0.0, seed=3,
                      extra={"dry_multiplier": 0.0, "repeat_penalty": 1.0})
    m = client.metrics()
    t = res.timings
    assert t is not None
    assert t.draft_n > 0 and 0 <= t.draft_n_accepted <= t.draft_n, (t, res.text[:300])
    assert m["spec_decode_num_draft_tokens_total"] >= t.draft_n
    assert m["spec_decode_num_accepted_tokens_total"] == t.draft_n_accepted


def test_cli_chat_hello_end_to_end(capsys: pytest.CaptureFixture[str], beedeck_home: Path) -> None:
    rc = main(["chat", "hello", "--max-tokens", "16", "--temperature", "0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "tok/s seen by the client" in out and "by the server" in out and "time to first token" in out
    assert "ready in" in err
    assert not (beedeck_home / "state" / "server.pid").exists()  # the server it started is gone


def test_cli_serve_exit_when_ready(capsys: pytest.CaptureFixture[str], beedeck_home: Path) -> None:
    rc = main(["serve", "--exit-when-ready"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.startswith("running: ") and "--jinja" in out and "ready in" in out
    assert not (beedeck_home / "state" / "server.pid").exists()
    rc = main(["serve", "--print-argv", "--ctx", "2048"])
    out, _ = capsys.readouterr()
    assert rc == 0 and "--ctx-size 2048" in out


def test_cli_takes_the_forms_launch_settings(capsys: pytest.CaptureFixture[str]) -> None:
    """Headless parity: the settings that matter for the engine cases reach the argv from the CLI."""
    rc = main(["serve", "--print-argv", "--ctx", "8192", "--cache-type-k", "q8_0", "--cache-type-v", "q8_0",
               "--flash-attn", "on", "--no-kv-unified", "--threads", "1", "--gpu-layers", "0"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    for flag in ("--ctx-size 8192", "--cache-type-k q8_0", "--cache-type-v q8_0", "--flash-attn on",
                 "--no-kv-unified", "-t 1", "-ngl 0"):
        assert flag in out, (flag, out)
    rc = main(["serve", "--print-argv", "--spec", "ngram-mod", "--draft-max", "7"])
    out, _ = capsys.readouterr()
    assert rc == 0 and "--spec-type ngram-mod" in out and "--spec-draft-n-max 7" in out
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    out, _ = capsys.readouterr()
    assert "--cache-type-k" in out and "--kv-unified" in out and "--in-server-baseline" in out


def test_the_server_says_how_far_it_has_read_a_long_prompt(start_server: StartServer) -> None:
    """llama-server's prompt_progress, as the chat pane asks for it (issue 37: the wait before the first token of a
    long conversation is said): the prompt's size at once, what it kept from the last request, the whole read."""
    proc = start_server()
    proc.wait_ready(120)
    client = LlamaClient(proc.base_url)
    code = "\n".join(f"def f{i}(x):\n    return x * {i} + {3 * i}" for i in range(40))
    messages = [{"role": "user", "content": f"What does f7 return for 2?\n{code}"}]
    stream = client.stream_chat(messages, max_tokens=4, temperature=0.0, extra={"return_progress": True})
    deltas = list(stream)
    progress = [d.progress for d in deltas if d.progress is not None]
    first_text = next(i for i, d in enumerate(deltas) if d.content)
    assert progress and all(d.progress is None for d in deltas[first_text:])  # all of it before the first token
    assert progress[0].total >= 500 and progress[0].processed == progress[0].cache
    assert progress[-1].processed == progress[-1].total and progress[-1].read == progress[-1].to_read
    assert stream.result.timings is not None and stream.result.timings.prompt_n == progress[-1].to_read
    again = client.stream_chat(messages + [{"role": "assistant", "content": stream.result.text},
                                           {"role": "user", "content": "And for 3?"}],
                               max_tokens=4, temperature=0.0, extra={"return_progress": True})
    kept = [d.progress for d in again if d.progress is not None]
    assert kept[0].cache >= progress[-1].total - 8  # the conversation so far was kept: only the new part is read
