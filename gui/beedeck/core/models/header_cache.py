"""The GGUF headers of the profile's model files, as the mode switch needs them (which modes a target and
a draft can run: :func:`~beedeck.core.models.paircheck.model_facts`), kept per file version.

The caller reads off its GUI thread (even a stat can hang on a network mount): :meth:`HeaderCache.reader`
gives the blocking read of one file, :meth:`HeaderCache.store` keeps what it found. A file is read again
only when its version (path, size, mtime) changed: a re-download.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.speculation.modes import ModelFacts
from beedeck.core.models import gguf
from beedeck.core.models.gguf import ModelInfo
from beedeck.core.models.paircheck import model_facts

FileKey = tuple[str, int, int]  # path, size, mtime: a re-downloaded file is read again
Read = tuple[FileKey | None, ModelInfo | None]  # the version read (None: no such file), its header (None: unreadable)


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
        return self.known.get(path, (None, None))[1] if path else None

    def facts(self, profile: LaunchSettings | None) -> ModelFacts:
        """What the headers read so far say about ``profile``'s target and draft."""
        if profile is None:
            return ModelFacts()
        return model_facts(self.info(profile.target), self.info(profile.draft))

    def to_read(self, profile: LaunchSettings | None) -> list[str]:
        """The profile's files to look at now (each is checked, and read only if it changed), marked as under
        way: :meth:`store` or :meth:`forget` each."""
        if profile is None:
            return []
        paths = [p for p in dict.fromkeys((profile.target, profile.draft)) if p and p not in self.reading]
        self.reading.update(paths)
        return paths

    def reader(self, path: str) -> Callable[[], Read]:
        """The blocking check of ``path``: its header read again only when the file changed."""
        known = self.known.get(path, (None, None))

        def read() -> Read:
            key = file_key(path)
            if key is None or key == known[0]:
                return key, known[1] if key else None
            try:
                return key, self._inspect(path)
            except (OSError, ValueError):
                return key, None  # unreadable: the modes are judged from the profile, the launch names it

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
