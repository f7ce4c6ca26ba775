"""A local stand-in for the Hugging Face Hub, speaking its HTTP protocol (docs/reference/python-stack.md §4.2, §9).

Two stdlib servers on 127.0.0.1: the *hub* (``/{repo}/resolve/{rev}/{file}``, ``/api/models/...``)
and a *CDN* that serves LFS blobs. ``huggingface_hub`` 2.4.0 talks to it unchanged when given
``endpoint=hub.endpoint``; BeeDeck's download loop fetches the blobs from the CDN. Knobs for the
situations the real Hub cannot produce on demand: throttling, cutting a connection after N bytes,
transient 5xx answers, gated/private repos and tokens. Every request is recorded (with its headers)
so tests can assert what was asked for, e.g. the ``Range`` of a resume::

    with FakeHub() as hub:
        hub.add_repo("org/model", {"m.gguf": data}, gated="manual", accepted_tokens={"hf_ok"})
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class FakeFile:
    data: bytes
    lfs: bool = True
    # A hub that lies: the size and sha256 its API and headers state, when not the content's own.
    claimed_size: int | None = None
    claimed_sha256: str | None = None
    claimed_etag: str | None = None  # a hostile hub: the ETag (X-Linked-Etag) it names the blob by
    # A big file held sparsely: ``data`` then zeros up to this many bytes (a metadata-only GGUF of a
    # 17 GB model). Its "sha256" is a stand-in (hashing the zeros would take minutes): not for downloads.
    sparse_size: int | None = None

    @property
    def size(self) -> int:
        return len(self.data) if self.sparse_size is None else self.sparse_size

    @property
    def sha256(self) -> str:
        if self.sparse_size is not None:
            return hashlib.sha256(self.data + b"sparse:%d" % self.sparse_size).hexdigest()
        return hashlib.sha256(self.data).hexdigest()

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the content."""
        head = self.data[start:end]
        return head + bytes(max(0, min(end, self.size) - max(start, len(self.data))))

    @property
    def meta_size(self) -> int:
        return self.size if self.claimed_size is None else self.claimed_size

    @property
    def meta_sha256(self) -> str:
        return self.claimed_sha256 or self.sha256

    @classmethod
    def sparse_gguf(cls, path: Path) -> FakeFile:
        """A FakeFile of a sparse metadata-only GGUF on disk (tests/fixtures/meta_gguf.py): its header
        bytes, then zeros to the file's size (the same content, without reading the holes)."""
        size = path.stat().st_size
        head = bytearray()
        with open(path, "rb") as fh:
            while len(head) < size:
                chunk = fh.read(1 << 20)
                if not chunk.strip(b"\0"):
                    break
                head += chunk
        return cls(bytes(head).rstrip(b"\0"), sparse_size=size)

    @property
    def git_oid(self) -> str:
        # git's blob id: sha1 over "blob <len>\0" + content (for LFS files the hub hashes the pointer)
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data, usedforsecurity=False).hexdigest()


@dataclass
class FakeRepo:
    repo_id: str
    files: dict[str, FakeFile]
    commit: str
    gated: bool | str = False  # False, "auto" or "manual", as the Hub's API reports it
    private: bool = False
    accepted_tokens: set[str] = field(default_factory=set)  # tokens whose user accepted the licence / may read
    denied_tokens: set[str] = field(default_factory=set)  # tokens that get a plain 403 (fine-grained, no read)
    any_revision: bool = False  # a hostile hub: every revision exists (and is this commit)


@dataclass
class Recorded:
    server: str  # "hub" or "cdn"
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class CdnBehaviour:
    throttle_bps: int = 0  # bytes per second for blob bodies; 0 = as fast as possible
    cut_after: int | None = None  # close the connection after sending this many body bytes (one request)
    cut_times: int = 1  # how many requests in a row get cut
    fail_statuses: list[int] = field(default_factory=list)  # answer the next requests with these statuses
    ignore_range: bool = False  # answer 200 with the full body even when Range is asked for
    stall_after: int | None = None  # send this many body bytes, then nothing (connection held open; one request)
    trickle_after: int | None = None  # send this many body bytes at speed, then one byte every 0.1 s
    redirect_loop: bool = False  # answer every GET with a 302 to another URL of the CDN, for ever




class FakeHub:
    """Start with ``with FakeHub() as hub`` (or start()/stop()); ``hub.endpoint`` is the Hub URL."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Recorded] = []
        self.cdn = CdnBehaviour()
        self._lock = threading.Lock()
        self._blobs: dict[str, FakeFile] = {}
        self._hub_srv = _Server(("127.0.0.1", 0), _HubHandler, self)
        self._cdn_srv = _Server(("127.0.0.1", 0), _CdnHandler, self)
        self._threads: list[threading.Thread] = []
        self.bytes_sent = 0  # blob body bytes the CDN wrote (counts partial sends too)
        self.stopping = threading.Event()
        self.api_silent = False  # the API accepts connections and never answers (until stop)
        # A hostile hub that answers every path it does not know with this (repo, file): file names
        # with ../ reach it only after the client has normalised the URL.
        self.answer_any: tuple[str, str] | None = None

    # -- set-up -----------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._hub_srv.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        return f"http://127.0.0.1:{self._cdn_srv.server_address[1]}"

    def add_repo(self, repo_id: str, files: dict[str, bytes | FakeFile], **kw: Any) -> FakeRepo:
        wrapped = {name: f if isinstance(f, FakeFile) else FakeFile(f) for name, f in files.items()}
        commit = kw.pop("commit", None) or hashlib.sha1(repo_id.encode(), usedforsecurity=False).hexdigest()
        repo = FakeRepo(repo_id=repo_id, files=wrapped, commit=commit, **kw)
        self.repos[repo_id] = repo
        for f in wrapped.values():
            self._blobs[f.sha256] = f
        return repo

    def replace_file(self, repo_id: str, name: str, data: bytes) -> FakeFile:
        """Change a file on the 'server' (new content, new sha256, new commit)."""
        repo = self.repos[repo_id]
        f = FakeFile(data)
        repo.files[name] = f
        repo.commit = hashlib.sha1((repo.commit + name).encode(), usedforsecurity=False).hexdigest()
        self._blobs[f.sha256] = f
        return f

    def record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)

    def cdn_gets(self) -> list[Recorded]:
        return [r for r in self.requests if r.server == "cdn" and r.method == "GET"]

    def blob(self, sha: str) -> FakeFile | None:
        return self._blobs.get(sha)

    # -- life cycle ---------------------------------------------------------------
    def start(self) -> FakeHub:
        for srv in (self._hub_srv, self._cdn_srv):
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self.stopping.set()
        for srv in (self._hub_srv, self._cdn_srv):
            srv.shutdown()
            srv.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], handler: type[BaseHTTPRequestHandler], hub: FakeHub) -> None:
        super().__init__(addr, handler)
        self.hub = hub

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-answer (cancel, cut tests) are expected; anything else is printed.
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Base(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    kind = "?"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def hub(self) -> FakeHub:
        return self.server.hub

    def _record(self) -> None:
        self.hub.record(Recorded(self.kind, self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def _error(self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None) -> None:
        headers = {"Content-Type": "application/json", "X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers)

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth[7:] if auth.lower().startswith("bearer ") else None


class _HubHandler(_Base):
    kind = "hub"

    def do_HEAD(self) -> None:
        self._record()
        self._route()

    def do_GET(self) -> None:
        self._record()
        self._route()

    def do_POST(self) -> None:
        self._record()
        length = int(self.headers.get("Content-Length") or 0)
        self._body = self.rfile.read(length) if length else b""
        self._route()

    # Access rules as the Hub answers them (docs/reference/python-stack.md §4.2).
    def _check_access(self, repo: FakeRepo | None, repo_id: str, for_files: bool) -> bool:
        token = self._token()
        if repo is None or (repo.private and token not in repo.accepted_tokens):
            self._error(401, "RepoNotFound", "Repository not found")
            return False
        if token is not None and token in repo.denied_tokens:
            self._error(403, None, f"Access to model {repo_id} is forbidden: this fine-grained token "
                                   "does not have read access to it.")
            return False
        if repo.gated and for_files and token not in repo.accepted_tokens:
            if token is None:
                self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have "
                                              "access to it and be authenticated to access it. Please log in.")
            else:
                self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted and you are not in "
                                              f"the authorized list. Visit https://huggingface.co/{repo_id} "
                                              "to ask for access.")
            return False
        return True

    def _route(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = url.path  # split first, then unquote: a revision is quoted whole ("refs%2Fpr%2F1")
        unq = urllib.parse.unquote
        query = urllib.parse.parse_qs(url.query)
        m = re.match(r"^/api/models/([^/]+/[^/]+)(?:/(tree|paths-info|revision)/([^/]+)(?:/(.*))?)?$", path)
        if m:
            if self.hub.api_silent:
                return self._hold_silent()
            return self._api(unq(m.group(1)), m.group(2), unq(m.group(3)) if m.group(3) else None,
                             unq(m.group(4) or ""), query)
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        known = m is not None and unq(m.group(3)) in getattr(self.hub.repos.get(unq(m.group(1))), "files", {})
        if m and (known or self.hub.answer_any is None):
            return self._resolve(unq(m.group(1)), unq(m.group(2)), unq(m.group(3)))
        if self.hub.answer_any is not None:
            return self._resolve(self.hub.answer_any[0], "main", self.hub.answer_any[1])
        self._error(404, None, "Not Found")

    def _hold_silent(self) -> None:
        while not self.hub.stopping.wait(0.05):  # connection accepted, not a byte of answer, until the client leaves
            try:
                if self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    break
            except BlockingIOError:
                continue
            except OSError:
                break
        self.close_connection = True

    def _rev_ok(self, repo: FakeRepo, rev: str) -> bool:
        if rev in ("main", repo.commit) or repo.any_revision:
            return True
        self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    def _resolve(self, repo_id: str, rev: str, filename: str) -> None:
        repo = self.hub.repos.get(repo_id)
        if not self._check_access(repo, repo_id, for_files=True):
            return
        assert repo is not None
        if not self._rev_ok(repo, rev):
            return
        f = repo.files.get(filename)
        if f is None:
            self._error(404, "EntryNotFound", f"{filename} does not exist on \"{rev}\"",
                        {"X-Repo-Commit": repo.commit})
            return
        if f.lfs:
            self._send(302, b"", {
                "Location": f"{self.hub.cdn_url}/blobs/{f.sha256}?X-Amz-Signature=sig{int(time.time())}",
                "X-Repo-Commit": repo.commit,
                "X-Linked-Etag": f'"{f.claimed_etag or f.meta_sha256}"',
                "X-Linked-Size": str(f.meta_size),
                "ETag": f'"{f.git_oid}"',
            })
        else:
            self._send(200, f.data, {"X-Repo-Commit": repo.commit, "ETag": f'"{f.git_oid}"',
                                     "Content-Type": "application/octet-stream"})

    def _entry(self, name: str, f: FakeFile) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": "file", "oid": f.git_oid, "size": f.meta_size, "path": name}
        if f.lfs:
            entry["lfs"] = {"oid": f.meta_sha256, "size": f.meta_size, "pointerSize": 134}
        return entry

    def _api(self, repo_id: str, kind: str | None, rev: str | None, sub: str, query: dict[str, list[str]]) -> None:
        repo = self.hub.repos.get(repo_id)
        if not self._check_access(repo, repo_id, for_files=False):
            return
        assert repo is not None
        if rev is not None and not self._rev_ok(repo, rev):
            return
        if kind in (None, "revision"):
            siblings = []
            for name, f in sorted(repo.files.items()):
                s: dict[str, Any] = {"rfilename": name}
                if query.get("blobs") == ["true"]:
                    s.update(size=f.meta_size, blobId=f.git_oid)
                    if f.lfs:
                        s["lfs"] = {"sha256": f.meta_sha256, "size": f.meta_size, "pointerSize": 134}
                siblings.append(s)
            body = {"_id": "0" * 24, "id": repo_id, "modelId": repo_id, "sha": repo.commit, "private": repo.private,
                    "gated": repo.gated, "disabled": False, "downloads": 0, "likes": 0, "tags": ["gguf"],
                    "siblings": siblings, "lastModified": "2026-11-01T00:00:00.000Z"}
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})
        elif kind == "tree":
            entries = [self._entry(n, f) for n, f in sorted(repo.files.items()) if n.startswith(sub)]
            self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"})
        else:  # paths-info
            form = urllib.parse.parse_qs(getattr(self, "_body", b"").decode())
            wanted = form.get("paths", [])
            entries = [self._entry(n, repo.files[n]) for n in wanted if n in repo.files]
            self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"})


@dataclass
class _Body:
    """Bytes [start, end) of a file, read as they are sent (a sparse file is never built in memory)."""

    file: FakeFile
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def read(self, a: int, b: int) -> bytes:
        return self.file.read(self.start + a, self.start + b)


class _CdnHandler(_Base):
    kind = "cdn"

    def do_HEAD(self) -> None:
        self._record()
        self._serve()

    def do_GET(self) -> None:
        self._record()
        self._serve()

    def _serve(self) -> None:
        hub = self.hub
        behaviour = hub.cdn
        m = re.match(r"^/blobs/([0-9a-f]{64})", self.path)
        f = hub.blob(m.group(1)) if m else None
        if f is None:
            self._send(404, b"NoSuchKey")
            return
        if behaviour.fail_statuses and self.command == "GET":
            self._send(behaviour.fail_statuses.pop(0), b"Service Unavailable")
            return
        if behaviour.redirect_loop and self.command == "GET":
            n = int(urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("hop", ["0"])[0]) + 1
            self._send(302, b"", {"Location": f"/blobs/{f.sha256}?hop={n}"})
            return
        size, etag = f.size, f'"{f.sha256}"'
        start, end, status = 0, size, 200
        rng = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if rng and not behaviour.ignore_range and (if_range is None or if_range == etag):
            mr = re.match(r"bytes=(\d+)-(\d*)$", rng)  # "a-" (a resume) or "a-b" (b inclusive, a header read)
            if mr:
                start = int(mr.group(1))
                if start >= size:
                    self._send(416, b"", {"Content-Range": f"bytes */{size}"})
                    return
                end = min(size, int(mr.group(2)) + 1) if mr.group(2) else size
                status = 206
        body = _Body(f, start, end)
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if self.command == "HEAD":
            return
        cut = None
        if behaviour.cut_after is not None and behaviour.cut_times > 0 and self.command == "GET":
            cut = behaviour.cut_after
            behaviour.cut_times -= 1
        if behaviour.stall_after is not None and self.command == "GET":
            stall, behaviour.stall_after = behaviour.stall_after, None
            self._write_body(body, stall, 0, close=False)
            self.wfile.flush()
            while not self.hub.stopping.wait(0.05):  # hold the connection open, silent, until the client leaves
                try:
                    if self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                        break
                except BlockingIOError:
                    continue
                except OSError:
                    break
            self.close_connection = True
            return
        if behaviour.trickle_after is not None and self.command == "GET":
            fast, behaviour.trickle_after = behaviour.trickle_after, None
            self._write_body(body, fast, 0, close=False)
            try:
                for i in range(fast, len(body)):
                    self.wfile.write(body.read(i, i + 1))
                    self.wfile.flush()
                    if self.hub.stopping.wait(0.1):  # the fake's own pacing, not a test wait
                        break
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        self._write_body(body, cut, behaviour.throttle_bps)

    def _write_body(self, body: _Body, cut: int | None, bps: int, close: bool = True) -> None:
        limit = len(body) if cut is None else min(cut, len(body))
        step = 64 * 1024 if not bps else max(1024, bps // 20)
        sent, t0 = 0, time.monotonic()
        try:
            while sent < limit:
                n = min(step, limit - sent)
                self.wfile.write(body.read(sent, sent + n))
                sent += n
                with self.hub._lock:
                    self.hub.bytes_sent += n
                if bps:
                    ahead = sent / bps - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)  # the fake's own pacing, not a test wait
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return
        if cut is not None and cut < len(body) and close:
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


__all__ = ["CdnBehaviour", "FakeFile", "FakeHub", "FakeRepo", "Recorded"]
