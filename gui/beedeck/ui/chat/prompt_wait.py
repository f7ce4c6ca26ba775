"""The wait before a reply's first token, said while it lasts: how far the server has read the conversation
(or, from a server that does not say, how big it is), under the transcript once the wait is longer than
:data:`~beedeck.core.chat.prompt_read.HINT_AFTER_S`, and in short in the speed dock. The words are
:mod:`beedeck.core.chat.prompt_read`'s."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from beedeck.core.chat.prompt_read import HINT_AFTER_S, reading_hint, reading_short
from beedeck.core.engine.client import PromptProgress


class PromptWait(QObject):
    """One reply's wait for its first token: :meth:`start` when the request goes, :meth:`progress` with what the
    server reports, :meth:`end` at the first token (or the end of the reply). ``say(text)`` shows the sentence
    (the chat pane's notice line) and ``shown()`` is what that line shows now (a notice said since is left alone).

    Signal: ``reading(str)``: the short line for the speed dock while the prompt is read.
    """

    reading = Signal(str)

    def __init__(self, say: Callable[[str], None], shown: Callable[[], str], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._say, self._shown = say, shown
        self._timer = QTimer(self, singleShot=True, interval=round(HINT_AFTER_S * 1000))
        self._timer.timeout.connect(self._tell)
        self._waiting = False
        self._chars = 0
        self._progress: PromptProgress | None = None
        self._said = ""

    @property
    def waiting(self) -> bool:
        return self._waiting

    def start(self, chars: int) -> None:
        """The request went out; ``chars``: its messages' characters."""
        self._waiting, self._chars, self._progress, self._said = True, chars, None, ""
        self._timer.start()

    def progress(self, progress: PromptProgress) -> None:
        if not self._waiting:
            return
        self._progress = progress
        self.reading.emit(reading_short(progress))
        if self._said:
            self._tell()

    def end(self) -> None:
        """The first token came, or the reply ended without one: the sentence goes (if it is still shown)."""
        if not self._waiting:
            return
        self._waiting = False
        self._timer.stop()
        if self._said and self._shown() == self._said:
            self._say("")
        self._said = ""

    def _tell(self) -> None:
        if self._waiting:
            self._said = reading_hint(self._progress, self._chars)
            self._say(self._said)
