"""A :class:`ModelInfo` as JSON and back, without loss for the pair check and the planner.

The sizing cache (``hub.sizing``) and the shipped header set (``resources/hub-headers``) store what
the GGUF header said in this form: the tensor table, the per-layer layout and the metadata, where
big arrays (token lists, merges) keep only their type and length, strings too long to keep
(:class:`LongString`) only their length. A decoded model plans exactly as the one read from the file
(tests/core/models/hub/test_sizing.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from beedeck.core.models.gguf.reader import ArrayInfo, DFlashInfo, LongString, ModelInfo, TensorInfo

FORMAT = 1
_LISTS = ("n_head", "n_head_kv", "head_dim_k", "head_dim_v", "is_swa", "is_recurrent")
_SCALARS = ("file_size", "architecture", "name", "basename", "size_label", "file_type", "n_layer", "n_layer_all",
            "n_embd", "n_ff", "sliding_window", "shared_kv_layers", "vocab_size", "tokenizer_model", "bos_id",
            "eos_id", "context_length", "has_chat_template")


def _meta_value(v: Any) -> Any:
    if isinstance(v, ArrayInfo):
        return {"__array__": [v.elem_type, v.length, None if v.values is None else list(v.values)]}
    if isinstance(v, LongString):
        return {"__string__": v.length}
    return v


def _meta_back(v: Any) -> Any:
    if isinstance(v, dict) and "__array__" in v:
        t, n, vals = v["__array__"]
        return ArrayInfo(int(t), int(n), None if vals is None else tuple(vals))
    if isinstance(v, dict) and "__string__" in v:
        return LongString(int(v["__string__"]))
    return v


def encode(m: ModelInfo) -> dict[str, Any]:
    d: dict[str, Any] = {"format": FORMAT, "parts": [p.name for p in m.parts]}
    d.update({k: getattr(m, k) for k in _SCALARS})
    d.update({k: list(getattr(m, k)) for k in _LISTS})
    d["ssm"] = dict(m.ssm)
    d["tensors"] = [[t.name, list(t.dims), t.ggml_type, t.offset, t.nbytes] for t in m.tensors]
    d["dflash"] = None if m.dflash is None else {
        "fmt": m.dflash.fmt, "block_size": m.dflash.block_size, "mask_token_id": m.dflash.mask_token_id,
        "target_layer_ids": list(m.dflash.target_layer_ids), "n_target_features": m.dflash.n_target_features}
    d["metadata"] = {k: _meta_value(v) for k, v in m.metadata.items()}
    return d


def decode(d: dict[str, Any], folder: Path | None = None) -> ModelInfo:
    """The ModelInfo of :func:`encode`'s output; its paths are the file names (under ``folder``)."""
    if d.get("format") != FORMAT:
        raise ValueError(f"unknown header record format {d.get('format')!r}")
    parts = [(folder / n) if folder else Path(n) for n in d["parts"]]
    df = d.get("dflash")
    fields: dict[str, Any] = {k: d[k] for k in _SCALARS}
    fields.update({k: list(d[k]) for k in _LISTS})
    return ModelInfo(
        path=parts[0], parts=parts, **fields,
        ssm={k: int(v) for k, v in d["ssm"].items()},
        tensors=[TensorInfo(n, tuple(dims), int(t), int(o), int(b)) for n, dims, t, o, b in d["tensors"]],
        dflash=None if df is None else DFlashInfo(df["fmt"], int(df["block_size"]), df["mask_token_id"],
                                                  tuple(df["target_layer_ids"]), df["n_target_features"]),
        metadata={k: _meta_back(v) for k, v in d["metadata"].items()},
    )
