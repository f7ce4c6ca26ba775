"""Which chat each BeeDeck window has open, so that two windows on one chat history never share a chat.

A window holds a *lease* on the chat it shows: ``.<history>.open/<conversation id>.lock``, held with an
exclusive lock (``paths.try_hold``) that the kernel drops when the window's process ends however it ends, so
a crashed window never keeps a chat for ever. A window that starts opens the newest chat no live window
holds (or a new one), and a chat another window holds is not opened beside it: two windows writing one
chat would interleave their turns. The lock files stay (removing one lets two windows lock two files of one
name); there is one per chat ever opened, empty but for the holder's pid.
"""

from __future__ import annotations

from pathlib import Path

from beedeck.core import paths


class ChatLeases:
    """One window's lease: on one chat at a time, the one it shows. A history in memory or in a folder BeeDeck
    cannot write has no leases (every chat is free: nothing of it is written by two windows there anyway)."""

    def __init__(self, history: Path) -> None:
        memory = str(history) in ("", ":memory:")
        self.folder = None if memory else history.with_name(f".{history.name}.open")  # hidden, beside it
        self._held: tuple[int, paths.Held] | None = None

    @property
    def held(self) -> int | None:
        """The chat this window holds, if any."""
        return self._held[0] if self._held is not None else None

    def _path(self, conversation_id: int) -> Path:
        assert self.folder is not None
        return self.folder / f"{int(conversation_id)}.lock"

    def take(self, conversation_id: int) -> str | None:
        """Hold ``conversation_id`` for this window, giving up the chat held before: None when it is this
        window's now, else who holds it ("a BeeDeck window (pid N)")."""
        if self.folder is None or self.held == conversation_id:
            return None
        try:
            held = paths.try_hold(self._path(conversation_id), paths.owner_note())
        except OSError:
            return None  # the folder cannot be written: no leases
        if held is None:
            return self.holder(conversation_id)
        self.release()
        self._held = (conversation_id, held)
        return None

    def holder(self, conversation_id: int) -> str | None:
        """Who else holds ``conversation_id`` now, in words; None when no other window does."""
        if self.folder is None or self.held == conversation_id:
            return None
        try:
            probe = paths.try_hold(self._path(conversation_id))
        except OSError:
            return None
        if probe is not None:
            probe.release()
            return None
        return paths.describe_note(paths.holder_note(self._path(conversation_id))) or "another BeeDeck window"

    def release(self) -> None:
        """Give up the chat held (the window closes, or shows another chat)."""
        held, self._held = self._held, None
        if held is not None:
            held[1].release()
