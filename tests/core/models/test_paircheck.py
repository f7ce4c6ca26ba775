"""Pair checks on small metadata-only GGUFs (real key layout, small shapes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.models.gguf.reader import ModelInfo, inspect
from beedeck.core.models.paircheck import check_pair
from tests.fixtures import meta_gguf as mg

MAINLINE = EngineCaps(path="llama-server", generation=Generation.MAINLINE, spec_types=("draft-simple", "draft-dflash"))
BEE_A = EngineCaps(path="bee", generation=Generation.BEE_A, version="0.1.2", spec_types=("dflash",))
NO_DFLASH = EngineCaps(path="old", generation=Generation.MAINLINE, spec_types=("ngram-simple",))
V = 1000


def _target(tmp_path: Path, arch: str = "qwen35", n_embd: int = 64, n_layer: int = 8, salt: str = "") -> ModelInfo:
    return inspect(mg.tiny_model(tmp_path / f"{arch}-{n_embd}-{n_layer}{salt}.gguf", arch, V, salt, n_layer, n_embd,
                                 extra={"general.basename": "Qwen3.6"}))


def _draft(tmp_path: Path, fmt: str = "dflash", n_embd: int = 64, layers: tuple[int, ...] = (1, 3, 6),
           n_vocab: int = V, tokens: list[str] | None = None, name: str = "d") -> ModelInfo:
    return inspect(mg.dflash_draft(tmp_path / f"{name}-{fmt}.gguf", fmt, n_embd, layers, n_vocab, n_layer=2,
                                   n_head=4, n_kv=2, hd=16, n_ff=128, qtype=mg.Q.F32, tokens=tokens))


def test_good_upstream_pair_on_mainline(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path), _draft(tmp_path), MAINLINE)
    assert v.ok, v.reasons
    assert v.reasons == []


def test_fork_draft_refused_on_mainline(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path), _draft(tmp_path, "dflash-draft"), MAINLINE)
    assert not v.ok
    assert any("fork format (dflash-draft)" in r and "upstream" in r for r in v.reasons)


def test_upstream_draft_refused_on_bee_01(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path), _draft(tmp_path), BEE_A)
    assert not v.ok and any("upstream 'dflash' format" in r for r in v.reasons)
    newer = EngineCaps(path="bee", generation=Generation.BEE_A, version="0.3.1", spec_types=("dflash",))
    assert check_pair(_target(tmp_path), _draft(tmp_path), newer).ok


def test_engine_without_dflash(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path), _draft(tmp_path), NO_DFLASH)
    assert any("no DFlash speculative type" in r for r in v.reasons)


def test_hidden_size_mismatch(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path), _draft(tmp_path, n_embd=128), MAINLINE)
    assert not v.ok and any("hidden size 128" in r and "has 64" in r for r in v.reasons)


def test_layer_ids_beyond_target(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path, n_layer=4), _draft(tmp_path), MAINLINE)
    assert not v.ok and any("[6]" in r and "only 4 layers" in r for r in v.reasons)


def test_vocab_size_and_text(tmp_path: Path) -> None:
    v = check_pair(_target(tmp_path), _draft(tmp_path, n_vocab=V + 8), MAINLINE)
    assert any("vocabulary of 1008 tokens" in r for r in v.reasons)
    other = mg.vocab(V)
    other[42] = "<other>"
    v = check_pair(_target(tmp_path), _draft(tmp_path, tokens=other, name="o"), MAINLINE)
    assert not v.ok and any("token 42 is '<other>'" in r for r in v.reasons)


def test_gemma3_target_refused_on_mainline_but_fine_on_bee_a(tmp_path: Path) -> None:
    t = _target(tmp_path, arch="gemma3")
    v = check_pair(t, _draft(tmp_path), MAINLINE)
    assert not v.ok and any("'gemma3' model" in r and "abort" in r for r in v.reasons)
    assert check_pair(t, _draft(tmp_path, "dflash-draft"), BEE_A).ok


def test_target_is_a_draft(tmp_path: Path) -> None:
    d = _draft(tmp_path)
    v = check_pair(d, d, MAINLINE)
    assert not v.ok and "not a target model" in v.reasons[0]


def test_ordinary_draft_llama_rules(tmp_path: Path) -> None:
    t = _target(tmp_path, arch="llama")
    same = inspect(mg.tiny_model(tmp_path / "small.gguf", "llama", V + 100))
    assert check_pair(t, same, MAINLINE).ok  # size difference 100 <= 128; texts equal
    far = inspect(mg.tiny_model(tmp_path / "far.gguf", "llama", V + 200))
    assert any("at most 128" in r for r in check_pair(t, far, MAINLINE).reasons)
    bos = inspect(mg.tiny_model(tmp_path / "bos.gguf", "llama", V, extra={"tokenizer.ggml.bos_token_id": 7}))
    assert any("BOS token (7)" in r for r in check_pair(t, bos, MAINLINE).reasons)
    txt = inspect(mg.tiny_model(tmp_path / "txt.gguf", "llama", V, salt="x"))
    assert any("token 5 is '<t5x>'" in r for r in check_pair(t, txt, MAINLINE).reasons)
    v = check_pair(t, same, BEE_A)
    assert any("BeeLlama 0.1-0.3 would run it as a DFlash drafter" in r for r in v.reasons)


@pytest.mark.parametrize("caps", [None, MAINLINE])
def test_every_rejection_has_a_reason(tmp_path: Path, caps: EngineCaps | None) -> None:
    v = check_pair(_target(tmp_path, n_layer=2), _draft(tmp_path, n_embd=32, n_vocab=V + 1), caps)
    assert not v.ok and len(v.reasons) >= 3 and all(r.endswith((".", ")")) for r in v.reasons)


def test_modes_for_reads_mtp_heads_and_the_drafts_kind(tmp_path: Path) -> None:
    from beedeck.core.engine.help_text import caps_from_texts
    from beedeck.core.engine.launch_settings import LaunchSettings
    from beedeck.core.engine.mode import Mode
    from beedeck.core.models.paircheck import model_facts, modes_for, read_infos
    from tests.fixtures.engines import MAINLINE as MAINLINE_HELP
    from tests.fixtures.engines import help_stdout

    ml = caps_from_texts("ml", "", help_stdout(MAINLINE_HELP))
    mtp = mg.tiny_model(tmp_path / "mtp.gguf", "qwen35", V, n_embd=64, extra={"qwen35.nextn_predict_layers": 1})
    eagle = mg.tiny_model(tmp_path / "eagle.gguf", "eagle3", V, n_layer=1, n_embd=64)
    s = LaunchSettings(target=str(mtp), draft=str(eagle), spec_mode=Mode.EAGLE3)
    target, draft = read_infos(s)
    facts = model_facts(target, draft)
    assert (facts.target_name, facts.mtp_layers, facts.draft_name, facts.draft_kind) == ("mtp.gguf", 1, "eagle.gguf",
                                                                                         "eagle3")
    assert [o.key for o in modes_for(ml, s, target, draft) if o.available] == ["baseline", "eagle3", "mtp",
                                                                              "model-free"]
    # A missing or unreadable file is simply not read: the modes are judged from the profile.
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf")
    assert read_infos(LaunchSettings(target=str(tmp_path / "bad.gguf"), draft=str(tmp_path / "none.gguf"))) == (
        None, None)
    assert model_facts(None, None).mtp_layers is None and not model_facts(None, None).draft_read
