"""A lean GGUF header reader: metadata without decoding big arrays, fast enough for the UI.

``GGUFReader`` from the ``gguf`` package decodes every array element in Python (8.9 s / 650 MB on
an 8B-sized header, docs/reference/python-stack.md); this scanner seeks over arrays (0.1 s).

:func:`read_header` reads the metadata (and, on request, the tensor table). :func:`inspect` turns
a model file (or the first part of a split model) into a :class:`ModelInfo` with everything the
pair check and the memory planner need: per-layer attention layout, recurrent layers, DFlash keys
and per-tensor byte sizes. Token texts are only decoded on demand (:func:`token_texts`).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import struct
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from beedeck.core import paths
from beedeck.core.models.gguf.header import (
    _STRING,
    GGUF_MAGIC,
    LIMITS,
    MAX_STRING,
    ArrayInfo,
    Budget,
    GGUFError,
    GGUFHeader,
    LongString,
    Stream,
    TensorInfo,
    printable_key,
    read_header,
    read_header_from,
)
from beedeck.core.models.gguf.type_tables import FILE_TYPES

__all__ = ["GGUF_MAGIC", "LIMITS", "SPLIT_RE", "ArrayInfo", "Budget", "DFlashInfo", "GGUFError", "GGUFHeader",
           "LongString", "ModelInfo", "Stream", "TensorInfo", "architecture", "check_split_set", "inspect",
           "iter_token_bytes", "iter_tokens", "model_info", "read_header", "read_header_from", "token_texts",
           "tokenizer_digest"]

SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")

MAX_LAYERS = 512  # llama.cpp's LLAMA_MAX_LAYERS (src/llama-hparams.h)
MAX_SPLITS = 99_999  # the -NNNNN-of-NNNNN.gguf names hold five digits
_BIG = 1 << 24  # widths, head counts, vocabularies: far above any real model, far below a crafted 2^60
_ID = 1 << 32  # token ids (uint32 in llama.cpp)
TOKEN_CHUNK = 1 << 20  # token lists are read in chunks of this many bytes, never whole


def _whole(p: Path, key: str, value: Any, lo: int, hi: int) -> int:
    """A header number as an int within lo..hi, or GGUFError naming the key, what it holds and the range."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and lo <= value <= hi:
        return value
    shown = f"the {type(value).__name__} {str(value)[:40]!r}" if not isinstance(value, ArrayInfo) else "an array"
    raise GGUFError(f"{p.name}: its metadata key {key} holds {shown}, but it must be a whole number from {lo:,} "
                    f"to {hi:,}: the file is corrupt or was converted wrongly; download it again (or convert it again).")


def _num(h: GGUFHeader, name: str, default: int, hi: int = _BIG, lo: int = 0, arch: bool = True) -> int:
    """The checked int at ``<arch>.name`` (or the global key ``name``); ``default`` when absent or 0."""
    key = f"{h.architecture}.{name}" if arch else name
    value = h.metadata.get(key)
    if value is None:
        return default
    return _whole(h.path, key, value, lo, hi) or default


def architecture(path: str | Path) -> str:
    return read_header(path).architecture


# --------------------------------------------------------------------------- model inspection


@dataclass(frozen=True)
class DFlashInfo:
    """The DFlash keys of a draft GGUF, normalised over the two formats (docs/reference/engine-facts.md §5.1)."""

    fmt: str  # "dflash-draft" (BeeLlama <= 0.3 fork format) or "dflash" (upstream)
    block_size: int
    mask_token_id: int | None
    target_layer_ids: tuple[int, ...]  # Hugging Face layer ids (the upstream +1 is removed)
    n_target_features: int | None


@dataclass
class ModelInfo:
    """Everything BeeDeck knows about a model from its GGUF header(s), without reading weights."""

    path: Path
    parts: list[Path]
    file_size: int
    architecture: str
    name: str
    basename: str
    size_label: str
    file_type: str
    n_layer: int  # repeating layers used for inference (block_count minus MTP/NextN blocks)
    n_layer_all: int
    n_embd: int
    n_ff: int
    n_head: list[int]
    n_head_kv: list[int]
    head_dim_k: list[int]  # per layer (SWA layers may differ, Gemma 4)
    head_dim_v: list[int]
    is_swa: list[bool]
    is_recurrent: list[bool]
    sliding_window: int
    shared_kv_layers: int
    ssm: dict[str, int]  # conv_kernel, inner_size, state_size, group_count, time_step_rank
    vocab_size: int
    tokenizer_model: str
    bos_id: int | None
    eos_id: int | None
    context_length: int
    has_chat_template: bool
    tensors: list[TensorInfo]
    dflash: DFlashInfo | None
    metadata: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def tensor_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def tied_embeddings(self) -> bool:
        names = {t.name for t in self.tensors}
        return "token_embd.weight" in names and "output.weight" not in names

    @property
    def is_draft(self) -> bool:
        return self.dflash is not None

    def kv_layers(self) -> list[int]:
        """Layers that own an attention KV cache (no recurrent, no shared-KV layers)."""
        last = self.n_layer - self.shared_kv_layers
        return [i for i in range(self.n_layer) if not self.is_recurrent[i] and i < last]

    def tensor_map(self) -> dict[str, TensorInfo]:
        return {t.name: t for t in self.tensors}


def _per_layer(h: GGUFHeader, name: str, n: int, default: int) -> list[int]:
    key = f"{h.architecture}.{name}"
    value = h.metadata.get(key)
    if isinstance(value, ArrayInfo):
        vals = [_whole(h.path, key, v, 0, _BIG) for v in (value.values or ())]
        if len(vals) >= n:
            return vals[:n]
        return [vals[0] if vals else default] * n
    return [_whole(h.path, key, value, 0, _BIG) if value is not None else default] * n


def _swa_layout(h: GGUFHeader, n_all: int) -> tuple[list[bool], int]:
    arch = h.architecture
    window = _num(h, "attention.sliding_window", 0, _ID)
    key = f"{arch}.attention.sliding_window_pattern"
    pat = h.metadata.get(key)
    if window <= 0:
        return [False] * n_all, 0
    if isinstance(pat, ArrayInfo):
        vals = [bool(v) for v in (pat.values or ())]
        return (vals + [False] * n_all)[:n_all], window
    # Default pattern per architecture (llama.cpp src/models/*.cpp load_swa_pattern calls).
    defaults = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "gemma-embedding": 6, "cohere2": 4, "llama4": 4,
                "openai-moe": 2, "exaone4": 4, "olmo2": 4, "plamo3": 8}
    if pat is None and arch not in defaults:
        return [False] * n_all, 0
    # A number, or an array of booleans (one per layer): a string here is a corrupt header.
    n_pattern = _whole(h.path, key, pat, 0, MAX_LAYERS) if pat is not None else defaults[arch]
    return [n_pattern == 0 or (i % n_pattern < n_pattern - 1) for i in range(n_all)], window


def _recurrent_layout(h: GGUFHeader, n_layer: int, n_all: int) -> list[bool]:
    if h.architecture not in ("qwen35", "qwen35moe", "qwen3next"):
        return [False] * n_all
    arr = h.arch_key("attention.recurrent_layers")
    if isinstance(arr, ArrayInfo):
        vals = [bool(v) for v in (arr.values or ())]
        return (vals + [False] * n_all)[:n_all]
    interval = _num(h, "full_attention_interval", 4, MAX_LAYERS)
    return [i < n_layer and (i + 1) % interval != 0 for i in range(n_all)]


def _ids(h: GGUFHeader, key: str) -> tuple[int, ...]:
    arr = h.metadata.get(key)
    return tuple(_whole(h.path, key, v, 0, MAX_LAYERS + 1) for v in (arr.values or ())) \
        if isinstance(arr, ArrayInfo) else ()


def _dflash_info(h: GGUFHeader) -> DFlashInfo | None:
    arch, m, p = h.architecture, h.metadata, h.path

    def opt(key: str, hi: int) -> int | None:
        return None if m.get(key) is None else _whole(p, key, m[key], 0, hi)

    if arch.endswith("dflash-draft"):
        return DFlashInfo(
            "dflash-draft", _num(h, "dflash.block_size", 16, 4096),
            opt(f"{arch}.dflash.mask_token_id", _ID), _ids(h, f"{arch}.dflash.target_layer_ids"),
            opt(f"{arch}.dflash.n_target_features", _BIG * 64),
        )
    if arch == "dflash":
        hf = tuple(v - 1 for v in _ids(h, "dflash.target_layers"))
        n_embd = _num(h, "dflash.embedding_length", 0)
        return DFlashInfo("dflash", _num(h, "dflash.block_size", 16, 4096), opt("tokenizer.ggml.mask_token_id", _ID),
                          hf, len(hf) * n_embd or None)
    return None


def _split_parts(first: Path, h: GGUFHeader) -> list[Path]:
    count = _num(h, "split.count", 1, MAX_SPLITS, arch=False)
    if count <= 1:
        return [first]
    m = SPLIT_RE.match(first.name)
    if not m or int(m.group("no")) != 1 or int(m.group("count")) != count:
        stem = m.group("stem") if m else first.name.removesuffix(".gguf")
        raise GGUFError(
            f"{first.name} says (split.count) it is part 1 of a model split into {count} files, but its name does "
            f"not end in -00001-of-{count:05d}.gguf, so llama-server cannot find the other parts (llama.cpp: "
            f"\"invalid split file name: {first.name}\"): give it the name it was published under "
            f"({stem}-00001-of-{count:05d}.gguf), or download the model again.")
    stem = m.group("stem")
    parts = [first] + [first.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(2, count + 1)]
    missing = [q.name for q in parts if not q.is_file()]
    if missing:
        more = f" and {len(missing) - 3:,} more" if len(missing) > 3 else ""
        raise GGUFError(
            f"{first.name} is part 1 of a model split into {count} files, and {', '.join(missing[:3])}{more} "
            f"{'are' if len(missing) > 1 else 'is'} missing: download every part into the same folder."
        )
    return parts


def _links(parts: list[Path]) -> dict[int, int]:
    """Part index -> the index of an earlier part that is the same file (a symbolic or a hard link)."""
    seen: dict[tuple[int, int], int] = {}
    same: dict[int, int] = {}
    for i, q in enumerate(parts):
        st = os.stat(q)
        same_as = seen.setdefault((st.st_dev, st.st_ino), i)
        if same_as != i:
            same[i] = same_as
    return same


def _part_problems(h: GGUFHeader, part: GGUFHeader, idx: int, owner: dict[str, int], count: int) -> list[str]:
    """What part ``idx`` (0-based) says that does not fit part 1 ``h``, in llama.cpp's words where it has them."""
    said: list[str] = []
    name, md = part.path.name, part.metadata
    if md.get("split.no") is None:
        said.append(f"it has no split.no key (llama.cpp: \"missing key split.no in GGUF split {name}\")")
    else:
        no = _whole(part.path, "split.no", md["split.no"], 0, MAX_SPLITS)
        its = md.get("split.count")
        its_count = count if its is None else _whole(part.path, "split.count", its, 0, MAX_SPLITS)
        if no != idx:
            said.append(f"it says it is part {no + 1} of {its_count} (llama.cpp: \"invalid split file idx: {no} "
                        f"(file: {name}), expected {idx}\")")
        elif its_count != count:
            said.append(f"it says the model has {its_count} parts, part 1 says {count}")
    arch = md.get("general.architecture")
    if arch is not None and str(arch) != h.architecture:
        said.append(f"it is a part of a {printable_key(str(arch))} model, part 1 of a {h.architecture!r} one")
    for t in part.tensors:
        if t.name in owner:
            said.append(f"it repeats the tensor {printable_key(t.name)} of part {owner[t.name] + 1} (llama.cpp: "
                        f"\"invalid model: tensor '{t.name}' is duplicated\")")
            break
        owner[t.name] = idx
    return said


def check_split_set(h: GGUFHeader, rest: list[GGUFHeader], parts: list[Path],
                    links: dict[int, int] | None = None) -> None:
    """Refuse parts that do not belong together (src/llama-model-loader.cpp checks the index and the tensor
    names; BeeDeck also the count and the architecture): ``h`` is part 1's header, ``rest`` the others',
    ``links`` maps a part that is the same file as an earlier one to that one."""
    owner = {t.name: 0 for t in h.tensors}
    problems = []
    for idx, part in enumerate(rest, start=1):
        said = _part_problems(h, part, idx, owner, len(parts))
        if links and idx in links:
            said.insert(0, f"it is the same file as {parts[links[idx]].name} (a link), not a part of its own")
        if said:
            problems.append(f"{part.path.name} (part {idx + 1}): {'; '.join(said)}")
    first = parts[0].name
    if problems:
        raise GGUFError(f"{first} is part 1 of a model split into {len(parts)} files, but the parts do not belong "
                        f"together. {' '.join(p.rstrip('.') + '.' for p in problems)} Download every part of the "
                        "model again into one folder, from one repo and one quant.")
    expected = h.metadata.get("split.tensors.count")
    found = len(h.tensors) + sum(len(r.tensors) for r in rest)
    if expected is not None and _whole(h.path, "split.tensors.count", expected, 0, 1 << 32) != found:
        raise GGUFError(f"{first} says its {len(parts)} parts hold {expected} tensors, but they hold {found} (llama.cpp: "
                        f"\"corrupted model: {expected} tensors expected but {found} found\"): download every part "
                        "of the model again into one folder.")


def inspect(path: str | Path) -> ModelInfo:
    """Read a model's GGUF header(s) into a :class:`ModelInfo`; split models read as one model (their parts
    checked against each other as llama.cpp checks them), all parts' headers within one :class:`Budget`.
    Every number the planner uses is checked for type and range (GGUFError names the key): a string, NaN or
    3e7 layers where a layer count belongs is a corrupt header, not a crash or 2.6 GB of lists."""
    p = Path(path)
    budget = Budget()
    h = read_header(p, tensors=True, budget=budget)
    split_no = _num(h, "split.no", 0, MAX_SPLITS, arch=False)
    if split_no > 0:
        count = _num(h, "split.count", 0, MAX_SPLITS, arch=False)
        m = SPLIT_RE.match(p.name)
        first = f"{m.group('stem')}-00001-of-{m.group('count')}.gguf" if m else "the -00001-of- file"
        raise GGUFError(
            f"{p.name} is part {split_no + 1} of {count} of a split model, not a model on its own "
            f"(llama.cpp: \"illegal split file idx: {split_no} (file: {p.name}), model must be loaded with the "
            f"first split\"): open the first part ({first}) instead."
        )
    if not h.architecture:
        raise GGUFError(f"{p.name} has no general.architecture key: it is not a llama.cpp model; convert it again.")
    parts = _split_parts(p, h)
    rest = [read_header(part, tensors=True, budget=budget) for part in parts[1:]]
    if rest:
        check_split_set(h, rest, parts, _links(parts))
    return model_info(h, rest, parts, sum(q.stat().st_size for q in parts))


def model_info(h: GGUFHeader, rest: list[GGUFHeader], parts: list[Path], file_size: int) -> ModelInfo:
    """The :class:`ModelInfo` of part 1's header ``h`` (tensor table read) and the other parts' headers
    (a local file's or a Hub repo's read by range requests, core/models/hub/sizing.py)."""
    p = parts[0]
    tensors = list(h.tensors)
    for part_header in rest:
        tensors.extend(part_header.tensors)
    md, arch = h.metadata, h.architecture
    n_all = _num(h, "block_count", 0, MAX_LAYERS)
    n_layer = n_all - _num(h, "nextn_predict_layers", 0, n_all)
    n_embd = _num(h, "embedding_length", 0)
    n_head = _per_layer(h, "attention.head_count", n_all, 0)
    n_head_kv = _per_layer(h, "attention.head_count_kv", n_all, n_head[0] if n_head else 0)
    dk = _num(h, "attention.key_length", n_embd // n_head[0] if n_head and n_head[0] else 0)
    dv = _num(h, "attention.value_length", dk)
    dk_swa = _num(h, "attention.key_length_swa", dk)
    dv_swa = _num(h, "attention.value_length_swa", dv)
    is_swa, window = _swa_layout(h, n_all)
    n_ff = max(_per_layer(h, "feed_forward_length", n_all, 0)) if n_all else 0
    tokens = md.get("tokenizer.ggml.tokens")
    vocab = _num(h, "vocab_size", 0) or (tokens.length if isinstance(tokens, ArrayInfo) else 0)
    ssm = {k: _num(h, f"ssm.{k}", 0) for k in ("conv_kernel", "inner_size", "state_size", "group_count",
                                                "time_step_rank")}
    ftype = md.get("general.file_type")
    ftype = None if ftype is None else _whole(p, "general.file_type", ftype, 0, 1 << 16)

    def token_id(key: str) -> int | None:
        return None if md.get(key) is None else _whole(p, key, md[key], -1, _ID)

    return ModelInfo(
        path=p, parts=parts, file_size=file_size, architecture=arch,
        name=str(md.get("general.name", "")), basename=str(md.get("general.basename", "")),
        size_label=str(md.get("general.size_label", "")),
        file_type=FILE_TYPES.get(ftype, f"type {ftype}") if ftype is not None else "",
        n_layer=n_layer, n_layer_all=n_all, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv,
        head_dim_k=[dk_swa if s else dk for s in is_swa], head_dim_v=[dv_swa if s else dv for s in is_swa],
        is_swa=is_swa, is_recurrent=_recurrent_layout(h, n_layer, n_all), sliding_window=window,
        shared_kv_layers=_num(h, "attention.shared_kv_layers", 0, n_all), ssm=ssm, vocab_size=vocab,
        tokenizer_model=str(md.get("tokenizer.ggml.model", "")),
        bos_id=token_id("tokenizer.ggml.bos_token_id"), eos_id=token_id("tokenizer.ggml.eos_token_id"),
        context_length=_num(h, "context_length", 0, _ID),
        has_chat_template="tokenizer.chat_template" in md, tensors=tensors, dflash=_dflash_info(h), metadata=md,
    )


def _token_range(info: ModelInfo) -> ArrayInfo | None:
    arr = info.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(arr, ArrayInfo) or arr.offset is None or arr.end is None or arr.elem_type != _STRING:
        return None
    return arr


def _token_chunks(info: ModelInfo, arr: ArrayInfo) -> Generator[bytes, None, None]:
    """The token list's bytes in chunks of at most :data:`TOKEN_CHUNK` (the range the header read showed)."""
    assert arr.offset is not None and arr.end is not None
    with paths.open_regular(info.path) as fh:
        fh.seek(arr.offset)
        left = arr.end - arr.offset
        while left > 0:
            chunk = fh.read(min(TOKEN_CHUNK, left))
            if not chunk:
                raise GGUFError(f"{info.path.name} got shorter while BeeDeck read its token list (was it replaced?): "
                                "check the file, or download it again.")
            left -= len(chunk)
            yield chunk


def iter_token_bytes(info: ModelInfo) -> Generator[bytes, None, None]:
    """The tokens' raw bytes one by one, read in bounded chunks: the pair check compares two lists of 260,000
    tokens without holding either (and decodes only the pair that differs). Nothing without a token list."""
    arr = _token_range(info)
    if arr is None:
        return
    chunks = _token_chunks(info, arr)
    buf, pos, unpack = b"", 0, struct.Struct("<Q").unpack_from
    try:
        for _ in range(arr.length):
            if len(buf) - pos < 8 or len(buf) - pos < 8 + unpack(buf, pos)[0]:  # past this chunk: take the next
                buf, pos = _refill(info, chunks, buf[pos:]), 0
            n = unpack(buf, pos)[0]
            yield buf[pos + 8 : pos + 8 + n]
            pos += 8 + n
    finally:
        chunks.close()


def _refill(info: ModelInfo, chunks: Generator[bytes, None, None], rest: bytes) -> bytes:
    """``rest`` and as many chunks more as the next token needs (a token longer than a chunk takes several)."""
    while len(rest) < 8 or len(rest) < 8 + struct.unpack_from("<Q", rest)[0]:
        if len(rest) >= 8 and struct.unpack_from("<Q", rest)[0] > MAX_STRING:
            raise GGUFError(f"{info.path.name} has a token of {struct.unpack_from('<Q', rest)[0]:,} bytes in its "
                            "token list: the file is corrupt (or was replaced while BeeDeck read it); download it again.")
        nxt = next(chunks, b"")
        if not nxt:
            raise GGUFError(f"{info.path.name}'s token list no longer fits what its header said (was the file "
                            "replaced while BeeDeck read it?): check the file, or download it again.")
        rest += nxt
    return rest


def iter_tokens(info: ModelInfo) -> Generator[str, None, None]:
    """The token texts one by one (:func:`iter_token_bytes`, decoded)."""
    with closing(iter_token_bytes(info)) as raw:
        for token in raw:
            yield token.decode("utf-8", "replace")


def token_texts(info: ModelInfo) -> list[str]:
    """The whole token list as a list (tests and small models; the pair check streams :func:`iter_tokens`)."""
    return list(iter_tokens(info))


def tokenizer_digest(info: ModelInfo) -> str:
    """sha256 over the raw token-list bytes, read in bounded chunks: the tokenizer's identity, cheap to compare."""
    arr = _token_range(info)
    if arr is None:
        return ""
    digest = hashlib.sha256()
    for chunk in _token_chunks(info, arr):
        digest.update(chunk)
    return digest.hexdigest()
