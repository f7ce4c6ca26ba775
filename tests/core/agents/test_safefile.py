"""core.agents.safefile: a config read within bounds (no FIFO, device or huge file; links followed or
refused with the reason), its encoding kept, replaced whole with its mode and owner, BeeDeck's own copies
private, one writer at a time."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beedeck.core.agents import safefile
from beedeck.core.agents.formats import AgentConfigError


def test_a_fifo_a_device_and_a_huge_file_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "opencode.json"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(AgentConfigError, match=r"is a FIFO \(named pipe\).*at most 1,048,576 bytes: move it aside"):
        safefile.read(fifo)
    zero = tmp_path / "settings.json"
    zero.symlink_to("/dev/zero")
    with pytest.raises(AgentConfigError, match="is a character device"):
        safefile.read(zero)
    huge = tmp_path / "config.yaml"
    with open(huge, "wb") as fh:
        fh.truncate(1_500_000_000)  # sparse: 1.5 GB claimed, nothing read
    with pytest.raises(AgentConfigError, match=r"is 1,500,000,000 bytes, more than the 1,048,576"):
        safefile.read(huge)
    assert time.monotonic() - t0 < 2


def test_a_link_is_followed_to_its_file_and_one_that_dangles_or_loops_is_refused(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "opencode.json").write_text("{}\n")
    link = tmp_path / "opencode.json"
    link.symlink_to(dotfiles / "opencode.json")
    now = safefile.read(link)
    assert now.target == safefile.Target(link, dotfiles / "opencode.json", str(dotfiles / "opencode.json"))
    assert now.raw == b"{}\n"
    gone = tmp_path / "gone.json"
    gone.symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(AgentConfigError, match=r"is a symbolic link to .*nowhere.json, which does not exist"):
        safefile.read(gone)
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(AgentConfigError, match="a symbolic link that loops"):
        safefile.read(loop)
    assert safefile.read(tmp_path / "absent.json").raw is None


@pytest.mark.parametrize("raw", [b'{"a": 1}\r\n', b'\xef\xbb\xbf{"a": 1}\n', b'\xef\xbb\xbfa: 1\r\nb: 2\r\n',
                                 b"a: 1\nb: 2", b"a: 1\r\nb: 2\n"])
def test_the_byte_order_mark_and_line_endings_come_back(raw: bytes) -> None:
    text, enc = safefile.decode(raw, Path("x"))
    assert "\r\n" not in text or not enc.crlf
    assert safefile.encode(text, enc) == raw
    assert safefile.encode(text + "c: 3\n", enc).endswith(b"c: 3\r\n" if enc.crlf else b"c: 3\n")


def test_text_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(AgentConfigError, match="is not UTF-8 text"):
        safefile.decode(b"caf\xe9", Path("config.yaml"))


def test_replace_keeps_the_mode_and_the_owner_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_bytes(b"old")
    path.chmod(0o640)
    owner = (4242, 4343) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    if os.geteuid() == 0:
        os.chown(path, *owner)
    now = safefile.read(path)
    safefile.replace_file(path, b"new", now.mode, (now.uid, now.gid))
    st = path.stat()
    assert path.read_bytes() == b"new" and stat.S_IMODE(st.st_mode) == 0o640 and (st.st_uid, st.st_gid) == owner
    assert sorted(p.name for p in tmp_path.iterdir()) == ["settings.json"]


def test_a_temporary_name_left_by_a_dead_writer_is_swept_and_a_live_ones_is_not(tmp_path: Path) -> None:
    real = tmp_path / "config.toml"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / f".config.toml{safefile.TMP_TAG}{int(dead.stdout)}-abcd1234"
    left.write_bytes(b"x" * 6_000_000)
    live = tmp_path / f".config.toml{safefile.TMP_TAG}{os.getppid()}-abcd1234"
    live.write_bytes(b"y")
    assert safefile.sweep(real) == [left]
    assert not left.exists() and live.exists()


def test_beedecks_own_copies_are_private(tmp_path: Path) -> None:
    copy = tmp_path / "backups" / "client" / "0001.bak"
    (tmp_path / "backups").mkdir(mode=0o755)
    safefile.write_private(copy, b"secret")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    safefile.private_dir(tmp_path / "backups")
    assert stat.S_IMODE((tmp_path / "backups").stat().st_mode) == 0o700


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    lock = tmp_path / "agent-backups" / ".lock"
    with safefile.locked(lock):
        with pytest.raises(AgentConfigError, match=r"Another BeeDeck has been writing .* try again"):
            with safefile.locked(lock, timeout_s=0.2):
                pass
    with safefile.locked(lock, timeout_s=0.2):
        pass
