"""Faults: hostile or careless input. Text that is not UTF-8, empty, full of control characters,
longer than the context or megabytes long; numbers out of range; a LAN bind without a key; a key
that would leak. Each is refused (or handled) with a message that says what to change.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.server_state import ServerState

from .conftest import Beedeck, wait_for

pytestmark = pytest.mark.engine


def test_a_prompt_that_is_not_utf8_is_refused_before_anything_starts(beedeck: Beedeck) -> None:
    # What a Latin-1 terminal hands over: bytes Python sees as lone surrogates.
    env = beedeck.env()
    done = subprocess.run([sys.executable, "-m", "beedeck", "chat", b"caf\xe9 \xff\xfe hello",
                           *beedeck.starter_args()], env=env, capture_output=True, timeout=60, cwd=beedeck.workdir)
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err
    assert "The prompt is not valid UTF-8: byte(s) 0xE9 at character 4" in err and "iconv -f latin1 -t utf-8" in err
    assert "starting" not in err


@pytest.mark.parametrize("prompt", ["", "   \n\t "], ids=["empty", "blank"])
def test_an_empty_prompt_is_refused_with_an_example(beedeck: Beedeck, prompt: str) -> None:
    done = beedeck.run("chat", prompt, *beedeck.starter_args())
    assert done.returncode == 2 and 'the prompt is empty: pass the text to ask, e.g. beedeck chat "hello"' in done.stderr


def test_control_characters_in_a_prompt_reach_the_model_intact(beedeck: Beedeck) -> None:
    done = beedeck.run("chat", "Say ok.\x1b[31m red\x07\x08\x7f \u2028 line", "--max-tokens", "8", "--json",
                       *beedeck.starter_args())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["timings"]["prompt_n"] > 5 and result["finish_reason"] in ("length", "stop")


def test_a_prompt_longer_than_the_context_says_how_to_fit_it(beedeck: Beedeck) -> None:
    done = beedeck.run("chat", "bee " * 3000, "--ctx", "512", *beedeck.starter_args())
    assert done.returncode == 1
    assert "The conversation is longer than the server's context (" in done.stderr
    assert "the context holds 512)" in done.stderr and "raise Context in Settings (`--ctx`" in done.stderr


def test_a_megabytes_long_paste_in_the_window_is_answered_without_freezing_it(
        qtbot: QtBot, starter_window: Any) -> None:
    window = starter_window()
    chat = window.chat
    huge = "bee " * 1_000_000  # 4 MB pasted
    chat.input.setPlainText(huge)
    ticks: list[int] = []
    from PySide6.QtCore import QTimer

    timer = QTimer(window, interval=50)
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start()
    chat.send_button.click()
    qtbot.waitUntil(lambda: "longer than the server's context" in chat.view.toPlainText()
                    or "longer than the server's context" in chat.notice.text(), timeout=120_000)
    timer.stop()
    assert len(ticks) > 3  # the event loop kept turning while the server tokenized 4 MB
    user = [m for m in window.store.messages(chat.conversation_id) if m.role == "user"]
    assert user and user[-1].content == huge.strip()  # what was typed is kept
    assert window.session.server.state == ServerState.READY  # the server survived it


def test_a_lan_bind_without_an_api_key_is_refused_with_both_ways_to_give_one(beedeck: Beedeck) -> None:
    done = beedeck.run("serve", *beedeck.starter_args(), "--host", "0.0.0.0", "--exit-when-ready")
    assert done.returncode == 2
    assert "API key" in done.stderr and "BEEDECK_API_KEY" in done.stderr and "--api-key-prompt" in done.stderr


def test_an_api_key_never_reaches_a_command_line_or_a_log(beedeck: Beedeck) -> None:
    secret = "bd-fault-key-91c2e7"
    child = beedeck.spawn("serve", *beedeck.starter_args(), "--host", "0.0.0.0", "--json",
                          BEEDECK_API_KEY=secret)
    child.wait_text('"state": "ready"', 120, "out")
    (server,) = wait_for(child.servers, 30, "the server")
    cmdline = psutil.Process(server).cmdline()
    assert secret not in " ".join(cmdline) and "--api-key-file" in cmdline
    key_file = Path(cmdline[cmdline.index("--api-key-file") + 1])
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    url = json.loads(child.stdout().splitlines()[-1])["base_url"]
    from beedeck.core.engine.client import HTTPStatusError, LlamaClient

    with pytest.raises(HTTPStatusError, match="API key is wrong"):
        LlamaClient(url).props()
    assert LlamaClient(url, api_key=secret).props()["total_slots"] == 1
    child.proc.terminate()
    child.wait(30)
    assert secret not in child.stdout() + child.stderr()
    assert not key_file.exists()
    logs = [p for p in beedeck.home.rglob("*") if p.is_file()]
    assert all(secret.encode() not in p.read_bytes() for p in logs)  # not in any file BeeDeck keeps


def test_an_engine_without_a_key_file_option_refuses_the_key_rather_than_leak_it(beedeck: Beedeck) -> None:
    engine = beedeck.workdir / "llama-server"
    engine.write_text(f'#!/bin/sh\ncase "$*" in *--help*) "{beedeck.engine}" --help | grep -v -- --api-key-file; '
                      f'exit 0;; esac\nexec "{beedeck.engine}" "$@"\n')
    engine.chmod(0o755)
    done = beedeck.run("serve", "--engine", str(engine), "--model", str(beedeck.model), "--host", "0.0.0.0",
                       "--exit-when-ready", BEEDECK_API_KEY="bd-fault-key-1")
    assert done.returncode == 2
    assert "This engine has no --api-key-file option, so its API key would be on the command line" in done.stderr
    assert "bd-fault-key-1" not in done.stdout + done.stderr


@pytest.mark.parametrize(("flags", "says"), [
    (["--ctx", "-5"], "Context size (--ctx) is -5: it must be 0..16,777,216"),
    (["--ctx", "99999999999"], "Context size (--ctx) is 99999999999: it must be 0..16,777,216"),
    (["--port", "70000"], "Port (--port) is 70000: it must be 0..65535"),
    (["--threads", "0"], "Threads (--threads) is 0: it must be 1..1024 (CPU threads)"),
    (["--draft-max", "-1"], "Draft max (--draft-max) is -1: it must be 0..256"),
], ids=["ctx", "ctx-huge", "port", "threads", "draft-max"])
def test_an_out_of_range_number_is_refused_naming_the_setting_and_its_range(beedeck: Beedeck, flags: list[str],
                                                                            says: str) -> None:
    done = beedeck.run("serve", *beedeck.starter_args(), *flags, "--exit-when-ready")
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "running:" not in done.stdout

