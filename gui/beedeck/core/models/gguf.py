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
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from beedeck.core.models.gguf_types import FILE_TYPES, GGML_TYPES

GGUF_MAGIC = 0x46554747  # b"GGUF" little-endian

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


class Stream(Protocol):
    """What the header reader needs of a file: an open file, or hub_range's range-request reader."""
    def read(self, n: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


class GGUFError(ValueError):
    """The file is not a readable GGUF model; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class ArrayInfo:
    """An array value that was skipped, not decoded: its element type and length."""

    elem_type: int
    length: int
    # Small arrays of scalars (e.g. per-layer head counts) are decoded; big ones are not.
    values: tuple[Any, ...] | None = None
    offset: int | None = None  # file offset of the first element (for lazy decoding)
    end: int | None = None  # file offset just past the last element


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table: enough to size it without reading its data."""

    name: str
    dims: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the data section
    nbytes: int

    @property
    def type_name(self) -> str:
        return GGML_TYPES.get(self.ggml_type, (f"type{self.ggml_type}", 1, 1))[0]


@dataclass
class GGUFHeader:
    """The metadata (and optionally the tensor table) of one GGUF file."""

    path: Path
    version: int
    tensor_count: int
    metadata: dict[str, Any] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)
    data_offset: int = 0  # start of tensor data (only set when tensors were read)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_key(self, name: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{name}", default)


_SMALL_ARRAY = 4096


def _read_exact(fh: Stream, n: int, path: Path) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise GGUFError(f"{path.name} is truncated (the header ends early): download it again.")
    return data


def _tensor_nbytes(dims: tuple[int, ...], ggml_type: int, path: Path, name: str) -> int:
    try:
        _tname, block, size = GGML_TYPES[ggml_type]
    except KeyError:
        raise GGUFError(
            f"{path.name}: tensor {name} has ggml type {ggml_type}, which BeeDeck does not know: "
            "the file is corrupt or newer than BeeDeck; update BeeDeck."
        ) from None
    n = 1
    for d in dims:
        n *= d
    if dims and dims[0] % block:
        raise GGUFError(f"{path.name}: tensor {name} has a row length that does not fit its type: the file is corrupt.")
    return n // block * size


def read_header(path: str | Path, max_kv: int = 100_000, tensors: bool = False) -> GGUFHeader:
    """Read a GGUF file's metadata (and tensor table if asked). Raises GGUFError on bad input."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise GGUFError(f"{p} does not exist: check the path or download the model again.") from None
    except IsADirectoryError:
        raise GGUFError(f"{p} is a folder, not a .gguf file: pick the model file inside it.") from None
    except PermissionError:
        raise GGUFError(f"{p} cannot be read (permission denied): fix its permissions.") from None
    with fh:
        return read_header_from(fh, p, os.fstat(fh.fileno()).st_size, max_kv, tensors)


def read_header_from(fh: Stream, p: Path, size: int, max_kv: int = 100_000, tensors: bool = False,
                     known: dict[str, tuple[int, int]] | None = None) -> GGUFHeader:
    """:func:`read_header` over any seekable binary stream (e.g. HTTP range reads) of a ``size``-byte file.
    ``known``: string arrays whose (count, byte length) a sibling file showed, jumped over unread."""
    head = fh.read(24)
    if not head:
        raise GGUFError(f"{p.name} is empty (0 bytes): its download or copy failed; download it again.")
    if len(head) < 4 or struct.unpack("<I", head[:4])[0] != GGUF_MAGIC:
        raise GGUFError(
            f"{p.name} is not a GGUF model (wrong magic bytes): llama-server needs a .gguf file; "
            "convert the model or download its GGUF version."
        )
    if len(head) < 24:
        raise GGUFError(f"{p.name} is truncated (the header ends early): download it again.")
    _magic, version, n_tensors, n_kv = struct.unpack("<IIQQ", head)
    if version not in (2, 3):
        raise GGUFError(f"{p.name} uses GGUF version {version}, which BeeDeck does not read (2 and 3 are supported).")
    if n_kv > max_kv:
        raise GGUFError(f"{p.name} claims {n_kv} metadata entries: the file is corrupt; download it again.")
    if n_tensors > 1_000_000:
        raise GGUFError(f"{p.name} claims {n_tensors} tensors: the file is corrupt; download it again.")
    meta: dict[str, Any] = {}

    def rstr() -> str:
        (n,) = struct.unpack("<Q", _read_exact(fh, 8, p))
        if n > 1 << 31:
            raise GGUFError(f"{p.name} has a corrupt string length in its header: download it again.")
        return _read_exact(fh, n, p).decode("utf-8", "replace")

    def skip_strings(n: int) -> None:
        # Token lists hold ~250k strings: walk their lengths in memory, not with a seek each.
        start = fh.tell()
        buf = fh.read(1 << 22)
        pos, limit, unpack = 0, len(buf) - 8, struct.unpack_from
        for _ in range(n):
            while pos > limit:
                more = fh.read(max(1 << 22, len(buf)))
                if not more:
                    raise GGUFError(f"{p.name} is truncated (the header ends early): download it again.")
                buf += more
                limit = len(buf) - 8
            length = unpack("<Q", buf, pos)[0]
            if length > 1 << 31:
                raise GGUFError(f"{p.name} has a corrupt string length in its header: download it again.")
            pos += 8 + length
        fh.seek(start + pos)

    def skip(vt: int) -> None:
        if vt in _SCALARS:
            _read_exact(fh, struct.calcsize(_SCALARS[vt]), p)
        elif vt == _STRING:
            (n,) = struct.unpack("<Q", _read_exact(fh, 8, p))
            fh.seek(n, 1)
        elif vt == _ARRAY:
            st, n = struct.unpack("<IQ", _read_exact(fh, 12, p))
            if st in _SCALARS:
                fh.seek(n * struct.calcsize(_SCALARS[st]), 1)
            elif st == _STRING:
                skip_strings(n)
            else:
                for _ in range(n):
                    skip(st)
        else:
            raise GGUFError(f"{p.name} has an unknown value type {vt} in its header: the file is corrupt.")

    for _ in range(n_kv):
        key = rstr()
        (vt,) = struct.unpack("<I", _read_exact(fh, 4, p))
        if vt in _SCALARS:
            fmt = "<" + _SCALARS[vt]
            meta[key] = struct.unpack(fmt, _read_exact(fh, struct.calcsize(fmt), p))[0]
        elif vt == _STRING:
            meta[key] = rstr()
        elif vt == _ARRAY:
            st, n = struct.unpack("<IQ", _read_exact(fh, 12, p))
            if st in _SCALARS and n <= _SMALL_ARRAY:
                fmt = "<" + _SCALARS[st] * n
                values = struct.unpack(fmt, _read_exact(fh, struct.calcsize(fmt), p))
                meta[key] = ArrayInfo(st, n, values)
            elif st == _STRING and known and known.get(key, (-1, 0))[0] == n:
                start = fh.seek(known[key][1], 1) - known[key][1]
                meta[key] = ArrayInfo(st, n, None, start, start + known[key][1])
            else:
                start = fh.tell()
                fh.seek(-12, 1)
                skip(_ARRAY)
                meta[key] = ArrayInfo(st, n, None, start, fh.tell())
        else:
            raise GGUFError(f"{p.name} has an unknown value type {vt} in its header: the file is corrupt.")
    header = GGUFHeader(path=p, version=version, tensor_count=n_tensors, metadata=meta)
    if tensors:
        _read_tensor_table(fh, header, size)
    return header


def _read_tensor_table(fh: Stream, header: GGUFHeader, size: int) -> None:
    p = header.path
    base = fh.tell()
    # The table is ~100 B per tensor; read it in chunks, never the tensor data behind it.
    raw = fh.read(header.tensor_count * 160 + 4096)
    pos = 0
    out: list[TensorInfo] = []

    def take(n: int) -> bytes:
        nonlocal pos, raw
        while pos + n > len(raw):
            more = fh.read(max(1 << 20, n))
            if not more:
                raise GGUFError(f"{p.name} is truncated (the tensor table ends early): download it again.")
            raw += more
        chunk = raw[pos : pos + n]
        pos += n
        return chunk

    for _ in range(header.tensor_count):
        (nlen,) = struct.unpack("<Q", take(8))
        if nlen > 1 << 16:
            raise GGUFError(f"{p.name} has a corrupt tensor name in its tensor table: download it again.")
        name = take(nlen).decode("utf-8", "replace")
        (n_dims,) = struct.unpack("<I", take(4))
        if n_dims > 8:
            raise GGUFError(f"{p.name}: tensor {name} claims {n_dims} dimensions: the file is corrupt.")
        dims = struct.unpack(f"<{n_dims}Q", take(8 * n_dims))
        ggml_type, offset = struct.unpack("<IQ", take(12))
        out.append(TensorInfo(name, dims, ggml_type, offset, _tensor_nbytes(dims, ggml_type, p, name)))
    align = int(header.metadata.get("general.alignment", 32)) or 32
    table_end = base + pos
    header.data_offset = (table_end + align - 1) // align * align
    header.tensors = out
    need = header.data_offset + max((t.offset + t.nbytes for t in out), default=0)
    if size < need:
        raise GGUFError(
            f"{p.name} is truncated: it has {size:,} bytes but its tensors need {need:,} "
            "(an interrupted download?): download it again."
        )


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


def _per_layer(value: Any, n: int, default: int) -> list[int]:
    if isinstance(value, ArrayInfo):
        vals = list(value.values or ())
        if len(vals) >= n:
            return [int(v) for v in vals[:n]]
        return [int(vals[0]) if vals else default] * n
    return [int(value) if value is not None else default] * n


def _swa_layout(h: GGUFHeader, n_all: int) -> tuple[list[bool], int]:
    arch = h.architecture
    window = int(h.arch_key("attention.sliding_window", 0) or 0)
    pat = h.arch_key("attention.sliding_window_pattern")
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
    n_pattern = int(pat) if pat is not None else defaults[arch]
    return [n_pattern == 0 or (i % n_pattern < n_pattern - 1) for i in range(n_all)], window


def _recurrent_layout(h: GGUFHeader, n_layer: int, n_all: int) -> list[bool]:
    if h.architecture not in ("qwen35", "qwen35moe", "qwen3next"):
        return [False] * n_all
    arr = h.arch_key("attention.recurrent_layers")
    if isinstance(arr, ArrayInfo):
        vals = [bool(v) for v in (arr.values or ())]
        return (vals + [False] * n_all)[:n_all]
    interval = int(h.arch_key("full_attention_interval", 4) or 4)
    return [i < n_layer and (i + 1) % interval != 0 for i in range(n_all)]


def _dflash_info(h: GGUFHeader) -> DFlashInfo | None:
    arch, m = h.architecture, h.metadata
    if arch.endswith("dflash-draft"):
        ids = m.get(f"{arch}.dflash.target_layer_ids")
        mask = m.get(f"{arch}.dflash.mask_token_id")
        feats = m.get(f"{arch}.dflash.n_target_features")
        return DFlashInfo(
            "dflash-draft", int(m.get(f"{arch}.dflash.block_size", 16)), None if mask is None else int(mask),
            tuple(int(v) for v in (ids.values or ())) if isinstance(ids, ArrayInfo) else (),
            None if feats is None else int(feats),
        )
    if arch == "dflash":
        ids = m.get("dflash.target_layers")
        mask = m.get("tokenizer.ggml.mask_token_id")
        hf = tuple(int(v) - 1 for v in (ids.values or ())) if isinstance(ids, ArrayInfo) else ()
        n_embd = int(m.get("dflash.embedding_length", 0) or 0)
        return DFlashInfo("dflash", int(m.get("dflash.block_size", 16)), None if mask is None else int(mask), hf,
                          len(hf) * n_embd or None)
    return None


def _split_parts(first: Path, h: GGUFHeader) -> list[Path]:
    count = int(h.metadata.get("split.count", 1) or 1)
    if count <= 1:
        return [first]
    m = SPLIT_RE.match(first.name)
    stem = m.group("stem") if m else first.name.removesuffix(".gguf")
    parts = [first] + [first.with_name(f"{stem}-{i:05d}-of-{count:05d}.gguf") for i in range(2, count + 1)]
    missing = [q.name for q in parts if not q.is_file()]
    if missing:
        raise GGUFError(
            f"{first.name} is part 1 of a model split into {count} files, and {', '.join(missing)} "
            "is missing: download every part into the same folder."
        )
    return parts


def inspect(path: str | Path) -> ModelInfo:
    """Read a model's GGUF header(s) into a :class:`ModelInfo`; split models read as one model."""
    p = Path(path)
    h = read_header(p, tensors=True)
    split_no = int(h.metadata.get("split.no", 0) or 0)
    if split_no > 0:
        count = int(h.metadata.get("split.count", 0) or 0)
        m = SPLIT_RE.match(p.name)
        first = f"{m.group('stem')}-00001-of-{m.group('count')}.gguf" if m else "the -00001-of- file"
        raise GGUFError(
            f"{p.name} is part {split_no + 1} of {count} of a split model, not a model on its own: "
            f"open the first part ({first}) instead."
        )
    if not h.architecture:
        raise GGUFError(f"{p.name} has no general.architecture key: it is not a llama.cpp model; convert it again.")
    parts = _split_parts(p, h)
    rest = [read_header(part, tensors=True) for part in parts[1:]]
    return model_info(h, rest, parts, sum(q.stat().st_size for q in parts))


def model_info(h: GGUFHeader, rest: list[GGUFHeader], parts: list[Path], file_size: int) -> ModelInfo:
    """The :class:`ModelInfo` of part 1's header ``h`` (tensor table read) and the other parts' headers."""
    p = parts[0]
    tensors = list(h.tensors)
    for part_header in rest:
        tensors.extend(part_header.tensors)
    md, arch = h.metadata, h.architecture
    n_all = int(h.arch_key("block_count", 0) or 0)
    nextn = int(h.arch_key("nextn_predict_layers", 0) or 0)
    n_layer = max(0, n_all - nextn)
    n_embd = int(h.arch_key("embedding_length", 0) or 0)
    n_head = _per_layer(h.arch_key("attention.head_count"), n_all, 0)
    n_head_kv = _per_layer(h.arch_key("attention.head_count_kv"), n_all, n_head[0] if n_head else 0)
    dk_default = n_embd // n_head[0] if n_head and n_head[0] else 0
    dk = int(h.arch_key("attention.key_length", dk_default) or dk_default)
    dv = int(h.arch_key("attention.value_length", dk) or dk)
    dk_swa = int(h.arch_key("attention.key_length_swa", dk) or dk)
    dv_swa = int(h.arch_key("attention.value_length_swa", dv) or dv)
    is_swa, window = _swa_layout(h, n_all)
    ff = h.arch_key("feed_forward_length", 0)
    n_ff = max(_per_layer(ff, n_all, 0)) if n_all else 0
    tokens = md.get("tokenizer.ggml.tokens")
    vocab = int(h.arch_key("vocab_size", 0) or 0) or (tokens.length if isinstance(tokens, ArrayInfo) else 0)
    ssm = {k: int(h.arch_key(f"ssm.{k}", 0) or 0)
           for k in ("conv_kernel", "inner_size", "state_size", "group_count", "time_step_rank")}
    ftype = md.get("general.file_type")
    bos, eos = md.get("tokenizer.ggml.bos_token_id"), md.get("tokenizer.ggml.eos_token_id")
    return ModelInfo(
        path=p, parts=parts, file_size=file_size, architecture=arch,
        name=str(md.get("general.name", "")), basename=str(md.get("general.basename", "")),
        size_label=str(md.get("general.size_label", "")),
        file_type=FILE_TYPES.get(int(ftype), f"type {ftype}") if ftype is not None else "",
        n_layer=n_layer, n_layer_all=n_all, n_embd=n_embd, n_ff=n_ff, n_head=n_head, n_head_kv=n_head_kv,
        head_dim_k=[dk_swa if s else dk for s in is_swa], head_dim_v=[dv_swa if s else dv for s in is_swa],
        is_swa=is_swa, is_recurrent=_recurrent_layout(h, n_layer, n_all), sliding_window=window,
        shared_kv_layers=int(h.arch_key("attention.shared_kv_layers", 0) or 0), ssm=ssm, vocab_size=vocab,
        tokenizer_model=str(md.get("tokenizer.ggml.model", "")),
        bos_id=None if bos is None else int(bos), eos_id=None if eos is None else int(eos),
        context_length=int(h.arch_key("context_length", 0) or 0),
        has_chat_template="tokenizer.chat_template" in md, tensors=tensors, dflash=_dflash_info(h), metadata=md,
    )


def token_texts(info: ModelInfo) -> list[str]:
    """Decode the token list (lazily: only the pair check needs it). Empty when the file has none."""
    arr = info.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(arr, ArrayInfo) or arr.offset is None or arr.end is None or arr.elem_type != _STRING:
        return []
    with open(info.path, "rb") as fh:
        fh.seek(arr.offset)
        raw = fh.read(arr.end - arr.offset)
    out: list[str] = []
    pos, unpack = 0, struct.unpack_from
    for _ in range(arr.length):
        (n,) = unpack("<Q", raw, pos)
        out.append(raw[pos + 8 : pos + 8 + n].decode("utf-8", "replace"))
        pos += 8 + n
    return out


def tokenizer_digest(info: ModelInfo) -> str:
    """sha256 over the raw token-list bytes: the tokenizer's identity, cheap to compare."""
    arr = info.metadata.get("tokenizer.ggml.tokens")
    if not isinstance(arr, ArrayInfo) or arr.offset is None or arr.end is None:
        return ""
    with open(info.path, "rb") as fh:
        fh.seek(arr.offset)
        return hashlib.sha256(fh.read(arr.end - arr.offset)).hexdigest()
