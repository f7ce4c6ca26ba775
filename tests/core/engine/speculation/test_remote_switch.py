"""A server BeeDeck did not start: what it serves, as launch settings, and why the switch cannot be
offered on it before a check (the switch's behaviour on it: test_mode_switch.py)."""

from __future__ import annotations

import dataclasses

from beedeck.core.engine.mode import Mode
from beedeck.core.engine.speculation.remote_switch import (
    NOT_OURS,
    check_failed_reason,
    served_settings,
    toggle_reason,
    verdict_reason,
)
from beedeck.core.engine.speculation.switching import PerRequestVerdict
from tests.core.engine.speculation.test_mode_switch import REMOTE


def test_what_an_attached_server_runs_reads_as_launch_settings() -> None:
    dflash = served_settings(REMOTE)  # BeeLlama 0.1-0.3 reports no type: any draft is DFlash
    assert dflash.spec_mode == Mode.DFLASH and dflash.draft and dflash.target == "/m/Target.gguf"
    mtp = served_settings(dataclasses.replace(REMOTE, spec_types="draft-mtp,ngram-mod"))
    assert mtp.spec_mode == Mode.MTP and mtp.draft is None
    eagle = served_settings(dataclasses.replace(REMOTE, spec_types="draft-eagle3"))
    assert eagle.spec_mode == Mode.EAGLE3 and eagle.draft
    ngram = served_settings(dataclasses.replace(REMOTE, spec_types="ngram-simple"))
    assert ngram.spec_mode == Mode.MODEL_FREE and ngram.spec_model_free_type == "ngram-simple"


def test_only_a_dflash_server_is_worth_a_check() -> None:
    assert toggle_reason(REMOTE) is None
    assert toggle_reason(dataclasses.replace(REMOTE, spec_types="draft-dflash")) is None
    off = toggle_reason(dataclasses.replace(REMOTE, speculative=False))
    # BeeDeck keeps its capital inside a sentence (the words used to read "and beeDeck did not start").
    assert off is not None and off.startswith("This server runs without speculation, and BeeDeck did not start")
    eagle = toggle_reason(dataclasses.replace(REMOTE, spec_types="draft-eagle3"))
    assert eagle is not None and "speculates with draft-eagle3" in eagle and "only between Baseline and DFlash" in eagle


def test_the_reasons_say_what_the_check_found() -> None:
    ignored = verdict_reason(PerRequestVerdict(False, 40, 36, 0.0))
    assert ignored.startswith(NOT_OURS) and "still drafted 36 tokens" in ignored and "so Baseline restarts" not in ignored
    assert ignored.endswith("Baseline cannot be honest here.")
    assert check_failed_reason("timed out") == f"{NOT_OURS}, and the per-request check failed (timed out)."
