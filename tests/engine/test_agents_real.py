"""The coding agents act, for real: each one, installed from its registry (tests/agents/clients.py, cached by
version outside the checkout), set up by ``beedeck agent write`` alone (beedeck.core.agents.configfile
writes what beedeck.core.agents.clients renders for beedeck.core.agents.endpoint) and run headless from
the command BeeDeck prints (tests/agents/headless.py), creates ``hello.py`` through ``beedeck serve`` on a scripted
model that calls the agent's own file tool (tests/fixtures/synth_agents.py): OpenCode's ``write``, Claude
Code's ``Write`` (Anthropic ``tool_use`` over /v1/messages), Codex CLI's ``exec_command`` over
/v1/responses, Continue CLI's ``Write``, Aider's whole-file listing. The file must hold exactly what the
model wrote, and the agent must print the model's answer to the tool's result (its loop ended).

Per engine family (mainline; BeeLlama Gen A and Gen B, portable CPU builds) and speculation mode (off,
DFlash with a sticky scripted draft, MTP on the scripted ``qwen35`` target, the engine's N-gram type), the
agents run five at a time, each with a server of its own: a DFlash draft of its own (the sticky draft is right
at one step of one agent's reply) and speculation counts that are that agent's alone, for the cost of one
shared server (measured on mainline, five agents: 12-14 s either way, 3 s of server CPU, the same 38k
prompt tokens evaluated: the engine's prompt cache gives each agent back its prompt).
A relay that copies bytes unchanged (tests/agents/relay.py) shows each agent's real requests; the engine's
log gives the drafted and accepted tokens, which must be above zero wherever speculation is on.
A mode the engine does not offer is recorded as such, never run.

The keyed case: a LAN server (``serve --host 0.0.0.0`` with its key in BEEDECK_API_KEY), whose config
names a variable the printed command fills from ``beedeck agent key``; the key never lands in a file and
reaches the server in the agent's request. (Claude Code takes its key from ``apiKeyHelper``, which runs
``beedeck agent key`` itself: not run here until that command returns the server's key.)
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.agents.clients import client
from beedeck.core.engine.alias import model_alias
from beedeck.core.engine.argv import LaunchRefused, build_argv
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import pick_model_free_type
from tests.agents import headless
from tests.agents.clients import cache_root, ensure_client
from tests.agents.relay import Recording, relay
from tests.engine.conftest import RealEngine
from tests.engine.procs import pid_alive
from tests.fixtures import synth_agents as sa

pytestmark = [pytest.mark.engine, pytest.mark.slow]

AGENTS = ("opencode", "claude-code", "codex", "continue", "aider")
# BeeLlama 0.1 turns DFlash off for a reply once a tool call starts (its log says so): the agents still act,
# with the call generated undrafted. Asserted, so the table (docs/agents.md) changes when the engine does.
SUPPRESSED = "suppressing DFlash for this response"
CTX = 65536  # Claude Code reserves its 32000-token max_tokens inside the window BeeDeck writes
AGENT_TIMEOUT = 300.0
KEY = "agent-test-key-4f1c"


@dataclass
class Outcome:
    """One agent's run against one server."""

    agent: str
    rc: int | None = None
    seconds: float = 0.0
    cpu_s: float = 0.0  # the agent's own CPU time (and its children's)
    server_cpu_s: float = 0.0  # its llama-server's
    content: str | None = None  # hello.py afterwards (None: no file)
    drafted: int = 0
    accepted: int = 0
    requests: list[str] = field(default_factory=list)
    output: str = ""
    replies: str = ""  # the tail of what the server sent, for a failure's message
    key_sent: bool = False
    suppressed: bool = False  # under DFlash, the engine logged that it turned it off for a tool call

    @property
    def wrote(self) -> bool:
        return self.content == sa.SCRIPTS[self.agent].content

    def problems(self, speculating: bool, suppressed: bool = False) -> list[str]:
        """What went wrong; ``suppressed``: the engine is known to turn speculation off for this reply."""
        out = []
        if self.rc != 0:
            out.append(f"exit status {self.rc}")
        if self.content is None:
            out.append("no hello.py")
        elif not self.wrote:
            out.append(f"hello.py differs: {self.content[:200]!r}")
        if not any(r.split("?")[0] == f"POST {headless.ENDPOINTS[self.agent]}" for r in self.requests):
            out.append(f"never asked {headless.ENDPOINTS[self.agent]}")
        if sa.SCRIPTS[self.agent].tool and sa.ANSWER not in self.output:
            out.append("the model's answer to the tool's result is not in the agent's output")
        if suppressed and not (self.suppressed and not self.accepted):
            out.append(f"the engine was expected to say it turned DFlash off for the tool call ({SUPPRESSED!r}): "
                       f"{self.drafted} drafted, {self.accepted} accepted")
        elif speculating and not suppressed and not (self.drafted and self.accepted):
            out.append(f"speculation did not run ({self.drafted} drafted, {self.accepted} accepted)")
        return out

    def row(self) -> str:
        return (f"{client(self.agent).label}: {'wrote hello.py' if self.wrote else 'NO FILE'}, {self.seconds:.1f} s "
                f"(CPU {self.cpu_s:.1f} s agent, {self.server_cpu_s:.1f} s server), "
                f"{self.drafted} drafted / {self.accepted} accepted{' (engine: DFlash off)' if self.suppressed else ''}")


@pytest.fixture(scope="session")
def agent_models(starter_model_path: Path) -> Path:
    """The scripted targets (written once into the agents' cache, outside the checkout)."""
    folder = cache_root() / "models"
    sa.cached_llama_target(folder, starter_model_path)
    sa.cached_mtp_target(folder, starter_model_path)
    return folder


@pytest.fixture(scope="session")
def installed_agents() -> dict[str, Path]:
    return {agent: ensure_client(agent).executable for agent in AGENTS}


def _offered(engine: RealEngine, settings: LaunchSettings) -> bool:
    try:
        build_argv(settings, engine.caps)
    except LaunchRefused:
        return False
    return True


def serve_args(engine: RealEngine, mode: str, folder: Path, starter: Path, agent: str) -> list[str] | None:
    """``beedeck serve`` arguments for ``mode`` on ``engine`` (None: the engine does not offer it)."""
    target = sa.cached_llama_target(folder, starter)
    common = ["--engine", str(engine.path), "--ctx", str(CTX), "--threads", "1"]  # 1 thread: 2 shared cores
    if mode == "off":
        return [*common, "--model", str(target), "--spec", "off"]
    if mode == "dflash":
        fmt = "bee" if engine.draft_format == "bee" else "mainline"
        draft = sa.cached_dflash_draft(folder, target, fmt, agent)
        return [*common, "--model", str(target), "--draft", str(draft), "--spec", "dflash"]
    if mode == "mtp":
        mtp = sa.cached_mtp_target(folder, starter)
        if not _offered(engine, LaunchSettings(target=str(mtp), spec_mode=Mode.MTP)):
            return None
        return [*common, "--model", str(mtp), "--spec", "mtp"]
    kind = pick_model_free_type(engine.caps)
    return None if kind is None else [*common, "--model", str(target), "--spec", kind]


def _replies(rec: Recording) -> str:
    with rec.lock:
        blobs = [bytes(b).decode("utf-8", "replace") for b in rec.received]
    return "\n---\n".join(b[-1500:] for b in blobs[-3:])


def act(agent: str, executable: Path, args: list[str], root: Path, *, host: str | None = None,
        key: str | None = None) -> Outcome:
    """Serve, set the agent up with ``agent write``, run it headless from the printed command, look."""
    out = Outcome(agent)
    home, work = root / "home", root / "work"
    work.mkdir(parents=True)
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=30)  # a project, as a user's is
    model = model_alias(args[args.index("--model") + 1])
    serve_env = {"BEEDECK_API_KEY": key} if key else None
    with headless.serve([*args, *(["--host", host] if host else [])], home, root / "serve.log", serve_env) as served, \
            relay(served.port) as (port, rec):
        printed = headless.agent_write(agent, home, port=port, ctx=CTX, model=model, host=host)
        filled, argv = headless.headless_argv(printed, executable, agent)
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb", "NO_COLOR": "1", "LANG": "C.UTF-8",
               "XDG_CACHE_HOME": str(cache_root() / "xdg-cache"), **headless.QUIET[agent]}
        env.update(dict.fromkeys(filled, key or ""))  # what NAME="$(beedeck agent key)" gives the agent
        done = headless.run_agent(argv, env, work, root / "agent.log", AGENT_TIMEOUT)
        out.rc, out.seconds, out.cpu_s = done.rc, done.seconds, done.cpu_s
        out.output = done.output if done.rc is not None else f"killed after {AGENT_TIMEOUT:.0f} s: {done.output}"
        out.server_cpu_s = headless.cpu_seconds(served.pid)
        out.requests, out.replies = rec.requests(), _replies(rec)
        if key:
            with rec.lock:
                out.key_sent = any(key.encode() in bytes(b) for b in rec.sent)
    assert not pid_alive(served.pid), "a llama-server outlived its beedeck serve"
    hello = work / sa.FILE_NAME
    out.content = hello.read_text() if hello.is_file() else None
    log = served.log.read_text(errors="replace")
    out.drafted, out.accepted = headless.speculation(log)
    # (0.1.2 logs it on any tool call; it stops drafting only under DFlash: its n-gram drafts on)
    out.suppressed = SUPPRESSED in log and args[args.index("--spec") + 1] == "dflash"
    return out


def run_side_by_side(jobs: dict[Any, Callable[[], Outcome]], workers: int = len(AGENTS)) -> dict[Any, Outcome]:
    """Run ``jobs`` ``workers`` at a time (one agent and its server each): a slow agent's tail overlaps
    the next runs instead of idling the cores."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def suppressed(kind: str, mode: str, agent: str) -> bool:
    """Whether the engine is known to turn this mode off for the agent's tool call (see SUPPRESSED)."""
    return kind == "bee-a" and mode == "dflash" and bool(sa.SCRIPTS[agent].tool)


def _failures(outcomes: dict[str, Outcome], kind: str, mode: str) -> list[str]:
    return [f"{kind} {mode} {o.agent}: {'; '.join(p)}\n  requests: {o.requests}\n  agent output: "
            f"{o.output[-1500:]}\n  server replies: {o.replies[-1500:]}"
            for o in outcomes.values() if (p := o.problems(mode != "off", suppressed(kind, mode, o.agent)))]


@pytest.mark.timeout(900)  # 45-65 s an engine here; the agents and the engines are fixtures
def test_every_agent_creates_hello_py_through_beedeck_with_each_speculation_mode(
    real_engine: RealEngine, agent_models: Path, installed_agents: dict[str, Path], starter_model_path: Path,
    tmp_path: Path, record_property: Any,
) -> None:
    table: dict[str, Any] = {}
    runs: dict[str, dict[str, list[str]]] = {}
    for mode in ("off", "dflash", "mtp", "n-gram"):
        args = {a: serve_args(real_engine, mode, agent_models, starter_model_path, a) for a in AGENTS}
        if any(v is None for v in args.values()):
            table[mode] = "not offered by this engine"
            print(f"{real_engine.kind} {mode}: not offered by this engine")
        else:
            runs[mode] = args  # type: ignore[assignment]
    t0 = time.monotonic()
    outcomes = run_side_by_side({(mode, a): partial(act, a, installed_agents[a], args[a], tmp_path / mode / a)
                                 for mode, args in runs.items() for a in AGENTS})
    took = time.monotonic() - t0
    failures: list[str] = []
    for mode, args in runs.items():
        done = {a: outcomes[(mode, a)] for a in AGENTS}
        spec = args[AGENTS[0]][args[AGENTS[0]].index("--spec") + 1]
        table[mode] = {"spec": spec, **{
            a: {"wrote": o.wrote, "seconds": round(o.seconds, 1), "agent_cpu_s": round(o.cpu_s, 1),
                "server_cpu_s": round(o.server_cpu_s, 1), "drafted": o.drafted, "accepted": o.accepted,
                "speculation_suppressed": o.suppressed}
            for a, o in done.items()}}
        print(f"{real_engine.kind} {mode} (--spec {spec}): " + "; ".join(o.row() for o in done.values()))
        failures += _failures(done, real_engine.kind, mode)
    print(f"{real_engine.kind}: {len(outcomes)} agent runs in {took:.0f} s, {len(AGENTS)} at a time")
    table["wall_s"] = round(took, 1)
    record_property("agents_act", json.dumps({real_engine.kind: table}))
    assert not failures, "\n\n".join(failures)
    assert real_engine.caps.generation == Generation.BEE_A or "mtp" in runs, table  # Gen B and mainline run MTP


@pytest.mark.timeout(900)
def test_a_lan_servers_key_reaches_each_agent_from_the_printed_command(
    starter_engine_path: Path, agent_models: Path, installed_agents: dict[str, Path], starter_model_path: Path,
    tmp_path: Path,
) -> None:
    agents = [a for a in AGENTS if a != "claude-code"]  # its key comes through apiKeyHelper: see the module doc
    target = sa.cached_llama_target(agent_models, starter_model_path)
    args = ["--engine", str(starter_engine_path), "--ctx", str(CTX), "--threads", "1", "--model", str(target)]
    outcomes = run_side_by_side({a: partial(act, a, installed_agents[a], args, tmp_path / a, host="0.0.0.0", key=KEY)
                                 for a in agents})
    print("keyed: " + "; ".join(o.row() for o in outcomes.values()))
    failures = _failures(outcomes, "keyed", "off")
    for a, o in outcomes.items():
        written = [p for p in (tmp_path / a / "home").rglob("*") if p.is_file() and KEY in p.read_text(errors="replace")]
        assert not written, f"{a}: the key landed in {written}"
        if not o.key_sent:
            failures.append(f"keyed {a}: the key never reached the server (requests {o.requests})")
    assert not failures, "\n\n".join(failures)
