"""Tool calls that survive speculation: an OpenAI ``tools``/``tool_calls`` round trip and an Anthropic
``tool_use``/``tool_result`` round trip come back byte-identical with speculation off and with every
mode the engine runs (DFlash, MTP, n-gram), greedy, on each engine family (real_engine: mainline always,
BeeLlama 0.1.2 / 0.4.3 where their sources are given).

Each round trip is what an agent sends: a request with the tool schemas, then the next turn carrying
the assistant's tool call and the tool's result, rendered through ``--jinja`` with a tool-aware ChatML
template (tests/fixtures/tools-chatml.jinja, Qwen 2.5's tool format). The call in the history is the
client's: on mainline b11434 a *generated* call cannot be forced on these models (``tool_choice:
required`` leaves SmolLM2's "peg-native" format unconstrained, and the synthetic vocabulary makes the
forced grammar fail with "Failed to initialize samplers"), so the generated side compared here is the
reply text around the tools. The sticky models' drafts are accepted, so the drafted path is exercised.
A call the model itself generates under speculation is tests/engine/test_toolcalls_generated_real.py's
(a scripted synthetic target whose vocabulary holds the call's pieces).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.argv import LaunchRefused, build_argv
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import pick_model_free_type
from beedeck.core.launcher import launch
from tests.conftest import FIXTURES, PERSISTENT
from tests.engine.conftest import RealEngine
from tests.engine.procs import pid_alive
from tests.fixtures import synth_gguf as sg
from tests.fixtures import synth_mtp as sm

pytestmark = pytest.mark.engine

SYNTH = PERSISTENT / "synth"
TEMPLATE = FIXTURES / "tools-chatml.jinja"
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Berlin", "Tokyo"]}},
                   "required": ["city"], "additionalProperties": False}}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "The weather in a city.",
                  "input_schema": TOOL["function"]["parameters"]}  # type: ignore[index]
ASK = "What is the weather in Paris? Use the tool."
GREEDY = {"temperature": 0.0, "top_k": 1, "seed": 7, "ignore_eos": True}  # a random model may stop at once
# Volatile fields (a fresh call id per request, clocks): everything else must match byte for byte.
VOLATILE = {"id", "created", "timings", "system_fingerprint", "usage"}


def _strip(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


def _post(base_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(base_url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=240) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{path} answered {exc.code}: {exc.read()[:2000]!r}") from None


CALL_ARGS = '{"city": "Paris"}'
RESULT = '{"sky": "clear", "celsius": 21}'


def drafted(*responses: dict[str, Any]) -> int:
    """Draft tokens the server generated for these responses (its ``timings``; 0 without speculation)."""
    return sum(int((r.get("timings") or {}).get("draft_n", 0)) for r in responses)


def openai_round_trip(base_url: str) -> tuple[str, int]:
    """The reply to the tools request, then the reply after the tool call and its result: canonical JSON."""
    ask: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    first = _post(base_url, "/v1/chat/completions", {"messages": ask, "tools": [TOOL], "max_tokens": 48, **GREEDY})
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": CALL_ARGS}}
    turn = [*ask, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": RESULT}]
    second = _post(base_url, "/v1/chat/completions", {"messages": turn, "tools": [TOOL], "max_tokens": 48, **GREEDY})
    assert second["choices"][0]["message"].get("content") or second["choices"][0]["message"].get("tool_calls")
    return json.dumps([_strip(first), _strip(second)], sort_keys=True), drafted(first, second)


def anthropic_round_trip(base_url: str) -> str:
    body = {"model": "m", "max_tokens": 48, "tools": [ANTHROPIC_TOOL], **GREEDY}
    ask: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    first = _post(base_url, "/v1/messages", {**body, "messages": ask})
    turn = [*ask, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
                                                       "input": json.loads(CALL_ARGS)}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": RESULT}]}]
    second = _post(base_url, "/v1/messages", {**body, "messages": turn})
    assert second["content"], second
    return json.dumps([_strip(first), _strip(second)], sort_keys=True)


def _settings(target: Path, mode: Mode, draft: Path | None = None, free_type: str = "ngram-mod") -> LaunchSettings:
    return LaunchSettings(target=str(target), draft=str(draft) if draft else None, spec_mode=mode, ctx_size=4096,
                          parallel=1, flash_attn="auto", draft_n_max=15 if mode != Mode.BASELINE else None,
                          threads=1, n_gpu_layers="0", draft_n_gpu_layers=None, jinja=True,
                          spec_model_free_type=free_type, extra_args=["--chat-template-file", str(TEMPLATE)])


def _offered(engine: RealEngine, settings: LaunchSettings) -> bool:
    try:
        build_argv(settings, engine.caps)
    except LaunchRefused:
        return False
    return True


def _round_trips(engine: RealEngine, settings: LaunchSettings, tmp_path: Path) -> tuple[str, str, int]:
    """Both round trips on a server of these settings, and the tokens it drafted."""
    proc = launch(engine.path, engine.caps, settings, pid_file=tmp_path / f"{settings.spec_mode.setting}.pid")
    try:
        proc.wait_ready(180)
        openai, n_drafted = openai_round_trip(proc.base_url)
        return openai, anthropic_round_trip(proc.base_url), n_drafted
    finally:
        proc.stop(timeout=5.0)
        assert not pid_alive(proc.pid), "a llama-server outlived its test"


# The random synthetic models write bytes the tool parser rejects (HTTP 500 "does not match the expected
# peg-native format"): the sticky ones, the starter's SmolLM2 and their drafts are what an agent meets.
def test_tool_calls_are_identical_with_and_without_speculation(
    real_engine: RealEngine, starter_model_path: Path, tmp_path: Path, record_property: Any
) -> None:
    """Per engine, every model x mode it runs: (target, {mode: settings}); MTP only where the engine has it."""
    free = pick_model_free_type(real_engine.caps) or "ngram-mod"
    llama = sg.cached_target(SYNTH, sticky=True)
    draft = sg.cached_draft(SYNTH, llama, sticky=True, fmt="bee" if real_engine.draft_format == "bee" else "mainline")
    mtp = sm.cached_mtp_target(SYNTH, sticky=True)
    cases = {
        "llama-sticky": (llama, {"dflash": _settings(llama, Mode.DFLASH, draft),
                                 "n-gram": _settings(llama, Mode.MODEL_FREE, free_type=free)}),
        "starter": (starter_model_path, {"n-gram": _settings(starter_model_path, Mode.MODEL_FREE, free_type=free)}),
    }
    if _offered(real_engine, _settings(mtp, Mode.MTP)):  # BeeLlama 0.1 has no MTP (nor its qwen35 target)
        cases["mtp-sticky"] = (mtp, {"mtp": _settings(mtp, Mode.MTP),
                                     "n-gram": _settings(mtp, Mode.MODEL_FREE, free_type=free)})
    table: dict[str, str] = {}
    for model, (target, modes) in cases.items():
        base = _round_trips(real_engine, _settings(target, Mode.BASELINE), tmp_path)
        for name, settings in modes.items():
            key = f"{model} {name}"
            if not _offered(real_engine, settings):
                table[key] = "not offered by this engine"
                continue
            got = _round_trips(real_engine, settings, tmp_path)
            table[key] = " ".join(f"{kind} {'identical' if a == b else 'DIFFERENT'}" for kind, a, b in
                                  (("openai", base[0], got[0]), ("anthropic", base[1], got[1])))
            table[key] += f" ({got[2]} tokens drafted)"
            print(f"{real_engine.kind} {key}: {table[key]}")
            assert got[0] == base[0], f"{key}: the OpenAI tool-call round trip changed under speculation"
            assert got[1] == base[1], f"{key}: the Anthropic tool-use round trip changed under speculation"
            if name in ("dflash", "mtp"):
                assert got[2] > 0, f"{key} drafted nothing: the speculative path was not exercised"
    record_property("tool_call_identity", json.dumps({real_engine.kind: table}))
    assert any(v.startswith("openai") for v in table.values()), f"no speculation mode ran: {table}"
