"""Real MTP speculative decoding (``--spec-type draft-mtp``) on the CPU mainline llama-server.

The synthetic ``qwen35`` target (tests/fixtures/synth_mtp.py) carries its own MTP block; no draft
file is passed. The sticky target answers every ChatML prompt with " bee bee ..." and its MTP head
always proposes the token it was given, so every drafted token must be accepted. The random target
and head write varied text that the head almost never predicts: the text must still be the same as
plain decoding. A target without MTP layers must make the server exit with the engine's own lines.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PERSISTENT
from tests.fixtures import llama_server
from tests.fixtures import synth_gguf as sg
from tests.fixtures import synth_mtp as sm
from tests.fixtures.llama_server import START_TIMEOUT_S, Server, free_port, metrics, post_chat

pytestmark = pytest.mark.engine

SYNTH = PERSISTENT / "synth"
N_TOKENS = 64
# One thread, as in test_dflash_real.py: on 2 busy shared cores a second ggml thread stalls the barrier.
COMMON_ARGS = [
    "-c", "4096", "-np", "1", "--flash-attn", "auto", "--metrics", "--no-webui", "-s", "7", "-t", "1", "-tb", "1",
]  # fmt: skip
MTP = ["--spec-type", "draft-mtp"]  # the head is inside the target: no --spec-draft-model

# What b11434 logs when draft-mtp meets a model without MTP layers (src/llama-context.cpp:3886,
# common/speculative.cpp:2645, tools/server/server-context.cpp:1258, tools/server/server.cpp:491).
NO_MTP_LINES = (
    "W llama_init_from_model: context type MTP requested but model doesn't contain MTP layers",
    "E common_speculative_init_result: failed to create MTP context",
    "E srv    load_model: failed to create MTP context",
    "E srv  llama_server: exiting due to model loading error",
)
# Logged earlier by the memory fit (common/fit.cpp:227), for the same reason.
NO_MTP_FIT_LINE = (
    "W operator(): failed to measure the memory of the extra model, fitting without it: "
    "failed to create llama_context from model"
)


def _args(model: Path, port: int, extra: Sequence[str]) -> list[str]:
    return ["-m", str(model), "--host", "127.0.0.1", "--port", str(port), *COMMON_ARGS, *extra]


@contextmanager
def serving(engine: Path, model: Path, log: Path, extra: Sequence[str] = ()) -> Iterator[Server]:
    """llama-server on ``model`` with ``extra`` arguments, healthy, always stopped on exit."""
    port = free_port()
    with llama_server.serving(engine, _args(model, port, extra), port, log) as server:
        yield server


def chat(
    server: Server, prompt: str, n_tokens: int = N_TOKENS, *, ignore_eos: bool = False
) -> tuple[str, dict[str, Any]]:
    """One greedy chat reply: its text and ``timings``."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": n_tokens,
        "temperature": 0.0,
        "top_k": 1,
        "seed": 7,
        "ignore_eos": ignore_eos,
    }
    reply = post_chat(server, body)
    assert "timings" in reply, reply
    return str(reply["choices"][0]["message"]["content"]), dict(reply["timings"])


@pytest.fixture(scope="module")
def sticky_target() -> Path:
    return sm.cached_mtp_target(SYNTH, sticky=True)


@pytest.fixture(scope="module")
def base_server(
    starter_engine_path: Path, sticky_target: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    with serving(
        starter_engine_path, sticky_target, tmp_path_factory.mktemp("base") / "server.log"
    ) as server:
        yield server


@pytest.fixture(scope="module")
def mtp_server(
    starter_engine_path: Path, sticky_target: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("mtp") / "server.log"
    with serving(starter_engine_path, sticky_target, log, MTP) as server:
        yield server


def test_sticky_mtp_drafts_are_all_accepted(mtp_server: Server, record_property: Any) -> None:
    text, timings = chat(mtp_server, "Say hello to the deck.")
    assert timings["predicted_n"] == N_TOKENS
    assert text.split() == ["bee"] * N_TOKENS
    assert timings["draft_n"] > 0
    assert timings["draft_n_accepted"] == timings["draft_n"], timings
    # --spec-draft-n-max defaults to 3: each step drafts 3 and keeps them plus the target's own
    # token, so about 3/4 of the reply was drafted (47 of 64 measured: the first token has no draft).
    assert timings["draft_n"] >= 0.7 * N_TOKENS, timings
    record_property("mtp_sticky", f"{timings['draft_n_accepted']}/{timings['draft_n']} accepted")

    log = mtp_server.wait_log("draft acceptance = ")
    assert "common_speculative_init_result: creating MTP draft context against the target model" in log
    assert "draft acceptance = 1.00000" in log, mtp_server.log_tail()

    m = metrics(mtp_server)
    drafted = m["llamacpp:spec_decode_num_draft_tokens_total"]
    assert drafted >= timings["draft_n"]
    assert m["llamacpp:spec_decode_num_accepted_tokens_total"] == drafted


def test_greedy_text_is_identical_with_and_without_mtp(base_server: Server, mtp_server: Server) -> None:
    for prompt in ("Write python code.", "hello"):
        base, tb = chat(base_server, prompt)
        assert base.split() == ["bee"] * N_TOKENS  # the sticky target itself, no speculation involved
        assert tb.get("draft_n", 0) == 0, tb  # an MTP model drafts only when asked (--spec-type)
        text, tm = chat(mtp_server, prompt)
        assert text == base
        assert tm["draft_n"] > 0 and tm["draft_n_accepted"] == tm["draft_n"], tm


def test_longer_mtp_drafts_from_the_single_head(
    starter_engine_path: Path, sticky_target: Path, tmp_path: Path
) -> None:
    # qwen35 has one MTP block; draft-mtp runs it autoregressively up to --spec-draft-n-max tokens.
    extra = [*MTP, "--spec-draft-n-max", "8", "--spec-draft-n-min", "1"]
    with serving(starter_engine_path, sticky_target, tmp_path / "server.log", extra) as server:
        text, timings = chat(server, "hello")
    assert text.split() == ["bee"] * N_TOKENS
    assert timings["draft_n_accepted"] == timings["draft_n"] >= 0.8 * N_TOKENS, timings


def test_random_target_text_is_identical_with_and_without_mtp(
    starter_engine_path: Path, tmp_path: Path, record_property: Any
) -> None:
    # Random trunk (3 gated-delta-net layers + 1 attention layer) and random head: every token is
    # decided by the target's batched verification and the recurrent-state rollback.
    target = sm.cached_mtp_target(SYNTH, sticky=False)
    drafted = accepted = 0
    with (
        serving(starter_engine_path, target, tmp_path / "base.log") as base,
        serving(starter_engine_path, target, tmp_path / "mtp.log", MTP) as mtp,
    ):
        for prompt in ("Write python code.", "hello", "Say hello to the deck."):
            # A random model may pick an end token first: ignore it so every reply has N_TOKENS.
            text, tb = chat(base, prompt, ignore_eos=True)
            spec_text, tm = chat(mtp, prompt, ignore_eos=True)
            assert tb["predicted_n"] == tm["predicted_n"] == N_TOKENS
            assert tm["draft_n"] > 0
            assert spec_text == text
            drafted += tm["draft_n"]
            accepted += tm["draft_n_accepted"]
    record_property("mtp_random", f"{accepted}/{drafted} accepted")
    assert accepted < 0.5 * drafted, (accepted, drafted)


@pytest.mark.parametrize("kind", ["llama", "qwen35-without-head"])
def test_draft_mtp_on_a_target_without_mtp_layers_exits(
    starter_engine_path: Path, kind: str, tmp_path: Path
) -> None:
    if kind == "llama":
        model = sg.cached_target(SYNTH, sticky=True)
    else:
        model = sm.cached_mtp_target(SYNTH, sticky=True, mtp=False)
    # The failure comes before the HTTP server listens; run() kills the process if it ever hangs.
    done = subprocess.run(
        [str(starter_engine_path), *_args(model, free_port(), MTP)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=START_TIMEOUT_S,
    )
    log = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 1, log[-2000:]
    lines = [line.split(" ", 1)[1] for line in log.splitlines() if " " in line]  # drop the timestamps
    for want in (*NO_MTP_LINES, NO_MTP_FIT_LINE):
        assert want in lines, f"{want!r} missing:\n{log[-2000:]}"
    assert lines.index(NO_MTP_LINES[0]) < lines.index(NO_MTP_LINES[1]) < lines.index(NO_MTP_LINES[3])
