"""Full-size pairs meet each real engine family's checks before launch: the metadata-only Gemma 4 31B
Q4_K_M (18.7 GB, zero weights, sparse) with its DFlash Q5_K_M draft (1.1 GB) in each draft format.

The loads themselves ran on the CUDA builds of BeeLlama v0.4.3 and v0.1.2 on an H200
(docs/gpu-runs/2026-12-01-h200-fullsize: plan within 0.1 % of the engine's buffers). On this 2-core,
23 GiB machine BeeDeck's launch refuses the pair and says why: its weights would sit in host memory.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from beedeck.core.engine.client import LlamaClient
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed
from beedeck.core.launcher import launch
from tests.conftest import PERSISTENT
from tests.engine.conftest import RealEngine
from tests.fixtures import meta_gguf as mg

pytestmark = pytest.mark.engine

FULL = PERSISTENT / "fullsize"


def _settings(fmt: str) -> LaunchSettings:
    target, draft = mg.gemma4_pair(FULL, "Q4_K_M", fmt)
    assert target.stat().st_size > 18e9 and 1.0e9 < draft.stat().st_size < 1.2e9
    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size, s.threads, s.mmap, s.mlock, s.no_host = 2048, 1, True, False, False
    return s


def test_the_full_size_pair_in_its_format_is_refused_only_for_host_memory(real_engine: RealEngine) -> None:
    """The right format passes every layout and guard check; what stops it is the 23 GiB host."""
    with pytest.raises(ServerFailed, match="host memory") as info:
        launch(real_engine.path, real_engine.caps, _settings("dflash-draft" if real_engine.kind == "bee-a" else "dflash"))
    assert "GiB" in info.value.failure.message and info.value.failure.remedy


def test_a_draft_in_the_other_format_is_refused_before_launch(real_engine: RealEngine) -> None:
    """The fork format on an upstream engine (and the reverse on Gen A) never reaches the engine."""
    with pytest.raises(ServerFailed) as info:
        launch(real_engine.path, real_engine.caps, _settings("dflash" if real_engine.kind == "bee-a" else "dflash-draft"))
    assert info.value.failure.code == "wrong_draft_format"


def _sticky_full_width(fmt: str) -> tuple[LaunchSettings, LaunchSettings]:
    """Gemma 4 31B's full-width layout (5,376 wide, its head sizes, one global and five sliding layers) with the
    DFlash draft's, both sticky (meta_gguf.make_sticky: the few tensors that make them agree on every token),
    small enough in layers and vocabulary for a 2-core CPU; the same writer makes the 60-layer pair for the GPU
    run (packaging/gpu-check/fullsize_gpu.py, pair gemma4-sticky). Returns (DFlash, Baseline) settings."""
    folder = PERSISTENT / "fullwidth-sticky"
    target = mg.gemma4_31b(folder / "gemma4-6l.gguf", quant="Q4_K_M", n_layer=6, n_vocab=4096)
    draft = mg.dflash_draft(folder / f"gemma4-6l-draft-{fmt}.gguf", fmt, quant="Q5_K_M",
                            **{**mg.GEMMA4_DRAFT, "n_vocab": 4096, "target_layers_hf": (0,), "n_layer": 2})  # type: ignore[arg-type]
    mg.make_sticky(target, draft)
    s = LaunchSettings.guide_dflash(str(target), str(draft))
    s.ctx_size, s.threads, s.mmap, s.mlock, s.no_host, s.temp, s.top_k = 2048, 2, True, False, False, 0.0, 1
    s.n_gpu_layers = s.draft_n_gpu_layers = "0"
    s.draft_n_max = 15
    base = replace(s, spec_mode=Mode.BASELINE, draft=None)
    return s, base


def test_a_sticky_full_width_pair_accepts_every_draft_and_says_what_baseline_says(upstream_engine: RealEngine) -> None:
    """The other end of speculation's cost at full width: target and draft agree on every token (the zero-weight
    pair agrees on none), so DFlash accepts every drafted token and its text is the baseline's. On the engines
    with upstream DFlash; BeeLlama v0.1.2's CPU build aborts on this Gemma 4 target alone in its warm-up
    (ggml-cpu ops.cpp:4447, a scale of a non-F32 tensor), so Gen A is checked on CUDA (docs/gpu-runs)."""
    dflash, base = _sticky_full_width("dflash")
    replies = {}
    for name, s in (("baseline", base), ("dflash", dflash)):
        proc = launch(upstream_engine.path, upstream_engine.caps, s, stop_leftover=False)
        try:
            proc.wait_ready(timeout=300)
            replies[name] = LlamaClient(proc.base_url, timeout=300.0).chat(
                [{"role": "user", "content": "hello"}], max_tokens=16, temperature=0.0, seed=7,
                extra={"ignore_eos": True, "cache_prompt": False})
        finally:
            proc.stop()
    said = f"<t{mg.STICKY_ID}>" * 16
    assert replies["baseline"].text == said and replies["dflash"].text == said, (replies["baseline"].text, replies["dflash"].text)
    t = replies["dflash"].timings
    assert t is not None and t.draft_n > 0 and t.draft_n_accepted == t.draft_n, t
