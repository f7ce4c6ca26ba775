"""A lean GGUF header reader: metadata without decoding big arrays, fast enough for the UI.

``GGUFReader`` from the ``gguf`` package decodes every array element in Python (8.9 s / 650 MB on
an 8B-sized header, shared/docs/python-stack.md); this scanner seeks over arrays (0.1 s).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

GGUF_MAGIC = 0x46554747  # b"GGUF" little-endian

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a readable GGUF model; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class ArrayInfo:
    """An array value that was skipped, not decoded: its element type and length."""

    elem_type: int
    length: int
    # Small arrays of scalars (e.g. per-layer head counts) are decoded; big ones are not.
    values: tuple[Any, ...] | None = None


@dataclass
class GGUFHeader:
    path: Path
    version: int
    tensor_count: int
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def arch_key(self, name: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{name}", default)


_SMALL_ARRAY = 4096


def _read_exact(fh: BinaryIO, n: int, path: Path) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise GGUFError(f"{path.name} is truncated (the header ends early): download it again.")
    return data


def read_header(path: str | Path, max_kv: int = 100_000) -> GGUFHeader:
    """Read a GGUF file's metadata. Raises GGUFError with a specific message on bad input."""
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
        head = fh.read(24)
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
        meta: dict[str, Any] = {}

        def rstr() -> str:
            (n,) = struct.unpack("<Q", _read_exact(fh, 8, p))
            if n > 1 << 31:
                raise GGUFError(f"{p.name} has a corrupt string length in its header: download it again.")
            return _read_exact(fh, n, p).decode("utf-8", "replace")

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
                else:
                    meta[key] = ArrayInfo(st, n)
                    fh.seek(-12, 1)
                    skip(_ARRAY)
            else:
                raise GGUFError(f"{p.name} has an unknown value type {vt} in its header: the file is corrupt.")
        return GGUFHeader(path=p, version=version, tensor_count=n_tensors, metadata=meta)


def architecture(path: str | Path) -> str:
    return read_header(path).architecture
