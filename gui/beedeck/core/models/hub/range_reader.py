"""Read the start of a remote file with HTTP range requests, as a seekable stream for the GGUF reader.

:class:`RangeReader` holds the bytes fetched so far (always a prefix of the file) and asks for more
only when the reader goes past them: the first request is ``first`` bytes, each further one at least
half of what is already held, so a header larger than the first range costs a few more requests,
never the file. Reads over 1 MiB (only the GGUF scanner's 4 MiB look-ahead over token lists, which
takes short reads) are answered with what is held or one growth step, never by fetching all they ask for.
Nothing past ``limit`` (the GGUF header budget, :data:`gguf.header.HEADER_BYTES`) is ever fetched: a
header read over HTTP costs the bytes a local one may, and what is held never passes that.

:func:`http_ranges` fetches with ``Range: bytes=a-b`` over httpx2: a connection cut mid-body resumes
from the last byte received, a stall ends at the read timeout and is retried, and after ``tries``
failures it raises :class:`RangeReadError` with what to do. A server that ignores ``Range`` (200) is
read only as far as needed, then closed.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx2

from beedeck.core.connection import what_happened
from beedeck.core.download import DownloadCancelled, DownloadError
from beedeck.core.models.gguf.header import HEADER_BYTES

FIRST_RANGE = 1 << 20  # most GGUF headers of small models fit; 27B-class ones (big vocab) need ~8-10 MiB
MIN_STEP = 1 << 20
JUMP_FIRST = 64 * 1024  # the first fetch after a jump: the rest of a header's metadata and its tensor table
SMALL_READ = 1 << 20  # reads up to this size are answered in full (fields, names, chat templates, tensor tables)
TRIES = 4

Fetch = Callable[[int, int], bytes]  # (start, end exclusive) -> exactly those bytes


class RangeReadError(DownloadError):
    """The header could not be read over the network; the message says what to do."""


class RangeReader(io.RawIOBase):
    """A read-only, seekable view of a ``size``-byte remote file that fetches what is read, on demand.

    What is held is a list of segments: the prefix, plus one more wherever a reader jumps more than
    ``MIN_STEP`` past what is held (the GGUF reader jumping over a token list a sibling file showed);
    a jump's segment starts at ``JUMP_FIRST`` bytes and grows like the prefix."""

    read_chunk = JUMP_FIRST  # what the GGUF scanner's look-ahead asks for at a time (each growth is a request)

    def __init__(self, fetch: Fetch, size: int, first: int = FIRST_RANGE, limit: int = HEADER_BYTES) -> None:
        super().__init__()
        self._fetch, self.size, self._first = fetch, size, max(1, first)
        self.limit = min(size, limit)  # no byte past this is fetched (reads there come back short)
        self._segs: list[tuple[int, bytearray]] = [(0, bytearray())]
        self._pos = 0
        self.requests = 0

    @property
    def bytes_read(self) -> int:
        return sum(len(b) for _s, b in self._segs)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _segment(self, pos: int) -> int:
        """The index of the segment that holds (or directly continues to) ``pos``; a new one after a jump."""
        i = max(j for j, (st, _b) in enumerate(self._segs) if st <= pos)
        st, buf = self._segs[i]
        if pos > st + len(buf) + MIN_STEP:
            self._segs.insert(i + 1, (pos, bytearray()))
            return i + 1
        return i

    def _grow(self, i: int, upto: int) -> None:
        st, buf = self._segs[i]
        held = st + len(buf)
        first = self._first if st == 0 else JUMP_FIRST
        step = first if not buf else max(len(buf) // 2, min(first, MIN_STEP))
        end = min(self.limit, max(upto, held + step))
        nxt = self._segs[i + 1][0] if i + 1 < len(self._segs) else self.size
        end = min(end, nxt)
        if end <= held:
            return
        data = self._fetch(held, end)
        if len(data) != end - held:
            raise RangeReadError(f"The server sent {len(data)} bytes for a {end - held}-byte range: retry later.")
        buf += data
        self.requests += 1
        if end == nxt and i + 1 < len(self._segs):  # met the next segment: one segment from here on
            buf += self._segs.pop(i + 1)[1]

    def _held(self, i: int) -> int:
        return self._segs[i][0] + len(self._segs[i][1])

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self._pos
        if self._pos >= self.size or n == 0:
            return b""
        want = min(self._pos + n, self.size)
        i = self._segment(self._pos)
        # Reads up to SMALL_READ are answered in full; bigger ones with what one growth step brings.
        target = want if n <= SMALL_READ else min(want, self._pos + SMALL_READ)
        while self._held(i) < target:
            before = self._held(i)
            self._grow(i, target)
            if self._held(i) == before:
                break
            if n > SMALL_READ:
                break
        st, buf = self._segs[i]
        out = bytes(buf[self._pos - st : min(want, st + len(buf)) - st])
        self._pos += len(out)
        return out

    def slice(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the file, fetching what is not held yet."""
        self.seek(start)
        out = bytearray()
        while len(out) < end - start:
            chunk = self.read(min(SMALL_READ, end - start - len(out)))
            if not chunk:
                break
            out += chunk
        return bytes(out)


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def http_ranges(client: httpx2.Client, url: str, headers: dict[str, str], name: str, *, tries: int = TRIES,
                cancel_event: threading.Event | None = None) -> Fetch:
    """A :data:`Fetch` over ``url``; ``name`` is the file the messages name."""

    def fetch(start: int, end: int) -> bytes:
        got = bytearray()
        last: str = ""
        for _attempt in range(tries):
            if cancel_event is not None and cancel_event.is_set():
                raise DownloadCancelled(f"Sizing {name} was cancelled.")
            lo = start + len(got)
            try:
                with client.stream("GET", url, headers={**headers, "Range": f"bytes={lo}-{end - 1}"}) as r:
                    if r.status_code == 416 or r.status_code >= 400:
                        raise RangeReadError(f"The server refused the header of {name} (HTTP {r.status_code}): "
                                             "retry later, or download the file to size it from disk.")
                    skip = lo if r.status_code == 200 else 0  # Range ignored: the body starts at byte 0
                    if r.status_code == 206:
                        m = _CONTENT_RANGE.match(r.headers.get("content-range", ""))
                        if not m or int(m.group(1)) != lo:
                            raise RangeReadError(f"The server answered a different range for {name} than asked: "
                                                 "retry later.")
                    for chunk in r.iter_raw():
                        if cancel_event is not None and cancel_event.is_set():
                            raise DownloadCancelled(f"Sizing {name} was cancelled.")
                        if skip:
                            cut = min(skip, len(chunk))
                            chunk, skip = chunk[cut:], skip - cut
                        got += chunk[: end - start - len(got)]
                        if len(got) >= end - start:
                            return bytes(got)
                    last = "the connection closed early"
            except httpx2.TimeoutException:
                last = "the server stopped sending"
            except httpx2.TransportError as exc:
                last = what_happened(exc, urlsplit(url).netloc or url)
        raise RangeReadError(f"Reading the header of {name} failed {tries} times ({last}): check the network "
                             "and retry; nothing was downloaded.")

    return fetch
