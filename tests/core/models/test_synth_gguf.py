"""The synthetic GGUF generator writes files both GGUF readers accept, with the keys the engines need."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import pytest

from beedeck.core.models.gguf.reader import read_header
from tests.fixtures import synth_gguf as sg

# Tensors mainline's DFlash loader requires (src/models/dflash.cpp, load_arch_tensors; flag 0).
MAINLINE_GLOBAL = {"fc.weight", "enc.output_norm.weight", "output_norm.weight"}
MAINLINE_LAYER = (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
)  # fmt: skip
LLAMA_LAYER = (
    "attn_norm",
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_norm",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
)


def _tensors(path: Path) -> dict[str, gguf.ReaderTensor]:
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def _field(path: Path, key: str) -> object:
    return gguf.GGUFReader(path).fields[key].contents()


def test_target_is_a_llama_model_with_tokenizer_and_template(tmp_path: Path) -> None:
    path = sg.write_llama_target(tmp_path / "t.gguf", sticky=True)
    h = read_header(path)
    assert h.architecture == "llama"
    assert h.arch_key("embedding_length") == 128
    assert h.arch_key("block_count") == 6
    assert h.arch_key("attention.head_count") == 4
    assert h.metadata["tokenizer.ggml.model"] == "llama"
    assert "<|im_start|>" in h.metadata["tokenizer.chat_template"]
    tokens = _field(path, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list) and len(tokens) == 320
    assert {"<0x00>", "<0x0A>", "<0xFF>", "<|im_start|>", "<|im_end|>", sg.STICKY_TOKEN} <= set(tokens)
    types = _field(path, "tokenizer.ggml.token_type")
    assert isinstance(types, list)
    assert types[tokens.index("<0x0A>")] == gguf.TokenType.BYTE
    assert types[tokens.index("<|im_end|>")] == gguf.TokenType.CONTROL
    names = set(_tensors(path))
    assert "token_embd.weight" in names and "output.weight" not in names  # head tied to the embeddings
    assert {f"blk.{i}.{n}.weight" for i in range(6) for n in LLAMA_LAYER} <= names


def test_sticky_target_maps_each_token_to_itself_and_newline_to_bee(tmp_path: Path) -> None:
    path = sg.write_llama_target(tmp_path / "t.gguf", sticky=True)
    t = _tensors(path)
    for i in range(6):
        assert not np.any(t[f"blk.{i}.attn_output.weight"].data)
        assert not np.any(t[f"blk.{i}.ffn_down.weight"].data)
    # With zero layer outputs the last hidden state is the input embedding; the tied head scores it
    # against every embedding (RMS norm with unit weights does not change the argmax).
    emb = np.asarray(t["token_embd.weight"].data, dtype=np.float32)
    nxt = np.argmax(emb @ emb.T, axis=1)
    tokens = _field(path, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list)
    bee, newline = tokens.index(sg.STICKY_TOKEN), tokens.index("<0x0A>")
    assert nxt[newline] == bee and nxt[bee] == bee
    others = [i for i in range(len(tokens)) if i != newline]
    assert np.array_equal(nxt[others], np.array(others))


def test_random_target_has_nonzero_layers(tmp_path: Path) -> None:
    path = sg.write_llama_target(tmp_path / "t.gguf", sticky=False, n_layer=2, seed=3)
    t = _tensors(path)
    assert np.any(t["blk.1.attn_output.weight"].data) and np.any(t["blk.1.ffn_down.weight"].data)
    assert "random" in str(_field(path, "general.name"))


def test_mainline_draft_matches_target_and_loader(tmp_path: Path) -> None:
    target = sg.write_llama_target(tmp_path / "t.gguf", sticky=True)
    draft = sg.write_dflash_draft(tmp_path / "d.gguf", target, sticky=True, target_layers=(1, 2, 5))
    h = read_header(draft)
    assert h.architecture == "dflash"
    assert h.arch_key("embedding_length") == read_header(target).arch_key("embedding_length")
    assert h.arch_key("block_size") == 16
    assert h.arch_key("target_layers").values == (1, 2, 5)
    tokens = _field(draft, "tokenizer.ggml.tokens")
    assert tokens == _field(target, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list)
    assert h.metadata["tokenizer.ggml.mask_token_id"] == tokens.index(sg.STICKY_TOKEN)
    t = _tensors(draft)
    assert "token_embd.weight" not in t and "output.weight" not in t
    assert MAINLINE_GLOBAL | {f"blk.0.{n}.weight" for n in MAINLINE_LAYER} == set(t)
    # ggml shape {len(target_layers) * n_embd, n_embd}: the fc reads the concatenated target features
    assert [int(x) for x in t["fc.weight"].shape] == [3 * 128, 128]
    assert not np.any(t["blk.0.attn_output.weight"].data) and not np.any(t["blk.0.ffn_down.weight"].data)


def test_random_draft_has_a_wrong_mask_token_and_random_layers(tmp_path: Path) -> None:
    target = sg.write_llama_target(tmp_path / "t.gguf", sticky=True)
    draft = sg.write_dflash_draft(tmp_path / "d.gguf", target, sticky=False)
    tokens = _field(target, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list)
    mask = read_header(draft).metadata["tokenizer.ggml.mask_token_id"]
    assert 0 <= mask < len(tokens) and mask != tokens.index(sg.STICKY_TOKEN)
    assert np.any(_tensors(draft)["blk.0.ffn_down.weight"].data)


def test_bee_format_draft_uses_gen_a_keys_and_hf_layer_ids(tmp_path: Path) -> None:
    target = sg.write_llama_target(tmp_path / "t.gguf", sticky=True)
    draft = sg.write_dflash_draft(tmp_path / "d.gguf", target, sticky=True, fmt="bee")
    h = read_header(draft)
    assert h.architecture == "dflash-draft"
    assert h.metadata["dflash-draft.dflash.block_size"] == 16
    assert h.metadata["dflash-draft.dflash.target_layer_ids"].values == (0, 2, 4)
    assert h.metadata["dflash-draft.dflash.n_target_features"] == 3 * 128
    assert h.metadata["dflash-draft.attention.causal"] is False
    assert "tokenizer.ggml.mask_token_id" not in h.metadata
    names = set(_tensors(draft))
    assert {"dflash_fc.weight", "dflash_hidden_norm.weight", "output_norm.weight"} <= names
    assert "blk.0.post_attention_norm.weight" in names and "fc.weight" not in names


@pytest.mark.parametrize("layers", [(), (0, 2), (1, 6)])
def test_draft_rejects_layer_ids_outside_the_target(tmp_path: Path, layers: tuple[int, ...]) -> None:
    target = sg.write_llama_target(tmp_path / "t.gguf", sticky=True)
    with pytest.raises(ValueError, match="target_layers"):
        sg.write_dflash_draft(tmp_path / "d.gguf", target, sticky=True, target_layers=layers)
    assert not (tmp_path / "d.gguf").exists()


def test_vocab_too_small_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="n_vocab=200 is too small"):
        sg.write_llama_target(tmp_path / "t.gguf", sticky=True, n_vocab=200)
    assert list(tmp_path.iterdir()) == []  # no half-written temp file left behind


def test_synthetic_pair_is_cached_and_rewritten_on_version_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, draft = sg.synthetic_pair(tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in (target, draft)}
    os.utime(target, ns=(1, stamps[target]))  # atime only: a rewrite would change mtime
    assert sg.synthetic_pair(tmp_path) == (target, draft)
    assert {p: p.stat().st_mtime_ns for p in (target, draft)} == stamps

    monkeypatch.setattr(sg, "GENERATOR_VERSION", "test-next")
    assert sg.synthetic_pair(tmp_path) == (target, draft)
    assert str(_field(target, "general.name")).endswith(" vtest-next")
    assert str(_field(draft, "general.name")).endswith(" vtest-next")


def test_random_pair_differs_from_sticky_pair(tmp_path: Path) -> None:
    sticky = sg.synthetic_pair(tmp_path, sticky=True)
    rand = sg.synthetic_pair(tmp_path, sticky=False)
    assert set(sticky).isdisjoint(rand)
    assert "random" in str(_field(rand[1], "general.name"))
    assert read_header(rand[1]).arch_key("target_layers").values == (1, 3, 5)


def test_sizes_are_consistent_and_unknown_sizes_are_refused(tmp_path: Path) -> None:
    for size, dims in sg.SIZES.items():
        assert dims["n_embd"] % dims["n_head"] == 0
        assert all(1 <= x < dims["n_layer"] for x in sg.SIZE_LAYERS[size])
    with pytest.raises(ValueError, match="size must be one of"):
        sg.synthetic_pair(tmp_path, size="huge")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []
