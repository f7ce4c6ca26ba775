"""A tool call the MODEL generates under speculation comes out identical to speculation off: the
speculative decode path of a tool call (what llama.cpp #27296 corrupts), on each engine family.

The target is a scripted synthetic model (tests/fixtures/synth_script.py): at temperature 0 it writes
``<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>`` after any ChatML
generation prompt, so the engine's own tool-call parser (``--jinja``, tests/fixtures/tools-chatml.jinja)
turns it into ``tool_calls`` / ``tool_use``. Per engine and mode, one server answers:

- OpenAI ``/v1/chat/completions`` with the tools: the generated call (parsed ``tool_calls``);
- the raw text of the same turn: ``/apply-template`` then ``/completion`` (no parser in between);
- the same request streamed, the call put together from its deltas as an agent does (speculation
  emits several tokens a step, so the streaming parser meets other partial texts);
- the next turn, with that call and its result in the history (the call is generated again; the
  history now holds its tokens, so n-gram speculation drafts it whole);
- Anthropic ``/v1/messages`` with the tools: the generated ``tool_use`` block;
- a schema whose enum lacks "Paris": the engine's tool-call grammar then overrides the model inside
  the call (the reply names Tokyo), so the drafts, which follow the model, are rejected under the
  grammar: the rollback path of a constrained speculative decode.

Everything but ids and clocks must be byte-identical to the same engine with speculation off, and the
speculative runs must have drafted and accepted tokens (the replies' ``timings``), or nothing was
exercised. Modes: DFlash (a sticky draft proposing one token of the call: one accepted token per call),
every model-free type the engine runs that the known-issue table does not refuse (the n-gram types with a
lookup short enough for an 8-token call; the engine's default pick must accept drafts), MTP where the
engine runs it (the scripted ``qwen35`` target's head predicts the script). This sweep found BeeLlama
0.1.2's runaway at a minimum draft of 0 (ngram-cache cut the call's arguments to ``{"city":``, suffix and
recycle aborted): BeeDeck passes ``--spec-draft-n-min 1`` there (core/engine/argv/spec.py).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.known_issues import refused_spec_types
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import pick_model_free_type
from beedeck.core.launcher import launch
from tests.engine import test_toolcalls_spec_real as supplied  # the supplied-call round trips: their helpers
from tests.engine.conftest import RealEngine
from tests.engine.procs import pid_alive
from tests.fixtures import synth_script as ss

pytestmark = pytest.mark.engine
post, strip = supplied._post, supplied._strip

GREEDY = {"temperature": 0.0, "top_k": 1, "seed": 7}  # no ignore_eos: the call ends at <|im_end|>
MAX_TOKENS = 24  # the call is 8 tokens
RESULT = '{"sky": "clear", "celsius": 21}'
STEERED_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Berlin", "Tokyo"]}},
                   "required": ["city"], "additionalProperties": False}}}
# The n-gram types' defaults (ngram-mod: a 24-token lookup and drafts of at least 48; ngram-simple: a
# 12-token lookup) never fire on an 8-token reply: a 2-token lookup, drafts of up to 8.
NGRAM_ARGS = {"ngram-mod": ["--spec-ngram-mod-n-match", "2", "--spec-ngram-mod-n-min", "1",
                            "--spec-ngram-mod-n-max", "8"],
              "ngram-simple": ["--spec-ngram-simple-size-n", "2", "--spec-ngram-simple-size-m", "8"],
              "ngram-map-k": ["--spec-ngram-map-k-size-n", "2", "--spec-ngram-map-k-size-m", "8"],
              "ngram-map-k4v": ["--spec-ngram-map-k4v-size-n", "2", "--spec-ngram-map-k4v-size-m", "8"]}


def _settings(target: Path, mode: Mode, draft: Path | None = None, free_type: str = "ngram-mod") -> LaunchSettings:
    extra = ["--chat-template-file", str(supplied.TEMPLATE)]
    if mode == Mode.MODEL_FREE:
        extra += NGRAM_ARGS.get(free_type, [])
    return LaunchSettings(target=str(target), draft=str(draft) if draft else None, spec_mode=mode, ctx_size=2048,
                          parallel=1, flash_attn="auto", draft_n_max=15 if mode != Mode.BASELINE else None,
                          threads=1, n_gpu_layers="0", draft_n_gpu_layers=None, jinja=True,
                          spec_model_free_type=free_type, extra_args=extra)


def _speculated(*replies: dict[str, Any]) -> tuple[int, int]:
    """(drafted, accepted) tokens over these replies, from their ``timings`` (0, 0 without speculation)."""
    timings = [r.get("timings") or {} for r in replies]
    return (sum(int(t.get("draft_n", 0)) for t in timings), sum(int(t.get("draft_n_accepted", 0)) for t in timings))


def _stream(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """A streamed chat reply put together as an agent does: content and each call's name and arguments
    from the deltas (the chunking itself may differ under speculation, several tokens a step)."""
    req = urllib.request.Request(base_url + "/v1/chat/completions", data=json.dumps({**body, "stream": True}).encode(),
                                 headers={"Content-Type": "application/json"})
    content, calls, finish = "", {}, None  # calls: index -> [name, arguments]
    with urllib.request.urlopen(req, timeout=240) as resp:
        for line in resp:
            data = line.decode().strip().removeprefix("data: ")
            if not data.startswith("{"):
                continue
            for choice in json.loads(data).get("choices", []):
                delta = choice.get("delta") or {}
                content += delta.get("content") or ""
                for tc in delta.get("tool_calls") or []:
                    call = calls.setdefault(tc.get("index", 0), ["", ""])
                    call[0] += (tc.get("function") or {}).get("name") or ""
                    call[1] += (tc.get("function") or {}).get("arguments") or ""
                finish = choice.get("finish_reason") or finish
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)], "finish_reason": finish}


def _args(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text  # cut short or corrupted: kept as written, for the assertion's message


def _call_of(message: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["function"]["name"], _args(c["function"]["arguments"])) for c in message.get("tool_calls") or []]


def generated_calls(base_url: str) -> tuple[dict[str, Any], tuple[int, int]]:
    """What the server generated for the tools requests (ids and clocks removed), and its speculation."""
    ask: list[dict[str, Any]] = [{"role": "user", "content": supplied.ASK}]
    chat = {"tools": [supplied.TOOL], "max_tokens": MAX_TOKENS, **GREEDY}
    first = post(base_url, "/v1/chat/completions", {"messages": ask, **chat})
    message = first["choices"][0]["message"]
    assert _call_of(message) == [(ss.CALL_NAME, ss.CALL_ARGUMENTS)], f"not the scripted call: {message}"
    prompt = post(base_url, "/apply-template", {"messages": ask, "tools": [supplied.TOOL]})["prompt"]
    raw = post(base_url, "/completion", {"prompt": prompt, "n_predict": MAX_TOKENS, "return_tokens": True, **GREEDY})
    assert raw["content"] == ss.CALL_TEXT, f"raw text of the call: {raw['content']!r}"
    # The ids it wrote are the text's own tokens (then <|im_end|>): what n-gram finds in a history.
    assert post(base_url, "/tokenize", {"content": raw["content"]})["tokens"] == raw["tokens"][:-1], raw
    streamed = _stream(base_url, {"messages": ask, **chat})
    assert [(n, _args(a)) for n, a in streamed["tool_calls"]] == _call_of(message), streamed
    call = {"id": "call_1", "type": "function", "function": message["tool_calls"][0]["function"]}
    turn = [*ask, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": RESULT}]
    second = post(base_url, "/v1/chat/completions", {"messages": turn, **chat})
    anthropic = post(base_url, "/v1/messages", {"model": "m", "max_tokens": MAX_TOKENS,
                                                "tools": [supplied.ANTHROPIC_TOOL], "messages": ask, **GREEDY})
    uses = [(b["name"], b["input"]) for b in anthropic["content"] if b.get("type") == "tool_use"]
    assert uses == [(ss.CALL_NAME, ss.CALL_ARGUMENTS)], anthropic["content"]
    # A schema without "Paris": the tool-call grammar (lazy, from <tool_call> on) overrides the model
    # inside the call, so drafts of the model's own choice are rejected there, token after token.
    steered = post(base_url, "/v1/chat/completions", {**chat, "messages": ask, "tools": [STEERED_TOOL]})
    assert "Paris" not in json.dumps(steered) and "Tokyo" in json.dumps(steered), steered
    got = {"openai": strip(first), "raw": {"content": raw["content"], "tokens": raw.get("tokens")},
           "openai_streamed": streamed, "openai_after_result": strip(second), "anthropic": strip(anthropic),
           "openai_grammar_steered": strip(steered)}
    return got, _speculated(first, raw, second, anthropic, steered)


def _serve(engine: RealEngine, settings: LaunchSettings, tmp_path: Path) -> tuple[dict[str, Any], tuple[int, int]]:
    proc = launch(engine.path, engine.caps, settings, pid_file=tmp_path / f"{settings.spec_mode.setting}.pid")
    try:
        proc.wait_ready(180)
        return generated_calls(proc.base_url)
    finally:
        proc.stop(timeout=5.0)
        assert not pid_alive(proc.pid), "a llama-server outlived its test"


def test_generated_tool_calls_are_identical_with_and_without_speculation(
    real_engine: RealEngine, tmp_path: Path, record_property: Any
) -> None:
    free = pick_model_free_type(real_engine.caps) or "ngram-mod"
    llama = ss.cached_llama_target(supplied.SYNTH)
    fmt = "bee" if real_engine.draft_format == "bee" else "mainline"
    draft = ss.cached_dflash_draft(supplied.SYNTH, llama, fmt)
    # Every model-free type the engine runs (the known-issue table refuses some): the engine's pick must
    # accept drafts; the others must match too (BeeLlama 0.1's runaway showed in ngram-cache and suffix).
    types = [t for t in real_engine.caps.model_free_spec_types if t not in refused_spec_types(real_engine.caps)]
    llama_modes = {"dflash": _settings(llama, Mode.DFLASH, draft),
                   **{f"n-gram {t}": _settings(llama, Mode.MODEL_FREE, free_type=t) for t in types}}
    must_accept = {"dflash", f"n-gram {free}", "mtp"}
    cases: dict[str, tuple[Path, dict[str, LaunchSettings]]] = {"llama-script": (llama, llama_modes)}
    mtp = ss.cached_mtp_target(supplied.SYNTH)
    if supplied._offered(real_engine, _settings(mtp, Mode.MTP)):  # BeeLlama 0.1 has no MTP (nor its qwen35 target)
        cases["mtp-script"] = (mtp, {"mtp": _settings(mtp, Mode.MTP),
                                     f"n-gram {free}": _settings(mtp, Mode.MODEL_FREE, free_type=free)})
    table: dict[str, str] = {}
    for model, (target, modes) in cases.items():
        base, _ = _serve(real_engine, _settings(target, Mode.BASELINE), tmp_path)
        for name, settings in modes.items():
            key = f"{model} {name}"
            if not supplied._offered(real_engine, settings):
                table[key] = "not offered by this engine"
                continue
            got, (n_drafted, n_accepted) = _serve(real_engine, settings, tmp_path)
            differ = [part for part in base if got[part] != base[part]]
            table[key] = (f"{'identical' if not differ else 'DIFFERENT: ' + ', '.join(differ)} "
                          f"({n_drafted} drafted, {n_accepted} accepted)")
            print(f"{real_engine.kind} {key}: {table[key]}")
            for part in differ:
                assert got[part] == base[part], f"{key}: the generated call's {part} changed under speculation"
            if name in must_accept:
                assert n_drafted > 0 and n_accepted > 0, f"{key}: no draft accepted, the speculative path was not run"
    record_property("generated_tool_call_identity", json.dumps({real_engine.kind: table}))
    assert sum(v.startswith("identical") for v in table.values()) >= 3, f"too few speculation modes ran: {table}"
