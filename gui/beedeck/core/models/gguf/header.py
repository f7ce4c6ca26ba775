"""The GGUF header scanner: metadata and tensor table, read within hard limits and one budget.

A header is untrusted input: a few hundred crafted bytes can claim 2^62 array elements, a string of
2 GB, arrays nested thousands deep or a million tensors in a sparse file of a terabyte. Every field
that sizes an allocation or a loop is checked before it is used, against a limit (:data:`LIMITS`)
and against the bytes the file still holds. Limits on single values are not enough (100,000 small
arrays each within its limit cost 3.2 GB), so the whole header, and every part of a split model
together, also spends from one :class:`Budget`: bytes of header, elements walked one by one, bytes
kept in memory, tensors and CPU seconds, each a stated margin over the largest real header BeeDeck
knows (Gemma 4's: 262,144 tokens and 514,906 merges, about 16 MB; benchmarks/hostile_headers.py
measures it). Values BeeDeck does not need are skipped, not kept: big arrays are walked through a
sliding window (a sparse file is never read whole) and strings over :data:`KEEP_STRING` bytes keep
only their length (:class:`LongString`). Reading any header fails with :class:`GGUFError` (a
message and a remedy), never another exception; a key twice and a tensor name twice or of 64 bytes
or more are refused in llama.cpp's words (ggml/src/gguf.cpp).
"""

from __future__ import annotations

import errno
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from beedeck.core import paths
from beedeck.core.models.gguf.type_tables import GGML_TYPES

GGUF_MAGIC = 0x46554747  # b"GGUF" little-endian

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

# Limits on one field (each checked before it sizes anything).
MAX_KV = 1 << 14  # metadata entries (real models: 30-60; Gemma 4 has 56)
MAX_KEY = 1 << 16  # bytes of one key name
MAX_STRING = 1 << 24  # bytes of one string value or array element (chat templates are ~10 KB)
MAX_ARRAY = 1 << 24  # elements of one array (token lists hold ~260,000, Gemma 4's merges 514,906)
MAX_DEPTH = 4  # arrays of arrays (llama.cpp reads none; gguf-py can write them)
MAX_NAME = 63  # bytes of one tensor name: ggml's GGML_MAX_NAME is 64 with the terminating zero
MAX_DIMS = 8
SMALL_ARRAY = 4096  # scalar arrays up to this are decoded (per-layer head counts); bigger ones skipped
KEEP_STRING = 1 << 16  # a longer string value is skipped: only its length is kept (LongString)
# The budget of one model's header(s), all values together. The largest real header BeeDeck knows, Gemma 4
# 31B's (tests/fixtures/meta_gguf.py gemma4_31b_full_tokenizer), takes 16,075,648 bytes, 777,052 elements
# walked, 27,235 bytes kept, 833 tensors and 0.09 s of CPU: the margins are 4.2x, 5.4x, 38x, 79x and 55x.
HEADER_BYTES = 64 << 20  # bytes of header (metadata and tensor table, every part of a split model)
MAX_WALK = 1 << 22  # elements walked one by one (strings, nested arrays): 4,194,304
KEEP_BYTES = 1 << 20  # kept in memory: keys, strings, decoded numbers (32 B each), 100 B per entry
MAX_TENSORS = 1 << 16  # tensor-table entries (the biggest real models have ~1,000-2,000)
HEADER_CPU_S = 5.0  # CPU seconds of the reading thread (a network wait costs none)
ENTRY_COST = 100  # what Python spends on a kept entry besides its bytes (the dict slot, the objects)
NUMBER_COST = 32  # what a decoded number costs in a tuple (a float or a large int object and its slot)
_CHUNK = 1 << 22

LIMITS = {"metadata entries": MAX_KV, "tensors": MAX_TENSORS, "string bytes": MAX_STRING,
          "array elements": MAX_ARRAY, "array nesting": MAX_DEPTH, "elements walked": MAX_WALK,
          "header bytes": HEADER_BYTES, "bytes kept": KEEP_BYTES, "CPU seconds": HEADER_CPU_S}


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
class LongString:
    """A string value longer than :data:`KEEP_STRING` (a chat template of 100 KB), skipped: its length only."""

    length: int

    def __str__(self) -> str:
        return f"<a {self.length:,}-byte string BeeDeck did not read>"


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


class Stream(Protocol):
    """What the header reader needs of a file: an open file, or hub.range_reader's range-request reader."""
    def read(self, n: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


def _corrupt(p: Path, what: str) -> GGUFError:
    return GGUFError(f"{p.name} {what}: the file is corrupt; download it again.")


@dataclass
class Budget:
    """What reading one model's header costs at most, all keys, values and tensors together. The parts of
    a split model share one: the sum of their headers is the model's header."""

    header_bytes: int = HEADER_BYTES
    walk: int = MAX_WALK
    keep: int = KEEP_BYTES
    tensors: int = MAX_TENSORS
    cpu_s: float = HEADER_CPU_S
    started: float = field(default_factory=time.thread_time)

    def over(self, p: Path, what: str) -> GGUFError:
        return GGUFError(f"{p.name}: {what}, more than any real model's header needs (the largest BeeDeck knows, "
                         "Gemma 4's with 262,144 tokens and 514,906 merges, takes about 16 MB): the file is corrupt "
                         "or was crafted; download it again from a source you trust.")

    def spend_walk(self, p: Path, n: int, at: str) -> None:
        self.walk -= n
        if self.walk < 0:
            raise self.over(p, f"its header has more than {MAX_WALK:,} array elements to walk one by one (at {at})")

    def spend_keep(self, p: Path, n: int, at: str) -> None:
        self.keep -= n
        if self.keep < 0:
            raise self.over(p, f"its header holds more than {KEEP_BYTES:,} bytes of keys, strings and small arrays "
                            f"to keep (at {at})")

    def spend_tensors(self, p: Path, n: int) -> None:
        self.tensors -= n
        if self.tensors < 0:
            raise self.over(p, f"it claims {n:,} tensors, which with the other parts of its model make more than "
                            f"{MAX_TENSORS:,}")

    def check_cpu(self, p: Path, at: str) -> None:
        if time.thread_time() - self.started > self.cpu_s:
            raise self.over(p, f"reading its header took more than {self.cpu_s:g} s of CPU (at {at})")


class _Cursor:
    """Reads a file through a sliding window: small reads come from memory, long skips seek, and the
    window never holds more than one chunk plus the largest single value read. Every read and skip
    spends from the header's :class:`Budget`."""

    def __init__(self, fh: Stream, path: Path, size: int, budget: Budget) -> None:
        self.fh, self.path, self.size, self.budget = fh, path, size, budget
        # A stream whose reads cost a request each (hub.range_reader's) says how much one read should ask for.
        self.chunk = int(getattr(fh, "read_chunk", _CHUNK))
        self.base = fh.tell()  # file offset of buf[0]
        self.buf, self.pos = b"", 0
        self.limit = budget.header_bytes  # this file's header may end no further (the budget left)
        self.at = "the start of the header"  # what is being read, for the messages

    def tell(self) -> int:
        return self.base + self.pos

    def left(self) -> int:
        return self.size - self.tell()

    def truncated(self, where: str = "the header", detail: str = "") -> GGUFError:
        return GGUFError(f"{self.path.name} is truncated ({where} ends early){detail}: download it again.")

    def reach(self, target: int) -> None:
        """Refuse a header that would end past the file or past the budget's bytes, before reading there."""
        if target > self.size:
            raise self.truncated()
        if target > self.limit:
            whole = "" if self.limit == HEADER_BYTES else " (with the other parts of its model)"
            raise self.budget.over(self.path, f"its header goes on past {HEADER_BYTES:,} bytes{whole} (at {self.at})")

    def take(self, n: int, where: str = "the header") -> bytes:
        if self.pos + n > len(self.buf):
            if n > self.left():
                raise self.truncated(where)
            self.reach(self.tell() + n)
            self.budget.check_cpu(self.path, self.at)
            have = len(self.buf) - self.pos
            self.base += self.pos
            ahead = min(max(self.chunk, n - have), self.limit - self.base - have)  # never past the budget
            self.buf = self.buf[self.pos:] + self.fh.read(ahead)
            self.pos = 0
            if n > len(self.buf):
                raise self.truncated(where)
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str, where: str = "the header") -> tuple[Any, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), where))

    def skip(self, n: int, where: str = "the header") -> None:
        if n > self.left():
            raise self.truncated(where)
        if self.pos + n <= len(self.buf):
            self.pos += n
            return
        self.jump(self.tell() + n)

    def jump(self, target: int) -> None:
        """Seek to ``target`` (past the window), within the file and the budget."""
        self.reach(target)
        self.budget.check_cpu(self.path, self.at)
        self.fh.seek(target)
        self.base, self.buf, self.pos = target, b"", 0

    def walk(self, n: int) -> None:
        """Count ``n`` elements against the whole header's budget of elements walked one by one."""
        self.budget.spend_walk(self.path, n, self.at)


def _long_string(c: _Cursor, n: int, limit: int, key: str) -> GGUFError:
    return GGUFError(f"{c.path.name} has a corrupt string length in its header ({n:,} bytes at {key!r}; BeeDeck "
                     f"reads at most {limit:,}): download it again.")


def _string(c: _Cursor, limit: int, key: str) -> bytes:
    (n,) = c.unpack("<Q")
    if n > limit:
        raise _long_string(c, n, limit, key)
    return c.take(n)


def _skip_strings(c: _Cursor, n: int, key: str) -> None:
    """Walk ``n`` strings (a token list: ~260,000 of them) in the window, seeking over long ones."""
    c.walk(n)
    buf, pos, end, unpack = c.buf, c.pos, len(c.buf), struct.Struct("<Q").unpack_from
    for _ in range(n):
        if pos + 8 > end:
            c.pos = pos
            c.take(8)  # refills the window (or says the file is truncated)
            buf, pos, end = c.buf, c.pos - 8, len(c.buf)
        length = unpack(buf, pos)[0]
        if length > MAX_STRING:
            raise _long_string(c, length, MAX_STRING, key)
        pos += 8 + length
        if pos > end:  # past the window: seek there (a long string, or a sparse file's zeros)
            c.jump(c.base + pos)
            buf, pos, end = b"", 0, 0
    c.pos = pos


def _check_array(c: _Cursor, st: int, n: int, key: str, depth: int) -> None:
    if n > MAX_ARRAY:
        raise _corrupt(c.path, f"claims {n:,} elements in the array {key!r} (BeeDeck reads at most {MAX_ARRAY:,})")
    if depth > MAX_DEPTH:
        raise _corrupt(c.path, f"nests arrays more than {MAX_DEPTH} deep at {key!r}")
    least = struct.calcsize(_SCALARS[st]) if st in _SCALARS else 8 if st == _STRING else 12 if st == _ARRAY else 0
    if not least:
        raise _corrupt(c.path, f"has an unknown element type {st} in the array {key!r}")
    if n * least > c.left():
        raise c.truncated(detail=f"; the array {key!r} claims {n:,} elements, more than the file holds")
    c.reach(c.tell() + n * least)


def _skip_elements(c: _Cursor, st: int, n: int, key: str, depth: int) -> None:
    """Walk over the ``n`` elements of type ``st`` of an array nested ``depth`` deep (checked by _check_array)."""
    if st in _SCALARS:
        c.skip(n * struct.calcsize(_SCALARS[st]))
    elif st == _STRING:
        _skip_strings(c, n, key)
    else:
        c.walk(n)
        for _ in range(n):
            _skip_value(c, st, key, depth)


def _skip_value(c: _Cursor, vt: int, key: str, depth: int) -> None:
    if vt in _SCALARS:
        c.skip(struct.calcsize(_SCALARS[vt]))
    elif vt == _STRING:
        (n,) = c.unpack("<Q")
        if n > MAX_STRING:
            raise _long_string(c, n, MAX_STRING, key)
        c.skip(n)
    elif vt == _ARRAY:
        st, n = c.unpack("<IQ")
        _check_array(c, st, n, key, depth + 1)
        _skip_elements(c, st, n, key, depth + 1)
    else:
        raise _corrupt(c.path, f"has an unknown value type {vt} at {key!r}")


def _read_value(c: _Cursor, key: str, known: dict[str, tuple[int, int]] | None = None) -> Any:
    (vt,) = c.unpack("<I")
    if vt in _SCALARS:
        return c.unpack("<" + _SCALARS[vt])[0]
    if vt == _STRING:
        (n,) = c.unpack("<Q")
        if n > MAX_STRING:
            raise _long_string(c, n, MAX_STRING, key)
        if n > KEEP_STRING:  # not a value BeeDeck needs (a chat template is only looked for): skipped
            c.skip(n)
            return LongString(n)
        c.budget.spend_keep(c.path, n, c.at)
        return c.take(n).decode("utf-8", "replace")
    if vt != _ARRAY:
        raise _corrupt(c.path, f"has an unknown value type {vt} at {key!r}")
    st, n = c.unpack("<IQ")
    _check_array(c, st, n, key, 1)
    if st in _SCALARS and n <= SMALL_ARRAY:
        c.budget.spend_keep(c.path, n * NUMBER_COST, c.at)
        return ArrayInfo(st, n, c.unpack("<" + _SCALARS[st] * n))
    start = c.tell()
    if st == _STRING and known and known.get(key, (-1, 0))[0] == n:
        c.skip(known[key][1])  # a sibling file showed this list's byte length: jump over it unread
        return ArrayInfo(st, n, None, start, start + known[key][1])
    _skip_elements(c, st, n, key, 1)
    return ArrayInfo(st, n, None, start, c.tell())


def _open(p: Path) -> BinaryIO:
    try:
        return paths.open_regular(p)
    except FileNotFoundError:
        raise GGUFError(f"{p} does not exist: check the path or download the model again.") from None
    except PermissionError:
        raise GGUFError(f"{p} cannot be read (permission denied): fix its permissions.") from None
    except paths.NotARegularFileError as exc:
        if exc.kind == "a folder":
            raise GGUFError(f"{p} is a folder, not a .gguf file: pick the model file inside it.") from None
        raise GGUFError(f"{p} is {exc.kind}, not a model file: BeeDeck reads a model only from a regular "
                        "file; pick the .gguf file itself.") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GGUFError(f"{p} is a symbolic link that loops (it leads back to itself): point it at the "
                            "model file.") from None
        if exc.errno == errno.ENAMETOOLONG:
            longest = max((len(part.encode()) for part in p.parts), default=0)
            raise GGUFError(f"The model path is too long for this file system (a name of {longest} bytes; "
                            "the limit is 255 per name): rename the file or a folder on its path.") from None
        raise GGUFError(f"{p} cannot be read ({exc.strerror or exc}): check the file and its folder.") from None


def read_header(path: str | Path, max_kv: int = MAX_KV, tensors: bool = False,
                budget: Budget | None = None) -> GGUFHeader:
    """Read a GGUF file's metadata (and tensor table if asked). Raises GGUFError on bad input."""
    p = Path(path)
    fh = _open(p)
    with fh:
        return read_header_from(fh, p, os.fstat(fh.fileno()).st_size, max_kv, tensors, budget=budget)


def read_header_from(fh: Stream, p: Path, size: int, max_kv: int = MAX_KV, tensors: bool = False,
                     known: dict[str, tuple[int, int]] | None = None, budget: Budget | None = None) -> GGUFHeader:
    """:func:`read_header` over any seekable binary stream (e.g. HTTP range reads) of a ``size``-byte file,
    with the same limits. ``known``: string arrays whose (count, byte length) a sibling file showed,
    jumped over unread. ``budget``: what the header may cost (the parts of one model pass the same one)."""
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
    if n_kv > min(max_kv, MAX_KV):
        raise GGUFError(f"{p.name} claims {n_kv} metadata entries (real models have 30-60; BeeDeck reads at most "
                        f"{min(max_kv, MAX_KV):,}): the file is corrupt; download it again.")
    if n_tensors > MAX_TENSORS:
        raise GGUFError(f"{p.name} claims {n_tensors} tensors (real models have at most a few thousand; BeeDeck "
                        f"reads at most {MAX_TENSORS:,}): the file is corrupt; download it again.")
    c = _Cursor(fh, p, size, budget if budget is not None else Budget())
    # Each entry takes at least 13 bytes (key length, type, a one-byte value), each tensor 24.
    if n_kv * 13 + (n_tensors * 24 if tensors else 0) > c.left():
        raise c.truncated(detail=f"; it claims {n_kv:,} metadata entries and {n_tensors:,} tensors, more than its "
                          f"{size:,} bytes hold")
    meta: dict[str, Any] = {}
    for i in range(n_kv):
        raw = _string(c, MAX_KEY, "a key name")
        key = raw.decode("utf-8", "replace")
        if key in meta:
            raise _corrupt(p, f"has the metadata key {printable_key(key)} twice, which llama.cpp refuses "
                           f"(\"duplicate key '{printable_key(key, quote=False)}' for KV pair {i}\")")
        c.at = printable_key(key)
        c.budget.spend_keep(p, len(raw) + ENTRY_COST, c.at)
        meta[key] = _read_value(c, key, known)
    header = GGUFHeader(path=p, version=version, tensor_count=n_tensors, metadata=meta)
    if tensors:
        c.at = "the tensor table"
        c.budget.spend_tensors(p, n_tensors)
        _read_tensor_table(c, header)
    c.budget.header_bytes -= c.tell()
    return header


def printable_key(key: str, quote: bool = True) -> str:
    """A key or tensor name as a message shows it: at most 80 characters, quoted unless asked not to."""
    short = key if len(key) <= 80 else key[:79] + "…"
    return repr(short) if quote else short


def tensor_nbytes(dims: tuple[int, ...], ggml_type: int, path: Path, name: str) -> int:
    try:
        _tname, block, size = GGML_TYPES[ggml_type]
    except KeyError:
        raise GGUFError(
            f"{path.name}: tensor {name!r} has ggml type {ggml_type}, which BeeDeck does not know: "
            "the file is corrupt or newer than BeeDeck; update BeeDeck."
        ) from None
    n = 1
    for d in dims:
        n *= d
    if dims and dims[0] % block:
        raise GGUFError(f"{path.name}: tensor {name!r} has a row length that does not fit its type: the file is corrupt.")
    return n // block * size


def alignment(header: GGUFHeader) -> int:
    """general.alignment, checked as llama.cpp checks it (a power of two; 32 when absent)."""
    align = header.metadata.get("general.alignment", 32)
    if isinstance(align, bool) or not isinstance(align, int) or align <= 0 or align & (align - 1) or align > 1 << 30:
        raise _corrupt(header.path, f"has general.alignment {str(align)[:40]!r}, which is not a power of two")
    return align


def _read_tensor_table(c: _Cursor, header: GGUFHeader) -> None:
    p = header.path
    where = "the tensor table"
    out: list[TensorInfo] = []
    seen: set[str] = set()
    for i in range(header.tensor_count):
        (nlen,) = c.unpack("<Q", where)
        if nlen > MAX_NAME:
            raise _corrupt(p, f"has a tensor name of {nlen:,} bytes, which llama.cpp refuses (\"tensor name {i} is "
                           f"too long: {nlen} >= {MAX_NAME + 1}\")")
        name = c.take(nlen, where).decode("utf-8", "replace")
        if name in seen:
            raise _corrupt(p, f"has the tensor {printable_key(name)} twice, which llama.cpp refuses (\"duplicate "
                           f"tensor name '{name}' for tensor {i}\")")
        seen.add(name)
        (n_dims,) = c.unpack("<I", where)
        if n_dims > MAX_DIMS:
            raise GGUFError(f"{p.name}: tensor {name!r} claims {n_dims} dimensions: the file is corrupt.")
        dims = c.unpack(f"<{n_dims}Q", where)
        ggml_type, offset = c.unpack("<IQ", where)
        out.append(TensorInfo(name, dims, ggml_type, offset, tensor_nbytes(dims, ggml_type, p, name)))
    align = alignment(header)
    header.data_offset = (c.tell() + align - 1) // align * align
    header.tensors = out
    need = header.data_offset + max((t.offset + t.nbytes for t in out), default=0)
    if c.size < need:
        raise GGUFError(
            f"{p.name} is truncated: it has {c.size:,} bytes but its tensors need {need:,} "
            "(an interrupted download?): download it again."
        )
