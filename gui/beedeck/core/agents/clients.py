"""One row per coding agent: what it needs from the server, where its own config lives and how
BeeDeck's part of that config reads. Renderers are pure: (endpoint, the file's text or None) -> text.

JSON files are edited in place (BeeDeck's members replaced, the user's kept with their comments where the
format has them: OpenCode's JSONC); YAML and TOML files get one block between marker comments, replaced on
the next write, the user's lines left alone. Every value goes through the format's own quoting
(:mod:`.formats`, :mod:`.jsonc`), so no value can add a key.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from beedeck.core.agents.endpoint import KEY_ENV, NO_KEY, Endpoint
from beedeck.core.agents.formats import AgentConfigError, toml_str, yaml_str
from beedeck.core.agents.jsonc import Document

BEGIN = ">>> BeeDeck (beedeck agent write {id}; undo: beedeck agent undo {id})"
END = "<<< BeeDeck"


__all__ = ["CLIENTS", "AgentClient", "AgentConfigError", "client", "refusal"]


@dataclass(frozen=True)
class AgentClient:
    """A coding agent BeeDeck can set up. ``config`` is None where the tool has no file of its own
    (then :attr:`command` and :attr:`env` are the whole recipe)."""

    id: str
    label: str
    protocol: str  # "openai" (/v1/chat/completions) or "anthropic" (/v1/messages)
    min_ctx: int  # below this the client's own system prompt and tool schemas do not fit
    key_note: str  # how the key reaches the tool when the server needs one
    config: Callable[[], Path] | None
    render: Callable[[Endpoint, str | None], str] | None
    command: Callable[[Endpoint], str]
    env: Callable[[Endpoint], dict[str, str]]
    package: str = ""  # where the tool comes from (npm / PyPI)

    def needs(self, ep: Endpoint) -> list[str]:
        """What the server must offer this client, each with the reason (empty: it is all there)."""
        out = []
        if not ep.jinja:
            out.append("--jinja: the client sends tool schemas, which only the model's Jinja template renders")
        if ep.ctx_size and ep.ctx_size < self.min_ctx:
            out.append(f"a context of at least {self.min_ctx} tokens (this server has {ep.ctx_size}): "
                       f"{self.label}'s system prompt and tool schemas alone fill most of it")
        return out


def _home() -> Path:
    return Path.home()


def _xdg_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")


def _json_doc(text: str | None, what: str, comments: bool) -> Document:
    try:
        return Document(text or "", comments=comments, what=what)
    except AgentConfigError as exc:
        raise AgentConfigError(f"{exc} Fix it or move it aside, then write again: BeeDeck does not overwrite a "
                               "file it cannot read.") from None


def _key_or_env(ep: Endpoint, env_form: str) -> str:
    return env_form if ep.key_required else NO_KEY


def _block(client_id: str, lines: list[str], indent: str = "") -> list[str]:
    return [f"{indent}# {BEGIN.format(id=client_id)}", *(indent + x if x else x for x in lines), f"{indent}# {END}"]


def _strip_block(text: str, client_id: str) -> list[str]:
    """The file's lines without BeeDeck's earlier block."""
    out, inside = [], False
    begin = BEGIN.format(id=client_id)
    for line in text.splitlines():
        if line.strip() == f"# {begin}":
            inside = True
        elif inside and line.strip() == f"# {END}":
            inside = False
        elif not inside:
            out.append(line)
    return out


# ---- OpenCode: ~/.config/opencode/opencode.json (JSONC, {env:VAR} references) ----

def _opencode(ep: Endpoint, old: str | None) -> str:
    doc = _json_doc(old, "OpenCode's opencode.json", comments=True)  # OpenCode reads it as JSONC
    if "$schema" not in doc.data:
        doc.set(("$schema",), "https://opencode.ai/config.json")
    model: dict[str, Any] = {"name": f"{ep.model} (BeeDeck)"}
    if ep.tools is not None:  # checked (the template's capabilities), never assumed
        model["tool_call"] = ep.tools
    model["limit"] = {"context": ep.ctx_size, "output": max(256, min(4096, ep.ctx_size // 4))}
    doc.set(("provider", "beedeck"), {
        "npm": "@ai-sdk/openai-compatible",
        "name": "BeeDeck",
        "options": {"baseURL": ep.openai_url, "apiKey": _key_or_env(ep, "{env:" + KEY_ENV + "}")},
        "models": {ep.model: model},
    })
    doc.set(("model",), f"beedeck/{ep.model}")
    return doc.text if doc.text.endswith("\n") else doc.text + "\n"


# ---- Codex CLI: a profile file of its own, ~/.codex/beedeck.config.toml (Codex >= 0.16x keeps each
# --profile in <name>.config.toml beside config.toml); env_key names the key's variable ----

def _codex_path() -> Path:
    return Path(os.environ.get("CODEX_HOME") or _home() / ".codex") / "beedeck.config.toml"


def _codex(ep: Endpoint, old: str | None) -> str:
    # Two blocks: top-level keys must come before any table, and the user's own top-level keys must
    # not end up inside BeeDeck's table, so the keys go first and the provider table last.
    lines = _strip_block(old or "", "codex")  # both blocks carry the same marker
    # workspace-write: Codex's own "Auto" sandbox (writes in the task's folder, nothing outside it); its
    # default for a profile is read-only, where `codex exec` cannot create a file at all.
    # web_search and multi_agent are tools of another kind than "function" (OpenAI's hosted search, a
    # namespace of sub-agent tools): llama.cpp skips them, BeeLlama 0.1 refuses the whole request (400
    # "'type' of tool must be 'function'"), so Codex could not run there at all.
    top = [f"model = {toml_str(ep.model, 'The model alias')}", 'model_provider = "beedeck"',
           'sandbox_mode = "workspace-write"', 'web_search = "disabled"', "features.multi_agent = false",
           f"model_context_window = {int(ep.ctx_size)}"]
    provider = ["[model_providers.beedeck]", 'name = "BeeDeck"', f"base_url = {toml_str(ep.openai_url, 'The URL')}",
                'wire_api = "responses"']
    if ep.key_required:
        provider.append(f'env_key = "{KEY_ENV}"')
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    middle = ["", *lines, ""] if lines else [""]
    text = "\n".join([*_block("codex", top), *middle, *_block("codex", provider)]) + "\n"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AgentConfigError(f"Codex's beedeck.config.toml does not parse with BeeDeck's block ({exc}): it "
                               "may already set model, model_provider or [model_providers.beedeck]; remove "
                               "those lines (or the file), then write again.") from None
    ours = data.get("model_providers", {}).get("beedeck", {})
    if data.get("model") != ep.model or ours.get("base_url") != ep.openai_url:  # a second guard: read back
        raise AgentConfigError("Codex's beedeck.config.toml would not say what BeeDeck wrote: not written.")
    return text


def _codex_command(ep: Endpoint) -> str:
    return f"{ep.key_env_prefix()}codex --profile beedeck"


# ---- Continue (its CLI `cn` and the IDE extensions read the same ~/.continue/config.yaml) ----

def _continue_path() -> Path:
    return Path(os.environ.get("CONTINUE_GLOBAL_DIR") or _home() / ".continue") / "config.yaml"


def _continue(ep: Endpoint, old: str | None) -> str:
    # apiKey is one of two fixed strings (a secret's name, or the no-key word): everything else is quoted.
    tools = ["  capabilities: [tool_use]"] if ep.tools else ["  capabilities: []"] if ep.tools is False else []
    item = [f"- name: {yaml_str(f'{ep.model} (BeeDeck)', 'The model alias')}", "  provider: openai",
            f"  model: {yaml_str(ep.model, 'The model alias')}", f"  apiBase: {yaml_str(ep.openai_url, 'The URL')}",
            f"  apiKey: {_key_or_env(ep, '${{ secrets.' + KEY_ENV + ' }}')}",
            "  roles: [chat, edit, apply]", *tools,
            "  defaultCompletionOptions:", f"    contextLength: {int(ep.ctx_size)}"]
    lines = _strip_block(old or "", "continue")
    if not any(x.strip() for x in lines):
        lines = ["name: Local config", "version: 1.0.0", "schema: v1"]
    at = next((i for i, x in enumerate(lines) if re.match(r"models:\s*(#.*)?$", x)), None)
    if at is None:
        if any(re.match(r"models:", x) for x in lines):
            raise AgentConfigError("Continue's config.yaml has a 'models:' entry BeeDeck cannot extend (a flow "
                                   "list on one line): write it as a block list, or add the model by hand.")
        return "\n".join([*lines, "models:", *_block("continue", item, "  ")]) + "\n"
    following = next((x for x in lines[at + 1:] if x.strip() and not x.strip().startswith("#")), "")
    indent = re.match(r"\s*", following).group(0) if following.lstrip().startswith("-") else "  "  # type: ignore[union-attr]
    return "\n".join([*lines[:at + 1], *_block("continue", item, indent), *lines[at + 1:]]) + "\n"


def _continue_command(ep: Endpoint) -> str:
    # `cn -p` (headless) leaves out every tool that would ask, Write among them, so the model cannot make
    # a file; --allow Write allows that one tool for this run (Bash and the rest keep their policies).
    return f"{ep.key_env_prefix()}cn --allow Write"


# ---- Aider: ~/.aider.conf.yml (flat YAML) ----

_AIDER_KEYS = ("model", "openai-api-base", "openai-api-key")


def _aider(ep: Endpoint, old: str | None) -> str:
    lines = [x for x in _strip_block(old or "", "aider")
             if not any(re.match(rf"{k}\s*:", x) for k in _AIDER_KEYS)]
    ours = [f"model: {yaml_str('openai/' + ep.model, 'The model alias')}",
            f"openai-api-base: {yaml_str(ep.openai_url, 'The URL')}"]
    if not ep.key_required:
        ours.append(f"openai-api-key: {NO_KEY}")
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join([*lines, *([""] if lines else []), *_block("aider", ours)]) + "\n"


def _aider_command(ep: Endpoint) -> str:
    return f"{ep.key_fill('OPENAI_API_KEY') if ep.key_required else ''}aider"


# ---- Claude Code: ~/.claude/settings.json (its env block; the key through apiKeyHelper) ----

def _claude_path() -> Path:
    return Path(os.environ.get("CLAUDE_CONFIG_DIR") or _home() / ".claude") / "settings.json"


# Claude Code (2.1.328) refuses locally, sending nothing ("Prompt is too long"), unless
# CLAUDE_CODE_MAX_CONTEXT_TOKENS - min(CLAUDE_CODE_MAX_OUTPUT_TOKENS, 20000) covers its own estimate of the
# request: 6,262 tokens for a one-line task (system prompt and tool schemas; the server counts 4,258 of them).
# Measured with the real client by bisection (a dead port: "Connection refused" means it passed its own check):
# a context of 8,192 sends with an output limit up to 1,930, one of 16,384 up to 10,122 (6,262 left both times),
# and with its default output from 26,262 up: the refusal at 8,192 was its 20,000-token reply reservation.
# tests/faults/test_agent_configs.py runs it on BeeDeck's config.
# BeeDeck keeps CLAUDE_REQUEST_ROOM for the request and gives the reply the rest, up to Claude Code's own 32,000.
CLAUDE_REQUEST_ROOM = 7168
CLAUDE_MIN_OUTPUT = 1024
CLAUDE_MIN_CTX = CLAUDE_REQUEST_ROOM + CLAUDE_MIN_OUTPUT  # 8192


def claude_output_tokens(ctx: int) -> int:
    """The CLAUDE_CODE_MAX_OUTPUT_TOKENS that lets Claude Code send its request within ``ctx``."""
    return max(CLAUDE_MIN_OUTPUT, min(32000, ctx - CLAUDE_REQUEST_ROOM))


def _claude(ep: Endpoint, old: str | None) -> str:
    doc = _json_doc(old, "Claude Code's settings.json", comments=False)
    for name, value in {
        "ANTHROPIC_BASE_URL": ep.base_url,
        "ANTHROPIC_MODEL": ep.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": ep.model,  # the "small fast" model Claude Code uses for chores
        "ANTHROPIC_SMALL_FAST_MODEL": ep.model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry or update checks to anthropic.com
        "CLAUDE_CODE_MAX_CONTEXT_TOKENS": str(ep.ctx_size),  # else it assumes 1M tokens for an unknown model
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(claude_output_tokens(ep.ctx_size)),
    }.items():
        doc.set(("env", name), value)
    if ep.key_required:
        doc.delete(("env", "ANTHROPIC_AUTH_TOKEN"))
        doc.set(("apiKeyHelper",), ep.key_command())  # Claude Code runs it for the key: never stored in the file
    else:
        doc.set(("env", "ANTHROPIC_AUTH_TOKEN"), NO_KEY)
        doc.delete(("apiKeyHelper",))
    return doc.text if doc.text.endswith("\n") else doc.text + "\n"


def refusal(c: AgentClient, ep: Endpoint) -> str | None:
    """Why ``c`` cannot run on this server at all, said before anything is written (None: it can)."""
    if c.id == "claude-code" and ep.ctx_size < CLAUDE_MIN_CTX:
        return (f"Claude Code cannot run on this server: it has {ep.ctx_size:,} tokens of context per slot, and "
                f"Claude Code refuses to send a request (\"Prompt is too long\") below {CLAUDE_MIN_CTX:,}: its own "
                f"system prompt and tools take about {CLAUDE_REQUEST_ROOM - 900:,} tokens as it counts them, plus "
                f"{CLAUDE_MIN_OUTPUT:,} for its reply. Start the server with --ctx {CLAUDE_MIN_CTX} or more (on a "
                "model trained for at least that), then write again.")
    return None


def _claude_command(ep: Endpoint) -> str:
    # Without it Write and Edit wait for a yes that `claude -p` never asks: the file is not written ("Claude
    # requested permissions to write ... but you haven't granted it yet"). acceptEdits grants edits in the
    # working folder only; commands (Bash) still ask.
    return "claude --permission-mode acceptEdits"


def _openai_env(ep: Endpoint) -> dict[str, str]:
    return {"OPENAI_BASE_URL": ep.openai_url,
            "OPENAI_API_KEY": _key_or_env(ep, f"${{OPENAI_API_KEY:-$({ep.key_command()})}}"), "OPENAI_MODEL": ep.model}


def _anthropic_env(ep: Endpoint) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": ep.base_url,
            "ANTHROPIC_AUTH_TOKEN": _key_or_env(ep, f"${{ANTHROPIC_AUTH_TOKEN:-$({ep.key_command()})}}"),
            "ANTHROPIC_MODEL": ep.model}


CLIENTS: tuple[AgentClient, ...] = (
    AgentClient("opencode", "OpenCode", "openai", 16384,
                f"opencode.json names the variable ({{env:{KEY_ENV}}}); the command fills it from `beedeck agent key` unless it is already exported",
                lambda: _xdg_config() / "opencode" / "opencode.json", _opencode,
                lambda ep: f"{ep.key_env_prefix()}opencode", lambda ep: {}, "npm: opencode-ai"),
    AgentClient("aider", "Aider", "openai", 4096,
                "Aider reads OPENAI_API_KEY from the environment; the command fills it from `beedeck agent key` unless it is already exported",
                lambda: _home() / ".aider.conf.yml", _aider, _aider_command, lambda ep: {}, "PyPI: aider-chat"),
    AgentClient("codex", "Codex CLI", "openai", 16384,
                f"config.toml names the variable (env_key = {KEY_ENV}); the command fills it from `beedeck agent key` unless it is already exported",
                _codex_path, _codex, _codex_command, lambda ep: {}, "npm: @openai/codex"),
    AgentClient("continue", "Continue (CLI and IDE)", "openai", 8192,
                f"config.yaml names a secret (${{{{ secrets.{KEY_ENV} }}}}): Continue resolves it from the "
                f"environment or from ~/.continue/.env, which is plain text; the command fills the variable unless it is already exported",
                _continue_path, _continue, _continue_command, lambda ep: {},
                "npm: @continuedev/cli; the VS Code / JetBrains extension reads the same file"),
    AgentClient("claude-code", "Claude Code", "anthropic", CLAUDE_MIN_CTX,
                "settings.json runs `beedeck agent key` (apiKeyHelper) for the key: it is never written there",
                _claude_path, _claude, _claude_command, lambda ep: {}, "npm: @anthropic-ai/claude-code"),
    AgentClient("openai", "Any OpenAI-compatible tool", "openai", 0,
                "set OPENAI_API_KEY as shown (from `beedeck agent key` unless already exported)", None, None,
                lambda ep: "", _openai_env),
    AgentClient("anthropic", "Any Anthropic-compatible tool", "anthropic", 0,
                "set ANTHROPIC_AUTH_TOKEN as shown (from `beedeck agent key` unless already exported)", None, None,
                lambda ep: "", _anthropic_env),
)
BY_ID = {c.id: c for c in CLIENTS}


def client(client_id: str) -> AgentClient:
    """The row of ``client_id``; KeyError names the known ones."""
    try:
        return BY_ID[client_id]
    except KeyError:
        raise KeyError(f"no agent called {client_id!r}: pick one of {', '.join(BY_ID)}") from None
