"""The drafter's defaults an engine applies when the launch does not say: BeeLlama v0.4.5+ gives the drafter
its own ubatch (-ubd, default 128) and a 2048-token window (shared/docs/field-2026-12.md section 1;
Anbeeld/beellama.cpp#172), found from the probe: the v0.4.7 --help (a fixture derived from v0.4.3's real one
plus the documented flags, tests/fixtures/engines/README.md) or the release recorded beside the binary."""

from __future__ import annotations

import dataclasses

import pytest

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.models.gguf.reader import ModelInfo, inspect
from beedeck.core.models.planner import DraftDefaults, GiB, draft_defaults, pad, plan, row_bytes
from beedeck.core.models.planner.drafts import BEE_DRAFT_UBATCH, BEE_DRAFT_WINDOW
from tests.conftest import PERSISTENT
from tests.fixtures import hub_models
from tests.fixtures.engines import BEE_B, HERE, MAINLINE, help_stdout

BARE = (HERE / "beellama-0.4.3-cpu.version.txt").read_text()


def _caps(name: str, release: str = "", version_text: str = BARE) -> EngineCaps:
    return dataclasses.replace(caps_from_texts(f"/e/{name}", version_text, help_stdout(name)), release=release)


def test_beellama_0_4_7s_probe_gives_the_drafter_its_own_ubatch_and_window() -> None:
    v047 = _caps("beellama-0.4.7-cpu", "v0.4.7")
    assert v047.has("-ubd") and v047.defaults["--spec-draft-ubatch-size"] == "128"
    d = draft_defaults(v047)
    assert (d.ubatch, d.window) == (BEE_DRAFT_UBATCH, BEE_DRAFT_WINDOW) == (128, 2048)
    assert "#172" in d.why
    # the --help's own default wins over the documented one
    said = dataclasses.replace(v047, defaults={**v047.defaults, "--spec-draft-ubatch-size": "96"})
    assert draft_defaults(said).ubatch == 96
    # v0.4.5 or v0.4.6 (no -ubd yet): the release says so
    assert draft_defaults(_caps(BEE_B, "v0.4.5")).window == 2048
    # v0.4.3, an unknown release without -ubd, mainline, no engine: the old rule (the target's -ub, full context)
    for caps in (_caps(BEE_B, "v0.4.3"), _caps(BEE_B, "", "version: 11207 (ba27edad2)\n"),
                 caps_from_texts("/e/ml", "version: 11434 (515e85511)\n", help_stdout(MAINLINE)), None):
        assert draft_defaults(caps) == DraftDefaults(), caps


@pytest.fixture(scope="module")
def pair() -> tuple[ModelInfo, ModelInfo]:
    files = hub_models.build_all(PERSISTENT / "hub-models")
    return inspect(files["Qwen3.8-27B-Q4_K_M.gguf"]), inspect(files["dflash2"])


def _s(**kw: object) -> LaunchSettings:
    base: dict[str, object] = {"target": "t", "draft": "d", "spec_mode": Mode.DFLASH, "ctx_size": 98304,
                               "flash_attn": "on", "parallel": 1, "n_gpu_layers": "all", "kv_unified": True,
                               "cache_type_k": "q8_0", "cache_type_v": "q8_0", "batch_size": 1024, "ubatch_size": 512,
                               "draft_n_max": 7}
    base.update(kw)
    return LaunchSettings(**base)  # type: ignore[arg-type]


def test_the_plan_counts_the_default_ubatch_and_the_draft_window(pair: tuple[ModelInfo, ModelInfo]) -> None:
    target, draft = pair
    d = draft_defaults(_caps("beellama-0.4.7-cpu", "v0.4.7"))
    old = plan(target, draft, _s(), Generation.BEE_B, [24 * GiB])
    new = plan(target, draft, _s(), Generation.BEE_B, [24 * GiB], draft_defaults=d)
    # the draft's KV: its full-attention layer over 2048 tokens (not 96k), its sliding layers over window + ub
    full = [i for i in draft.kv_layers() if not draft.is_swa[i]]
    swa = [i for i in draft.kv_layers() if draft.is_swa[i]]

    def kv(cells: int, layers: list[int]) -> int:
        return sum(cells * 2 * row_bytes("f16", draft.n_head_kv[i] * draft.head_dim_k[i]) for i in layers)

    assert new.component("draft_kv") == kv(2048, full) + kv(pad(min(2048, draft.sliding_window + 128)), swa)
    assert old.component("draft_kv") == kv(98304, full) + kv(pad(min(98304, draft.sliding_window + 512)), swa)
    # its compute: the larger of the logits and the attention peak, at ub 128 over a 2048-token context
    n_tl = len(draft.dflash.target_layer_ids) if draft.dflash else 0
    assert new.component("draft_compute") == max(4 * 128 * (target.vocab_size + target.n_embd),
                                                 128 * (2 * 2048 + 4 * (n_tl + 2) * target.n_embd))
    assert old.component("draft_compute") == max(4 * 512 * (target.vocab_size + target.n_embd),
                                                 512 * (2 * 98304 + 4 * (n_tl + 2) * target.n_embd))
    assert new.gpu_total < old.gpu_total and any("#172" in n for n in new.notes)
    # -ubd set (64 on a 24 GB card) wins over the engine's default; the target's own cache is untouched
    ubd = plan(target, draft, _s(draft_ubatch_size=64), Generation.BEE_B, [24 * GiB], draft_defaults=d)
    assert ubd.component("draft_compute") == max(4 * 64 * (target.vocab_size + target.n_embd),
                                                 64 * (2 * 2048 + 4 * (n_tl + 2) * target.n_embd))
    assert ubd.component("kv") == new.component("kv") == old.component("kv")
    # the target's own MTP heads take the default ubatch too (no window: only DFlash-format drafts were measured)
    mtp = _s(draft=None, spec_mode=Mode.MTP, draft_n_max=None)
    assert plan(target, None, mtp, Generation.BEE_B, [24 * GiB], draft_defaults=d).component("mtp_compute") == \
        4 * 128 * (target.vocab_size + target.n_embd)
