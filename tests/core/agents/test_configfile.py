"""core.agents.configfile: the plan (diff first), the write (a private, durable record before the file is
replaced), undo through a history back to the user's own bytes, links and modes kept."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from beedeck.core.agents import configfile
from beedeck.core.agents.clients import AgentConfigError, client
from beedeck.core.agents.endpoint import Endpoint

EP = Endpoint("127.0.0.1", 8477, "smollm2-135m-instruct.q4_1", 8192, tools=False)


@pytest.fixture
def home(agent_home: Path) -> Path:
    return agent_home  # tests/conftest.py: a HOME of the test's own


def _opencode(home: Path) -> Path:
    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_any_number_of_writes_undo_back_to_the_users_own_bytes(home: Path) -> None:
    path = _opencode(home)
    original = b'\xef\xbb\xbf{\r\n  // mine\r\n  "theme": "dark"\r\n}'  # a BOM, CRLF, a comment, no last newline
    path.write_bytes(original)
    c = client("opencode")
    seen = [original]
    for model in ("a", "b", "c"):
        plan = configfile.plan(c, Endpoint("127.0.0.1", 8477, model, 8192))
        assert plan.new_raw.startswith(b"\xef\xbb\xbf{\r\n  // mine\r\n") and b"\n" not in plan.new_raw.replace(b"\r\n", b"")
        configfile.write(plan)
        seen.append(path.read_bytes())
    for expected in reversed(seen[:-1]):
        said = configfile.undo("opencode")
        assert path.read_bytes() == expected, said
    assert not configfile.has_undo("opencode")
    with pytest.raises(AgentConfigError, match="nothing to undo"):
        configfile.undo("opencode")


def test_records_and_copies_are_private_and_the_config_keeps_its_mode(home: Path) -> None:
    path = _opencode(home)
    path.write_text('{"provider": {"openai": {"options": {"apiKey": "sk-other-provider"}}}}\n')
    path.chmod(0o600)
    backup = configfile.write(configfile.plan(client("opencode"), EP))
    assert backup is not None and b"sk-other-provider" in backup.read_bytes()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for p in [backup.parent, *backup.parent.iterdir()]:
        assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600), p
    root = configfile.backups_dir("opencode").parent
    assert stat.S_IMODE(root.stat().st_mode) == 0o700 and stat.S_IMODE(backup.parent.parent.stat().st_mode) == 0o700
    configfile.undo("opencode")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_linked_config_is_written_through_and_undo_brings_back_link_and_file(home: Path) -> None:
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "opencode.json"
    target.write_text('{"theme": "dark"}\n')
    path = _opencode(home)
    path.symlink_to(target)
    plan = configfile.plan(client("opencode"), EP)
    assert plan.diff().startswith(f"# {path} is a link to {target}: BeeDeck writes {target} and keeps the link")
    configfile.write(plan)
    assert path.is_symlink() and os.readlink(path) == str(target)
    assert json.loads(target.read_text())["model"] == "beedeck/smollm2-135m-instruct.q4_1"
    path.unlink()  # a tool replaced the link with a copy of the file
    path.write_text(target.read_text())
    with pytest.raises(AgentConfigError, match="edited after BeeDeck wrote it"):
        configfile.undo("opencode")
    configfile.undo("opencode", force=True)
    assert path.is_symlink() and os.readlink(path) == str(target) and target.read_text() == '{"theme": "dark"}\n'


def test_a_record_that_cannot_be_written_leaves_the_config_alone(home: Path) -> None:
    path = _opencode(home)
    path.write_text('{"theme": "dark"}\n')
    history = configfile.backups_dir("opencode") / "history"
    history.parent.mkdir(parents=True)
    history.write_text("a file where the history folder belongs")
    with pytest.raises(AgentConfigError, match=r"The undo record could not be written .* was not touched"):
        configfile.write(configfile.plan(client("opencode"), EP))
    assert path.read_text() == '{"theme": "dark"}\n'


def test_a_write_whose_replace_never_happened_is_not_undone(home: Path) -> None:
    # Killed between its record and the replace: the file still holds what was there, the record is dropped.
    path = _opencode(home)
    path.write_text('{"theme": "dark"}\n')
    configfile.write(configfile.plan(client("opencode"), EP))
    first = path.read_bytes()
    plan = configfile.plan(client("opencode"), Endpoint("127.0.0.1", 9000, "other", 8192))
    real_replace = configfile.safefile.replace_file

    def killed(real: Path, *args: object) -> None:
        if real == plan.real:  # the config itself: BeeDeck's own record went through
            raise SystemExit("killed")
        real_replace(real, *args)  # type: ignore[arg-type]

    configfile.safefile.replace_file = killed  # type: ignore[assignment]
    try:
        with pytest.raises(SystemExit):
            configfile.write(plan)
    finally:
        configfile.safefile.replace_file = real_replace
    assert path.read_bytes() == first and len(list((configfile.backups_dir("opencode") / "history").glob("*.json"))) == 2
    configfile.undo("opencode")
    assert path.read_text() == '{"theme": "dark"}\n' and not configfile.has_undo("opencode")


def test_a_file_changed_since_the_diff_is_refused_unless_it_already_says_this(home: Path) -> None:
    c = client("claude-code")
    plan = configfile.plan(c, EP)
    plan.path.parent.mkdir(parents=True)
    plan.path.write_text('{"model": "opus"}\n')
    with pytest.raises(AgentConfigError, match="changed since the diff"):
        configfile.write(plan)
    assert plan.path.read_text() == '{"model": "opus"}\n'
    plan.path.write_bytes(plan.new_raw)
    with pytest.raises(configfile.AlreadyWritten, match="already says this"):
        configfile.write(plan)


def test_the_record_of_a_beedeck_before_the_history_is_still_undone(home: Path) -> None:
    path = _opencode(home)
    path.write_text('{"theme": "new"}\n')
    folder = configfile.backups_dir("opencode")
    folder.mkdir(parents=True)
    (folder / "old.json").write_text('{"theme": "old"}\n')
    import hashlib

    (folder / "last-write.json").write_text(json.dumps({
        "path": str(path), "backup": str(folder / "old.json"),
        "written_sha256": hashlib.sha256(b'{"theme": "new"}\n').hexdigest()}))
    assert configfile.has_undo("opencode")
    assert "restored" in configfile.undo("opencode")
    assert path.read_text() == '{"theme": "old"}\n' and not configfile.has_undo("opencode")


def test_a_damaged_record_is_named(home: Path) -> None:
    history = configfile.backups_dir("opencode") / "history"
    history.mkdir(parents=True)
    (history / "0001.json").write_text("{cut")
    with pytest.raises(AgentConfigError, match=r"0001.json is damaged: restore by hand"):
        configfile.undo("opencode")
    assert configfile.has_undo("opencode")
