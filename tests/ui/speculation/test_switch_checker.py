"""The per-request check, run for the switch: two short replies to a protocol-level fake llama-server (a
real BeeLlama 0.1-0.3 DFlash server is what honours "no drafts"; tests/engine covers real servers), the
verdict remembered per engine build, and a "baseline" reply that drafted remembered as a contradiction."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from beedeck.core.chat.reply_facts import ReplyFacts
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.modes import PER_REQUEST, RESTART
from tests.fakes.sse_server import FakeLlamaServer, SSEScript
from tests.ui.speculation.test_mode_toggle import _caps, _toggle


def test_checker_measures_a_server_that_ignores_no_drafts_and_remembers_it(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_B)
    s, t = _toggle(qtbot, tmp_path, caps)
    checker = s.switching.checker
    with FakeLlamaServer(SSEScript(tokens=["1,"] * 30, draft_n=36, draft_n_accepted=36)) as srv:
        checker.server_ready(caps, lambda: LlamaClient(srv.base_url))
        bodies = [r.body for r in srv.requests if r.method == "POST"]
    assert [b.get("speculative.n_max") for b in bodies] == [None, 0]  # as it is, then asking for none
    assert s.switch.path() == RESTART and "ignores a per-request" in t.toolTip() and "still drafted 36" in t.toolTip()
    assert s.per_request_memory.get(caps) is False
    # A new window on the same build does not ask again: the verdict is remembered.
    s2, t2 = _toggle(qtbot, tmp_path, caps)
    s2.switching.checker.runner = lambda *a: (_ for _ in ()).throw(AssertionError("checked again"))
    s2.server.caps = caps  # its server is ready
    s2.switching.server_ready("http://127.0.0.1:9", None)
    assert s2.switch.path() == RESTART and "Checked earlier on this engine build: it ignores" in t2.toolTip()


def test_checker_measures_a_server_that_honours_it(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_A)
    s, t = _toggle(qtbot, tmp_path, caps)
    script = SSEScript(tokens=["1,"] * 30, draft_n=33, draft_n_accepted=33, honours_no_drafts=True)
    with FakeLlamaServer(script) as srv, qtbot.waitSignal(s.switching.checker.verdict_known):
        s.switching.checker.server_ready(caps, lambda: LlamaClient(srv.base_url))
    assert s.switch.path() == PER_REQUEST and s.per_request_memory.get(caps) is True
    assert "honours a per-request" in t.toolTip() and "Baseline switches per request" in t.status.text()


def test_an_inconclusive_check_keeps_restarting_and_is_not_remembered(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_A)
    s, t = _toggle(qtbot, tmp_path, caps)
    with FakeLlamaServer(SSEScript(tokens=["x"] * 10, draft_n=0)) as srv:
        s.switching.checker.server_ready(caps, lambda: LlamaClient(srv.base_url))
    assert s.switch.path() == RESTART and "inconclusive" in t.toolTip() and s.per_request_memory.get(caps) is None


def test_a_drafted_baseline_reply_switches_to_restarting(qtbot: QtBot, tmp_path: Path) -> None:
    caps = _caps(tmp_path, Generation.BEE_A)
    s, t = _toggle(qtbot, tmp_path, caps, per_request=True)
    s.server.caps = caps  # the running server's engine
    t.baseline_button.click()
    assert s.switch.mode == "baseline" and s.switch.path() == PER_REQUEST
    with qtbot.waitSignal(s.switching.restarting) as blocker:
        s.switching.reply_finished(ReplyFacts(mode=Mode.BASELINE, draft_n=12, draft_accepted=12))
    assert blocker.args[0].draft is None  # the server restarts without the draft: a real baseline
    assert s.switch.path() == RESTART and s.per_request_memory.get(caps) is False
    assert "drafted 12 tokens" in t.toolTip()
    # A DFlash reply with drafts is no contradiction.
    assert s.switching.checker.reply_finished(caps, ReplyFacts(mode=Mode.DFLASH, draft_n=40)) is None
