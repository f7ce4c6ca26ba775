"""The generation smoke test: a freshly built or downloaded llama-server loads a tiny model and generates.

Probing (``--help``, ``--version``, ``--list-devices``) runs none of the engine's compute kernels, so a build
whose CPU code cannot run here passed it and crashed at the first chat: a native build on a host whose CPU
reports AMX died by SIGILL in warm-up (GCC 12's ``_tile_loadconfig`` tells the optimiser it reads 8 of the
tile config's 64 bytes, so the stores that fill it are dropped and the first tile instruction faults). This
check starts the engine on the given model (the starter model: 98 MB; 1.3-2.1 s a build on a busy 2-core
machine, probe included), asks for a few tokens, and stops it; a death is classified by :func:`beedeck.core.engine.logparse.classify_failure`.

The model comes from the caller (``EngineRegistry.smoke_model``): this wing may not import the starter.
"""

from __future__ import annotations

import http.client
import json
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from beedeck.core.engine.argv import build_argv
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import ServerFailed, ServerFailure, uses_amx
from beedeck.core.engine.ports import claimed_free_port, release_port
from beedeck.core.engine.registry import ModelLocator, Prober, SmokeResult, smoke_test
from beedeck.core.engine.server import ServerProcess, start_server

SMOKE_PROMPT = "The capital of France is"
SMOKE_TOKENS = 8
SMOKE_CTX = 512
LOAD_TIMEOUT_S = 180.0  # a tiny model loads in seconds; a first CUDA start compiles nothing but may be slow
REPLY_TIMEOUT_S = 120.0
# One thread: on a busy two-core machine two threads wait on each other at every step (a smoke test of 6-12 s
# against 1.2-1.6 s measured), and the AMX fault shows with one thread (SIGILL) as with more (SIGSEGV).
SMOKE_THREADS = 1
# The signals that mean "this build's CPU code cannot run here" (SIGSEGV only with AMX code in use).
CPU_SIGNALS = (int(signal.SIGILL),)


@dataclass
class GenerationCheck:
    """What the engine did with a short generation: ``ok`` with the tokens and seconds, or the failure."""

    ok: bool
    message: str
    seconds: float = 0.0  # start to the end of the reply (or the death)
    tokens: int = 0
    failure: ServerFailure | None = None
    signal: int | None = None  # the signal that killed it, if one did
    amx: bool = False  # its log shows AMX matrix code in use
    log_tail: list[str] = field(default_factory=list)

    @property
    def cpu_fault(self) -> bool:
        """Died because its CPU code cannot run here: SIGILL, or a crash inside AMX code."""
        return self.signal in CPU_SIGNALS or (self.amx and self.signal == int(signal.SIGSEGV))


def smoke_settings(model: Path, *, gpu: bool, threads: int | None) -> LaunchSettings:
    """A one-slot, small-context launch on 127.0.0.1 (any free port): only what a generation needs."""
    return LaunchSettings(target=str(model), ctx_size=SMOKE_CTX, n_gpu_layers="all" if gpu else "0",
                          draft_n_gpu_layers=None, threads=threads, host="127.0.0.1", port=0, metrics=False,
                          jinja=False)


def _complete(proc: ServerProcess, timeout: float) -> dict[str, object]:
    body = json.dumps({"prompt": SMOKE_PROMPT, "n_predict": SMOKE_TOKENS, "temperature": 0.0,
                       "cache_prompt": False})
    conn = http.client.HTTPConnection("127.0.0.1", proc.port, timeout=timeout)
    try:
        conn.request("POST", "/completion", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    if resp.status != 200:
        raise OSError(f"HTTP {resp.status}: {data[:300].decode('utf-8', 'replace')}")
    answer = json.loads(data)
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    return answer


def _tokens(answer: dict[str, object]) -> int:
    n = answer.get("tokens_predicted")
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    content = answer.get("content")
    return 1 if isinstance(content, str) and content else 0


def check_generation(binary: str | Path, caps: EngineCaps, model: Path, *, gpu: bool = False,
                     threads: int | None = SMOKE_THREADS, load_timeout: float = LOAD_TIMEOUT_S,
                     reply_timeout: float = REPLY_TIMEOUT_S) -> GenerationCheck:
    """Start ``binary`` on ``model``, ask for :data:`SMOKE_TOKENS` tokens, stop it; never raises for the engine's
    faults (they are the result). The server is always stopped (its whole process group) before this returns."""
    t0 = time.monotonic()
    proc: ServerProcess | None = None
    try:
        settings = smoke_settings(model, gpu=gpu, threads=threads)
        settings = replace(settings, port=claimed_free_port(settings.host))
        try:
            proc = start_server(binary, caps, build_argv(settings, caps), stop_leftover=False)
        except BaseException:
            release_port(settings.port)  # claimed for a server that did not start
            raise
        proc.wait_ready(timeout=load_timeout)
        answer = _complete(proc, reply_timeout)
    except ServerFailed as exc:
        return _failed(exc.failure, proc, t0)
    except (OSError, ValueError, http.client.HTTPException) as exc:
        if proc is not None and proc.wait_exit(5.0) is not None and proc.failure is not None:
            return _failed(proc.failure, proc, t0)  # it died while answering: the death is the reason
        return GenerationCheck(False, f"it started but did not answer a generation request ({exc}).",
                               time.monotonic() - t0, log_tail=proc.log_lines()[-40:] if proc else [])
    finally:
        if proc is not None:
            proc.stop(timeout=5.0)
    seconds = time.monotonic() - t0
    n = _tokens(answer)
    if n <= 0:
        return GenerationCheck(False, f"it answered but generated nothing ({str(answer)[:200]}).", seconds)
    return GenerationCheck(True, f"generated {n} tokens from {model.name} in {seconds:.1f} s", seconds, n)


def _failed(failure: ServerFailure, proc: ServerProcess | None, t0: float) -> GenerationCheck:
    code = proc.exit_code if proc is not None else failure.exit_code
    sig = -code if code is not None and code < 0 else None
    lines = proc.log_lines() if proc is not None else list(failure.log_tail)
    text = f"{failure.message} {failure.remedy}".strip()
    return GenerationCheck(False, text, time.monotonic() - t0, failure=failure, signal=sig, amx=uses_amx(lines),
                           log_tail=lines[-40:])


def _locate(locate: ModelLocator | None) -> tuple[Path | None, str]:
    if locate is None:
        return None, "no test model was given"
    try:
        model = locate()
    except LookupError as exc:
        return None, f"the test model is not here ({exc})"
    return (model, "") if model.is_file() else (None, f"the test model {model} is missing")


def smoke_engine(binary: str | Path, *, expect_gpu: bool, prober: Prober,
                 locate: ModelLocator | None) -> tuple[SmokeResult, GenerationCheck | None]:
    """The whole smoke test: the probe (:func:`smoke_test`: it answers, a GPU build lists its GPU), then one short
    generation on the model ``locate`` finds. Without a model the probe's verdict stands and says so."""
    probed = smoke_test(binary, expect_gpu=expect_gpu, prober=prober)
    if not probed.ok:
        return probed, None
    model, why = _locate(locate)
    if model is None:
        probed.message += f"; generation not tried: {why}"
        return probed, None
    check = check_generation(binary, prober(str(binary)), model, gpu=expect_gpu, threads=SMOKE_THREADS)
    if check.ok:
        message = f"{probed.message}; {check.message}"
    else:
        message = f"{Path(binary).name} answers --help but failed a {SMOKE_TOKENS}-token generation: {check.message}"
    return SmokeResult(check.ok, message, probed.backend, probed.devices, probed.checked_at), check
