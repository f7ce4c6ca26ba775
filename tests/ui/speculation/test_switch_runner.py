"""The session's half of the switch: the model files' headers read off the GUI thread (and the toggle's
segments following them), a server BeeDeck did not start never read here, and the other mode loaded beside
the running server as soon as the restart path is known (when the user keeps it on)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.mode_switch import ModeSwitch
from beedeck.core.engine.speculation.switching import PerRequestMemory, PerRequestVerdict
from beedeck.core.models import header_cache
from beedeck.core.models.gguf import reader as gguf
from beedeck.core.models.header_cache import HeaderCache
from beedeck.ui.background import Runner
from beedeck.ui.speculation.mode_toggle import ModeToggle
from beedeck.ui.speculation.switch_runner import SwitchRunner
from tests.fakes.inline_runner import run_inline
from tests.ui.speculation.sessions import URL, SwitchServing
from tests.ui.speculation.test_mode_toggle import WITH_DRAFT, _caps, _mtp_target, _real_caps


class _Refused:
    """A client whose server does not answer (a check through it fails)."""

    def chat(self, messages: Any, **kw: Any) -> Any:
        raise OSError("connection refused")


def _runner(qtbot: QtBot, tmp_path: Path, runner: Runner = run_inline,
            inspect: Any = gguf.inspect) -> tuple[SwitchRunner, ModeToggle]:
    r = SwitchRunner(ModeSwitch(), SwitchServing(), PerRequestMemory(tmp_path / "per-request.json"),
                     lambda url, key: _Refused(), runner=runner, headers=HeaderCache(inspect))
    t = ModeToggle(r.switch)
    qtbot.addWidget(t)
    r.changed.connect(t.show_switch)
    return r, t


def test_headers_are_read_off_the_gui_thread_and_the_segments_follow(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending: list[Any] = []
    read: list[str] = []

    def inspect(path: str) -> Any:
        read.append(path)
        return gguf.inspect(path)

    def no_stat_here(*_a: object) -> None:
        raise AssertionError("a file was looked at on the GUI thread")

    r, t = _runner(qtbot, tmp_path, lambda fn, done, err: pending.append((fn, done)), inspect)
    target = _mtp_target(tmp_path)
    caps = _real_caps("mainline")  # made (its modules imported) before stat is forbidden
    with monkeypatch.context() as m:  # configure touches no file: even a stat can hang on a network mount
        m.setattr(header_cache.os, "stat", no_stat_here)
        r.configure(LaunchSettings(target=str(target)), caps)
    assert t.offered() == ["baseline", "model-free"]  # the header is not read yet
    assert "has not read qwen-mtp.gguf's header" in t.toolTip()
    fn, done = pending.pop()
    done(fn())
    assert t.offered() == ["baseline", "mtp", "model-free"] and read == [str(target)]
    r.configure(r.switch.profile, _real_caps("mainline"))  # same file, same version: checked, not read again
    fn, done = pending.pop()
    done(fn())
    assert read == [str(target)] and t.offered() == ["baseline", "mtp", "model-free"]
    target.write_bytes(target.read_bytes() + b"\0" * 32)  # a new version of the file is read again
    r.configure(r.switch.profile, _real_caps("mainline"))
    fn, done = pending.pop()
    done(fn())
    assert read == [str(target)] * 2


def test_a_running_servers_paths_are_not_read_on_this_machine(qtbot: QtBot, tmp_path: Path) -> None:
    """A server BeeDeck did not start names files on its own machine: a file of that name here must not
    decide its modes (and is not even opened)."""
    here = tmp_path / "model.gguf"
    here.write_bytes(b"GGUF")
    opened: list[str] = []

    def inspect(path: str) -> Any:
        opened.append(path)
        raise OSError("not a model")

    r, _t = _runner(qtbot, tmp_path, inspect=inspect)
    r.configure(LaunchSettings(target=str(here), spec_mode=Mode.MTP), None, False, local_files=False)
    assert opened == []
    r.configure(LaunchSettings(target=str(here)), None)  # a local profile: its header is read
    assert opened == [str(here)]


def test_the_other_mode_is_loaded_beside_once_the_restart_path_is_known(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.MAINLINE)
    r, _t = _runner(qtbot, tmp_path)
    serving = r.serving
    assert isinstance(serving, SwitchServing)
    r.configure(WITH_DRAFT, caps, r.memory.get(caps))
    r.launch_settings(WITH_DRAFT)  # the server starts in the profile's own mode
    serving.caps = caps
    r.server_ready(URL, None)  # its check fails: restart, and nothing is preloaded without a verdict
    assert serving.preloads == [] and "The check failed (connection refused)" in r.switch.path_note
    r.memory.remember(caps, PerRequestVerdict(False, 40, 36, 0.0))  # an earlier check: it ignores "no drafts"
    r.switch.checked.clear()
    r.server_ready(URL, None)
    assert [(s.spec_mode, s.draft) for s in serving.preloads] == [(Mode.BASELINE, None)]  # Baseline beside
    # Whether it is loaded (standby on, memory free) is the serving's rule: tests/core/serving/test_serving.py.


def test_a_kept_cache_the_engine_did_not_use_is_said_after_the_reply_that_shows_it(qtbot: QtBot,
                                                                                   tmp_path: Path) -> None:
    """Issue 36: the first reply after a switch proves whether the kept cache was used (core/serving/slot_carry.py
    ``reply_read``); where it was not, the toggle's line says so as news, from that reply's own figures."""
    from beedeck.core.chat.reply_facts import ReplyFacts

    heard: list[tuple[int | None, int | None]] = []

    class Serving(SwitchServing):
        def reply_read(self, prompt_n: int | None, cache_n: int | None) -> str:
            heard.append((prompt_n, cache_n))
            return "the engine did not use the conversation's cache" if cache_n == 0 else ""

    r = SwitchRunner(ModeSwitch(), Serving(), PerRequestMemory(tmp_path / "per-request.json"),
                     lambda url, key: _Refused(), runner=run_inline, headers=HeaderCache(gguf.inspect))
    t = ModeToggle(r.switch)
    qtbot.addWidget(t)
    r.changed.connect(t.show_switch)
    r.reply_finished(ReplyFacts(mode=Mode.BASELINE, tokens=10, prompt_n=16, cache_n=4000))
    assert t.status.line() == "" and not r.switch.news
    r.reply_finished(ReplyFacts(mode=Mode.BASELINE, tokens=10, prompt_n=4016, cache_n=0))
    assert t.status.line() == "the engine did not use the conversation's cache" and r.switch.news
    assert heard == [(16, 4000), (4016, 0)]
