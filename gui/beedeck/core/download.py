"""A resumable, verifiable HTTP file download: BeeDeck's own loop for model files and engine assets.

Why not ``hf_hub_download``: it restarts from byte 0 after an interruption, reports progress only per
10 MiB and has no cancel (docs/reference/python-stack.md §4.3). This loop writes ``<dest>.part``, keeps a
sidecar ``<dest>.part.json`` (source URL, ETag, expected size/sha256) so a later call - even after an
app restart - resumes with ``Range`` only when the remote file is still the same, hashes while it
writes, verifies size and sha256, and only then renames atomically onto ``dest``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import filelock
import httpx2

from beedeck.core import paths
from beedeck.core.connection import what_happened

log = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int | None], None]

CHUNK_SIZE = 1 << 20  # buffered write size; network reads are smaller and each one is a cancel point
PROGRESS_INTERVAL_S = 0.1  # ~10 progress calls a second: smooth in the UI, cheap for big files
DISK_MARGIN_BYTES = 256 * 1024 * 1024  # keep some room so the rest of the system does not starve
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
# The low-speed limit (curl's --speed-limit/--speed-time): fewer bytes than this a second, averaged over
# the window, and the transfer is given up. A server trickling a byte a second never trips the read
# timeout; this catches it.
LOW_SPEED_BPS = 4096
LOW_SPEED_WINDOW_S = 60.0


class DownloadError(Exception):
    """A download failed; ``str(exc)`` says what happened and what the user can do."""


class DownloadCancelled(DownloadError):
    """The cancel event was set. The ``.part`` file is kept, so the next call resumes."""


class OfflineError(DownloadError):
    """The server could not be reached at all (connection refused, DNS failure, no network)."""


class DiskFullError(DownloadError):
    """Not enough free space, found before starting or when a write failed with ENOSPC."""


class ChecksumMismatchError(DownloadError):
    """The finished file's sha256 or size differs from what the server promised."""


class TooSlowError(DownloadError):
    """The transfer stayed under the low-speed limit for a whole window. The ``.part`` is kept."""


class HTTPStatusFailure(DownloadError):
    """The server answered with a non-retryable HTTP status (4xx) or kept failing (5xx)."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class _Transient(Exception):
    """Internal: an attempt failed in a way worth retrying."""


def _strip_query(url: str) -> str:
    # Signed CDN URLs change on every request; the path identifies the file.
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def _display_url(url: str) -> str:
    # Query strings of signed URLs are credentials of a sort: never put them in messages or logs.
    return _strip_query(url)


def part_paths(dest: Path) -> tuple[Path, Path]:
    """The partial file and its sidecar for ``dest``."""
    return dest.with_name(dest.name + ".part"), dest.with_name(dest.name + ".part.json")


def _read_sidecar(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_sidecar(path: Path, data: dict[str, Any]) -> None:
    # fsync'd replace: a crash must not leave an empty sidecar, which would throw the .part away.
    paths.atomic_write_text(path, json.dumps(data))


def _discard(*paths: Path) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def _human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def check_free_space(folder: Path, needed: int, margin: int = DISK_MARGIN_BYTES) -> None:
    """Raise DiskFullError when ``folder``'s file system has less than ``needed + margin`` bytes free."""
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < needed + margin:
        raise DiskFullError(
            f"Not enough disk space in {folder}: the download needs {_human(needed)} more "
            f"(plus {_human(margin)} headroom) but only {_human(free)} is free: free some space "
            "or choose another download folder, then retry."
        )


def _sha256_of(path: Path) -> Any:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK_SIZE * 8):
            h.update(block)
    return h


class _CancelWatch:
    """Shuts the response's socket down when ``cancel_event`` is set, so a read that is waiting on a
    stalled server returns at once instead of after the read timeout."""

    def __init__(self, cancel_event: threading.Event | None) -> None:
        self._cancel = cancel_event
        self._done = threading.Event()
        self._response: httpx2.Response | None = None
        self._thread: threading.Thread | None = None

    def attach(self, response: httpx2.Response) -> None:
        self._response = response
        if self._cancel is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="download-cancel-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        assert self._cancel is not None
        while not self._done.wait(0.05):
            if self._cancel.is_set():
                self._kill_socket()
                return

    def _kill_socket(self) -> None:
        resp = self._response
        stream = resp.extensions.get("network_stream") if resp is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


def _iter_network(response: httpx2.Response) -> Iterator[bytes]:
    # iter_raw without a chunk size yields what each socket read returned: on a slow link that
    # still means several progress updates and cancel checks a second.
    yield from response.iter_raw()


def download_file(
    url: str,
    dest: Path,
    *,
    expected_sha256: str | None = None,
    expected_size: int | None = None,
    headers: dict[str, str] | None = None,
    on_progress: ProgressCallback | None = None,
    cancel_event: threading.Event | None = None,
    retries: int = 5,
    client: httpx2.Client | None = None,
    sleep: Callable[[float], None] = time.sleep,
    disk_margin: int = DISK_MARGIN_BYTES,
    low_speed: tuple[float, float] = (LOW_SPEED_BPS, LOW_SPEED_WINDOW_S),
) -> Path:
    """Download ``url`` to ``dest`` with resume, retries, cancel and verification; return ``dest``.

    ``on_progress(done, total)`` is called about 10 times a second (and once at the end); ``total`` is
    None when neither ``expected_size`` nor the server says how big the file is. ``retries`` counts
    consecutive failed attempts (an attempt that received bytes resets the count); ``sleep`` is the
    backoff wait, injectable for tests. An existing ``dest`` is only replaced by a verified file.
    ``low_speed`` is (bytes a second, seconds): slower than that over a whole window raises TooSlowError.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    lock = filelock.FileLock(str(dest) + ".lock", timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        raise DownloadError(
            f"{dest.name} is already being downloaded (by another BeeDeck window or command): wait for "
            "that download to finish or cancel it."
        ) from None
    try:
        return _download_locked(url, dest, expected_sha256, expected_size, headers, on_progress, cancel_event,
                                retries, client, sleep, disk_margin, low_speed)
    finally:
        lock.release()
        with contextlib.suppress(OSError):
            Path(str(dest) + ".lock").unlink()


def _download_locked(
    url: str,
    dest: Path,
    expected_sha256: str | None,
    expected_size: int | None,
    headers: dict[str, str] | None,
    on_progress: ProgressCallback | None,
    cancel_event: threading.Event | None,
    retries: int,
    client: httpx2.Client | None,
    sleep: Callable[[float], None],
    disk_margin: int,
    low_speed: tuple[float, float],
) -> Path:
    part, sidecar = part_paths(dest)
    expected_sha256 = expected_sha256.lower() if expected_sha256 else None
    identity = {"url": _strip_query(url), "expected_size": expected_size, "expected_sha256": expected_sha256}

    side = _read_sidecar(sidecar)
    if part.exists() and any(side.get(k) != v for k, v in identity.items()):
        # A .part from another URL or another version of the file: its bytes cannot be reused.
        log.info("discarding stale partial download %s", part)
        _discard(part, sidecar)
        side = {}
    if not part.exists():
        side = {}
    _write_sidecar(sidecar, {**identity, "etag": side.get("etag")})

    own_client = client is None
    if client is None:
        client = httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(10.0, read=60.0))
    failures = 0
    state: dict[str, Any] = {"total": expected_size, "last_emit": 0.0, "low_speed": low_speed}

    def emit(done: int, force: bool = False) -> None:
        now = time.monotonic()
        if on_progress is not None and (force or now - state["last_emit"] >= PROGRESS_INTERVAL_S):
            state["last_emit"] = now
            on_progress(done, state["total"])

    try:
        while True:
            if cancel_event is not None and cancel_event.is_set():
                raise DownloadCancelled(f"Download of {dest.name} cancelled; run it again to resume.")
            try:
                received = _attempt(
                    client, url, part, sidecar, identity, headers or {}, expected_size, cancel_event,
                    emit, state, disk_margin,
                )
            except _Transient as exc:
                failures = 1 if exc.args[1] else failures + 1  # progress starts a new streak
                if failures > retries:
                    raise exc.args[2] from None
                delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** max(0, failures - 1))
                log.info("download of %s failed (%s); retry in %.1f s", dest.name, exc.args[0], delay)
                sleep(delay)
                continue
            if received is not None:
                break
        _verify_and_commit(part, sidecar, dest, expected_size, expected_sha256, received)
        emit(dest.stat().st_size, force=True)
        return dest
    finally:
        if own_client:
            client.close()


def _attempt(
    client: httpx2.Client,
    url: str,
    part: Path,
    sidecar: Path,
    identity: dict[str, Any],
    headers: dict[str, str],
    expected_size: int | None,
    cancel_event: threading.Event | None,
    emit: Callable[..., None],
    state: dict[str, Any],
    disk_margin: int,
) -> Any:
    """One GET. Returns the running sha256 object when the body is complete; raises _Transient
    (reason, made_progress, final_exception) for retryable failures."""
    have = part.stat().st_size if part.exists() else 0
    if expected_size is not None and have > expected_size:
        _discard(part)
        have = 0
    side = _read_sidecar(sidecar)
    if expected_size is not None and have == expected_size:
        return _sha256_of(part)  # finished earlier, only the rename was missing
    if expected_size is not None:
        check_free_space(part.parent, expected_size - have, disk_margin)

    req_headers = {**headers, "Accept-Encoding": "identity"}
    if have:
        req_headers["Range"] = f"bytes={have}-"
        if side.get("etag"):
            # If the file changed on the server, it answers 200 with the new file: we restart cleanly.
            req_headers["If-Range"] = side["etag"]
    shown = _display_url(url)
    progressed = [False]  # set by _write_body once a byte of this attempt is on disk
    watch = _CancelWatch(cancel_event)
    try:
        with client.stream("GET", url, headers=req_headers) as response:
            watch.attach(response)
            mode = _resume_mode(response, have, shown, part)
            if mode == "complete":
                return _sha256_of(part)
            if mode == "wb":
                have = 0  # the server ignored Range (or If-Range saw a new file)
            length = response.headers.get("Content-Length")
            if state["total"] is None and length is not None and length.isdigit():
                state["total"] = have + int(length)
                if expected_size is None:
                    check_free_space(part.parent, int(length), disk_margin)
            _write_sidecar(sidecar, {**identity, "etag": response.headers.get("ETag")})
            hasher = _sha256_of(part) if mode == "ab" else hashlib.sha256()
            emit(have, force=True)
            done = _write_body(response, part, mode, have, hasher, cancel_event, emit, state, progressed)
            if cancel_event is not None and cancel_event.is_set():
                raise DownloadCancelled(
                    f"Download of {part.name.removesuffix('.part')} cancelled at {_human(done)}; "
                    "run it again to resume."
                )
            return hasher
    except httpx2.TooManyRedirects:
        raise DownloadError(f"{shown} redirects in a loop (too many redirects): the server or a proxy between is "
                            "misconfigured; try again later, or download from another source.") from None
    except httpx2.TransportError as exc:
        if cancel_event is not None and cancel_event.is_set():
            raise DownloadCancelled(
                f"Download of {part.name.removesuffix('.part')} cancelled; run it again to resume."
            ) from None
        if isinstance(exc, httpx2.ConnectError) and not state.get("any_bytes"):
            # Nothing listens or the name does not resolve: retrying for half a minute helps nobody.
            host = urlsplit(url).netloc
            raise OfflineError(
                f"Cannot reach {host}: {what_happened(exc, host)}. Check the network connection (or proxy "
                "settings) and retry."
            ) from None
        raise _Transient(
            type(exc).__name__, progressed[0],
            OfflineError(f"The download from {urlsplit(url).netloc} kept failing: "
                         f"{what_happened(exc, urlsplit(url).netloc)}. Check the network connection and retry; "
                         "the download resumes where it stopped."),
        ) from None
    finally:
        watch.close()


def _resume_mode(response: Any, have: int, shown: str, part: Path) -> str:
    """How the answer's body is written: "ab" (a resume the server honoured at ``have``), "wb" (the whole
    file) or "complete" (nothing: the part already holds all of it); raises for the answers that are
    failures or a resume gone wrong."""
    status = response.status_code
    if status == 416 and have and _complete_length(response.headers.get("Content-Range")) == have:
        return "complete"  # the .part is the whole file (killed before its rename): verified, not fetched again
    if status == 416 and have:
        _discard(part)  # our .part is longer than the remote file: it changed; start over
        raise _Transient("range not satisfiable", False, _bad_resume(shown))
    if status in TRANSIENT_STATUS:
        raise _Transient(
            f"HTTP {status}", False,
            HTTPStatusFailure(f"{shown} kept failing with HTTP {status}: the server is having "
                              "trouble; try again later.", status),
        )
    if status >= 400:
        raise HTTPStatusFailure(_status_message(status, shown), status)
    if status == 206:
        start = _content_range_start(response.headers.get("Content-Range"))
        if start != have:
            _discard(part)
            raise _Transient("unexpected Content-Range", False, _bad_resume(shown))
        return "ab"
    return "wb"


def _write_body(response: Any, part: Path, mode: str, have: int, hasher: Any, cancel_event: threading.Event | None,
                emit: Callable[..., None], state: dict[str, Any], progressed: list[bool]) -> int:
    """Stream the body into ``part`` (hashing it, reporting progress, held to the low-speed limit);
    returns the bytes the file holds. A full disk is said as such; the part written is kept."""
    done = have
    bps, window_s = state["low_speed"]
    speed = _SpeedCheck(bps, window_s, part.name.removesuffix(".part"))
    try:
        with open(part, mode) as fh:
            for chunk in _iter_network(response):
                if cancel_event is not None and cancel_event.is_set():
                    break
                fh.write(chunk)
                hasher.update(chunk)
                done += len(chunk)
                progressed[0] = True
                state["any_bytes"] = True
                emit(done)
                speed.add(len(chunk))
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(
                f"The disk filled up while downloading {part.name.removesuffix('.part')}: free some "
                "space and retry; the part already downloaded is kept and the download resumes."
            ) from None
        raise
    return done


class _SpeedCheck:
    """Raises TooSlowError once a whole window of ``window_s`` seconds brought fewer than ``bps`` bytes a second."""

    def __init__(self, bps: float, window_s: float, name: str) -> None:
        self.bps, self.window_s, self.name = bps, window_s, name
        self.start, self.bytes = time.monotonic(), 0

    def add(self, n: int) -> None:
        self.bytes += n
        elapsed = time.monotonic() - self.start
        if elapsed < self.window_s:
            return
        rate = self.bytes / elapsed
        if rate < self.bps:
            raise TooSlowError(
                f"The transfer is too slow: {self.name} arrived at {_human(rate)}/s over the last {elapsed:.0f} s "
                f"(BeeDeck gives up below {_human(self.bps)}/s). Check the network connection, then run the same "
                "command again: the download resumes where it stopped.")
        self.start, self.bytes = time.monotonic(), 0


def _bad_resume(shown: str) -> DownloadError:
    return DownloadError(f"{shown} keeps answering resume requests inconsistently: delete the partial "
                         "download and retry.")


def _complete_length(value: str | None) -> int | None:
    # A 416's "bytes */200": the whole file's length.
    if not value or not value.startswith("bytes */"):
        return None
    try:
        return int(value[8:])
    except ValueError:
        return None


def _content_range_start(value: str | None) -> int | None:
    # "bytes 100-199/200"
    if not value or not value.startswith("bytes "):
        return None
    try:
        return int(value[6:].split("-", 1)[0])
    except ValueError:
        return None


def _status_message(status: int, shown: str) -> str:
    if status == 401:
        return f"{shown} needs authentication (HTTP 401): add an access token and retry."
    if status == 403:
        return f"Access to {shown} was refused (HTTP 403): check that your token may read it."
    if status == 404:
        return f"{shown} was not found (HTTP 404): check the name and version."
    return f"{shown} answered HTTP {status}: the download cannot continue."


def _verify_and_commit(
    part: Path, sidecar: Path, dest: Path, expected_size: int | None, expected_sha256: str | None, hasher: Any
) -> None:
    size = part.stat().st_size
    problem = None
    if expected_size is not None and size != expected_size:
        problem = f"its size is {size} bytes instead of {expected_size}"
    elif expected_sha256 is not None and hasher.hexdigest() != expected_sha256:
        problem = f"its sha256 is {hasher.hexdigest()} instead of {expected_sha256}"
    if problem:
        # A corrupt .part must not be resumed again; the existing dest (if any) stays untouched.
        _discard(part, sidecar)
        kept = " The previous copy was left unchanged." if dest.exists() else ""
        raise ChecksumMismatchError(
            f"The downloaded {dest.name} is corrupt: {problem}. The bad data was deleted.{kept} "
            "Retry the download; if it fails again the file on the server may have changed or a proxy "
            "alters it."
        )
    with open(part, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(part, dest)
    _discard(sidecar)
