"""The GGUF header scanner: metadata and tensor table, read within hard limits.

A header is untrusted input: a few hundred crafted bytes can claim 2^62 array elements, a string of
2 GB, arrays nested thousands deep or a million tensors in a sparse file of a terabyte. Every field
that sizes an allocation or a loop is checked before it is used, against a limit (:data:`LIMITS`)
and against the bytes the file still holds, so reading any header costs at most a bounded amount of
memory and time and fails with :class:`GGUFError` (a message and a remedy), never another exception.
Big arrays are walked, not decoded, through a sliding window: a sparse file is never read whole.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from beedeck.core import paths
from beedeck.core.models.gguf_types import GGML_TYPES

GGUF_MAGIC = 0x46554747  # b"GGUF" little-endian

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

MAX_KV = 100_000  # metadata entries (a real model has ~50)
MAX_TENSORS = 1_000_000  # tensor-table entries (the biggest MoE models have ~50,000)
MAX_KEY = 1 << 16  # bytes of one key name
MAX_STRING = 1 << 24  # bytes of one string value or array element (chat templates are ~10 KB)
MAX_ARRAY = 1 << 24  # elements of one array (token lists hold ~260,000)
MAX_DEPTH = 4  # arrays of arrays (llama.cpp reads none; gguf-py can write them)
MAX_WALK = 1 << 23  # elements walked one by one in the whole header (strings, nested arrays): ~8 M
MAX_NAME = 1 << 16  # bytes of one tensor name
MAX_DIMS = 8
SMALL_ARRAY = 4096  # scalar arrays up to this are decoded (per-layer head counts); bigger ones skipped
_CHUNK = 1 << 22

LIMITS = {"metadata entries": MAX_KV, "tensors": MAX_TENSORS, "string bytes": MAX_STRING,
          "array elements": MAX_ARRAY, "array nesting": MAX_DEPTH, "elements walked": MAX_WALK}


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


class Stream(Protocol):
    """What the header reader needs of a file: an open file, or hub_range's range-request reader."""
    def read(self, n: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...


def _corrupt(p: Path, what: str) -> GGUFError:
    return GGUFError(f"{p.name} {what}: the file is corrupt; download it again.")


class _Cursor:
    """Reads a file through a sliding window: small reads come from memory, long skips seek, and the
    window never holds more than one chunk plus the largest single value read."""

    def __init__(self, fh: Stream, path: Path, size: int) -> None:
        self.fh, self.path, self.size = fh, path, size
        # A stream whose reads cost a request each (hub_range's) says how much one read should ask for.
        self.chunk = int(getattr(fh, "read_chunk", _CHUNK))
        self.base = fh.tell()  # file offset of buf[0]
        self.buf, self.pos = b"", 0
        self.walked = 0

    def tell(self) -> int:
        return self.base + self.pos

    def left(self) -> int:
        return self.size - self.tell()

    def truncated(self, where: str = "the header", detail: str = "") -> GGUFError:
        return GGUFError(f"{self.path.name} is truncated ({where} ends early){detail}: download it again.")

    def take(self, n: int, where: str = "the header") -> bytes:
        if self.pos + n > len(self.buf):
            if n > self.left():
                raise self.truncated(where)
            self.base += self.pos
            self.buf = self.buf[self.pos:] + self.fh.read(max(self.chunk, n - (len(self.buf) - self.pos)))
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
        target = self.tell() + n
        self.fh.seek(target)
        self.base, self.buf, self.pos = target, b"", 0

    def walk(self, n: int, key: str) -> None:
        """Count ``n`` elements against the whole header's budget of elements walked one by one."""
        self.walked += n
        if self.walked > MAX_WALK:
            raise _corrupt(self.path, f"claims more than {MAX_WALK:,} array elements in its header (at {key!r})")


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
    c.walk(n, key)
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
            target = c.base + pos
            if target > c.size:
                raise c.truncated()
            c.fh.seek(target)
            c.base, c.buf, c.pos = target, b"", 0
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


def _skip_elements(c: _Cursor, st: int, n: int, key: str, depth: int) -> None:
    """Walk over the ``n`` elements of type ``st`` of an array nested ``depth`` deep (checked by _check_array)."""
    if st in _SCALARS:
        c.skip(n * struct.calcsize(_SCALARS[st]))
    elif st == _STRING:
        _skip_strings(c, n, key)
    else:
        c.walk(n, key)
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
        return _string(c, MAX_STRING, key).decode("utf-8", "replace")
    if vt != _ARRAY:
        raise _corrupt(c.path, f"has an unknown value type {vt} at {key!r}")
    st, n = c.unpack("<IQ")
    _check_array(c, st, n, key, 1)
    if st in _SCALARS and n <= SMALL_ARRAY:
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


def read_header(path: str | Path, max_kv: int = MAX_KV, tensors: bool = False) -> GGUFHeader:
    """Read a GGUF file's metadata (and tensor table if asked). Raises GGUFError on bad input."""
    p = Path(path)
    fh = _open(p)
    with fh:
        return read_header_from(fh, p, os.fstat(fh.fileno()).st_size, max_kv, tensors)


def read_header_from(fh: Stream, p: Path, size: int, max_kv: int = MAX_KV, tensors: bool = False,
                     known: dict[str, tuple[int, int]] | None = None) -> GGUFHeader:
    """:func:`read_header` over any seekable binary stream (e.g. HTTP range reads) of a ``size``-byte file,
    with the same limits. ``known``: string arrays whose (count, byte length) a sibling file showed,
    jumped over unread."""
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
        raise GGUFError(f"{p.name} claims {n_kv} metadata entries: the file is corrupt; download it again.")
    if n_tensors > MAX_TENSORS:
        raise GGUFError(f"{p.name} claims {n_tensors} tensors: the file is corrupt; download it again.")
    c = _Cursor(fh, p, size)
    # Each entry takes at least 13 bytes (key length, type, a one-byte value), each tensor 24.
    if n_kv * 13 + (n_tensors * 24 if tensors else 0) > c.left():
        raise c.truncated(detail=f"; it claims {n_kv:,} metadata entries and {n_tensors:,} tensors, more than its "
                          f"{size:,} bytes hold")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = _string(c, MAX_KEY, "a key name").decode("utf-8", "replace")
        meta[key] = _read_value(c, key, known)
    header = GGUFHeader(path=p, version=version, tensor_count=n_tensors, metadata=meta)
    if tensors:
        _read_tensor_table(c, header)
    return header


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
    for _ in range(header.tensor_count):
        (nlen,) = c.unpack("<Q", where)
        if nlen > MAX_NAME:
            raise GGUFError(f"{p.name} has a corrupt tensor name in its tensor table: download it again.")
        name = c.take(nlen, where).decode("utf-8", "replace")
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
