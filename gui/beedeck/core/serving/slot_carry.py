"""The conversation kept across a mode switch's restart: the slot's KV cache saved to a file before the old
server stops and restored into the new one before the chat is told it is ready, so the first reply after a
switch does not read the whole conversation again (issue 36: 16k tokens are about 12.5 s on an H200).

Where the engine can (probed: ``--slot-save-path`` in its help; mainline b11434 and BeeLlama v0.1.2 and v0.4.3
have it), every start of the app's server gets a slot folder (``prepare``), and a switch of the running target
(``Restart.fast``) does ``POST /slots/0?action=save`` then, on the new server, ``action=restore``. Measured on
this machine's CPU builds with the synthetic DFlash pair (tests/engine/test_slot_carry_real.py): the restored
slot is used by the next turn (about 3,100 cached tokens, 33 read) in either direction, with the draft loaded
or not, and the drafter drafts from the first reply after a restore (every draft accepted, the sticky pair).
Where the two modes' servers lay the cache out differently (BeeLlama 0.1-0.3 keeps two streams with
speculation on unless the cache is unified: the engine refuses the file), nothing is saved and that is said.

The file holds the conversation, so it is private: a 0700 folder in BeeDeck's state folder, the file made
0600, removed once restored, refused or abandoned (``ended``), and files an earlier BeeDeck left (a crash
between the save and the restore) are swept at the next start. It fits only a server of the same model,
context and KV types: the engine refuses other layouts, but it *accepts* another model's cache of the same
shape (measured: a random synthetic target restored the sticky one's 3,211 tokens), so the restore is only
asked for where the new server's settings and the target file are those the cache was saved from.

Whether the engine then *uses* the restored cache is its own affair, and not always: on a model with
sliding-window attention (Gemma 3 and 4), mainline b11434 reads the whole conversation again after a restore
(measured: Gemma 4 31B on a 24 GB hold of an H100, 16,432 tokens restored in 0.18 s, the next turn continuing
them exactly still read all 16,448, "forcing full prompt re-processing due to lack of cache data"; its
context checkpoints, which let a running server go back, are not in the saved file), while BeeLlama 0.1.2 and
0.4.3 use it (a small Gemma 3 on the CPU: 8 of 416 tokens read). So the first reply after a
restore is checked by its own figures (``reply_read``: the tokens it found cached), and mainline up to b11434 is
not asked at all for a sliding-window model (``SWA_REREAD``: known, so not promised): where the engine did not use
the cache, the user is told so, and that engine and model are remembered (``slot-carry.json`` beside the
folder) so that later switches neither save it nor promise it.

Nothing here may break a switch: a save that fails, a full disk, a restore the engine refuses, an engine
without the option or a chat on several slots, and the restart goes on as before (the next reply reads the
conversation again); the log says what happened, and the user is told once (``said``; an engine that cannot
is said once per engine).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from beedeck.core import paths
from beedeck.core.engine.caps import EngineCaps, Generation
from beedeck.core.engine.client import ClientError, ServerGone, SlotFile
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.slots import slot_context
from beedeck.core.serving.restarts import Restart

FLAG = "--slot-save-path"
SLOT = 0  # the chat's slot: BeeDeck serves one (-np 1; always with a draft loaded: core/engine/slots.py)
PREFIX = "carry-"
GiB = 1024**3
RESERVE = GiB  # free disk left after the largest cache the server could save
REREAD = "the next reply reads the conversation again"
NOT_USED = ("the engine did not use the cache restored at the last switch (it read the conversation again, as "
            "mainline llama.cpp does after a restore for models with sliding-window attention)")
SWA_REREAD = ("mainline llama.cpp up to b11434 reads a model with sliding-window layers again after a restore "
              "(measured on b11434 with Gemma 4 31B and a small Gemma 3: its saved cache keeps only the window)")
SWA_REREAD_UP_TO = 11434  # the newest mainline build measured; a newer one (or BeeLlama) is tried and checked
MEMORY = "slot-carry.json"
KEEP_UNUSED = 64  # engine and model pairs remembered


class SlotClient(Protocol):
    def slot_file(self, slot: int, action: str, filename: str) -> SlotFile: ...


def _client(base_url: str, api_key: str | None) -> SlotClient:
    from beedeck.core.engine.client import LlamaClient

    return LlamaClient(base_url, api_key)


def folder_of(argv: Sequence[str]) -> str | None:
    """The ``--slot-save-path`` of a command line (None: not given)."""
    for i, arg in enumerate(argv):
        if arg == FLAG and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(FLAG + "="):
            return arg.split("=", 1)[1]
    return None


@dataclass(frozen=True)
class Carried:
    """What the last restart did with the conversation's cache: ``kind`` "restored", "failed" or
    "unavailable", the tokens and bytes carried and the seconds of the save and the restore."""

    kind: str
    why: str = ""
    tokens: int = 0
    size: int = 0
    save_s: float = 0.0
    restore_s: float = 0.0

    def text(self) -> str:
        if self.kind == "restored":
            return (f"kept the conversation's cache ({self.tokens:,} tokens, {self.size / 1e6:,.0f} MB; saved in "
                    f"{self.save_s:.2f} s, restored in {self.restore_s:.2f} s): the next reply reads only what is new")
        if self.kind == "unused":
            return (f"the engine did not use the conversation's cache restored at the switch: this reply read all "
                    f"{self.tokens:,} tokens again (mainline llama.cpp does so after a restore for models with "
                    "sliding-window attention); switches of this model no longer save it")
        if self.kind == "unavailable":
            return f"the conversation's cache cannot be kept across this switch ({self.why}): {REREAD}"
        return f"the conversation's cache could not be kept ({self.why}): {REREAD}"


@dataclass(frozen=True)
class _Saved:
    path: Path
    key: tuple[object, ...]
    file: SlotFile
    save_s: float


def _identity(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def layout_key(s: LaunchSettings, caps: EngineCaps | None) -> tuple[object, ...]:
    """What a slot's cache must match to be restored: the target (its file as it is now), the KV types and the
    cache's layout as the engine makes it (core/engine/slots.py: the cells per sequence and the streams; BeeLlama
    0.1-0.3 keeps two streams with speculation on unless the cache is unified). Ports and load options may
    differ, and so may speculation where the layout stays."""
    generation = caps.generation if caps is not None else Generation.UNKNOWN
    slot = slot_context(s, generation, s.spec_mode != Mode.BASELINE)
    streams = 1 if s.kv_unified else slot.n_seq
    return (s.target, _identity(s.target), s.cache_type_k, s.cache_type_v, slot.per_slot, streams, s.parallel)


class SlotCarry:
    """:class:`~beedeck.core.serving.restarts.RestartSteps` that keep the conversation (see the module).

    ``folder``: where the slots are saved (None: ``<state>/slots``); ``client(base_url, api_key)``: the slot
    client; ``disk_free(path)``: the free bytes there. ``last`` is what the last switch did."""

    def __init__(self, folder: Path | None = None, *, client: Callable[[str, str | None], SlotClient] = _client,
                 disk_free: Callable[[Path], int] | None = None, reserve: int = RESERVE, known_rules: bool = True) -> None:
        self._folder = folder
        self.known_rules = known_rules  # False: only what is measured here decides (the rule's own test)
        self._check: tuple[str, int] | None = None  # after a restore: (engine and model, tokens) for reply_read
        self._unused_pairs: dict[str, float] | None = None  # see _unused
        self._client = client
        self._disk_free = disk_free or (lambda p: shutil.disk_usage(p).free)
        self.reserve = reserve
        self.last: Carried | None = None
        self._saved: _Saved | None = None
        self._told: set[str] = set()  # engines already told they cannot
        self._say = ""

    def folder(self) -> Path:
        """The slot folder, made private (0700) if it is not."""
        folder = self._folder if self._folder is not None else paths.state_dir() / "slots"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        return folder

    # -- the steps ---------------------------------------------------------------------------
    def prepare(self, settings: LaunchSettings, caps: EngineCaps) -> LaunchSettings:
        """Every start of the app's server on an engine that can save slots gets the slot folder."""
        self._unused()  # read here, on the serving's thread, not by a forecast on the GUI thread
        if not caps.has(FLAG) or folder_of(settings.extra_args) is not None:
            return settings  # none, or the user's own folder (used as it is)
        try:
            folder = self.folder()
            self._sweep(folder)
        except OSError:
            return settings  # no folder, no carry: before_stop says so
        return replace(settings, extra_args=[FLAG, str(folder), *settings.extra_args])

    def before_stop(self, restart: Restart, running: Any) -> None:
        self._saved, self.last, self._say, self._check = None, None, "", None
        if not restart.fast or running is None:
            return
        why = self._why_not(restart, running)
        if why:
            self._unavailable(restart, why)
            return
        folder = Path(str(folder_of(running.argv)))
        need = restart.kv_bytes or 0
        try:
            free = self._disk_free(folder)
        except OSError as exc:
            self._failed(restart, f"its folder cannot be read: {exc.strerror or exc}")
            return
        if free - need < self.reserve:
            self._failed(restart, f"the disk has {free / GiB:.1f} GiB free and the cache may take up to "
                                  f"{need / GiB:.1f} GiB: BeeDeck keeps {self.reserve / GiB:.0f} GiB free")
            return
        self._save(restart, running, folder)

    def _save(self, restart: Restart, running: Any, folder: Path) -> None:
        path = folder / f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex}.bin"
        t0 = time.monotonic()
        try:
            file = self._client(running.base_url, getattr(running, "api_key", None)).slot_file(SLOT, "save", path.name)
            os.chmod(path, 0o600)  # the conversation: this user's alone, whatever the engine's umask
            if file.tokens and path.stat().st_size != file.bytes:
                raise OSError(f"the file holds {path.stat().st_size:,} bytes, not the {file.bytes:,} it wrote")
        except (ClientError, OSError) as exc:
            _remove(path)  # a half-written file (a full disk) is no cache
            self._failed(restart, f"the engine did not save it: {exc}")
            return
        save_s = time.monotonic() - t0
        if file.tokens == 0:
            _remove(path)
            return  # an empty chat: nothing to carry, nothing to say
        assert restart.before is not None  # _why_not
        self._saved = _Saved(path, layout_key(restart.before, restart.caps), file, save_s)
        restart.log(f"mode switch: saved the conversation's cache ({file.tokens:,} tokens, {file.bytes / 1e6:,.0f} MB) "
                    f"in {save_s:.2f} s")

    def after_ready(self, restart: Restart, started: Any, took_s: float) -> bool:
        """Restore the saved cache into ``started``; False when the restore killed it (the serving starts it again).
        mainline b11434 aborts on a cut file (measured: GGML_ASSERT in state_seq_load_file), so a file that is not
        the one the engine wrote is never handed to it."""
        saved, self._saved = self._saved, None
        if saved is None:
            return True
        try:
            why = self._mismatch(saved, restart, started)
            if why:
                self._failed(restart, why)
                return True
            t0 = time.monotonic()
            client = self._client(started.base_url, getattr(started, "api_key", None))
            file = client.slot_file(SLOT, "restore", saved.path.name)
            restore_s = time.monotonic() - t0
        except ServerGone as exc:
            self._failed(restart, f"the new server stopped while restoring it ({exc}), so it was started again")
            return False
        except ClientError as exc:
            self._failed(restart, f"the new server refused it: {exc}")
            return True
        finally:
            _remove(saved.path)
        self.last = Carried("restored", tokens=file.tokens, size=saved.file.bytes, save_s=saved.save_s,
                            restore_s=restore_s)
        self._say = self.last.text()
        self._check = (_pair(restart.engine, restart.settings.target), file.tokens)
        restart.log(f"mode switch: restored the conversation's cache ({file.tokens:,} tokens) in {restore_s:.2f} s")
        return True

    def ended(self, restart: Restart) -> None:
        saved, self._saved = self._saved, None
        if saved is not None:  # the new server never became ready: the file goes now
            _remove(saved.path)

    def said(self) -> str:
        return self._say

    def forecast(self, restart: Restart, running: Any) -> tuple[str, float]:
        """Whether a switch now would keep the conversation (no I/O), and what the last save and restore took."""
        why = self._why_not(restart, running) if running is not None else "no server runs"
        last = self.last
        return why, (last.save_s + last.restore_s) if last is not None and last.kind == "restored" else 0.0

    def reply_read(self, prompt_n: int | None, cache_n: int | None) -> str:
        """The first reply after a restore: "" where it found the cache (the figures prove it), else said, and
        this engine and model remembered so that later switches do not save it (see the module)."""
        check, self._check = self._check, None
        if check is None or prompt_n is None:
            return ""
        pair, tokens = check
        if (cache_n or 0) >= tokens // 2:
            return ""
        self._remember_unused(pair)
        self.last = Carried("unused", tokens=prompt_n + (cache_n or 0))
        return self.last.text()

    def _memory(self) -> Path:
        return (self._folder.parent if self._folder is not None else paths.state_dir()) / MEMORY

    def _unused(self) -> dict[str, float]:
        """The pairs whose engine did not use a restored cache: read once (a small file), then kept here."""
        if self._unused_pairs is None:
            try:
                data = json.loads(self._memory().read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = {}
            unused = data.get("unused") if isinstance(data, dict) else None
            self._unused_pairs = {k: float(v) for k, v in unused.items()
                                  if isinstance(v, (int, float))} if isinstance(unused, dict) else {}
        return self._unused_pairs

    def _remember_unused(self, pair: str) -> None:
        unused = {**self._unused(), pair: time.time()}
        newest = sorted(unused, key=lambda k: unused[k], reverse=True)[:KEEP_UNUSED]
        self._unused_pairs = {k: unused[k] for k in newest}
        try:
            self._memory().parent.mkdir(parents=True, exist_ok=True)
            paths.atomic_write_text(self._memory(), json.dumps({"unused": self._unused_pairs}))
        except OSError:
            pass  # not remembered: the next switch saves it again and is checked again

    # -- why not ---------------------------------------------------------------------------
    def _why_not(self, restart: Restart, running: Any) -> str:
        caps, before, s = restart.caps, restart.before, restart.settings
        if caps is None or not caps.has(FLAG):
            return f"it has no {FLAG}"
        if self.known_rules and restart.sliding_window and _rereads_window(caps):
            return SWA_REREAD
        if (unused := self._unused()) and _pair(restart.engine, s.target) in unused:
            return NOT_USED
        if folder_of(getattr(running, "argv", ())) is None:
            return "the running server was started without a slot folder"
        if before is None or before.parallel != 1 or s.parallel != 1:
            slots = max(before.parallel if before else 1, s.parallel)
            return f"with {slots} parallel slots BeeDeck cannot tell which one holds this chat"
        old, new = layout_key(before, caps), layout_key(s, caps)
        if old[-2] != new[-2]:
            return (f"its cache has {old[-2]} stream{'s' if old[-2] != 1 else ''} in one mode and {new[-2]} in the "
                    "other (speculation on without a unified KV cache): turn on KV unified to keep it")
        if old != new:
            return "the two modes' servers lay out the cache differently (context or KV cache types)"
        return ""

    def _mismatch(self, saved: _Saved, restart: Restart, started: Any) -> str:
        if layout_key(restart.settings, restart.caps) != saved.key:
            return "the model file changed on disk since the cache was saved"
        if folder_of(getattr(started, "argv", ())) != str(saved.path.parent):
            return "the new server keeps its slots in another folder"
        try:
            size = saved.path.stat().st_size
        except OSError as exc:
            return f"the saved file is gone ({exc.strerror or exc})"
        if size != saved.file.bytes:
            return f"the saved file holds {size:,} bytes, not the {saved.file.bytes:,} the engine wrote"
        return ""

    def _failed(self, restart: Restart, why: str) -> None:
        self.last = Carried("failed", why)
        self._say = self.last.text()
        restart.log(f"mode switch: {self._say}")

    def _unavailable(self, restart: Restart, why: str) -> None:
        self.last = Carried("unavailable", why)
        restart.log(f"mode switch: {self.last.text()}")
        if restart.engine not in self._told:  # said once per engine; the log says it every time
            self._told.add(restart.engine)
            self._say = self.last.text()

    def _sweep(self, folder: Path) -> None:
        """Remove the files a BeeDeck that is gone left (saved, never restored): its pid is in the name."""
        for path in folder.glob(f"{PREFIX}*.bin"):
            pid = path.name[len(PREFIX):].split("-", 1)[0]
            if not pid.isdigit() or (int(pid) != os.getpid() and not _alive(int(pid))):
                _remove(path)


def _rereads_window(caps: EngineCaps) -> bool:
    """Mainline up to the build measured (an unknown build counts as the one BeeDeck ships, b11434) does not use
    a restored cache of a model with sliding-window layers (see the module)."""
    return caps.generation == Generation.MAINLINE and (caps.build is None or caps.build <= SWA_REREAD_UP_TO)


def _pair(engine: str, target: str) -> str:
    """An engine build and a model file, as they are on disk (a rebuilt engine or another file is checked anew)."""
    return json.dumps([engine, _identity(engine), target, _identity(target)])


def _remove(path: Path) -> None:
    """Remove a cache file that may be there; a folder that is gone or is no folder leaves nothing to remove."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
