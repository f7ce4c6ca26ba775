"""Draft kinds and MTP heads, read from real (synthetic) GGUF headers."""

from __future__ import annotations

from pathlib import Path

from beedeck.core.models.draft_kinds import DFLASH, DFLASH_LEGACY, draft_kind, mtp_layers
from beedeck.core.models.gguf.reader import inspect
from tests.conftest import PERSISTENT
from tests.fixtures import synth_gguf as sg
from tests.fixtures import synth_mtp as sm


def test_each_dflash_format_and_an_ordinary_target(tmp_path: Path) -> None:
    target = sg.cached_target(PERSISTENT / "synth", sticky=True)
    assert draft_kind(inspect(target)) is None and mtp_layers(inspect(target)) == 0
    up = sg.cached_draft(PERSISTENT / "synth", target, sticky=True, fmt="mainline")
    bee = sg.cached_draft(PERSISTENT / "synth", target, sticky=True, fmt="bee")
    assert draft_kind(inspect(up)) == DFLASH and draft_kind(inspect(bee)) == DFLASH_LEGACY


def test_mtp_heads_are_counted_inside_the_target() -> None:
    with_heads = inspect(sm.cached_mtp_target(PERSISTENT / "synth", sticky=True))
    assert mtp_layers(with_heads) == 1 and draft_kind(with_heads) is None
    assert with_heads.n_layer == with_heads.n_layer_all - 1  # the head is not a decoding layer
