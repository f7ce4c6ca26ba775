"""Real GGUF variants of the synthetic files (tests/fixtures/synth_gguf.py, synth_mtp.py) for the
sidecar tests: another quant tag, another architecture name, a DSpark Markov head, an ``mtp-`` head
file without the trunk. Each is a full copy through gguf-py's reader and writer (metadata and tensor
data), so BeeDeck's header reader sees exactly what it would see in a published file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np

from tests.fixtures import synth_gguf as sg
from tests.fixtures import synth_mtp as sm

# llama_ftype values (llama.h) for general.file_type.
Q4_K_M, Q5_K_M, Q8_0, IQ4_XS = 15, 17, 7, 30


def rewrite(src: Path, dst: Path, *, arch: str | None = None, kv: dict[str, Any] | None = None,
            keep: Callable[[str], bool] = lambda _name: True,
            extra: dict[str, np.ndarray] | None = None) -> Path:
    """Copy ``src`` to ``dst``: ``arch`` renames the architecture (and its ``<arch>.`` keys), ``kv``
    overrides uint32 keys, ``keep`` filters tensors by name, ``extra`` adds tensors."""
    r = gguf.GGUFReader(src)
    old = str(r.fields["general.architecture"].contents())
    new = arch or old
    w = gguf.GGUFWriter(dst, new)
    kv = dict(kv or {})
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        name = new + key[len(old):] if key.startswith(old + ".") else key
        if key in kv:
            w.add_uint32(name, kv.pop(key))
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), vtype, sub_type=sub)
    for key, value in kv.items():
        w.add_uint32(key, value)
    for t in r.tensors:
        if keep(t.name):
            w.add_tensor(t.name, np.array(t.data))
    for name, data in (extra or {}).items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst


def target(folder: Path, name: str, *, file_type: int = Q4_K_M, **kw: Any) -> Path:
    """A synthetic llama target saved as ``name`` with the quant tag ``file_type`` (the weights stay F16)."""
    raw = sg.write_llama_target(folder / f".raw-{name}", sticky=True, **kw)
    out = rewrite(raw, folder / name, kv={"general.file_type": file_type})
    raw.unlink()
    return out


def dflash(folder: Path, name: str, for_target: Path, *, file_type: int = Q4_K_M, fmt: sg.DraftFormat = "mainline",
           layers: tuple[int, ...] = (1, 3, 5)) -> Path:
    """A DFlash draft for ``for_target`` (upstream or BeeLlama fork format) saved as ``name``."""
    raw = sg.write_dflash_draft(folder / f".raw-{name}", for_target, sticky=True, fmt=fmt, target_layers=layers)
    out = rewrite(raw, folder / name, kv={"general.file_type": file_type})
    raw.unlink()
    return out


def dspark(folder: Path, name: str, for_target: Path) -> Path:
    """A DSpark draft: a mainline DFlash file with the Markov head's first tensor (what mainline detects)."""
    raw = sg.write_dflash_draft(folder / f".raw-{name}", for_target, sticky=True, target_layers=(1, 3, 5))
    n_embd = sg._target_shape(for_target)[0]
    out = rewrite(raw, folder / name, extra={"markov_w1.weight": np.zeros((n_embd, n_embd), dtype=np.float16)})
    raw.unlink()
    return out


def lucebox(folder: Path, name: str, for_target: Path) -> Path:
    """A draft in Lucebox's own ``gemma4-dflash-draft`` architecture (a renamed fork-format file)."""
    raw = sg.write_dflash_draft(folder / f".raw-{name}", for_target, sticky=True, fmt="bee")
    out = rewrite(raw, folder / name, arch="gemma4-dflash-draft")
    raw.unlink()
    return out


def mtp_target(folder: Path, name: str, *, n_embd: int = 128) -> Path:
    """A synthetic qwen35 target with its MTP head inside, saved as ``name`` (Q4_K_M tag)."""
    raw = sm.write_mtp_target(folder / f".raw-{name}", sticky=True, n_embd=n_embd)
    out = rewrite(raw, folder / name, kv={"general.file_type": Q4_K_M})
    raw.unlink()
    return out


def mtp_head(folder: Path, name: str, *, n_embd: int = 128) -> Path:
    """An ``mtp-`` sidecar: the MTP block of a synthetic qwen35 target without its trunk layers (what
    ``convert_hf_to_gguf.py --mtp`` publishes), with the embeddings and output norm it shares."""
    raw = sm.write_mtp_target(folder / f".raw-{name}", sticky=True, n_embd=n_embd)
    r = gguf.GGUFReader(raw)
    n_all = int(r.fields[f"{sm.ARCH}.block_count"].contents())
    head = f"blk.{n_all - 1}."
    out = rewrite(raw, folder / name, kv={"general.file_type": Q4_K_M},
                  keep=lambda t: t.startswith(head) or not t.startswith("blk."))
    raw.unlink()
    return out
