"""Faults, round three: data from another BeeDeck version, and many BeeDeck processes on one data folder.

A newer BeeDeck's profile or settings are said as such, left where they are and never overwritten; fields
this version does not know survive its saves; only what SQLite calls corrupt is a damaged history. Two
windows (or a window and ``beedeck serve``) on one BeeDeck home are real child processes
(tests/faults/gui_child.py, driven through a commands file): each has its own chat, a turn goes to the chat
it was typed in, the port is claimed so that two processes started together never both take it, and each
names the other as BeeDeck's own. A download killed at its final rename loses nothing.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.chat.recovery import open_store
from beedeck.core.chat.store import ChatStore, ChatStoreError, default_path
from beedeck.core.download import download_file
from beedeck.core.engine.ports import free_port
from beedeck.core.settings import SCHEMA_VERSION, settings_path
from beedeck.core.starter import StarterProfile
from beedeck.ui.window import app as app_mod
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fakes.fake_nvml import detect_no_gpu

from .conftest import Beedeck, Child, place_starter, wait_for


def _window(qtbot: QtBot) -> app_mod.MainWindow:
    window = app_mod.build_window(no_autostart=True, detect=detect_no_gpu)
    qtbot.addWidget(window)
    window.show()
    return window


def _profile(bd: Beedeck, port: int = 0, **extra: Any) -> dict[str, Any]:
    settings = StarterProfile(bd.engine, bd.model).settings(threads=1).to_dict()
    return {"engine": str(bd.engine), "label": "starter (CPU)", "settings": {**settings, "port": port}, **extra}


def _save_profile(bd: Beedeck, data: dict[str, Any]) -> Path:
    path = bd.home / "config" / "profile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


# --------------------------------------------------------------------------- data from another version

@pytest.mark.parametrize("newer", [{"settings": {"spec_mode": "eagle9"}}, {"schema_version": 2}, {"kind": "cluster"}],
                         ids=["unknown-mode", "newer-version", "unknown-kind"])
def test_a_profile_from_a_newer_beedeck_is_said_left_in_place_and_never_overwritten(
        qtbot: QtBot, beedeck: Beedeck, newer: dict[str, Any]) -> None:
    place_starter(beedeck.home, beedeck.model)
    data = _profile(beedeck)
    data = {**data, **newer, "settings": {**data["settings"], **newer.get("settings", {})}}
    path = _save_profile(beedeck, data)
    text = path.read_text()
    window = _window(qtbot)
    notice = window.notices.text()
    assert "written by a newer BeeDeck" in notice and "left as it is and not used" in notice, notice
    assert "could not be used" not in notice and "Choose the engine and models again" not in notice  # not damage
    qtbot.waitUntil(lambda: window.session.profile is not None, timeout=60_000)  # the starter, unsaved
    window.session.save_profile(window.session.profile)  # Settings → Save
    assert "The profile applies to this session only" in window.notices.text()
    window.close()
    assert path.read_text() == text and sorted(p.name for p in path.parent.glob("profile.json*")) == ["profile.json"]


def test_fields_a_newer_beedeck_added_to_the_profile_survive_settings_save(qtbot: QtBot, beedeck: Beedeck) -> None:
    data = _profile(beedeck, schema_version=1, future_top={"kept": True})
    data["settings"]["future_knob"] = 3
    path = _save_profile(beedeck, data)
    window = _window(qtbot)
    saved = window.session.profile
    assert saved is not None and window.notices.text() == ""
    saved.settings.ctx_size = 1024  # Settings → Save with one change
    window.session.save_profile(saved)
    window.close()
    after = json.loads(path.read_text())
    assert after["future_top"] == {"kept": True} and after["settings"]["future_knob"] == 3  # before: both gone
    assert after["settings"]["ctx_size"] == 1024 and after["schema_version"] == 1


def test_a_field_a_newer_beedeck_added_to_the_settings_survives_a_theme_change(qtbot: QtBot) -> None:
    path = settings_path()
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "theme": "light", "future": {"kept": [1]}}))
    window = _window(qtbot)
    window.set_theme("dark")
    window.close()
    after = json.loads(path.read_text())
    assert after["theme"] == "dark" and after["future"] == {"kept": [1]}  # before: the field was gone


def test_newer_settings_stay_said_after_a_menu_hover_and_a_theme_change_says_it_is_for_this_session(
        qtbot: QtBot) -> None:
    path = settings_path()
    text = json.dumps({"schema_version": SCHEMA_VERSION + 1, "theme": "light", "future": 1})
    path.write_text(text)
    window = _window(qtbot)
    assert "written by a newer BeeDeck" in window.notices.text()
    assert window.statusBar().currentMessage() == ""  # not drawn over the status bar's labels
    window.menu_actions["theme_dark"].showStatusText(window)  # a menu item hovered (before: the notice went)
    window.session.failure_cleared.emit()  # what a server becoming ready does (before: it hid the notice)
    assert window.notices.isVisible() and "written by a newer BeeDeck" in window.notices.text()
    window.set_theme("dark")
    assert "The theme applies to this session only" in window.notices.text()  # before: nothing said
    window.close()
    assert path.read_text() == text


def test_a_programming_error_in_the_chat_store_is_an_error_never_a_damaged_history(qtbot: QtBot) -> None:
    store = ChatStore()
    conv = store.create_conversation("kept")
    store.add_message(conv.id, "user", "a message to keep")
    store.close()
    window = _window(qtbot)
    with pytest.raises(ChatStoreError) as exc:  # the fault: a wrong argument type from BeeDeck's own code
        window.store.add_message(conv.id, "user", {"not": "text"})  # type: ignore[arg-type]
    window.chat._store_failed(exc.value)  # what the chat pane shows for it
    shown = window.chat.notice.text()
    assert "bug in BeeDeck, not damage" in shown and "damaged" not in shown and "aside" not in shown
    window.close()
    window.store.close()
    reopened, recovery = open_store()  # the next start: healthy, nothing moved aside
    assert recovery is None and [c.title for c in reopened.list_conversations()] == ["kept"]
    reopened.close()
    assert sorted(p.name for p in default_path().parent.glob("chats.sqlite3.*")) == []


# --------------------------------------------------------------------------- many processes, one data folder

@dataclass
class Window:
    """A real BeeDeck window in a child process, driven through its commands file."""

    child: Child
    commands: Path

    def do(self, line: str) -> None:
        with open(self.commands, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def _count(self, prefix: str) -> int:
        return sum(1 for line in self.child.stdout().splitlines() if line.startswith(prefix))

    def state(self) -> dict[str, Any]:
        n = self._count("state ")
        self.do("state")
        self.child.wait_text("state ", 30, "out")
        wait_for(lambda: self._count("state ") > n, 30, "the window's state")
        line = [x for x in self.child.stdout().splitlines() if x.startswith("state ")][n]
        return dict(json.loads(line[len("state "):]))

    def ready(self, timeout: float = 120) -> None:
        self.child.wait_text("ready http", timeout, "out")

    def ask(self, text: str) -> None:
        n = self._count("replied ")
        self.do(f"send {text}")
        wait_for(lambda: self._count("replied ") > n or self._count("failed ") > 0, 120, f"the reply to {text!r}")
        assert self._count("failed ") == 0, self.child.stdout()[-2000:]

    def quit(self) -> None:
        self.do("quit")
        self.child.wait(60)


def open_window(bd: Beedeck, *args: str) -> Window:
    commands = bd.workdir / f"commands-{len(bd.children)}.txt"
    commands.touch()
    return Window(bd.spawn("--no-gpu", "--commands", str(commands), *args, module="tests.faults.gui_child"), commands)


def _messages(db: Path) -> dict[int, list[tuple[int, str, str, int | None]]]:
    """Every conversation's shown messages, read straight from the file: (id, role, content, parent)."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT conversation_id, id, role, content, parent_id FROM messages WHERE active=1 "
                       "ORDER BY id").fetchall()
    con.close()
    out: dict[int, list[tuple[int, str, str, int | None]]] = {}
    for conv, mid, role, content, parent in rows:
        out.setdefault(conv, []).append((mid, role, content, parent))
    return out


def _one_path(turns: list[tuple[int, str, str, int | None]]) -> bool:
    """Each message follows the one before it: a chat, not two interleaved."""
    return all(turn[3] == (turns[i - 1][0] if i else 0) for i, turn in enumerate(turns))


def test_two_windows_on_one_data_folder_each_keep_their_own_chat_through_a_restart(beedeck: Beedeck) -> None:
    """Both opened the latest chat at start and shared it: a follow-up in one was saved as the reply to the
    other's answer, and after a restart one chat held both windows' messages interleaved."""
    _save_profile(beedeck, _profile(beedeck))  # port 0: each window's server on a port of its own
    store = ChatStore()
    old = store.create_conversation("an earlier chat")  # the latest chat, which both windows opened
    store.close()
    a = open_window(beedeck)
    a.ready()
    b = open_window(beedeck)
    b.ready()
    conv_a, conv_b = a.state()["conversation"], b.state()["conversation"]
    assert conv_a == old.id and conv_b not in (None, conv_a)  # the second window never adopts the first's chat
    a.ask("A: name a colour.")
    b.ask("B: name a fruit.")
    a.ask("A: and another colour?")
    b.ask("B: and another fruit?")
    assert [t for t in a.state()["shown"] if t.startswith("A:")] == ["A: name a colour.", "A: and another colour?"]
    a.quit()
    b.quit()
    after = _messages(default_path())  # what a restart reads
    users = {conv: [t[2] for t in turns if t[1] == "user"] for conv, turns in after.items()}
    assert users == {conv_a: ["A: name a colour.", "A: and another colour?"],
                     conv_b: ["B: name a fruit.", "B: and another fruit?"]}
    assert all(_one_path(turns) and len(turns) == 4 for turns in after.values())  # each reply after its question


def test_a_chat_held_by_a_killed_window_is_free_for_the_next_one(beedeck: Beedeck) -> None:
    place_starter(beedeck.home, beedeck.model)
    store = ChatStore()
    held = store.create_conversation("the killed window's chat").id
    store.close()
    a = open_window(beedeck, "--no-autostart")
    assert a.state()["conversation"] == held
    b = open_window(beedeck, "--no-autostart")
    assert b.state()["conversation"] != held  # a live window's chat is never adopted
    os.killpg(a.child.pid, signal.SIGKILL)  # no handler runs: only the kernel can give the chat back
    a.child.wait(30)
    c = open_window(beedeck, "--no-autostart")  # b's new chat is newer, but b holds it
    assert c.state()["conversation"] == held
    b.quit()
    c.quit()


@pytest.mark.parametrize("other", ["window", "serve"])
def test_two_beedeck_processes_started_together_never_both_take_the_port_and_name_each_other(
        beedeck: Beedeck, other: str) -> None:
    """Both looked at the port before either server had bound it (``--slow-launch`` widens that moment to
    3 s): both took it, and one server died on "address in use"; or the window named BeeDeck's own server
    "another program"."""
    port = free_port()
    _save_profile(beedeck, _profile(beedeck, port))
    first = open_window(beedeck, "--slow-launch", "3")
    if other == "window":
        second: Window | Child = open_window(beedeck, "--slow-launch", "3")
    else:
        second = beedeck.spawn("serve", *beedeck.starter_args(), "--port", str(port))
    first.ready(180)
    mine = first.state()
    if isinstance(second, Window):
        second.ready(180)
        theirs = second.state()
        ports = sorted([mine["port"], theirs["port"]])
        assert port in ports and len(set(ports)) == 2, (mine, theirs)  # before: both on the port, one failed
        moved, stayed = (mine, second) if mine["port"] != port else (theirs, first)
        assert f"Port {port} is" in moved["notices"] and f"a BeeDeck window (pid {stayed.child.pid})" in \
            moved["notices"], moved
        assert "another program" not in moved["notices"] and moved["status"] == ""  # whole, not in the status bar
        second.quit()
    else:
        done = second.wait(180) if mine["port"] == port else None
        if done is not None:  # the window had it: serve was told which BeeDeck process, and did not start
            assert done == 1 and f"Port {port} is" in second.stderr() and \
                f"a BeeDeck window (pid {first.child.pid})" in second.stderr(), second.stderr()[-2000:]
        else:  # serve had it: the window moved and named it
            second.wait_text("ready in", 120, "out")
            assert f"`beedeck serve` (pid {second.pid})" in mine["notices"] and "another program" not in \
                mine["notices"], mine
            second.proc.send_signal(signal.SIGTERM)
            second.wait(30)
    first.quit()


def test_a_window_beside_beedeck_serve_on_its_port_names_it_as_beedecks_own(beedeck: Beedeck) -> None:
    """Before: "Port N is taken by another program", cut off in the status bar."""
    port = free_port()
    serve = beedeck.spawn("serve", *beedeck.starter_args(), "--port", str(port))
    serve.wait_text("ready in", 120, "out")
    _save_profile(beedeck, _profile(beedeck, port))
    window = open_window(beedeck)
    window.ready()
    shown = window.state()
    assert shown["port"] != port and "another program" not in shown["notices"], shown
    assert f"Port {port} is taken by BeeDeck's own llama-server" in shown["notices"], shown
    assert f"`beedeck serve` (pid {serve.pid})" in shown["notices"] and shown["status"] == ""
    window.quit()
    serve.proc.send_signal(signal.SIGTERM)
    serve.wait(30)


# --------------------------------------------------------------------------- a download killed at its rename

KILL_AT_RENAME = """
import os, signal, sys
from pathlib import Path
from beedeck.core.download import download_file
url, dest, sha = sys.argv[1:4]
real = os.replace
def replace(src, dst, *args, **kwargs):
    if str(src).endswith(".part"):
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies as the verified file is renamed into place
    return real(src, dst, *args, **kwargs)
os.replace = replace
download_file(url, Path(dest), expected_sha256=sha, disk_margin=0)
"""


def test_a_download_killed_at_its_final_rename_loses_nothing(tmp_path: Path) -> None:
    """The whole file was on disk, verified, when the kill came: the next run renames it, fetching nothing
    (before: where the server states no size, the resume's 416 threw the complete file away)."""
    data = os.urandom(3_000_000)
    f = FakeFile(data)
    dest = tmp_path / "models" / "x.gguf"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with FakeHub() as hub:
        hub.add_repo("org/x-GGUF", {"x.gguf": f})
        url = f"{hub.cdn_url}/blobs/{f.sha256}"
        killed = subprocess.run([sys.executable, "-c", KILL_AT_RENAME, url, str(dest), f.sha256], env=env,
                                capture_output=True, timeout=120)
        assert killed.returncode == -signal.SIGKILL and not dest.exists()
        sent = hub.bytes_sent
        assert sent >= len(data)
        download_file(url, dest, expected_sha256=f.sha256, disk_margin=0)
        assert hub.bytes_sent == sent  # not a byte fetched again
    assert dest.read_bytes() == data and not list(dest.parent.glob("x.gguf.part*"))  # nothing half left either
