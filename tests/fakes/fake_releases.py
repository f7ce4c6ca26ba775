"""A local HTTP server speaking the GitHub releases API and serving release assets (with Range).

Routes: ``GET /repos/{owner}/{repo}/releases/latest``, ``GET /repos/{owner}/{repo}/releases/tags/{tag}``,
``GET /repos/{owner}/{repo}/releases`` (the list, newest first, prereleases included) - JSON shaped like
api.github.com: ``tag_name``, ``prerelease``, ``assets[]`` with ``name``, ``size``, ``digest``
``sha256:…``, ``browser_download_url`` - and ``GET /download/{owner}/{repo}/{tag}/{name}`` for the
bytes (200 or 206 for ``Range: bytes=N-``). :meth:`FakeReleases.add_listing` serves a recorded
listing (tests/fixtures/releases/*.json); the assets a test gives real files for are served with
those files' size and digest, the others keep the listing's figures and answer 404 when fetched.
``prefix`` puts every route under a path, as a GitHub Enterprise base (``/api/v3``) or a company
cache does. ``cut_after[name] = n`` makes the first download of that
asset stop after n bytes, the way a dropped connection does, so resume is exercised for real.
Archive builders make real .tar.gz (with the .so symlink chains real releases have) and .zip files.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def make_tar_gz(dest: Path, files: dict[str, Path | bytes], symlinks: dict[str, str] | None = None,
                modes: dict[str, int] | None = None) -> Path:
    """A .tar.gz with ``files`` (arcname -> source path or bytes) and ``symlinks`` (arcname -> target)."""
    with tarfile.open(dest, "w:gz", compresslevel=1) as tf:
        for arcname, src in files.items():
            data = src.read_bytes() if isinstance(src, Path) else src
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            info.mode = (modes or {}).get(arcname, 0o755 if isinstance(src, Path) and src.stat().st_mode & 0o111
                                          else 0o644)
            tf.addfile(info, io.BytesIO(data))
        for arcname, target in (symlinks or {}).items():
            info = tarfile.TarInfo(arcname)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    return dest


def make_zip(dest: Path, files: dict[str, Path | bytes], modes: dict[str, int] | None = None) -> Path:
    """A .zip whose entries carry Unix modes (as zips made on Linux/macOS do)."""
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for arcname, src in files.items():
            data = src.read_bytes() if isinstance(src, Path) else src
            mode = (modes or {}).get(arcname, 0o755 if isinstance(src, Path) and src.stat().st_mode & 0o111
                                     else 0o644)
            info = zipfile.ZipInfo(arcname)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return dest


def server_bundle(bin_dir: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """The real llama-server of ``bin_dir`` with the shared libraries it loads: (files, symlinks)."""
    files: dict[str, Path] = {"llama-server": bin_dir / "llama-server", "libllama-server-impl.so":
                              bin_dir / "libllama-server-impl.so"}
    links: dict[str, str] = {}
    for p in sorted(bin_dir.glob("lib*.so*")):
        if p.name.endswith("-impl.so"):
            continue  # other tools' code; the server needs only its own impl library
        if p.is_symlink():
            links[p.name] = str(p.readlink())
        else:
            files[p.name] = p
    return files, links


class FakeReleases:
    """The server. ``add_release`` registers assets (file paths); ``requests`` records (path, range)."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.releases: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.meta: dict[tuple[str, str], dict[str, Any]] = {}  # prerelease, draft, published_at
        self.order: dict[str, list[str]] = {}  # repo -> tags, newest first
        self.latest: dict[str, str] = {}
        self.blobs: dict[str, Path | bytes] = {}
        self.cut_after: dict[str, int] = {}
        self.with_digest = True
        self.requests: list[tuple[str, str | None]] = []
        self.authorization: list[tuple[str, str | None]] = []  # (path, Authorization header) per request
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The API base (with ``prefix``), what ``api_url`` / BEEDECK_RELEASES_API take."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}{self.prefix}"

    def _entry(self, key: str, name: str, data: bytes) -> dict[str, Any]:
        self.blobs[key] = data
        return {"name": name, "size": len(data), "digest": "sha256:" + hashlib.sha256(data).hexdigest(),
                "content_type": "application/octet-stream", "browser_download_url": f"{self.url}/download/{key}"}

    def _register(self, repo: str, tag: str, entries: list[dict[str, Any]], *, latest: bool,
                  prerelease: bool = False, published_at: str = "") -> None:
        self.releases[(repo, tag)] = entries
        self.meta[(repo, tag)] = {"prerelease": prerelease, "draft": False, "published_at": published_at}
        tags = [t for t in self.order.get(repo, []) if t != tag]
        self.order[repo] = [tag, *tags]  # the newest registered first, as the API lists them
        if latest:
            self.latest[repo] = tag

    def add_release(self, repo: str, tag: str, assets: list[Path], *, latest: bool = True,
                    prerelease: bool = False) -> None:
        entries = []
        for path in assets:
            key = f"{repo}/{tag}/{path.name}"
            entry = self._entry(key, path.name, path.read_bytes())
            self.blobs[key] = path
            entries.append(entry)
        self._register(repo, tag, entries, latest=latest, prerelease=prerelease)

    def add_listing(self, listing: Path, files: dict[str, Path] | None = None) -> str:
        """Serve a recorded listing (oldest release registered first); ``files`` maps asset names to the
        real archives served under them. Returns the listing's repository."""
        data = json.loads(listing.read_text(encoding="utf-8"))
        repo = data["repo"]
        for rel in reversed(data["releases"]):
            tag, entries = rel["tag_name"], []
            for a in rel["assets"]:
                key = f"{repo}/{tag}/{a['name']}"
                if files and a["name"] in files:
                    entries.append(self._entry(key, a["name"], files[a["name"]].read_bytes()))
                elif "text" in a:
                    entries.append(self._entry(key, a["name"], a["text"].encode()))
                else:
                    digest = "sha256:" + hashlib.sha256(f"{repo}/{tag}/{a['name']}".encode()).hexdigest()
                    entries.append({"name": a["name"], "size": a["size"], "digest": digest,
                                    "content_type": "application/octet-stream",
                                    "browser_download_url": f"{self.url}/download/{key}"})
            self._register(repo, tag, entries, latest=tag == data["latest"],
                           prerelease=bool(rel.get("prerelease")), published_at=rel.get("published_at", ""))
        return str(repo)

    def _release_json(self, repo: str, tag: str) -> dict[str, Any]:
        assets = [dict(a) for a in self.releases[(repo, tag)]]
        if not self.with_digest:
            for a in assets:
                a.pop("digest", None)
        meta = self.meta.get((repo, tag), {})
        return {"tag_name": tag, "name": tag, "draft": meta.get("draft", False),
                "prerelease": meta.get("prerelease", False), "published_at": meta.get("published_at", ""),
                "assets": assets, "html_url": f"https://github.com/{repo}/releases/tag/{tag}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _json(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                with fake._lock:
                    fake.requests.append((self.path, self.headers.get("Range")))
                    fake.authorization.append((self.path, self.headers.get("Authorization")))
                path = self.path.split("?")[0]
                if fake.prefix:
                    if not path.startswith(fake.prefix + "/"):
                        self._json(404, {"message": "Not Found"})
                        return
                    path = path[len(fake.prefix):]
                parts = path.strip("/").split("/")
                if parts[:1] == ["repos"] and len(parts) == 4 and parts[3] == "releases":
                    repo = f"{parts[1]}/{parts[2]}"
                    self._json(200, [fake._release_json(repo, t) for t in fake.order.get(repo, [])])
                    return
                if parts[:1] == ["repos"] and len(parts) >= 5 and parts[3] == "releases":
                    repo = f"{parts[1]}/{parts[2]}"
                    tag = fake.latest.get(repo) if parts[4] == "latest" else (
                        parts[5] if len(parts) > 5 and parts[4] == "tags" else None)
                    if tag is None or (repo, tag) not in fake.releases:
                        self._json(404, {"message": "Not Found"})
                        return
                    self._json(200, fake._release_json(repo, tag))
                    return
                if parts[:1] == ["download"]:
                    self._serve_blob("/".join(parts[1:]))
                    return
                self._json(404, {"message": "Not Found"})

            def _serve_blob(self, key: str) -> None:
                blob = fake.blobs.get(key)
                if blob is None:
                    self._json(404, {"message": "Not Found"})
                    return
                data = blob.read_bytes() if isinstance(blob, Path) else blob
                start = 0
                rng = self.headers.get("Range", "")
                if rng.startswith("bytes=") and rng.endswith("-"):
                    start = int(rng[6:-1])
                body = data[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", '"' + hashlib.sha256(data).hexdigest()[:16] + '"')
                self.send_header("Accept-Ranges", "bytes")
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                name = key.rsplit("/", 1)[-1]
                with fake._lock:
                    cut = fake.cut_after.pop(name, None)
                if cut is not None:
                    self.wfile.write(body[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        return Handler

    def start(self) -> FakeReleases:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> FakeReleases:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def recorded_listings(monkeypatch: Any) -> Iterator[FakeReleases]:
    """The recorded mainline and BeeLlama release listings (tests/fixtures/releases/) served, and BeeDeck pointed
    at them (for a fixture: ``yield from recorded_listings(monkeypatch)``)."""
    from beedeck.core.engine.releases.index import RELEASES_API_ENV

    with FakeReleases() as fake:
        for name in ("mainline.json", "beellama.json"):
            fake.add_listing(Path(__file__).resolve().parent.parent / "fixtures" / "releases" / name)
        monkeypatch.setenv(RELEASES_API_ENV, fake.url)
        yield fake
