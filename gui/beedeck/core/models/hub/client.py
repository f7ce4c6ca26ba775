"""Hugging Face model downloads: metadata and auth from huggingface_hub, bytes from core.download.

huggingface_hub answers "how big, which sha256, gated or not, which commit" and maps the Hub's error
codes; the bytes come from BeeDeck's resumable loop (docs/reference/python-stack.md §4.4). Files land in the Hub's
own cache layout (``models--org--name/blobs/<etag>``, ``snapshots/<commit>/<file>`` symlinks,
``refs/<rev>``) so llama.cpp's ``-hf``, ``huggingface-cli`` and others reuse them, or in a folder the
user picks. huggingface_hub is imported lazily: it costs ~200 ms at start-up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2

from beedeck.core import paths, secrets
from beedeck.core.connection import what_happened
from beedeck.core.download import (
    ChecksumMismatchError,
    DiskFullError,
    DownloadCancelled,
    DownloadError,
    HTTPStatusFailure,
    OfflineError,
    ProgressCallback,
    download_file,
)
from beedeck.core.models.hub.checks import api_timeout, verified_copy, within_deadline
from beedeck.core.printable import printable

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://huggingface.co"
SPLIT_RE = re.compile(r"^(?P<stem>.*)-(?P<idx>\d{5})-of-(?P<n>\d{5})\.gguf$")

__all__ = [
    "AccessDeniedError", "ChecksumMismatchError", "DiskFullError", "DownloadCancelled", "DownloadError",
    "EntryMissingError", "GatedRepoError", "HubFile", "HubError", "OfflineError", "RepoInfo", "RepoMissingError",
    "TokenRequiredError", "UnsafePathError", "changed_files", "download_model", "get_model_files", "hub_cache_dir",
    "repo_info", "resolve_token", "save_token", "split_parts",
]


# --- errors -------------------------------------------------------------------------------------------
class HubError(DownloadError):
    """A Hub request failed for a reason the user can act on; the message carries the remedy."""


class TokenRequiredError(HubError):
    """The repo needs a logged-in user (gated or private) and no token was found."""


class GatedRepoError(HubError):
    """A token was sent, but its user has not accepted the model's licence (or is not yet approved)."""


class AccessDeniedError(HubError):
    """HTTP 403 that is not about the licence: e.g. a fine-grained token without read access."""


class RepoMissingError(HubError):
    """The repo does not exist, or is private and the token cannot see it."""


class EntryMissingError(HubError):
    """The repo exists but the file (or revision) does not."""


class UnsafePathError(HubError):
    """A name that would place a file outside the folder it belongs in (``../``, an absolute path)."""


def _inside(root: Path, *parts: str, what: str, remote: bool, shown: str | None = None) -> Path:
    """``root/parts`` through :func:`paths.safe_join`, the one check for every path built from the
    Hub's answers (ETag, commit) or the user's words (file, revision, ``--dest``)."""
    try:
        return paths.safe_join(root, *parts)
    except ValueError:
        value = printable(parts[-1] if shown is None else shown, 120)  # the untrusted part, as given
        if remote:
            raise UnsafePathError(
                f"The Hub answered {what} '{value}', which would put a file outside {root}: BeeDeck refused it "
                "and wrote nothing there. The server (HF_ENDPOINT, a proxy) is broken or hostile: use "
                "https://huggingface.co, then retry.") from None
        raise UnsafePathError(
            f"The {what} '{value}' would put a file outside {root}: give it as the repo lists it, without "
            "'..' or a leading '/' (e.g. Qwen3-8B-Q4_K_M.gguf, or a branch name such as main).") from None


# --- token -------------------------------------------------------------------------------------------------
def _hf_home() -> Path:
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "huggingface"


def hub_cache_dir() -> Path:
    """The Hub cache folder other tools share: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    return Path(env).expanduser() if env else _hf_home() / "hub"


def save_token(token: str | None) -> bool:
    """Store (or, with None, delete) the token in the OS keyring. False when there is no keyring:
    the caller then keeps it for the session only (or tells the user to run ``hf auth login``)."""
    return secrets.set_secret(secrets.HF_TOKEN, token)


def resolve_token(explicit: str | None = None) -> str | None:
    """The token to send: an explicit one, HF_TOKEN, BeeDeck's keyring entry, then the Hub's token file."""
    if explicit:
        return explicit
    env = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if env:
        return env.strip()
    stored = secrets.get_secret(secrets.HF_TOKEN)
    if stored:
        return stored
    token_path = Path(os.environ["HF_TOKEN_PATH"]).expanduser() if os.environ.get("HF_TOKEN_PATH") else _hf_home() / "token"
    with contextlib.suppress(OSError):
        text = token_path.read_text(encoding="utf-8").strip()
        if text:
            return text
    return None


def _endpoint(endpoint: str | None) -> str:
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _host(endpoint: str | None) -> str:
    """The Hub's host (and port), as a failed connection names it."""
    url = _endpoint(endpoint)
    return urlsplit(url).netloc or url


def _redact(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text


# --- metadata ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HubFile:
    """One file of a repo as the Hub lists it."""

    repo: str
    filename: str
    size: int | None
    sha256: str | None  # LFS files only; small git files have just a git oid
    blob_id: str | None = None

    @property
    def basename(self) -> str:
        return self.filename.rsplit("/", 1)[-1]


@dataclass
class RepoInfo:
    """What the Hub says about a model repo (with file sizes and checksums)."""

    repo: str
    commit: str | None
    gated: bool | str  # False, "auto" or "manual"
    private: bool
    files: list[HubFile] = field(default_factory=list)

    def file(self, filename: str) -> HubFile | None:
        return next((f for f in self.files if f.filename == filename), None)


def _translate(exc: BaseException, repo: str, filename: str | None, token: str | None,
               endpoint: str | None = None) -> Exception:
    """Map huggingface_hub / transport errors to BeeDeck's classes with remedies (a failed connection says what
    happened: refused, a name that does not resolve, no answer in time; never an exception's class name)."""
    from huggingface_hub import errors as hf_errors

    what = f"{repo}/{filename}" if filename else repo
    page = f"https://huggingface.co/{repo}"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, hf_errors.GatedRepoError):  # before RepositoryNotFoundError: it is a subclass
        if not token:
            return TokenRequiredError(
                f"{repo} is a gated model: downloads need a Hugging Face access token. Create one at "
                "https://huggingface.co/settings/tokens, add it in BeeDeck's settings (or set HF_TOKEN / "
                f"run `hf auth login`), open {page}, accept the licence, then retry."
            )
        return GatedRepoError(
            f"Your Hugging Face account has not accepted the licence of {repo} (or is still waiting for "
            f"approval): open {page}, accept the licence, then retry."
        )
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        if not token:
            return RepoMissingError(
                f"{repo} was not found on the Hub. Check the name; if it is a private repo, add a "
                "Hugging Face access token and retry."
            )
        return RepoMissingError(
            f"{repo} was not found on the Hub, or your token cannot see it: check the name and that "
            "the token's account has access."
        )
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return EntryMissingError(f"{repo} has no such revision: check the branch, tag or commit name.")
    if isinstance(exc, (hf_errors.RemoteEntryNotFoundError, hf_errors.EntryNotFoundError)):
        return EntryMissingError(
            f"{what} does not exist: the repo has no file by that name (check the file list on {page})."
        )
    if status == 401:
        return TokenRequiredError(f"The Hub refused {what} without valid credentials (HTTP 401): check "
                                  "or replace your Hugging Face access token, then retry.")
    if status == 403:
        return AccessDeniedError(
            f"The Hub refused access to {what} (HTTP 403). If you use a fine-grained token, allow it to "
            "read this repo (and public gated repos) at https://huggingface.co/settings/tokens, then retry."
        )
    if isinstance(exc, (httpx2.ConnectError, httpx2.ConnectTimeout)) or (
        isinstance(exc, OSError) and not isinstance(exc, hf_errors.HfHubHTTPError)
    ):
        return OfflineError(
            f"Cannot reach the Hugging Face Hub: {what_happened(exc, _host(endpoint))}. Check the network "
            "connection or proxy, then retry. Models already downloaded still work offline."
        )
    if isinstance(exc, httpx2.TransportError):
        return OfflineError(f"The connection to the Hugging Face Hub broke: {what_happened(exc, _host(endpoint))}. "
                            "Retry in a moment.")
    return HubError(_redact(f"The Hub request for {what} failed: {exc}", token))


def _api(endpoint: str | None, token: str | None) -> Any:
    from huggingface_hub import HfApi

    # token=False: never let huggingface_hub pick up a token on its own; resolve_token() decided.
    return HfApi(endpoint=_endpoint(endpoint), token=token or False, library_name="beedeck")


def repo_info(repo: str, *, revision: str | None = None, token: str | None = None,
              endpoint: str | None = None) -> RepoInfo:
    """Repo metadata incl. each file's size and LFS sha256 (one API call)."""
    tok = resolve_token(token)

    def call() -> Any:
        try:
            return _api(endpoint, tok).model_info(repo, revision=revision, files_metadata=True, timeout=api_timeout())
        except Exception as exc:
            raise _translate(exc, repo, None, tok, endpoint) from None

    info = within_deadline(call, f"about {repo}")
    files = [
        HubFile(repo=repo, filename=s.rfilename, size=s.size, sha256=s.lfs.sha256 if s.lfs else None,
                blob_id=s.blob_id)
        for s in info.siblings or []
    ]
    return RepoInfo(repo=repo, commit=info.sha, gated=info.gated or False, private=bool(info.private), files=files)


def split_parts(filename: str) -> tuple[str, int] | None:
    """For ``name-00001-of-00003.gguf`` return (``name``, 3); None for single files."""
    m = SPLIT_RE.match(filename)
    return (m.group("stem"), int(m.group("n"))) if m else None


def get_model_files(repo: str, first_file: str, *, revision: str | None = None, token: str | None = None,
                    endpoint: str | None = None, info: RepoInfo | None = None) -> list[HubFile]:
    """The files to fetch for ``first_file``: itself, or every shard of its split set, in order."""
    info = info or repo_info(repo, revision=revision, token=token, endpoint=endpoint)
    split = split_parts(first_file)
    if split is None:
        f = info.file(first_file)
        if f is None:
            raise EntryMissingError(f"{repo}/{first_file} does not exist: the repo has no file by that name "
                                    f"(check the file list on https://huggingface.co/{repo}).")
        return [f]
    stem, n = split
    wanted = [f"{stem}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]
    found = [info.file(w) for w in wanted]
    missing = [w for w, f in zip(wanted, found, strict=True) if f is None]
    if missing:
        raise EntryMissingError(f"{repo} lists only part of the split model {first_file}: missing "
                                f"{', '.join(missing)}. Pick another quantisation.")
    return [f for f in found if f is not None]


# --- download --------------------------------------------------------------------------------------------
def _storage_folder(cache: Path, repo: str) -> Path:
    return cache / ("models--" + repo.replace("/", "--"))


def cached_path(repo: str, filename: str, *, revision: str = "main", cache_dir: Path | None = None) -> Path | None:
    """The snapshot path of an already cached file (like huggingface_hub's try_to_load_from_cache)."""
    storage = _storage_folder(cache_dir or hub_cache_dir(), repo)
    try:
        commit = revision
        ref = paths.safe_join(storage, "refs", revision)
        if ref.is_file():
            commit = ref.read_text().strip()
        p = paths.safe_join(storage, "snapshots", commit, filename)
    except (ValueError, OSError):  # a name from outside that leads out of the cache: not a cached file
        return None
    return p if p.exists() else None


def _link(pointer: Path, blob: Path) -> None:
    pointer.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        pointer.unlink()
    try:
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    except OSError:
        # No symlinks (Windows without developer mode): the Hub then moves the blob, we copy-free link.
        try:
            os.link(blob, pointer)
        except OSError:
            os.replace(blob, pointer)


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


def changed_files(repo: str, filename: str, local: list[Path], *, revision: str = "main", token: str | None = None,
                  endpoint: str | None = None) -> list[str]:
    """The files of a local copy of ``repo/filename`` (``local``: its paths, shards in order) whose
    sha256 is not the one the Hub states; [] when every one matches. Raises what repo_info raises."""
    files = get_model_files(repo, filename, revision=revision, token=token, endpoint=endpoint)
    by_name = {p.name: p for p in local}
    return [f.filename for f in files
            if f.sha256 and (f.basename not in by_name or not verified_copy(by_name[f.basename], f.sha256))]


def file_metadata(repo: str, filename: str, *, revision: str = "main", token: str | None = None,
                  endpoint: str | None = None) -> Any:
    """The Hub's HEAD answer for one file (HfFileMetadata: commit_hash, etag, location, size)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    tok = resolve_token(token)
    ep = _endpoint(endpoint)

    def call() -> Any:
        try:
            return get_hf_file_metadata(hf_hub_url(repo, filename, revision=revision, endpoint=ep),
                                        token=tok or False, endpoint=ep, timeout=api_timeout())
        except Exception as exc:
            raise _translate(exc, repo, filename, tok, endpoint) from None

    return within_deadline(call, f"about {repo}/{filename}")


def download_model(
    repo: str,
    filename: str,
    *,
    revision: str = "main",
    dest_dir: Path | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    on_progress: ProgressCallback | None = None,
    on_file: Callable[[HubFile, int, int], None] | None = None,
    cancel_event: threading.Event | None = None,
    client: httpx2.Client | None = None,
    sleep: Callable[[float], None] | None = None,
    cache_dir: Path | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[Path]:
    """Download ``filename`` (and the rest of its split set) from ``repo``; return the local paths.

    Without ``dest_dir`` the files go to the Hub cache layout (``cache_dir`` or ``hub_cache_dir()``);
    with it, to ``dest_dir/<filename>``. Files already there are not fetched again. ``on_progress``
    gets bytes done/total over the whole set; ``on_file(file, index, count)`` announces each file.
    A file already there counts only when it has the Hub's sha256 (:func:`verified_copy`); one
    that does not is fetched again and ``on_note`` told why. Raises the HubError subclasses,
    OfflineError, DiskFullError, ChecksumMismatchError or DownloadCancelled, each with a message
    that says what to do.
    """
    tok = resolve_token(token)
    ep = _endpoint(endpoint)
    cache = cache_dir or hub_cache_dir()
    storage = _inside(cache, _storage_folder(cache, repo).name, what="repo name", remote=False)
    # The user's own words are checked before anything is asked of the Hub.
    if dest_dir is not None:
        _inside(Path(dest_dir), filename, what="file name", remote=False)
    else:
        _inside(storage, "snapshots", "commit", filename, what="file name", remote=False)  # "commit": any name
        _inside(storage, "refs", revision, what="revision", remote=False)
    info = repo_info(repo, revision=revision, token=tok, endpoint=ep)
    files = get_model_files(repo, filename, info=info)
    sizes = [f.size or 0 for f in files]
    total = sum(sizes) if all(f.size is not None for f in files) else None
    results: list[Path] = []
    base = 0
    kw: dict[str, Any] = {"sleep": sleep} if sleep is not None else {}

    def fresh_meta(name: str) -> Any:
        return file_metadata(repo, name, revision=revision, token=tok, endpoint=ep)

    for index, f in enumerate(files):
        if on_file is not None:
            on_file(f, index, len(files))
        meta = file_metadata(repo, f.filename, revision=revision, token=tok, endpoint=ep)
        size = meta.size if meta.size is not None else f.size
        etag = meta.etag or f.sha256 or f.blob_id
        commit = meta.commit_hash or info.commit
        if dest_dir is not None:
            target = _inside(Path(dest_dir), f.filename, what="a file name", remote=True)
        else:
            target = _inside(storage, "blobs", str(etag), what="the ETag", remote=True)
            pointer = _inside(storage, "snapshots", str(commit), f.filename, what="the commit", remote=True,
                              shown=str(commit))
        if _have_copy(target, f, size, on_note):
            log.info("%s already downloaded", f.filename)
        else:
            offset = base

            def progress(done: int, _total: int | None, offset: int = offset) -> None:
                if on_progress is not None:
                    on_progress(offset + done, total)

            _fetch(f, meta, target, size, ep, tok, fresh_meta, on_progress=progress, cancel_event=cancel_event,
                   client=client, **kw)
        if dest_dir is None:
            _link(pointer, target)
            if revision != commit:
                ref = _inside(storage, "refs", revision, what="revision", remote=False)
                ref.parent.mkdir(parents=True, exist_ok=True)
                ref.write_text(str(commit))
            results.append(pointer)
        else:
            results.append(target)
        base += sizes[index]
        if on_progress is not None:
            on_progress(base, total)
    return results


def _have_copy(target: Path, f: HubFile, size: int | None, on_note: Callable[[str], None] | None) -> bool:
    """Whether ``target`` already holds ``f``: the size the Hub states and, when it states one, its sha256."""
    there = target.exists() and (size is None or target.stat().st_size == size)
    if there and f.sha256 and not verified_copy(target, f.sha256):
        if on_note is not None:
            on_note(f"{f.filename} on disk does not have the Hub's sha256 (it changed or was damaged since "
                    "it was downloaded): downloading it again.")
        return False
    return there


def _fetch(f: HubFile, meta: Any, target: Path, size: int | None, ep: str, tok: str | None,
           fresh_meta: Callable[[str], Any], **kw: Any) -> None:
    """Download one file from ``meta.location``; a signed CDN link that expired is asked for again (twice)."""
    from huggingface_hub.utils import build_hf_headers

    for attempt in range(3):
        headers = build_hf_headers(token=tok or False, library_name="beedeck")
        if not _same_origin(meta.location, ep):
            headers.pop("authorization", None)  # never send the token to the CDN
        try:
            download_file(meta.location, target, expected_sha256=f.sha256, expected_size=size, headers=headers, **kw)
            return
        except HTTPStatusFailure as exc:
            # Signed CDN links expire (about an hour): ask the Hub for a fresh one and resume.
            if exc.status_code not in (401, 403) or _same_origin(meta.location, ep) or attempt == 2:
                raise
            log.info("CDN link for %s refused (HTTP %s); asking the Hub for a new one", f.filename,
                     exc.status_code)
            meta = fresh_meta(f.filename)


def resolve_url(repo: str, filename: str, revision: str = "main", endpoint: str | None = None) -> str:
    """The Hub's /resolve URL for a file (what llama.cpp's -hf flag would fetch)."""
    return f"{_endpoint(endpoint)}/{repo}/resolve/{quote(revision, safe='')}/{quote(filename)}"
