"""The Baseline | DFlash toggle of the REAL main window on each REAL engine (CPU builds).

The window checks, once the server with its draft is ready, whether the engine honours a per-request
"no drafts": BeeLlama 0.1 (Gen A) does, so its toggle switches per request and keeps the server;
BeeLlama 0.4 (Gen B) and mainline parse that field inside ``#if 0``, so their toggle restarts the
server with or without the DFlash draft. The synthetic sticky pair (tests/fixtures/synth_gguf.py, in
each engine's draft format) makes the outcome exact: greedy replies are " bee bee ...", the sticky
draft proposes " bee", so a DFlash reply has drafts, all accepted, and a baseline reply has none.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.clicmd.bench import synthetic_settings
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.server_state import ServerState
from beedeck.core.engine.speculation.modes import PER_REQUEST, RESTART
from beedeck.core.profile import Profile
from beedeck.ui.window.main_window import MainWindow
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.engine.procs import pid_alive
from tests.fixtures import synth_gguf as sg
from tests.fixtures.llama_server import send, server_pid

pytestmark = pytest.mark.engine

MAX_TOKENS = 48  # the sticky target never ends a turn: every reply is exactly this long
START_MS = 120_000  # generous for a busy 2-core machine; the tiny pair loads in about a second
REPLY_MS = 120_000
TOOK = re.compile(r"restarted the server (with|without) the draft in (\d+\.\d) s")


def _sticky_profile(engine: Path, draft_format: str = "mainline") -> Profile:
    target = sg.cached_target(PERSISTENT / "synth", sticky=True)
    draft = sg.cached_draft(PERSISTENT / "synth", target, sticky=True, fmt=draft_format)  # type: ignore[arg-type]
    # The bench command's settings for this pair (threads 1, flash-attn auto, draft-n-max 15), in
    # DFlash mode and greedy, so acceptance is exactly 100 %.
    settings: LaunchSettings = replace(
        synthetic_settings(target, draft), spec_mode=Mode.DFLASH, temp=0.0, top_k=1
    )
    return Profile(str(engine), settings, "CPU engine + synthetic sticky pair")


def _has_draft_on_command_line(pid: int) -> bool:
    return "--spec-draft-model" in psutil.Process(pid).cmdline()


def _send(qtbot: QtBot, window: MainWindow, text: str) -> dict[str, Any]:
    return send(qtbot, window, text, MAX_TOKENS, REPLY_MS)


def _assert_dflash(stats: dict[str, Any]) -> None:
    assert stats["mode"] == "dflash", stats
    assert stats["draft_n"] > 0, stats
    assert stats["draft_accepted"] == stats["draft_n"], stats  # the sticky draft is always right


def _assert_baseline(stats: dict[str, Any]) -> None:
    assert stats["mode"] == "baseline", stats
    assert not stats.get("draft_n"), stats  # the server has no draft loaded


def _toggle(qtbot: QtBot, window: MainWindow, mode: str, chatted: bool = True) -> tuple[float, float]:
    """Click the toggle's ``mode`` segment and wait until the restarted server serves (``chatted``: after a
    conversation, which the switch keeps).

    Returns (seconds the toggle reports, seconds measured here from click to mode_changed).
    """
    toggle = window.mode
    button = toggle.baseline_button if mode == "baseline" else toggle.dflash_button
    old_pid = server_pid(window)
    # Before the click, the segment says what the switch costs here and that the conversation comes along
    # (core/engine/speculation/switch_cost.py SwitchForecast; the seconds once a switch was measured).
    tip = button.toolTip()
    forecast = window.session.switch.forecast
    assert "Switching restarts the server" in tip, tip
    assert forecast is not None and ("the conversation's cache comes along, which saves reading" in tip) == bool(
        forecast.tokens), tip
    t0 = time.monotonic()
    with qtbot.waitSignal(window.session.switching.mode_changed, timeout=START_MS) as blocker:
        button.click()
        assert window.session.switch.pending is not None  # the restart path shows progress while the server restarts
        assert not toggle.baseline_button.isEnabled() and not toggle.dflash_button.isEnabled()
        assert "restarting" in toggle.status.line()
    wall = time.monotonic() - t0
    assert blocker.args == [mode]
    assert window.session.switch.mode == mode and button.isChecked() and window.session.switch.pending is None
    assert toggle.baseline_button.isEnabled() and toggle.dflash_button.isEnabled()
    status = toggle.status.line()
    match = TOOK.search(status)
    assert match, status
    assert match.group(1) == ("without" if mode == "baseline" else "with"), status
    reported = window.session.switch.last_switch_s
    assert reported is not None and 0 < reported <= wall, (reported, wall)  # the restart we waited for
    assert match.group(2) == f"{reported:.1f}", (status, reported)
    if chatted:  # core/serving/slot_carry.py, said once
        assert "kept the conversation's cache (" in status, status
    # A real restart: the old process is gone, a new one runs with (or without) the draft.
    new_pid = server_pid(window)
    assert new_pid != old_pid and not pid_alive(old_pid)
    assert _has_draft_on_command_line(new_pid) == (mode == "dflash")
    assert window.state_label.text() == "server: ready"
    assert window.chat.send_button.isEnabled()
    return reported, wall


def _per_request_toggle(qtbot: QtBot, window: MainWindow, mode: str) -> tuple[float, float]:
    """Click ``mode`` on the per-request path: it takes effect at once, the same server keeps serving."""
    toggle = window.mode
    pid = server_pid(window)
    t0 = time.monotonic()
    with qtbot.waitSignal(window.session.switching.mode_changed, timeout=5_000) as blocker:
        (toggle.baseline_button if mode == "baseline" else toggle.dflash_button).click()
    wall = time.monotonic() - t0
    assert blocker.args == [mode] and window.session.switch.pending is None and server_pid(window) == pid
    assert ("asks for no drafts" if mode == "baseline" else "uses the draft") in toggle.status.line()
    return 0.0, wall


def test_toggle_switches_the_real_server_and_keeps_the_conversation(
    qtbot: QtBot, real_engine: RealEngine
) -> None:
    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    window.session.server.standby = False  # the restart path (the other mode kept loaded: the last test)
    window.session.set_profile(_sticky_profile(real_engine.path, real_engine.draft_format))
    window.chat.max_tokens = MAX_TOKENS
    toggle = window.mode
    assert toggle.isEnabled() and window.session.switch.mode == "dflash" and toggle.dflash_button.isChecked()
    pids: list[int] = []
    try:
        with qtbot.waitSignal(window.session.controller.ready, timeout=START_MS):
            window.start_action.trigger()
        pids.append(server_pid(window))
        assert _has_draft_on_command_line(pids[-1])
        # The check on ready: two short replies, as it is and asking for no drafts.
        qtbot.waitUntil(lambda: window.session.per_request_memory.get(window.session.server.caps) is not None, timeout=REPLY_MS)
        honours = real_engine.kind == "bee-a"
        assert window.session.switch.per_request is honours, toggle.toolTip()
        assert window.session.switch.path() == (PER_REQUEST if honours else RESTART)
        assert ("honours a per-request" if honours else "ignores a per-request") in toggle.toolTip()
        switch = _per_request_toggle if honours else _toggle

        conv_id = window.chat.conversation_id
        assert conv_id is not None
        first = _send(qtbot, window, "Say hello to the deck.")
        _assert_dflash(first)
        assert window.speed.acceptance.text().startswith(f"{first['draft_n']}/{first['draft_n']} (100 %)")

        to_baseline = switch(qtbot, window, "baseline")
        pids.append(server_pid(window))
        assert window.chat.conversation_id == conv_id
        kept = store.messages(conv_id)
        assert [m.role for m in kept] == ["user", "assistant"]
        assert kept[0].content == "Say hello to the deck." and kept[1].stats["mode"] == "dflash"
        assert (
            len(window.chat.view.messages()) == 2
            and "Say hello to the deck." in window.chat.view.toPlainText()
        )

        second = _send(qtbot, window, "Write python code.")
        _assert_baseline(second)  # per request, the loaded draft was told to stay silent
        if not honours:  # restarted: the restored cache holds the conversation, only the new turn is read
            assert second["cache_n"] > second["prompt_n"] > 0, second
        assert window.speed.acceptance.text() == "— (no drafts)"

        to_dflash = switch(qtbot, window, "dflash")
        pids.append(server_pid(window))
        third = _send(qtbot, window, "hello")
        _assert_dflash(third)

        msgs = store.messages(conv_id)
        assert window.chat.conversation_id == conv_id
        assert [m.role for m in msgs] == ["user", "assistant"] * 3
        assert [m.stats["mode"] for m in msgs if m.role == "assistant"] == ["dflash", "baseline", "dflash"]
        assert all(
            m.complete and m.content.split() == ["bee"] * MAX_TOKENS for m in msgs if m.role == "assistant"
        )

        # The speed panel holds the last figure of each mode side by side.
        speed = window.speed
        assert speed.last_by_mode == {Variant(Mode.BASELINE): second["tps"], Variant(Mode.DFLASH): third["tps"]}
        assert speed.gauge.baseline == second["tps"]
        compare = speed.compare.text()
        assert f"Baseline {second['tps']:.1f}" in compare and f"DFlash {third['tps']:.1f} tok/s" in compare
        # Two replies to two prompts: no speed-up between them (issue 37); a benchmark gives one.
        assert f"DFlash {third['tps']:.1f} tok/s (last reply)" in compare and "×" not in compare
    finally:
        window.close()  # must stop the server
        QApplication.processEvents()
        store.close()

    assert window.session.server.state == ServerState.STOPPED
    assert not [pid for pid in pids if pid_alive(pid)], "a llama-server outlived the window"
    leftover = [p for p in psutil.Process().children(recursive=True) if "llama-server" in p.name()]
    assert not [p for p in leftover if p.status() != psutil.STATUS_ZOMBIE], leftover
    print(
        f"\n{real_engine.kind}: {window.session.switch.path()} toggle on the synthetic sticky pair: DFlash->Baseline {to_baseline[0]:.3f} s "
        f"(click to mode_changed {to_baseline[1]:.2f} s), Baseline->DFlash {to_dflash[0]:.3f} s "
        f"({to_dflash[1]:.2f} s); replies {first['tps']:.0f} / {second['tps']:.0f} / {third['tps']:.0f} tok/s "
        f"(dflash / baseline / dflash), drafts {first['draft_n']} and {third['draft_n']}, all accepted"
    )


def test_a_failed_switch_and_a_stop_start_keep_the_chosen_mode(
    qtbot: QtBot, starter_engine_path: Path, tmp_path: Path
) -> None:
    # A copy of the draft, so the test can take it away: switching to DFlash then fails in the
    # engine's pre-launch check, and the toggle must fall back to baseline with Start usable.
    profile = _sticky_profile(starter_engine_path)
    draft = tmp_path / "draft.gguf"
    draft.write_bytes(Path(str(profile.settings.draft)).read_bytes())
    profile.settings.draft = str(draft)
    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    window.session.server.standby = False  # the restart path: a switch whose start fails
    window.session.set_profile(profile)
    window.chat.max_tokens = MAX_TOKENS
    toggle = window.mode
    pids: list[int] = []
    try:
        with qtbot.waitSignal(window.session.controller.ready, timeout=START_MS):
            window.start_action.trigger()
        pids.append(server_pid(window))
        _toggle(qtbot, window, "baseline", chatted=False)
        pids.append(server_pid(window))

        # Stop and Start again: the server comes back in the mode the toggle shows (baseline).
        with qtbot.waitSignal(window.session.controller.stopped, timeout=START_MS):
            window.stop_action.trigger()
        assert window.session.switch.mode == "baseline" and toggle.baseline_button.isChecked()
        with qtbot.waitSignal(window.session.controller.ready, timeout=START_MS):
            window.start_action.trigger()
        pids.append(server_pid(window))
        assert not _has_draft_on_command_line(pids[-1])
        _assert_baseline(_send(qtbot, window, "Say hello to the deck."))

        draft.unlink()
        with qtbot.waitSignal(window.session.controller.failed, timeout=START_MS):
            toggle.dflash_button.click()
        assert (
            window.session.switch.pending is None and window.session.switch.mode == "baseline" and toggle.baseline_button.isChecked()
        )
        assert toggle.status.line() == "switch failed: see the server log"
        assert toggle.baseline_button.isEnabled() and toggle.dflash_button.isEnabled()
        assert window.session.server.state == ServerState.FAILED and not pid_alive(pids[-1])
        assert window.start_action.isEnabled(), "Start must work again after a failed switch"
        with qtbot.waitSignal(window.session.controller.ready, timeout=START_MS):
            window.start_action.trigger()
        pids.append(server_pid(window))
        assert not _has_draft_on_command_line(pids[-1])
        _assert_baseline(_send(qtbot, window, "hello"))
    finally:
        window.close()
        QApplication.processEvents()
        store.close()
    assert not [pid for pid in pids if pid_alive(pid)], "a llama-server outlived the window"


def _kept_toggle(qtbot: QtBot, window: MainWindow, mode: str, words: str) -> int:
    """Click ``mode`` with the other mode kept loaded (core/engine/speculation/standby.py); returns the serving pid."""
    toggle = window.mode
    before = server_pid(window)
    with qtbot.waitSignal(window.session.switching.mode_changed, timeout=START_MS) as blocker:
        (toggle.baseline_button if mode == "baseline" else toggle.dflash_button).click()
    assert blocker.args == [mode] and window.session.switch.pending is None
    assert words in toggle.status.line(), toggle.status.line()
    pid = server_pid(window)
    assert pid != before and pid_alive(before)  # the other server serves; the one before stays loaded
    assert _has_draft_on_command_line(pid) == (mode == "dflash")
    assert window.state_label.text() == "server: ready" and window.chat.send_button.isEnabled()
    return pid


def test_toggle_keeps_the_other_mode_loaded_beside_when_it_fits(qtbot: QtBot, upstream_engine: RealEngine) -> None:
    """Issue 25: on the engines that restart to switch (BeeLlama >= 0.4, mainline), with memory free for both,
    the other mode is loaded beside the running server as soon as the check shows the restart path; every
    switch then loads nothing (the same two processes serve in turn), each reply has its own mode's drafts,
    and closing the window stops both servers."""
    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    assert window.session.server.standby  # the default
    window.session.set_profile(_sticky_profile(upstream_engine.path, upstream_engine.draft_format))
    window.chat.max_tokens = MAX_TOKENS
    pids: list[int] = []
    try:
        with qtbot.waitSignal(window.session.controller.ready, timeout=START_MS):
            window.start_action.trigger()
        pids.append(server_pid(window))
        qtbot.waitUntil(lambda: window.session.per_request_memory.get(window.session.server.caps) is not None, timeout=REPLY_MS)
        # The check said the engine ignores per-request speculation: Baseline is loaded beside at once.
        qtbot.waitUntil(lambda: window.session.server.kept is not None, timeout=START_MS)
        _assert_dflash(_send(qtbot, window, "Say hello to the deck."))
        assert server_pid(window) == pids[0]  # the preload served nothing
        pids.append(_kept_toggle(qtbot, window, "baseline", "switched to the server kept loaded without the draft"))
        _assert_baseline(_send(qtbot, window, "Write python code."))
        assert _kept_toggle(qtbot, window, "dflash", "switched to the server kept loaded with the draft") == pids[0]
        _assert_dflash(_send(qtbot, window, "hello"))
        assert _kept_toggle(qtbot, window, "baseline", "(nothing loaded)") == pids[1]
        _assert_baseline(_send(qtbot, window, "again"))
        conv = store.messages(window.chat.conversation_id)
        assert [m.stats["mode"] for m in conv if m.role == "assistant"] == ["dflash", "baseline", "dflash", "baseline"]
    finally:
        window.close()
        QApplication.processEvents()
    deadline = time.monotonic() + 15
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(pid_alive(p) for p in pids)  # both servers stopped: nothing orphaned
