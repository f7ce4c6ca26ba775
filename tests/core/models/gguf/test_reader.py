"""GGUF inspection on metadata-only files with the real shapes of Gemma 4 31B / Qwen3.6-27B / drafts."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from beedeck.core.models.gguf.reader import GGUFError, inspect, read_header, token_texts, tokenizer_digest
from tests.fixtures import hostile_gguf as hg
from tests.fixtures import meta_gguf as mg


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("meta")
    return {
        "gemma4": mg.gemma4_31b(d / "gemma-4-31B-it-Q4_K_S.gguf"),
        "qwen36": mg.qwen36_27b(d / "Qwen3.6-27B-Q5_K_S.gguf"),
        "draft_up": mg.dflash_draft(d / "up.gguf", "dflash", 5120, [1, 16, 31, 46, 61], 1000),
        "draft_fork": mg.dflash_draft(d / "fork.gguf", "dflash-draft", 5120, [1, 16, 31, 46, 61], 1000),
    }


def test_gemma4_layout(big: dict[str, Path]) -> None:
    m = inspect(big["gemma4"])
    assert (m.architecture, m.n_layer, m.n_embd, m.vocab_size) == ("gemma4", 60, 5376, 262144)
    assert sum(m.is_swa) == 50 and m.sliding_window == 1024
    assert [m.n_head_kv[i] for i in (0, 5)] == [16, 4]
    assert [m.head_dim_k[i] for i in (0, 5)] == [256, 512]
    assert m.tied_embeddings and m.file_type == "Q4_K_S" and m.has_chat_template
    assert m.context_length == 262144 and m.dflash is None
    assert len(m.kv_layers()) == 60 and not any(m.is_recurrent)
    # every tensor's bytes come from its dims and ggml block size; together they fill the file
    assert 0 < m.file_size - m.tensor_bytes < 64 * 1024 * 1024


def test_qwen36_hybrid_layout(big: dict[str, Path]) -> None:
    m = inspect(big["qwen36"])
    assert (m.architecture, m.n_layer, m.n_embd) == ("qwen35", 64, 5120)
    assert sum(m.is_recurrent) == 48 and len(m.kv_layers()) == 16
    assert m.kv_layers()[:2] == [3, 7]
    assert m.ssm == {"conv_kernel": 4, "inner_size": 6144, "state_size": 128, "group_count": 16, "time_step_rank": 48}
    assert not m.tied_embeddings
    sizes = m.tensor_map()
    assert sizes["token_embd.weight"].nbytes == 5120 * 248320 // 256 * 176  # Q5_K: 176 B per 256 values


def test_dflash_keys_both_formats(big: dict[str, Path]) -> None:
    up, fork = inspect(big["draft_up"]), inspect(big["draft_fork"])
    assert up.dflash is not None and fork.dflash is not None
    assert up.dflash.fmt == "dflash" and fork.dflash.fmt == "dflash-draft"
    # upstream stores HF ids + 1; both normalise to HF ids
    assert up.dflash.target_layer_ids == fork.dflash.target_layer_ids == (1, 16, 31, 46, 61)
    assert up.dflash.mask_token_id == 757 and fork.dflash.mask_token_id == 750
    assert fork.dflash.n_target_features == 25600 and up.dflash.block_size == 16
    assert up.is_draft and "token_embd.weight" not in up.tensor_map()
    assert sum(up.is_swa) == 4 and up.sliding_window == 2048


def test_inspect_is_fast_on_big_header(big: dict[str, Path]) -> None:
    t0 = time.perf_counter()
    m = inspect(big["gemma4"])
    elapsed = time.perf_counter() - t0
    assert len(m.tensors) > 800
    assert elapsed < 1.5, f"inspect took {elapsed:.2f} s"


def test_tokens_are_decoded_only_on_demand(big: dict[str, Path]) -> None:
    m = inspect(big["draft_up"])
    texts = token_texts(m)
    assert len(texts) == 1000 and texts[5] == "<t5>"
    assert len(tokenizer_digest(m)) == 64
    assert tokenizer_digest(m) == tokenizer_digest(inspect(big["draft_fork"]))


def test_not_gguf(tmp_path: Path) -> None:
    p = tmp_path / "model.safetensors"
    p.write_bytes(b"{\"__metadata__\": {}}" + b"\0" * 100)
    with pytest.raises(GGUFError, match="not a GGUF model"):
        inspect(p)


def test_truncated_header(tmp_path: Path, big: dict[str, Path]) -> None:
    p = tmp_path / "cut.gguf"
    p.write_bytes(big["draft_up"].read_bytes()[:500])
    with pytest.raises(GGUFError, match="truncated"):
        inspect(p)


def test_truncated_data(tmp_path: Path) -> None:
    p = mg.tiny_model(tmp_path / "t.gguf")
    os.truncate(p, p.stat().st_size - 1000)
    with pytest.raises(GGUFError, match=r"truncated: it has .* bytes but its tensors need"):
        inspect(p)


def test_corrupt_value_type(tmp_path: Path) -> None:
    good = mg.tiny_model(tmp_path / "t.gguf").read_bytes()
    # the first key's value type sits after magic/version/counts (24 B) and the key string
    klen = int.from_bytes(good[24:32], "little")
    pos = 32 + klen
    bad = good[:pos] + (99).to_bytes(4, "little") + good[pos + 4 :]
    p = tmp_path / "bad.gguf"
    p.write_bytes(bad)
    with pytest.raises(GGUFError, match="unknown value type 99"):
        read_header(p)


def test_missing_and_folder(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="does not exist"):
        inspect(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError, match="is a folder"):
        inspect(tmp_path)


def _split(tmp_path: Path, count: int = 2) -> list[Path]:
    out = []
    for no in range(count):
        path = tmp_path / f"m-{no + 1:05d}-of-{count:05d}.gguf"
        extra = {"split.no": no, "split.count": count}
        if no == 0:
            out.append(mg.tiny_model(path, extra=extra))
        else:
            out.append(mg.write_meta_gguf(path, "llama", {}, [(f"blk.9.ffn_{no}.weight", (64, 64), mg.Q.F32)],
                                          extra=extra))
    return out


def test_split_model_reads_as_one(tmp_path: Path) -> None:
    parts = _split(tmp_path)
    m = inspect(parts[0])
    assert m.parts == parts
    assert len(m.tensors) == 5 and m.tensor_map()["blk.9.ffn_1.weight"].nbytes == 64 * 64 * 4
    assert m.file_size == sum(p.stat().st_size for p in parts)


def test_split_part_two_alone(tmp_path: Path) -> None:
    parts = _split(tmp_path, 3)
    with pytest.raises(GGUFError, match=r"part 2 of 3 of a split model.*m-00001-of-00003.gguf"):
        inspect(parts[1])


def test_split_missing_part(tmp_path: Path) -> None:
    parts = _split(tmp_path, 3)
    parts[2].unlink()
    with pytest.raises(GGUFError, match="m-00003-of-00003.gguf is missing"):
        inspect(parts[0])


def test_cli_inspect(big: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from beedeck.cli import main

    assert main(["inspect", str(big["gemma4"]), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["architecture"] == "gemma4" and d["swa_layers"] == 50 and d["sliding_window"] == 1024
    assert main(["inspect", str(big["draft_up"])]) == 0
    assert "DFlash draft (dflash): block 16, target layers [1, 16, 31, 46, 61]" in capsys.readouterr().out
    assert main(["inspect", str(big["gemma4"].with_name("missing.gguf"))]) == 1
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(hg.CRAFTED))
def test_a_crafted_header_field_is_refused_by_its_limit(tmp_path: Path, name: str) -> None:
    path = hg.write(tmp_path / f"{name}.gguf", name)
    with pytest.raises(GGUFError, match=re.escape(hg.CRAFTED[name][2])):
        inspect(path)


def test_a_bad_library_file_is_listed_with_its_reason_and_the_good_one_kept(tmp_path: Path) -> None:
    from beedeck.core.models import library

    good = mg.tiny_model(tmp_path / "good.gguf")
    hg.write(tmp_path / "nested.gguf", "nested-5000")
    os.mkfifo(tmp_path / "fifo.gguf")
    found = {m.path.name: m.error for m in library.scan([tmp_path])}
    assert found[good.name] is None
    assert "nests arrays" in (found["nested.gguf"] or "") and "FIFO" in (found["fifo.gguf"] or "")


# ---------------------------------------------------------------------------- the header budget (issue 34)

def test_the_largest_real_header_reads_within_the_budget_with_its_margin(tmp_path: Path,
                                                                         gemma_model_path: Path) -> None:
    from beedeck.core.models.gguf import header as gh

    path = mg.gemma4_31b_full_tokenizer(tmp_path / "gemma-4-31B-it-Q4_K_M.gguf", gemma_model_path)
    budget = gh.Budget()
    h = read_header(path, tensors=True, budget=budget)
    spent = {"bytes": gh.HEADER_BYTES - budget.header_bytes, "walked": gh.MAX_WALK - budget.walk,
             "kept": gh.KEEP_BYTES - budget.keep, "tensors": gh.MAX_TENSORS - budget.tensors}
    assert h.data_offset - 32 < spent["bytes"] <= h.data_offset  # the whole header, up to the data's alignment
    assert 15_000_000 < spent["bytes"] < 17_000_000  # about 16 MB, as the real one
    assert spent["walked"] == 262_144 + mg.GEMMA4_MERGES + 2 and spent["tensors"] == 833
    # The margins the budget states (gguf/header.py): 4x the bytes, 5x the walk, 30x what is kept, 50x the
    # tensors.
    assert spent["bytes"] * 4 <= gh.HEADER_BYTES and spent["walked"] * 5 <= gh.MAX_WALK
    assert spent["kept"] * 30 <= gh.KEEP_BYTES and spent["tensors"] * 50 <= gh.MAX_TENSORS
    m = inspect(path)
    assert m.vocab_size == 262_144 and m.has_chat_template and len(token_texts(m)) == 262_144


def test_a_long_string_value_keeps_only_its_length_also_through_the_sizing_cache(tmp_path: Path) -> None:
    from beedeck.core.models.gguf import as_json as gguf_json
    from beedeck.core.models.gguf.reader import LongString

    template = "{# " + "x" * 70_000 + " #}"  # over KEEP_STRING: not a value BeeDeck needs
    m = inspect(mg.tiny_model(tmp_path / "t.gguf", extra={"tokenizer.chat_template": template}))
    assert m.metadata["tokenizer.chat_template"] == LongString(len(template)) and m.has_chat_template
    assert str(m.metadata["tokenizer.chat_template"]) == "<a 70,006-byte string BeeDeck did not read>"
    again = gguf_json.decode(gguf_json.encode(m))
    assert again.metadata["tokenizer.chat_template"] == LongString(len(template))


def test_a_header_that_takes_more_cpu_than_its_budget_is_refused(tmp_path: Path) -> None:
    from beedeck.core.models.gguf.header import Budget

    p = mg.tiny_model(tmp_path / "t.gguf", n_vocab=3000)
    with pytest.raises(GGUFError, match=r"reading its header took more than 0 s of CPU"):
        read_header(p, budget=Budget(cpu_s=0.0, started=-1.0))


def test_a_token_list_that_changed_after_the_header_was_read_is_an_error_not_a_crash(tmp_path: Path) -> None:
    p = mg.tiny_model(tmp_path / "t.gguf", n_vocab=3000)
    m = inspect(p)
    os.truncate(p, 2000)  # replaced by a shorter file between the header read and the pair check
    with pytest.raises(GGUFError, match="got shorter while BeeDeck read its token list"):
        token_texts(m)
