"""Round three: a coding agent's config (issue 33). Each fault the tester's hostile run found in `beedeck agent`
(a config that lost its mode, its link, its line endings, the user's original; a value that added a key; a
write that a kill, a second writer or a full record folder left half-done; files that blocked or ate memory;
a key that never reached the agent; a set-up read from the profile instead of the running server; Claude
Code refusing the config BeeDeck wrote) is driven here as a user drives it: the CLI as a child process with
a HOME of its own, the real starter server where a server matters, the real Claude Code where it does.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
import yaml

from beedeck.core.agents.safefile import TMP_TAG
from tests.agents.clients import ensure_client

from .conftest import Beedeck, Child, Tmpfs, wait_for
from .test_hostile_files import refused, run_limited

pytestmark = pytest.mark.engine

NO_KEYRING = "keyring.backends.fail.Keyring"  # the tester's machine: no keyring backend


@pytest.fixture
def home(beedeck: Beedeck) -> Path:
    path = beedeck.workdir / "home"
    path.mkdir()
    return path


def agent(bd: Beedeck, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``beedeck agent ARGS`` as the user runs it, with their HOME and no keyring; address space capped."""
    return run_limited(bd, "agent", *args, HOME=str(home), PYTHON_KEYRING_BACKEND=NO_KEYRING,
                       BEEDECK_AGENT_CLI_FROM_PYTHON="1", **env)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.returncode, done.stdout[-2000:],
                                                                     done.stderr[-3000:])
    return done.stdout


def _opencode(home: Path) -> Path:
    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _temps(*folders: Path) -> list[Path]:
    return [p for f in folders if f.is_dir() for p in f.rglob(f"*{TMP_TAG}*")]


# ------------------------------------------------------------------------------------ the file itself

def test_a_private_config_stays_private_and_so_does_every_copy(beedeck: Beedeck, home: Path) -> None:
    path = _opencode(home)
    path.write_text('{"provider": {"openai": {"options": {"apiKey": "sk-another-providers-key"}}}}\n')
    path.chmod(0o600)
    owner = (4242, 4343) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    if os.geteuid() == 0:
        os.chown(path, *owner)
    ok(agent(beedeck, home, "write", "opencode", "--yes"))
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and (st.st_uid, st.st_gid) == owner  # before: 0644, root's
    backups = beedeck.home / "data" / "agent-backups"
    for p in [backups, *backups.rglob("*")]:
        if p.name != ".lock":
            assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600), p  # before: 0644 in 0755
    assert any(b"sk-another-providers-key" in p.read_bytes() for p in backups.rglob("*.bak"))
    ok(agent(beedeck, home, "undo", "opencode"))
    st = path.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and (st.st_uid, st.st_gid) == owner and b"beedeck" not in path.read_bytes()


def test_a_linked_config_is_written_through_and_undo_restores_link_and_file(beedeck: Beedeck, home: Path) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "opencode.json"
    target.write_text('{"theme": "dark"}\n')
    path = _opencode(home)
    path.symlink_to(target)
    said = ok(agent(beedeck, home, "write", "opencode", "--yes"))
    assert f"{path} is a link to {target}: BeeDeck writes {target} and keeps the link" in said
    assert path.is_symlink() and json.loads(target.read_text())["model"].startswith("beedeck/")  # the dotfile, fresh
    ok(agent(beedeck, home, "undo", "opencode"))
    assert path.is_symlink() and os.readlink(path) == str(target) and target.read_text() == '{"theme": "dark"}\n'
    dangling = home / ".claude" / "settings.json"
    dangling.parent.mkdir()
    dangling.symlink_to(home / "dotfiles" / "missing.json")
    refused(agent(beedeck, home, "write", "claude-code", "--yes"), "which does not exist: BeeDeck writes through a link")


@pytest.mark.parametrize(("client", "flag"), [("codex", "--model"), ("aider", "--model"), ("continue", "--model"),
                                              ("codex", "--host"), ("aider", "--host")])
def test_a_value_with_a_newline_adds_no_key(beedeck: Beedeck, home: Path, client: str, flag: str) -> None:
    # The tester's values: valid TOML or YAML once a newline ends BeeDeck's line (its own TOML check passed it).
    value = {"codex": 'm"\nnotify = ["sh", "-c", "touch pwned"]\nx = "', "aider": "m\nlint-cmd: touch pwned",
             "continue": "m\n  lint-cmd: touch pwned"}[client]
    if flag == "--host":
        value = '10.0.0.1/v1"\nnotify = ["sh", "-c", "touch pwned"]\nx = "' if client == "codex" else \
            "10.0.0.1\nlint-cmd: touch pwned"
    done = agent(beedeck, home, "write", client, flag, value, "--yes")
    if flag == "--host":
        refused(done, "is not a host name or an address", code=2)
        assert not any(home.rglob("*.toml")) and not (home / ".aider.conf.yml").exists()
        return
    ok(done)
    path = {"codex": home / ".codex/beedeck.config.toml", "aider": home / ".aider.conf.yml",
            "continue": home / ".continue/config.yaml"}[client]
    text = path.read_text()
    data = tomllib.loads(text) if client == "codex" else yaml.safe_load(text)  # PyYAML: what Aider reads with
    assert "notify" not in data and "lint-cmd" not in data, text
    model = data["model"] if client != "continue" else data["models"][0]["model"]
    assert model in (value, f"openai/{value}")


def test_undo_after_any_number_of_writes_reaches_the_users_original(beedeck: Beedeck, home: Path) -> None:
    path = home / ".aider.conf.yml"
    original = b"# mine\r\ndark-mode: true\r\nmodel: gpt-4o"  # CRLF, no newline at the end
    path.write_bytes(original)
    states = [original]
    for model in ("a", "b", "c"):
        ok(agent(beedeck, home, "write", "aider", "--model", model, "--yes"))
        assert path.read_bytes().count(b"\r\n") == path.read_bytes().count(b"\n")  # written back as CRLF
        states.append(path.read_bytes())
    for expected in reversed(states[:-1]):  # before: the second undo said "nothing to undo", the model was lost
        ok(agent(beedeck, home, "undo", "aider"))
        assert path.read_bytes() == expected
    refused(agent(beedeck, home, "undo", "aider"), "nothing to undo")


@pytest.mark.parametrize("raw", [b'{\r\n  "theme": "dark"\r\n}\r\n', b'\xef\xbb\xbf{"theme": "dark"}\n',
                                 b'{"theme": "dark"}'], ids=["crlf", "bom", "no-final-newline"])
def test_undo_gives_back_the_users_bytes_exactly(beedeck: Beedeck, home: Path, raw: bytes) -> None:
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_bytes(raw)
    ok(agent(beedeck, home, "write", "claude-code", "--yes"))
    assert path.read_bytes().startswith(raw[:3]) and json.loads(path.read_bytes().decode("utf-8-sig"))["env"]
    ok(agent(beedeck, home, "undo", "claude-code"))
    assert path.read_bytes() == raw  # before: CRLF came back as LF


def test_opencodes_jsonc_is_written_back_with_its_comments(beedeck: Beedeck, home: Path) -> None:
    path = _opencode(home)
    path.write_text('{\n  // my theme\n  "theme": "dark", /* the one I like */\n  "keybinds": {"leader": "ctrl+x",},\n}\n')
    ok(agent(beedeck, home, "write", "opencode", "--yes"))  # before: "not valid JSON", refused
    text = path.read_text()
    assert "// my theme" in text and "/* the one I like */" in text and '"leader": "ctrl+x",}' in text
    assert '"model": "beedeck/smollm2-135m-instruct.q4_1"' in text


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "1.5-gb", "nested-200000"])
def test_a_config_that_is_a_fifo_a_device_huge_or_nested_too_deep_is_refused_at_once(
        beedeck: Beedeck, home: Path, kind: str) -> None:
    path = _opencode(home)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "1.5-gb":
        with open(path, "wb") as fh:
            fh.truncate(1_500_000_000)
    else:
        path.write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    t0 = time.monotonic()
    done = agent(beedeck, home, "write", "opencode", "--yes")  # 3 GB address space, a 90 s timeout
    says = {"fifo": "is a FIFO (named pipe), not a regular file", "dev-zero": "is a character device",
            "1.5-gb": "is 1,500,000,000 bytes, more than the 1,048,576", "nested-200000": "nests more than 64 levels"}
    refused(done, says[kind])
    assert "RecursionError" not in done.stderr and time.monotonic() - t0 < 30
    assert path.is_symlink() or path.exists()  # left as it was


# --------------------------------------------------------------------------- writers, kills, full folders

def test_six_parallel_writes_never_write_over_each_other(beedeck: Beedeck, home: Path) -> None:
    path = home / ".aider.conf.yml"
    original = b"dark-mode: true\n"
    path.write_bytes(original)
    go = beedeck.workdir / "go"
    script = textwrap.dedent(f"""
        import os, sys, time
        from beedeck.cli import main
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
        sys.exit(main(["agent", "write", "aider", "--model", sys.argv[1], "--yes"]))
    """)
    env = beedeck.env(HOME=str(home), PYTHON_KEYRING_BACKEND=NO_KEYRING)
    procs = [subprocess.Popen([sys.executable, "-c", script, f"model-{i}"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(6)]
    time.sleep(3)  # every writer imported and waiting
    go.write_text("")
    outs = [p.communicate(timeout=120) for p in procs]
    wrote = sum("Wrote " in out for out, _ in outs)
    refusals = [err for _, err in outs if "changed since the diff was shown" in err]
    assert wrote >= 1 and wrote + len(refusals) == 6, outs  # before: all six said "Wrote", each over the others
    for _ in range(wrote):
        ok(agent(beedeck, home, "undo", "aider"))
    assert path.read_bytes() == original  # every write that said "Wrote" is in the history, in order
    refused(agent(beedeck, home, "undo", "aider"), "nothing to undo")


KILLER = textwrap.dedent("""
    import os, signal, sys
    from beedeck.core.agents import configfile
    from beedeck.core.agents.clients import client
    from beedeck.core.agents.endpoint import Endpoint
    plan = configfile.plan(client("opencode"), Endpoint("127.0.0.1", 9000, "new-model", 8192))
    step, calls = int(sys.argv[1]), [0]
    def dying(name):
        real = getattr(os, name)
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == step:
                os.kill(os.getpid(), signal.SIGKILL)  # killed at this system call, nothing cleans up
            return real(*args, **kwargs)
        return call
    for name in ("open", "write", "fsync", "fchmod", "fchown", "link", "replace", "unlink", "mkdir", "chmod"):
        setattr(os, name, dying(name))
    configfile.write(plan)
    print("completed", calls[0])
""")


def test_a_write_killed_at_any_step_leaves_old_or_new_with_its_record_and_no_temporary_file(
        beedeck: Beedeck, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from beedeck.core.agents import configfile
    from beedeck.core.agents.clients import AgentConfigError, client
    from beedeck.core.agents.endpoint import Endpoint

    monkeypatch.setenv("HOME", str(home))  # this test's own checks run in-process, on the same files
    path = _opencode(home)
    old = b'{"theme": "dark"' + b" " * 900_000 + b"}\n"  # a large config (the tester's temp file was 6 MB)
    backups = beedeck.home / "data" / "agent-backups"
    outcomes = []
    for step in range(1, 400):
        path.write_bytes(old)
        shutil.rmtree(backups, ignore_errors=True)
        done = subprocess.run([sys.executable, "-c", KILLER, str(step)], env=beedeck.env(HOME=str(home)),
                              capture_output=True, text=True, timeout=60)
        now = path.read_bytes()
        assert now == old or b"new-model" in now, (step, done.stderr[-2000:])
        configfile.plan(client("opencode"), Endpoint("127.0.0.1", 1, "m", 8192))  # the next BeeDeck here
        assert not _temps(path.parent, backups), (step, _temps(path.parent, backups))  # before: a 6 MB temp file
        if now != old:  # the new file: its record is there, and undo brings the old one back
            configfile.undo("opencode")  # before: replaced with no undo record
            assert path.read_bytes() == old, step
        else:
            with pytest.raises(AgentConfigError, match="nothing to undo"):  # a write that never landed
                configfile.undo("opencode")
        outcomes.append("old" if now == old else "new")
        if done.returncode == 0:
            assert "completed" in done.stdout
            break
    else:
        raise AssertionError("the write never completed")
    assert outcomes.count("old") > 5 and outcomes[-1] == "new", outcomes


def test_an_undo_record_that_cannot_be_written_replaces_nothing(
        beedeck: Beedeck, home: Path, small_disk: Tmpfs, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    backups = beedeck.home / "data" / "agent-backups"
    backups.parent.mkdir(parents=True, exist_ok=True)
    if small_disk.real:  # BeeDeck's data folder on a full disk
        backups.symlink_to(small_disk.path, target_is_directory=True)
        ballast = small_disk.fill()
        try:
            done = agent(beedeck, home, "write", "codex", "--yes")
        finally:
            ballast.unlink()
        refused(done, "The undo record could not be written")
        said = done.stderr
    else:  # no tmpfs here: ENOSPC where the full disk would raise it, in the same code, in-process
        from beedeck.cli import main
        from beedeck.core.agents import safefile

        real = safefile.replace_file

        def full(path: Path, *args: object) -> None:
            if backups in path.parents:
                raise safefile.AgentConfigError(f"{path} could not be written (the disk is full): it was left as it was.")
            real(path, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(safefile, "replace_file", full)
        monkeypatch.setenv("HOME", str(home))
        assert main(["agent", "write", "codex", "--yes"]) == 1
        said = capsys.readouterr().err
    assert "The undo record could not be written" in said and "was not touched" in said and "the disk is full" in said
    assert not (home / ".codex" / "beedeck.config.toml").exists()  # before: written, with no way back


# --------------------------------------------------------------------------------- the running server

def _serve(bd: Beedeck, *args: str, **env: str) -> tuple[Child, int]:
    child = bd.spawn("serve", *bd.starter_args(), *args, **env)
    out = child.wait_text("ready in", timeout=180, stream="out")
    found = re.search(r"at http://(?:127\.0\.0\.1|0\.0\.0\.0):(\d+)", out)
    assert found, out
    child.wait_text("context:", timeout=30, stream="out")  # the line after "ready": what the engine gave
    return child, int(found.group(1))


def _stop(child: Child) -> None:
    child.proc.send_signal(2)
    child.wait(30)


def test_agent_write_names_the_port_and_the_context_the_running_server_has(beedeck: Beedeck, home: Path) -> None:
    server, port = _serve(beedeck, "--ctx", "32768")
    # Before: "ready" alone, while the engine had capped the slot at 8,192 ("exceeds the training context").
    assert "context: 8,192 tokens per slot (asked 32,768: the engine capped it at the model's training context, " \
           "8,192)" in server.stdout()
    said = ok(agent(beedeck, home, "write", "opencode", "--yes"))
    assert "server: BeeDeck's running server" in said
    data = json.loads((home / ".config/opencode/opencode.json").read_text())
    beedeck_provider = data["provider"]["beedeck"]
    assert beedeck_provider["options"]["baseURL"] == f"http://127.0.0.1:{port}/v1"  # before: 8477, where nothing ran
    assert beedeck_provider["models"]["smollm2-135m-instruct.q4_1"]["limit"]["context"] == 8192
    _stop(server)


def test_a_lan_servers_key_reaches_the_agent_and_a_key_the_user_exported_is_kept(
        beedeck: Beedeck, home: Path) -> None:
    key = "k-lan-4c1f"
    refused(agent(beedeck, home, "key"), "No API key is known for BeeDeck's server")  # before: beedeck-local, 0
    server, port = _serve(beedeck, "--host", "0.0.0.0", BEEDECK_API_KEY=key, PYTHON_KEYRING_BACKEND=NO_KEYRING)
    assert ok(agent(beedeck, home, "key")).strip() == key
    said = ok(agent(beedeck, home, "write", "aider", "--yes"))
    assert key not in said and key not in (home / ".aider.conf.yml").read_text()
    assert key not in server.stdout() + server.stderr()
    run = re.search(r"^Run: (.*)$", said, re.M)
    assert run and run.group(1).startswith('OPENAI_API_KEY="${OPENAI_API_KEY:-$('), said
    shell = run.group(1).removesuffix("aider") + "printenv OPENAI_API_KEY"
    env = beedeck.env(HOME=str(home), PYTHON_KEYRING_BACKEND=NO_KEYRING, BEEDECK_AGENT_CLI_FROM_PYTHON="1")
    env.pop("OPENAI_API_KEY", None)
    filled = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True, timeout=60)
    kept = subprocess.run(["bash", "-c", shell], env={**env, "OPENAI_API_KEY": "users-own"}, capture_output=True,
                          text=True, timeout=60)
    assert (filled.stdout.strip(), kept.stdout.strip()) == (key, "users-own")  # before: overwritten, 401 for all
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200
    _stop(server)
    refused(agent(beedeck, home, "key"), "no BeeDeck server runs")


def test_a_template_without_tools_is_said_and_not_declared(beedeck: Beedeck, home: Path) -> None:
    server, _ = _serve(beedeck)
    said = ok(agent(beedeck, home, "write", "continue", "--yes"))
    assert "tools: the model's chat template has no tool syntax (/props chat_template_caps)" in said
    assert 'nothing forces a tool call: "required"' in said
    (item,) = yaml.safe_load((home / ".continue/config.yaml").read_text())["models"]
    assert item["capabilities"] == []  # before: [tool_use], and OpenCode's tool_call true
    _stop(server)


def test_serve_and_agent_name_the_mode_that_breaks_tool_calls(beedeck: Beedeck, home: Path) -> None:
    server, _ = _serve(beedeck)
    assert "tool-safe: MTP speculation is known to break tool calls on this engine (mtp-tool-call-args); this " \
           "server runs no speculation, which is safe for an agent." in server.stdout()
    _stop(server)
    profile = {"schema_version": 1, "engine": str(beedeck.engine), "name": "mine",
               "settings": {"target": str(beedeck.model), "spec_mode": "mtp", "ctx_size": 8192}}
    (beedeck.home / "config").mkdir(exist_ok=True)
    (beedeck.home / "config" / "profile.json").write_text(json.dumps(profile))
    said = ok(agent(beedeck, home, "show", "claude-code"))
    assert "tool-safe: this server runs MTP, which is known to break tool calls here." in said  # before: only the window
    assert "`beedeck serve --spec off`" in said and "#27296" in said


def test_claude_code_with_the_config_beedeck_writes_sends_its_request(beedeck: Beedeck, home: Path) -> None:
    claude = ensure_client("claude-code")
    server, port = _serve(beedeck)
    ok(agent(beedeck, home, "write", "claude-code", "--yes"))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb", "DISABLE_AUTOUPDATER": "1",
           "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}
    run = subprocess.Popen([str(claude.executable), "-p", "Say hi.", "--max-turns", "1"], env=env, cwd=home,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def busy() -> bool:
        if run.poll() is not None:
            return True
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/slots", timeout=10) as resp:
            return any(s.get("is_processing") for s in json.loads(resp.read()))

    try:
        wait_for(busy, 120, "Claude Code's request at the server")
        assert run.poll() is None, run.communicate()[0][-2000:]  # before: "Prompt is too long", rc 1, nothing sent
    finally:
        run.kill()
        run.wait(10)
    _stop(server)


def test_claude_code_on_a_server_too_small_is_refused_before_writing(beedeck: Beedeck, home: Path) -> None:
    done = agent(beedeck, home, "write", "claude-code", "--ctx", "4096", "--yes")
    refused(done, "Not written: Claude Code cannot run on this server: it has 4,096 tokens of context per slot")
    assert "Prompt is too long" in done.stderr and not (home / ".claude").exists()
