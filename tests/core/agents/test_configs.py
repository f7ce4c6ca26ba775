"""core.agents: each client's config rendered from an endpoint, merged into what the user had, written
with a backup after the diff, and undone; the key never lands in a file; tool support written only where
the template has it; no value can add a key."""

from __future__ import annotations

import json
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from beedeck.core import secrets
from beedeck.core.agents import configfile
from beedeck.core.agents.clients import CLAUDE_MIN_CTX, CLIENTS, AgentConfigError, client, refusal
from beedeck.core.agents.endpoint import KEY_ENV, NO_KEY, Endpoint, api_key, endpoint_from_settings
from beedeck.core.engine.launch_settings import LaunchSettings


@pytest.fixture
def home(agent_home: Path) -> Path:
    return agent_home  # tests/conftest.py: a HOME of the test's own

LOCAL = Endpoint("127.0.0.1", 8477, "smollm2-135m-instruct.q4_1", 32768)
LAN = Endpoint("192.168.1.5", 8477, "qwen3.6-27b-q4_k_m", 65536, key_required=True)
SECRET = "s3cret-key-never-in-files"




def test_endpoint_from_settings_names_the_alias_and_keeps_the_lan_key() -> None:
    ep = endpoint_from_settings(LaunchSettings(target="/home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf", port=9000))
    assert (ep.openai_url, ep.model, ep.key_required) == ("http://127.0.0.1:9000/v1", "smollm2-135m-instruct.q4_1", False)
    lan = endpoint_from_settings(LaunchSettings(target="/m/a.gguf", host="0.0.0.0", api_key=SECRET))
    assert lan.key_required and lan.base_url == "http://127.0.0.1:8477" and SECRET not in repr(lan)


def test_every_config_file_lives_in_the_users_home(home: Path) -> None:
    files = {c.id: c.config() for c in CLIENTS if c.config}
    assert files == {
        "opencode": home / ".config/opencode/opencode.json",
        "aider": home / ".aider.conf.yml",
        "codex": home / ".codex/beedeck.config.toml",  # Codex's --profile beedeck reads its own file
        "continue": home / ".continue/config.yaml",
        "claude-code": home / ".claude/settings.json",
    }


@pytest.mark.parametrize("client_id", [c.id for c in CLIENTS if c.render])
def test_a_lan_server_key_is_referenced_never_written(client_id: str, home: Path) -> None:
    secrets.set_secret(secrets.SERVER_API_KEY, SECRET)
    assert api_key() == SECRET
    c = client(client_id)
    text = c.render(LAN, None)  # type: ignore[misc]
    assert SECRET not in text and NO_KEY not in text
    assert "http://192.168.1.5:8477" in text and LAN.model in text
    said = c.key_note + c.command(LAN) + text
    assert KEY_ENV in said or "agent key" in said


def test_opencode_merges_into_the_users_json(home: Path) -> None:
    old = json.dumps({"theme": "tokyonight", "provider": {"other": {"name": "Other"}}, "model": "other/x"})
    data = json.loads(client("opencode").render(LOCAL, old))  # type: ignore[misc]
    assert data["theme"] == "tokyonight" and "other" in data["provider"]
    assert data["model"] == f"beedeck/{LOCAL.model}"
    beedeck = data["provider"]["beedeck"]
    assert beedeck["options"] == {"baseURL": "http://127.0.0.1:8477/v1", "apiKey": NO_KEY}
    assert beedeck["models"][LOCAL.model]["limit"]["context"] == 32768
    assert "tool_call" not in beedeck["models"][LOCAL.model]  # unknown: not assumed
    lan = json.loads(client("opencode").render(LAN, None))  # type: ignore[misc]
    assert lan["provider"]["beedeck"]["options"]["apiKey"] == "{env:BEEDECK_API_KEY}"


def test_codex_profile_is_valid_toml_and_replaced_on_a_second_write() -> None:
    render = client("codex").render
    assert render is not None
    old = '# my notes\napproval_policy = "never"\n'
    once = render(LOCAL, old)
    twice = render(LOCAL, once)
    assert once == twice, "a second write replaces BeeDeck's block instead of adding another"
    data = tomllib.loads(once)
    assert data["approval_policy"] == "never" and "# my notes" in once
    assert (data["model"], data["model_provider"], data["model_context_window"]) == (LOCAL.model, "beedeck", 32768)
    assert data["sandbox_mode"] == "workspace-write", "read-only (Codex's default) cannot create a file"
    # only function tools: BeeLlama 0.1 refuses a request with Codex's web_search or multi_agent namespace
    assert (data["web_search"], data["features"]) == ("disabled", {"multi_agent": False})
    assert data["model_providers"]["beedeck"]["base_url"] == "http://127.0.0.1:8477/v1"
    assert "env_key" not in data["model_providers"]["beedeck"]
    assert tomllib.loads(render(LAN, once))["model_providers"]["beedeck"]["env_key"] == KEY_ENV
    with pytest.raises(AgentConfigError, match=r"model_providers.beedeck"):
        render(LOCAL, 'model = "gpt-5"\n')


def test_continue_item_joins_the_users_model_list_at_its_indent() -> None:
    render = client("continue").render
    assert render is not None
    old = "name: Mine\nversion: 1.0.0\nschema: v1\nmodels:\n- name: GPT\n  provider: openai\n  model: gpt-4o\n"
    text = render(LOCAL, old)
    assert text.startswith("name: Mine\n") and "- name: GPT\n  provider: openai\n" in text
    assert f'- name: "{LOCAL.model} (BeeDeck)"\n  provider: openai\n' in text
    assert f'  apiBase: "{LOCAL.openai_url}"\n' in text
    models = yaml.safe_load(text)["models"]
    assert [m["name"] for m in models] == [f"{LOCAL.model} (BeeDeck)", "GPT"] and "capabilities" not in models[0]
    assert render(LOCAL, text) == text
    fresh = render(LOCAL, None)
    assert fresh.startswith("name: Local config\nversion: 1.0.0\nschema: v1\nmodels:\n  # >>> BeeDeck")
    assert "${{ secrets.BEEDECK_API_KEY }}" in render(LAN, None)
    # headless `cn -p` offers no Write tool unless allowed: the command allows that one tool
    assert client("continue").command(LOCAL) == "cn --allow Write"
    with pytest.raises(AgentConfigError, match="flow"):
        render(LOCAL, "models: []\n")


def test_aider_replaces_only_the_keys_it_owns() -> None:
    render = client("aider").render
    assert render is not None
    text = render(LOCAL, "dark-mode: true\nmodel: gpt-4o\n")
    assert text.startswith("dark-mode: true\n") and "model: gpt-4o" not in text
    assert f'model: "openai/{LOCAL.model}"\nopenai-api-base: "{LOCAL.openai_url}"\n' in text
    assert render(LOCAL, text) == text
    assert yaml.safe_load(text) == {"dark-mode": True, "model": f"openai/{LOCAL.model}",
                                    "openai-api-base": LOCAL.openai_url, "openai-api-key": NO_KEY}
    assert "openai-api-key" not in render(LAN, None)
    assert client("aider").command(LAN).startswith('OPENAI_API_KEY="${OPENAI_API_KEY:-$(')


def test_claude_code_env_block_and_key_helper() -> None:
    render = client("claude-code").render
    assert render is not None
    data = json.loads(render(LOCAL, json.dumps({"permissions": {"allow": ["Bash(ls)"]}, "env": {"FOO": "1"}})))
    assert data["permissions"] == {"allow": ["Bash(ls)"]} and data["env"]["FOO"] == "1"
    assert data["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8477" and data["env"]["ANTHROPIC_MODEL"] == LOCAL.model
    assert data["env"]["ANTHROPIC_AUTH_TOKEN"] == NO_KEY and "apiKeyHelper" not in data
    lan = json.loads(render(LAN, json.dumps(data)))
    assert "ANTHROPIC_AUTH_TOKEN" not in lan["env"] and lan["apiKeyHelper"].endswith("agent key")
    # `claude -p` denies Write unless edits are allowed: the command says so (the settings stay the user's)
    assert client("claude-code").command(LOCAL) == "claude --permission-mode acceptEdits"


@pytest.mark.parametrize(("ctx", "output"), [(8192, 1024), (16384, 9216), (32768, 25600), (131072, 32000)])
def test_claude_code_keeps_room_for_its_request(ctx: int, output: int) -> None:
    # Claude Code sends only when context - min(max output, 20000) covers its own estimate of the request
    # (6,262 tokens for a one-line task): measured with the real client (core/agents/clients.py).
    render = client("claude-code").render
    assert render is not None
    env = json.loads(render(replace(LOCAL, ctx_size=ctx), None))["env"]
    assert (env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"], env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"]) == (str(ctx), str(output))
    assert ctx - min(output, 20000) >= 6262 + 900


def test_claude_code_is_refused_before_writing_below_its_floor() -> None:
    assert CLAUDE_MIN_CTX == 8192 and refusal(client("claude-code"), replace(LOCAL, ctx_size=8192)) is None
    said = refusal(client("claude-code"), replace(LOCAL, ctx_size=4096))
    assert said is not None and "4,096 tokens of context" in said and "Prompt is too long" in said
    assert refusal(client("aider"), replace(LOCAL, ctx_size=4096)) is None


def test_tool_support_is_written_only_where_the_template_has_it() -> None:
    for tools, tool_call, caps in ((True, True, ["tool_use"]), (False, False, []), (None, None, None)):
        ep = replace(LOCAL, tools=tools)
        oc = json.loads(client("opencode").render(ep, None))["provider"]["beedeck"]["models"][ep.model]  # type: ignore[misc]
        assert oc.get("tool_call") == tool_call
        (cont,) = yaml.safe_load(client("continue").render(ep, None))["models"]  # type: ignore[misc]
        assert cont.get("capabilities") == caps


@pytest.mark.parametrize("client_id", ["codex", "aider", "continue", "opencode", "claude-code"])
def test_no_model_or_host_can_add_a_key(client_id: str) -> None:
    # The tester's --model values: a newline and a Codex notify command / an Aider lint-cmd after it.
    evil = Endpoint("10.0.0.1\nnotify = 1", 8477, 'm"\nnotify = ["sh", "-c", "touch pwned"]\nlint-cmd: touch pwned', 8192)
    text = client(client_id).render(evil, None)  # type: ignore[misc]
    data = (tomllib.loads(text) if client_id == "codex" else json.loads(text) if client_id in ("opencode", "claude-code")
            else yaml.safe_load(text))
    assert "notify" not in json.dumps(sorted(data)) and "lint-cmd" not in data
    if client_id == "codex":
        assert data["model"] == evil.model and data["model_providers"]["beedeck"]["base_url"] == evil.openai_url


def test_needs_say_what_the_server_lacks() -> None:
    small = Endpoint("127.0.0.1", 8477, "m", 8192, jinja=False)
    needs = client("opencode").needs(small)
    assert any("--jinja" in n for n in needs) and any("16384" in n for n in needs)
    assert client("aider").needs(LOCAL) == []


def test_write_shows_the_diff_backs_up_and_undo_restores(home: Path) -> None:
    c = client("opencode")
    path = c.config()  # type: ignore[misc]
    path.parent.mkdir(parents=True)
    path.write_text('{"theme": "mine"}\n')
    plan = configfile.plan(c, LOCAL)
    diff = plan.diff()
    assert diff.startswith(f"--- {path}\n+++ {path}\n") and '+  "model": "beedeck/' in diff
    backup = configfile.write(plan)
    assert backup is not None and backup.read_text() == '{"theme": "mine"}\n'
    assert json.loads(path.read_text())["theme"] == "mine" and configfile.has_undo("opencode")
    assert not configfile.plan(c, LOCAL).changes
    assert "restored" in configfile.undo("opencode")
    assert path.read_text() == '{"theme": "mine"}\n' and not configfile.has_undo("opencode")


def test_undo_of_a_new_file_removes_it_and_edits_are_not_lost(home: Path) -> None:
    c = client("codex")
    plan = configfile.plan(c, LOCAL)
    assert plan.old is None and plan.diff().startswith("--- /dev/null\n")
    assert configfile.write(plan) is None
    plan.path.write_text(plan.path.read_text() + "# mine\n")
    with pytest.raises(AgentConfigError, match="edited after BeeDeck wrote it"):
        configfile.undo("codex")
    assert "removed" in configfile.undo("codex", force=True) and not plan.path.exists()
    assert any(p.name.startswith("edited-") for p in configfile.backups_dir("codex").iterdir())
    with pytest.raises(AgentConfigError, match="nothing to undo"):
        configfile.undo("codex")


def test_a_file_changed_after_the_diff_is_not_overwritten(home: Path) -> None:
    c = client("claude-code")
    plan = configfile.plan(c, LOCAL)
    plan.path.parent.mkdir(parents=True)
    plan.path.write_text('{"model": "opus"}\n')
    with pytest.raises(AgentConfigError, match="changed since the diff"):
        configfile.write(plan)
    assert plan.path.read_text() == '{"model": "opus"}\n'


def test_an_unreadable_config_is_refused_not_replaced(home: Path) -> None:
    c = client("opencode")
    path = c.config()  # type: ignore[misc]
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    with pytest.raises(AgentConfigError, match="not valid JSON.*does not overwrite"):
        configfile.plan(c, LOCAL)
    assert path.read_text() == "{ not json"


def test_clients_without_a_file_give_the_environment() -> None:
    env = client("openai").env(LAN)
    assert env["OPENAI_BASE_URL"] == "http://192.168.1.5:8477/v1"
    assert env["OPENAI_API_KEY"].startswith("${OPENAI_API_KEY:-$(") and "agent key" in env["OPENAI_API_KEY"]
    assert client("anthropic").env(LOCAL)["ANTHROPIC_AUTH_TOKEN"] == NO_KEY
    with pytest.raises(AgentConfigError, match="no config file"):
        configfile.plan(client("openai"), LOCAL)
