"""The short, stable name the server gives its model (``--alias``): what ``/v1/models`` lists and what
a coding agent's config names. Derived from the GGUF's file name, never its folder (a full path leaks
the home folder and breaks clients that map model names).
"""

from __future__ import annotations

import re
from pathlib import PurePath

_SHARD = re.compile(r"-\d{5}-of-\d{5}$")  # the first file of a split GGUF: name-00001-of-00003.gguf
_UNSAFE = re.compile(r"[^a-z0-9._-]+")
MAX_LEN = 64


def model_alias(target: str) -> str:
    """``/home/me/models/Qwen3-8B-Q4_K_M-00001-of-00002.gguf`` -> ``qwen3-8b-q4_k_m``: lower case,
    letters, digits and ``._-`` only, at most 64 characters; ``model`` when nothing is left."""
    stem = PurePath(target.replace("\\", "/")).name
    stem = re.sub(r"\.gguf$", "", stem, flags=re.IGNORECASE)
    stem = _SHARD.sub("", stem)
    name = _UNSAFE.sub("-", stem.lower()).strip("-._")[:MAX_LEN].rstrip("-._")
    return name or "model"
