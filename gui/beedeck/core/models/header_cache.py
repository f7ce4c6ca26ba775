"""The GGUF headers of the profile's model files, as the mode switch (which modes a target and a draft can run:
:func:`~beedeck.core.models.paircheck.model_facts`) and the launch form's preflight
(:class:`~beedeck.core.launch_facts.LaunchFacts`) need them, kept per file version, with why a file could not be
read.

The caller reads off its GUI thread (even a stat can hang on a network mount): :meth:`HeaderCache.reader`
gives the blocking read of one file, :meth:`HeaderCache.store` keeps what it found. A file is read again
only when its version (path, size, mtime) changed: a re-download.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.modes import ModelFacts
from beedeck.core.models.gguf import reader as gguf
from beedeck.core.models.gguf.reader import ModelInfo
from beedeck.core.models.paircheck import model_facts

FileKey = tuple[str, int, int]  # path, size, mtime: a re-downloaded file is read again


class Read(NamedTuple):
    """What a look at one file found."""

    key: FileKey | None  # the version looked at (None: no such file)
    info: ModelInfo | None  # its header (None: missing, or unreadable)
    error: str = ""  # why its header could not be read ("" when it was, or when there is no file)


def file_key(path: str) -> FileKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return path, st.st_size, st.st_mtime_ns


class HeaderCache:
    """Headers by path. ``inspect`` is the header reader (tests count its calls)."""

    def __init__(self, inspect: Callable[[str], ModelInfo] = gguf.inspect) -> None:
        self._inspect = inspect
        self.known: dict[str, Read] = {}
        self.reading: set[str] = set()  # reads under way: one at a time per file

    def info(self, path: str | None) -> ModelInfo | None:
        read = self.known.get(path) if path else None
        return read.info if read is not None else None

    def errors(self) -> dict[str, str]:
        """Why each file that could not be read was not (path -> the reader's words)."""
        return {path: read.error for path, read in self.known.items() if read.error}

    def facts(self, profile: LaunchSettings | None) -> ModelFacts:
        """What the headers read so far say about ``profile``'s target and draft."""
        if profile is None:
            return ModelFacts()
        return model_facts(self.info(profile.target), self.info(profile.draft))

    def to_read(self, profile: LaunchSettings | None, *, again: bool = True) -> list[str]:
        """The profile's files to look at now (each is checked, and read only if it changed; without ``again``
        only those not looked at yet), marked as under way: :meth:`store` or :meth:`forget` each."""
        if profile is None:
            return []
        paths = [p for p in dict.fromkeys((profile.target, profile.draft))
                 if p and p not in self.reading and (again or p not in self.known)]
        self.reading.update(paths)
        return paths

    def reader(self, path: str) -> Callable[[], Read]:
        """The blocking check of ``path``: its header read again only when the file changed."""
        known = self.known.get(path, Read(None, None))

        def read() -> Read:
            key = file_key(path)
            if key is None:
                return Read(None, None)
            if key == known.key:
                return known
            try:
                return Read(key, self._inspect(path))
            except (OSError, ValueError) as exc:  # unreadable: the modes are judged from the profile, the launch
                return Read(key, None, str(exc) or type(exc).__name__)  # names it with these words

        return read

    def store(self, path: str, result: Read) -> bool:
        """Keep what a read found; True when it changed what is known."""
        self.reading.discard(path)
        if self.known.get(path) == result:
            return False
        self.known[path] = result
        return True

    def forget(self, path: str) -> None:
        """A read that failed: nothing learnt, the file may be read again."""
        self.reading.discard(path)
