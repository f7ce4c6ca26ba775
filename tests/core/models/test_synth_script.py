"""The scripted synthetic target (tests/fixtures/synth_script.py): its head, read back from the file,
walks the tool-call script from the generation prompt's newline to <|im_end|>; the MTP variant and
the DFlash draft carry the same vocabulary."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from tests.fixtures import synth_script as ss


def _tensor(reader: gguf.GGUFReader, name: str) -> np.ndarray:
    return np.asarray(next(t for t in reader.tensors if t.name == name).data, dtype=np.float32)


def _walk(path: Path, steps: int) -> list[str]:
    """Greedy next tokens from START as the engine computes them on the sticky trunk: argmax(head @ e_t)."""
    r = gguf.GGUFReader(path)
    tokens = [str(t) for t in r.fields["tokenizer.ggml.tokens"].contents()]
    emb, head = _tensor(r, "token_embd.weight"), _tensor(r, "output.weight")
    out, tok = [], tokens.index(ss.START)
    for _ in range(steps):
        tok = int(np.argmax(head @ emb[tok]))
        out.append(tokens[tok])
    return out


def test_the_scripted_targets_say_the_tool_call_then_stop(tmp_path: Path) -> None:
    llama = ss.cached_llama_target(tmp_path)
    mtp = ss.cached_mtp_target(tmp_path)
    want = [*ss.SCRIPT, "<|im_end|>"]  # and <|im_end|> stays (an engine stops there)
    assert _walk(llama, len(want)) == want
    assert _walk(mtp, len(want)) == want
    assert "".join(ss.SCRIPT[:-1]).replace("\u2581", " ") == ss.CALL_TEXT
    r = gguf.GGUFReader(llama)
    assert bool(r.fields["tokenizer.ggml.add_space_prefix"].contents()) is False
    types = r.fields["tokenizer.ggml.token_type"].contents()
    tokens = [str(t) for t in r.fields["tokenizer.ggml.tokens"].contents()]
    assert [types[tokens.index(t)] for t in ss.TAGS] == [gguf.TokenType.USER_DEFINED] * 2
    assert len(set(ss.SCRIPT)) == len(ss.SCRIPT)  # a chain: each token has one successor


def test_the_dflash_draft_shares_the_vocabulary_and_masks_inside_the_call(tmp_path: Path) -> None:
    target = ss.cached_llama_target(tmp_path)
    for fmt, key in (("mainline", "tokenizer.ggml.mask_token_id"), ("bee", "dflash-draft.dflash.mask_token_id")):
        r = gguf.GGUFReader(ss.cached_dflash_draft(tmp_path, target, fmt))
        tokens = [str(t) for t in r.fields["tokenizer.ggml.tokens"].contents()]
        assert tokens == [str(t) for t in gguf.GGUFReader(target).fields["tokenizer.ggml.tokens"].contents()]
        assert tokens[int(r.fields[key].contents())] == ss.DFLASH_MASK in ss.SCRIPT
        assert "output.weight" not in {t.name for t in r.tensors}  # the engine lends the target's head
        assert bool(r.fields["tokenizer.ggml.add_space_prefix"].contents()) is False
