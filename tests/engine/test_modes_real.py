"""Every speculation mode the starter engine (mainline b11434, CPU) offers, through the product's own
paths: the benchmark and the toolbar toggle run MTP for real on the synthetic qwen35 target with its
own MTP head (tests/fixtures/synth_mtp.py), found from the GGUF header alone (no draft file), and the
model-free n-gram mode runs next to it.

The sticky target answers " bee bee ..." and its head always proposes the token it was given, so every
MTP draft is accepted and greedy text is identical in every mode. Kept lean for the shared 2-core
machine: one benchmark run (three servers, one after the other) and one window (three servers).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from beedeck.clicmd.bench import default_bench_modes, parse_modes, synthetic_mtp_settings
from beedeck.core.bench import report as br
from beedeck.core.bench.runner import run_bench
from beedeck.core.bench.suites import BenchPrompt, BenchSuite
from beedeck.core.chat.store import ChatStore
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode, Variant
from beedeck.core.engine.server_state import ServerState
from beedeck.core.profile import Profile
from beedeck.ui.window.main_window import MainWindow
from tests.conftest import PERSISTENT, REPO
from tests.engine.procs import pid_alive
from tests.fixtures import synth_mtp as sm
from tests.fixtures.llama_server import send, server_pid

pytestmark = pytest.mark.engine

SYNTH = PERSISTENT / "synth"
MAX_TOKENS = 48  # the sticky target never ends a turn: every reply is exactly this long
START_MS = 120_000
REPLY_MS = 120_000


@pytest.fixture(scope="module")
def sticky_mtp() -> Path:
    return sm.cached_mtp_target(SYNTH, sticky=True)


def test_the_benchmark_finds_mtp_in_the_target_and_runs_it_with_every_draft_accepted(
    starter_engine_path: Path, starter_caps: EngineCaps, sticky_mtp: Path, record_property: Any,
) -> None:
    settings = synthetic_mtp_settings(sticky_mtp)
    # Nothing but the header says the target has MTP heads: the default modes come from it.
    assert default_bench_modes(starter_caps, settings) == [Variant(Mode.BASELINE), Variant(Mode.MTP)]
    settings.spec_model_free_type = "ngram-simple"
    modes = parse_modes("baseline,draft-mtp,ngram-mod", starter_caps, settings)  # the engine's own words
    assert modes == [Variant(Mode.BASELINE), Variant(Mode.MTP), Variant(Mode.MODEL_FREE)] and settings.spec_model_free_type == "ngram-mod"
    suite = BenchSuite("synthetic", (BenchPrompt("py", "Write python code for the deck."),),
                       max_tokens=MAX_TOKENS, temperature=0.0, seed=7)
    report = run_bench(starter_engine_path, starter_caps, settings, suite, modes, reps=2, warmup=1,
                       switching="restart", environment={})
    assert report.ok, report.errors
    runs = {r.variant: r for r in report.runs}
    assert runs[Variant(Mode.MTP)].spec_type == "draft-mtp" and runs[Variant(Mode.MODEL_FREE)].spec_type == "ngram-mod"
    mtp_argv = runs[Variant(Mode.MTP)].argv
    assert mtp_argv[mtp_argv.index("--spec-type") + 1] == "draft-mtp" and "--spec-draft-model" not in mtp_argv
    assert "--spec-type" not in runs[Variant(Mode.BASELINE)].argv
    for s in report.samples:
        assert s.error is None and s.text.split() == ["bee"] * MAX_TOKENS, s
    assert all(s.draft_n == 0 for s in report.samples_for(Variant(Mode.BASELINE)))
    mtp = report.samples_for(Variant(Mode.MTP))
    assert len(mtp) == 2 and all(s.draft_n > 0 and s.acceptance == 1.0 for s in mtp)
    # The reply repeats itself, so ngram-mod finds matches (ngram-simple needs longer ones than 48 tokens give).
    assert all(s.draft_n > 0 for s in report.samples_for(Variant(Mode.MODEL_FREE)))
    summary = br.summarize(report)
    m, f = summary.overall[Variant(Mode.MTP)], summary.overall[Variant(Mode.MODEL_FREE)]
    assert m.acceptance == 1.0 and m.identical == m.compared == 2 and f.identical == f.compared == 2
    line = "; ".join(f"{mode.key}: {summary.overall[mode].gen_tps.median:.1f} tok/s"  # type: ignore[union-attr]
                     + (f", acceptance {100 * summary.overall[mode].acceptance:.0f} %"  # type: ignore[operator]
                        if summary.overall[mode].acceptance is not None else "") for mode in report.variants)
    print(line)
    record_property("modes_sticky_mtp", line)


def test_cli_bench_synthetic_mtp(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(REPO / "gui")}
    proc = subprocess.run(
        [sys.executable, "-m", "beedeck", "bench", "--synthetic", "mtp", "--modes", "baseline,mtp", "--reps", "1",
         "--max-tokens", "24", "--no-charts", "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=280, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mtp" in proc.stdout and "100.0%" in proc.stdout, proc.stdout
    data = json.loads((out / "report.json").read_text())
    assert data["modes"] == ["baseline", "mtp"]
    mtp = [s for s in data["samples"] if s["mode"] == "mtp"]
    assert mtp and all(s["draft_n"] > 0 and s["acceptance"] == 1.0 for s in mtp)


# ------------------------------------------------------------------------------ the toggle


def _spec_type(pid: int) -> str | None:
    argv = psutil.Process(pid).cmdline()
    return argv[argv.index("--spec-type") + 1] if "--spec-type" in argv else None


def _send(qtbot: QtBot, window: MainWindow, text: str) -> dict[str, Any]:
    return send(qtbot, window, text, MAX_TOKENS, REPLY_MS)


def test_the_toggle_switches_a_real_server_from_baseline_to_mtp_by_restart(
    qtbot: QtBot, starter_engine_path: Path, sticky_mtp: Path,
) -> None:
    settings = LaunchSettings(target=str(sticky_mtp), ctx_size=4096, flash_attn="auto", temp=0.0, top_k=1,
                              extra_args=["--threads", "1"])
    store = ChatStore()
    window = MainWindow(store)
    qtbot.addWidget(window)
    window.open_latest_chat()
    window.show()
    window.session.server.standby = False  # the restart path (kept loaded: tests/engine/test_ui_toggle_real.py)
    window.session.set_profile(Profile(str(starter_engine_path), settings, "CPU engine + synthetic MTP target"))
    window.chat.max_tokens = MAX_TOKENS
    toggle = window.mode
    pids: list[int] = []
    try:
        with qtbot.waitSignal(window.session.controller.ready, timeout=START_MS):
            window.start_action.trigger()
        pids.append(server_pid(window))
        assert _spec_type(pids[-1]) is None
        # The probed engine and the target's header (read off the GUI thread) decide the segments.
        qtbot.waitUntil(lambda: toggle.offered() == ["baseline", "mtp", "model-free"], timeout=10_000)
        assert toggle.isEnabled() and window.session.switch.mode == "baseline"
        # The toggle's tooltip keeps the technical reason; the ? popover says it in plain words.
        assert "• DFlash: No DFlash draft model is configured" in toggle.toolTip()
        assert "<b>DFlash</b>" in toggle.why_button.toolTip() and "Settings" in toggle.why_button.toolTip()
        first = _send(qtbot, window, "Say hello to the deck.")
        assert first["mode"] == "baseline" and not first.get("draft_n"), first

        mtp_button = toggle.button("mtp")
        assert mtp_button is not None
        t0 = time.monotonic()
        with qtbot.waitSignal(window.session.switching.mode_changed, timeout=START_MS) as changed:
            mtp_button.click()
            assert window.session.switch.pending is not None and "restarting with the target's MTP heads" in toggle.status.line()
        wall = time.monotonic() - t0
        assert changed.args == ["mtp"] and mtp_button.isChecked() and window.session.switch.pending is None
        assert "MTP: restarted the server with the target's MTP heads in" in toggle.status.line()
        assert window.session.switch.last_switch_s is not None and 0 < window.session.switch.last_switch_s <= wall
        pids.append(server_pid(window))
        assert pids[-1] != pids[-2] and not pid_alive(pids[-2]) and _spec_type(pids[-1]) == "draft-mtp"
        second = _send(qtbot, window, "Write python code.")
        assert second["mode"] == "mtp" and second["draft_n"] > 0, second
        assert second["draft_accepted"] == second["draft_n"], second  # the sticky head is always right

        # Back to Baseline through the public call the per-prompt advisor will use.
        with qtbot.waitSignal(window.session.switching.mode_changed, timeout=START_MS):
            assert window.session.request_mode(Mode.BASELINE) is True
        pids.append(server_pid(window))
        assert _spec_type(pids[-1]) is None
        third = _send(qtbot, window, "hello")
        assert third["mode"] == "baseline" and not third.get("draft_n"), third
        conv = window.chat.conversation_id
        assert conv is not None
        msgs = [m for m in store.messages(conv) if m.role == "assistant"]
        assert [m.stats["mode"] for m in msgs] == ["baseline", "mtp", "baseline"]
        assert all(m.content.split() == ["bee"] * MAX_TOKENS for m in msgs)  # identical greedy text
        print(f"\ntoggle Baseline->MTP {window.session.switch.last_switch_s:.2f} s; replies {first['tps']:.0f} / {second['tps']:.0f} / "
              f"{third['tps']:.0f} tok/s (baseline / mtp / baseline), MTP drafts {second['draft_n']}, all accepted")
    finally:
        window.close()
        QApplication.processEvents()
        store.close()
    assert window.session.server.state == ServerState.STOPPED
    assert not [pid for pid in pids if pid_alive(pid)], "a llama-server outlived the window"
