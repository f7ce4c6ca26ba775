"""The server a coding agent will talk to, as it really is: BeeDeck's running server when there is one,
else the saved profile (said as such).

A running server is found from the record every BeeDeck server leaves (``core/engine/pidfile.py``: its pid,
port and owner, written by ``beedeck serve`` and the app alike); its command line gives the address, the
alias and whether it reads a key file; its ``/props`` gives what the engine really made: the context per
slot after the engine's own cap (llama-server caps a slot at the model's training context: "exceeds the
training context of the model (8192) - capping"), and whether the chat template renders tools
(``chat_template_caps.supports_tools``). Without a server the same facts come from the profile and the
model's GGUF header (its training context, its chat template), and the view says so.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil

from beedeck.core import paths, secrets
from beedeck.core.agents.clients import AgentClient, refusal
from beedeck.core.agents.endpoint import KEY_ENV, NO_KEY, Endpoint, endpoint_from_settings
from beedeck.core.agents.toolsafe import spec_lines, tool_choice_lines
from beedeck.core.engine import pidfile
from beedeck.core.engine.alias import model_alias
from beedeck.core.engine.argv import is_loopback
from beedeck.core.engine.bounded import BodyTooLarge, bounded_get
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import DEFAULT_PORT, LaunchSettings
from beedeck.core.engine.mode import Mode

ACTING = ("opencode", "codex", "continue", "claude-code")  # agents that act only through tool calls
PROPS_DEADLINE_S = 3.0
PROPS_LIMIT = 16 << 20  # /props carries the whole chat template
KEY_MAX = 4096


@dataclass(frozen=True)
class ServerView:
    """An agent's view of the server: the endpoint its config names, where that came from (``running``: a
    BeeDeck server that runs now; ``profile``: the saved settings, nothing runs), what to tell the user
    about it, and what the tool-safe advice needs (the speculation it runs, the engine binary)."""

    endpoint: Endpoint
    source: str
    lines: tuple[str, ...]
    spec: Mode = Mode.BASELINE
    engine: str = ""
    pid: int | None = None


# ---- a running server ----

def running_records() -> list[pidfile.ServerRecord]:
    """Live servers of live BeeDeck sessions (a window, ``beedeck serve``), the newest first."""
    recs = [r for r in pidfile.live_records() if r.owner_alive()]
    return sorted(recs, key=lambda r: r.started, reverse=True)


def argv_of(pid: int) -> list[str]:
    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.Error:
        return []


def option(argv: list[str], *flags: str) -> str | None:
    """The value after the last of ``flags`` in ``argv`` (None: not there)."""
    found = None
    for i, word in enumerate(argv[:-1]):
        if word in flags:
            found = argv[i + 1]
    return found


def spec_of_argv(argv: list[str]) -> Mode:
    """The speculation a llama-server command line runs (BeeDeck's own flags: --spec-type, a draft model)."""
    kind = (option(argv, "--spec-type") or "").lower()
    if "mtp" in kind:
        return Mode.MTP
    if "eagle" in kind:
        return Mode.EAGLE3
    if "dspark" in kind:
        return Mode.DSPARK
    if "dflash" in kind or option(argv, "-md", "--model-draft", "--spec-draft-model"):
        return Mode.DFLASH
    if kind and kind != "none":
        return Mode.MODEL_FREE
    return Mode.BASELINE


def key_file_of(argv: list[str]) -> Path | None:
    found = option(argv, "--api-key-file")
    return Path(found) if found else None


def read_key_file(path: Path) -> str | None:
    """The key in a server's key file (0600, this user's); None when it cannot be read."""
    try:
        return paths.read_regular_text(path, KEY_MAX).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _get_json(url: str, key: str | None) -> Any:
    import httpx2

    try:
        got = bounded_get(url, headers={"Authorization": f"Bearer {key}"} if key else {}, limit=PROPS_LIMIT,
                          deadline_s=PROPS_DEADLINE_S)
    except (httpx2.TransportError, OSError, BodyTooLarge):
        return None
    if got.status_code != 200:
        return None
    try:
        return got.json()
    except ValueError:
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class Props:
    """What a running llama-server says of itself (each None where it did not say)."""

    alias: str | None = None
    n_ctx: int | None = None  # per slot, after the engine's cap
    n_ctx_train: int | None = None
    tools: bool | None = None
    build: str = ""


def read_props(base_url: str, key: str | None) -> Props | None:
    """``/props`` (and ``/v1/models`` for the training context) of the server at ``base_url``; None when it
    does not answer (stopped, still loading, or a key it refuses)."""
    props = _get_json(base_url + "/props", key)
    if not isinstance(props, dict):
        return None
    dgs = _dict(props.get("default_generation_settings"))
    caps = _dict(props.get("chat_template_caps"))
    tools = caps.get("supports_tools")
    models = _dict(_get_json(base_url + "/v1/models", key))
    data = models.get("data")
    meta = _dict(_dict(data[0]).get("meta")) if isinstance(data, list) and data else {}
    alias = props.get("model_alias")
    return Props(alias if isinstance(alias, str) and alias else None, _int(dgs.get("n_ctx")) or _int(meta.get("n_ctx")),
                 _int(meta.get("n_ctx_train")), tools if isinstance(tools, bool) else None,
                 str(props.get("build_info") or ""))


def asked_per_slot(argv: list[str]) -> int | None:
    """The context per slot a command line asks for (``--ctx-size`` over the slots, unless the cache is unified)."""
    try:
        ctx = int(option(argv, "-c", "--ctx-size") or 0)
        slots = max(1, int(option(argv, "-np", "--parallel") or 1))
    except ValueError:
        return None
    if not ctx:
        return None
    return ctx if "--kv-unified" in argv or "-kvu" in argv else ctx // slots


def context_line(asked: int | None, given: int | None, trained: int | None, *, running: bool) -> str:
    """What the context per slot is, and why it is not what was asked for."""
    if given is None:
        return f"context: {asked:,} tokens per slot asked (the server did not say what it gave)" if asked else \
            "context: unknown (the server did not say)"
    line = f"context: {given:,} tokens per slot"
    if asked and given < asked:
        cause = (f"the engine capped it at the model's training context, {trained:,}" if trained and given >= trained
                 else "the engine gave less")
        line += f" ({'asked' if running else 'the profile asks'} {asked:,}: {cause})"
    return line


def tools_line(tools: bool | None, where: str) -> str:
    if tools is None:
        return f"tools: unknown ({where} did not say whether the chat template renders them)"
    if tools:
        return f"tools: the model's chat template renders tool calls ({where})"
    return (f"tools: the model's chat template has no tool syntax ({where}): llama-server leaves the tools out of "
            "the prompt, so an agent cannot call tools with this model; BeeDeck declares no tool support for it")


def _view(head: str, ep: Endpoint, props: Props | None, asked: int | None, *, spec: Mode, engine: str = "",
          pid: int | None = None, extra: tuple[str, ...] = ()) -> ServerView:
    given = props.n_ctx if props else None
    tools = props.tools if props else None
    lines = (head + (f", {props.build}" if props and props.build else "")
             + ("" if props else ": it did not answer /props (still loading?), so these come from its settings"),
             context_line(asked, given, props.n_ctx_train if props else None, running=True),
             "API key: " + ("needed (`beedeck agent key` prints it)" if ep.key_required else "not needed"),
             tools_line(tools, "/props chat_template_caps" if props else "the server"), *extra)
    alias = props.alias if props and props.alias else ep.model
    return ServerView(replace(ep, model=alias, ctx_size=given or asked or ep.ctx_size, tools=tools), "running",
                      lines, spec, engine, pid)


def view_running(rec: pidfile.ServerRecord, others: list[int]) -> ServerView:
    """A server BeeDeck runs (found from its record): its command line, then what it answers."""
    argv = argv_of(rec.pid)
    host = option(argv, "--host") or "127.0.0.1"
    key_file = key_file_of(argv)
    needs_key = key_file is not None or "--api-key" in argv
    alias = option(argv, "-a", "--alias") or model_alias(option(argv, "-m", "--model") or "")
    ep = Endpoint(host, rec.port, alias, 0, needs_key or not is_loopback(host), "--no-jinja" not in argv)
    props = read_props(ep.base_url, read_key_file(key_file) if key_file else None)
    extra = (f"note: other BeeDeck servers run too (port {', '.join(map(str, others))}): this is the newest; "
             "--port picks another",) if others else ()
    return _view(f"server: BeeDeck's running server (pid {rec.pid}) at {ep.base_url}", ep, props,
                 asked_per_slot(argv), spec=spec_of_argv(argv), engine=rec.engine, pid=rec.pid, extra=extra)


def view_at(settings: LaunchSettings) -> ServerView:
    """The server at ``settings``' address (the window's own, with its key): what it answers there, else the
    settings themselves as the profile's view. Blocking (a local request or two): off the GUI thread."""
    ep = endpoint_from_settings(settings)
    props = read_props(ep.base_url, settings.api_key)
    if props is None:
        return view_profile(settings, f"the profile (nothing answers at {ep.base_url})")
    return _view(f"server: the running server at {ep.base_url}", ep, props, ep.ctx_size, spec=settings.spec_mode)


# ---- no server: the profile ----

def template_tools(template: str) -> bool:
    """Whether a Jinja chat template renders tools (it reads the ``tools`` variable)."""
    return re.search(r"\btools\b", template) is not None


def _template_of(settings: LaunchSettings) -> tuple[str | None, int | None]:
    """The chat template the profile's server would use and the model's training context (None: unknown)."""
    trained = None
    template = None
    file = option(settings.extra_args, "--chat-template-file")
    try:
        # the GGUF reader: only for a profile read without a server
        from beedeck.core.models.gguf import reader as gguf

        info = gguf.inspect(settings.target)
        trained = info.context_length or None
        found = info.metadata.get("tokenizer.chat_template")
        template = found if isinstance(found, str) else None
    except Exception:  # a missing or unreadable model: the facts stay unknown, said as such
        pass
    if file:
        try:
            template = paths.read_regular_text(Path(file), paths.CONFIG_MAX_BYTES)
        except (OSError, UnicodeDecodeError):
            template = None
    return template, trained


def view_profile(settings: LaunchSettings, what: str = "the saved profile") -> ServerView:
    ep = endpoint_from_settings(settings)
    template, trained = _template_of(settings) if settings.target else (None, None)
    if not settings.jinja:
        tools: bool | None = False
        where = "the profile runs without --jinja"
    else:
        tools = template_tools(template) if template is not None else None
        where = "read from the model's own template; no server runs to ask" if template is not None else \
            "the model file could not be read"
    asked = ep.ctx_size
    given = min(asked, trained) if asked and trained else asked or trained
    port_note = "" if settings.port else f" (port {DEFAULT_PORT}: the app's default; `beedeck serve` takes a free " \
        "port unless given --port)"
    lines = [f"server: none of BeeDeck's runs, so these come from {what}{port_note}: start it (the app or "
             "`beedeck serve`), then write again so the config names what the server really has",
             context_line(asked, given, trained, running=False),
             "API key: " + ("needed" if ep.key_required else "not needed"), tools_line(tools, where)]
    return ServerView(replace(ep, ctx_size=given or 0, tools=tools), "profile", tuple(lines), settings.spec_mode)


def server_view(settings: LaunchSettings, port: int | None = None, what: str = "the saved profile") -> ServerView:
    """The running BeeDeck server (the one on ``port`` when given), else ``settings`` as the view."""
    recs = running_records()
    chosen = [r for r in recs if port is None or r.port == port]
    if chosen:
        return view_running(chosen[0], [r.port for r in recs if r is not chosen[0]])
    view = view_profile(settings if port is None else replace(settings, port=port), what)
    if port is not None and recs:
        view = replace(view, lines=(*view.lines, f"note: no BeeDeck server runs on port {port}; they run on "
                                                 f"{', '.join(str(r.port) for r in recs)}"))
    return view


# ---- the key ----

@dataclass(frozen=True)
class KeyAnswer:
    """The key an agent should send (``key``; None: none is known) and where it came from or why not."""

    key: str | None
    source: str


def agent_key() -> KeyAnswer:
    """The running server's key (its key file), else the keyring's, else ``BEEDECK_API_KEY``'s; the no-key word
    when the running server needs none. ``key`` None: a key is needed, or no server runs, and none is known."""
    recs = running_records()
    why = "no BeeDeck server runs"
    if recs:
        argv = argv_of(recs[0].pid)
        key_file = key_file_of(argv)
        if key_file is None and "--api-key" not in argv:
            return KeyAnswer(NO_KEY, f"the server on port {recs[0].port} needs no key (any key is accepted)")
        key = read_key_file(key_file) if key_file else None
        if key:
            return KeyAnswer(key, f"the key file of the server on port {recs[0].port}")
        why = f"the server on port {recs[0].port} needs a key and its key file cannot be read"
    stored = secrets.get_secret(secrets.SERVER_API_KEY)
    if stored:
        return KeyAnswer(stored, "the keyring")
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return KeyAnswer(env, KEY_ENV)
    return KeyAnswer(None, why)


# ---- what it means for one agent ----

def describe(c: AgentClient, view: ServerView, caps: EngineCaps | None) -> list[str]:
    """What ``c`` on this server means, line by line (``beedeck agent show/write`` and Use with…): the server as
    it is, why the agent cannot run or what it needs, what the template and the engine do with tool calls, the
    tool-safe choice, the key, the environment and the command."""
    ep = view.endpoint
    lines = [f"{c.label}: {ep.openai_url if c.protocol == 'openai' else ep.base_url} "
             f"({'/v1/chat/completions' if c.protocol == 'openai' else '/v1/messages'}), model {ep.model}"]
    lines += [f"  {line}" for line in view.lines]
    why_not = refusal(c, ep)
    lines += [f"  cannot run: {why_not}"] if why_not else [f"  needs {need}" for need in c.needs(ep)]
    if ep.tools is False and c.id in ACTING:
        lines.append(f"  {c.label} acts through tool calls: with this model it can answer, but not edit files or "
                     "run commands")
    lines += [f"  {line}" for line in (*tool_choice_lines(caps, ep.tools), *spec_lines(view.spec, caps))]
    if ep.key_required:
        lines.append(f"  key: {c.key_note}")
    for name, value in c.env(ep).items():
        lines.append(f'  export {name}="{value}"' if value.startswith("$") else f"  export {name}={value}")
    if c.command(ep):
        lines.append(f"  run: {c.command(ep)}")
    return lines
