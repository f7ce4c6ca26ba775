"""The synthetic MTP target has exactly the keys and tensors mainline's qwen35 loader asks for."""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import pytest

from beedeck.core.models.gguf.reader import read_header
from tests.fixtures import synth_gguf as sg
from tests.fixtures import synth_mtp as sm

EVERY_BLOCK = ("attn_norm", "post_attention_norm", "ffn_gate", "ffn_up", "ffn_down")
ATTENTION = ("attn_q", "attn_k", "attn_v", "attn_output", "attn_q_norm", "attn_k_norm")
DELTA_NET = ("attn_qkv", "attn_gate", "ssm_conv1d", "ssm_beta", "ssm_alpha", "ssm_norm", "ssm_out")
NEXTN = ("nextn.eh_proj", "nextn.enorm", "nextn.hnorm")


def _tensors(path: Path) -> dict[str, gguf.ReaderTensor]:
    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def _expected_names(n_layer: int, mtp: bool) -> set[str]:
    names = {"token_embd.weight", "output_norm.weight"}
    for i in range(n_layer + (1 if mtp else 0)):
        linear = i < n_layer and (i + 1) % 4 != 0
        names |= {f"blk.{i}.{n}.weight" for n in EVERY_BLOCK + (DELTA_NET if linear else ATTENTION)}
        if linear:
            names |= {f"blk.{i}.ssm_dt.bias", f"blk.{i}.ssm_a"}
    if mtp:
        names |= {f"blk.{n_layer}.{n}.weight" for n in NEXTN}
    return names


def test_target_is_a_qwen35_with_one_mtp_block(tmp_path: Path) -> None:
    path = sm.write_mtp_target(tmp_path / "t.gguf")
    assert path.stat().st_size < 3_000_000
    h = read_header(path)
    assert h.architecture == "qwen35"
    assert h.arch_key("block_count") == 5  # 4 trunk layers + the MTP block
    assert h.arch_key("nextn_predict_layers") == 1
    assert h.arch_key("full_attention_interval") == 4
    assert h.arch_key("rope.dimension_sections").values == (6, 5, 5, 0)  # sums to head_dim / 2
    assert h.arch_key("ssm.inner_size") == h.arch_key("ssm.state_size") * h.arch_key("ssm.time_step_rank")
    for key in ("ssm.conv_kernel", "ssm.group_count", "attention.layer_norm_rms_epsilon"):
        assert h.arch_key(key) is not None, key
    assert "<|im_start|>" in h.metadata["tokenizer.chat_template"]
    t = _tensors(path)
    assert set(t) == _expected_names(4, mtp=True)  # the loader refuses tensors it does not ask for
    assert [int(x) for x in t["blk.4.nextn.eh_proj.weight"].shape] == [2 * 128, 128]
    assert [int(x) for x in t["blk.3.attn_q.weight"].shape] == [128, 2 * 128]  # query + output gate
    assert [int(x) for x in t["blk.0.ssm_conv1d.weight"].shape] == [sm.D_CONV, 3 * 128]
    assert t["blk.0.ssm_conv1d.weight"].tensor_type == gguf.GGMLQuantizationType.F32


def test_trunk_without_a_delta_net_layer_is_refused(tmp_path: Path) -> None:
    # llama-server b11434 aborts on the first decode of a qwen35 with no recurrent layer.
    with pytest.raises(ValueError, match="gated-delta-net"):
        sm.write_mtp_target(tmp_path / "t.gguf", full_attention_interval=1)
    assert list(tmp_path.iterdir()) == []


def test_target_without_head_has_no_nextn_block(tmp_path: Path) -> None:
    path = sm.write_mtp_target(tmp_path / "t.gguf", mtp=False)
    h = read_header(path)
    assert h.arch_key("block_count") == 4
    assert h.arch_key("nextn_predict_layers") is None
    assert set(_tensors(path)) == _expected_names(4, mtp=False)


def test_sticky_target_and_head_repeat_the_current_token(tmp_path: Path) -> None:
    path = sm.write_mtp_target(tmp_path / "t.gguf", sticky=True)
    t = _tensors(path)
    for name, tensor in t.items():
        if name.endswith(("attn_output.weight", "ssm_out.weight", "ffn_down.weight")):
            assert not np.any(tensor.data), name
    # eh_proj keeps the (normalised) token embedding and drops the target's hidden state
    eh = np.asarray(t["blk.4.nextn.eh_proj.weight"].data, dtype=np.float32)
    assert np.array_equal(eh, np.concatenate([np.eye(128), np.zeros((128, 128))], axis=1))
    emb = np.asarray(t["token_embd.weight"].data, dtype=np.float32)
    tokens = gguf.GGUFReader(path).fields["tokenizer.ggml.tokens"].contents()
    assert isinstance(tokens, list)
    nxt = np.argmax(emb @ emb.T, axis=1)
    bee, newline = tokens.index(sg.STICKY_TOKEN), tokens.index("<0x0A>")
    assert nxt[newline] == bee and nxt[bee] == bee


def test_random_target_has_nonzero_outputs(tmp_path: Path) -> None:
    t = _tensors(sm.write_mtp_target(tmp_path / "t.gguf", sticky=False))
    assert np.any(t["blk.0.ssm_out.weight"].data) and np.any(t["blk.3.attn_output.weight"].data)
    assert np.any(t["blk.4.ffn_down.weight"].data)
    assert np.all(np.asarray(t["blk.0.ssm_a"].data) < 0)  # decaying recurrent state


def test_cached_target_is_reused_and_rewritten_on_version_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = sm.cached_mtp_target(tmp_path)
    assert path.name == "synth-mtp-target-sticky.gguf"
    stamp = path.stat().st_mtime_ns
    os.utime(path, ns=(1, stamp))
    assert sm.cached_mtp_target(tmp_path) == path and path.stat().st_mtime_ns == stamp
    assert sm.cached_mtp_target(tmp_path, sticky=False).name == "synth-mtp-target-random.gguf"
    assert sm.cached_mtp_target(tmp_path, mtp=False).name == "synth-mtp-target-sticky-nomtp.gguf"

    monkeypatch.setattr(sm, "MTP_GENERATOR_VERSION", "test-next")
    assert sm.cached_mtp_target(tmp_path) == path
    name = gguf.GGUFReader(path).fields["general.name"].contents()
    assert str(name).endswith(" vtest-next")
