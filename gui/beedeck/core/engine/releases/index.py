"""Which release to download: the newest one with a build this machine runs, from whichever API base.

The 2026 release conventions (docs/reference/engine-facts.md §6.2/§6.3, field-2026-12.md):

- BeeLlama's ``/releases/latest`` is a ``vX.Y.Z`` release carrying the binaries; its ``preview-*``
  releases are prereleases and are never taken unless asked for by tag.
- mainline's ``/releases/latest`` is a semver release (``v0.6.0``) with **no binaries**, only
  ``nightly-tag.txt`` naming the ``bNNNN`` prerelease that has them: that file is followed, for a tag
  asked for by name too.
- When the newest release has no build this machine runs (the driver is older than every CUDA build,
  a CI job left an asset out, only a CUDA 13.2 build), the release list is walked back to the newest
  one that has.

The API base is api.github.com unless ``BEEDECK_RELEASES_API`` or the ``releases_api`` setting names a
mirror (GitHub Enterprise's ``https://HOST/api/v3``, a company cache serving the same paths).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx2

from beedeck.core.connection import what_happened
from beedeck.core.engine.releases.assets import (
    BEE_REPO,
    AssetChoice,
    ReleaseError,
    has_binaries,
    pick_asset,
)
from beedeck.core.settings import AppSettings, load_settings

GITHUB_API = "https://api.github.com"
RELEASES_API_ENV = "BEEDECK_RELEASES_API"
RELEASES_TOKEN_ENV = "BEEDECK_RELEASES_TOKEN"
NIGHTLY_TAG_ASSET = "nightly-tag.txt"
SUMS_ASSET = "SHA256SUMS.txt"
WALK_BACK = 30  # releases looked at when the newest has no build for this machine
_BUILD_TAG = re.compile(r"^b\d+$")  # mainline's build tags: prereleases that carry the binaries
_SAFE_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class NoLatestRelease(ReleaseError):
    """``/releases/latest`` answered 404: no stable release (a repository of prereleases only, or a wrong name)."""


def _check_base(url: str, where: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReleaseError(f"{where} is {url!r}, which is not an http(s) URL: use one like "
                           "https://github.example.com/api/v3, or remove it to use api.github.com.")
    if parts.username or parts.password:
        raise ReleaseError(f"{where} holds a user name or password: remove them from the URL "
                           "(BeeDeck never puts credentials in a URL it may show or log).")
    return url.strip().rstrip("/")


def releases_api_base(app: AppSettings | None = None) -> str:
    """The releases API base: ``BEEDECK_RELEASES_API``, else the ``releases_api`` setting, else GitHub's."""
    env = os.environ.get(RELEASES_API_ENV, "").strip()
    if env:
        return _check_base(env, f"The environment variable {RELEASES_API_ENV}")
    configured = (app if app is not None else load_settings()).releases_api
    if configured and configured.strip():
        return _check_base(configured, "The releases_api setting")
    return GITHUB_API


def release_token(api_url: str) -> str | None:
    """The token the releases API gets: ``BEEDECK_RELEASES_TOKEN`` (a mirror's, or GitHub's), else
    ``GITHUB_TOKEN`` but only for api.github.com, so a GitHub token never goes to a mirror. Read from the
    environment only: never a command-line argument, never logged."""
    own = os.environ.get(RELEASES_TOKEN_ENV, "").strip()
    if own:
        return own
    github = os.environ.get("GITHUB_TOKEN", "").strip()
    return github if github and api_url.rstrip("/") == GITHUB_API else None


class ReleaseIndex:
    """Reads one repository's releases through the API (one HTTP client, closed by :meth:`close`)."""

    def __init__(self, repo: str = BEE_REPO, *, api_url: str = GITHUB_API, token: str | None = None,
                 client: httpx2.Client | None = None) -> None:
        self.repo, self.api_url = repo, api_url.rstrip("/")
        self.token = token if token is not None else release_token(self.api_url)
        self._own = client is None
        # A short connect timeout: the wizard waits for this lookup before it offers the download.
        self.http = client or httpx2.Client(timeout=httpx2.Timeout(30.0, connect=10.0), follow_redirects=True)

    def close(self) -> None:
        if self._own:
            self.http.close()

    def __enter__(self) -> ReleaseIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, *, api: bool = True) -> httpx2.Response:
        url = self.api_url + path if api else path
        headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"} if api else {}
        if api and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            resp = self.http.get(url, headers=headers)
        except httpx2.HTTPError as exc:
            host = urlsplit(self.api_url).netloc or self.api_url
            raise ReleaseError(f"Could not reach {self.api_url}: {what_happened(exc, host)}. Check the network or "
                               f"proxy (a mirror goes in {RELEASES_API_ENV} or the releases_api setting), or "
                               "build from source.") from None
        if resp.status_code == 403 and resp.headers.get("x-ratelimit-remaining") == "0":
            raise ReleaseError("The releases API's rate limit is used up for this network: wait an hour, or set "
                               f"GITHUB_TOKEN (api.github.com) or {RELEASES_TOKEN_ENV} (any base).")
        return resp

    def release(self, tag: str | None = None) -> dict[str, Any]:
        """The release JSON (``/releases/latest`` or ``/releases/tags/{tag}``), not yet followed."""
        if tag is not None and not _SAFE_TAG.match(tag):
            raise ReleaseError(f"{tag!r} is not a release tag (letters, digits, '.', '_' and '-' only).")
        path = f"/repos/{self.repo}/releases/latest" if tag is None else f"/repos/{self.repo}/releases/tags/{tag}"
        resp = self._get(path)
        if resp.status_code == 404 and tag is None:
            raise NoLatestRelease(f"{self.repo} has no published release at {self.api_url}: check the repository "
                                  f"name, or the mirror ({RELEASES_API_ENV} / the releases_api setting).")
        if resp.status_code == 404:
            raise ReleaseError(f"{self.repo} has no release {tag}: check the tag name.")
        if resp.status_code != 200:
            raise ReleaseError(f"The releases API answered HTTP {resp.status_code} for {path}: try again later.")
        data = resp.json()
        if not isinstance(data, dict) or not isinstance(data.get("assets"), list):
            raise ReleaseError(f"Unexpected answer from {self.api_url}{path}: not a release.")
        return data

    def releases(self, count: int = WALK_BACK) -> list[dict[str, Any]]:
        """The newest ``count`` releases, prereleases included, newest first (the API's order)."""
        resp = self._get(f"/repos/{self.repo}/releases?per_page={min(max(count, 1), 100)}")
        if resp.status_code != 200:
            raise ReleaseError(f"The releases API answered HTTP {resp.status_code} for the release list.")
        data = resp.json()
        if not isinstance(data, list):
            raise ReleaseError(f"Unexpected answer from {self.api_url}: the release list is not a list.")
        return [r for r in data if isinstance(r, dict) and isinstance(r.get("assets"), list)]

    def _asset_text(self, release: dict[str, Any], name: str) -> str | None:
        asset = next((a for a in release["assets"] if a.get("name") == name), None)
        if asset is None:
            return None
        resp = self._get(str(asset.get("browser_download_url", "")), api=False)
        if resp.status_code != 200:
            raise ReleaseError(f"{name} of {release.get('tag_name')} could not be read (HTTP {resp.status_code}).")
        return resp.text[:100_000]

    def follow(self, release: dict[str, Any]) -> dict[str, Any]:
        """A release without binaries whose ``nightly-tag.txt`` names a build: that build's release."""
        if has_binaries(release):
            return release
        text = self._asset_text(release, NIGHTLY_TAG_ASSET)
        if text is None:
            return release
        build = text.strip().split()[0] if text.strip() else ""
        if not _SAFE_TAG.match(build):
            raise ReleaseError(f"{NIGHTLY_TAG_ASSET} of {release.get('tag_name')} names no build tag ({build[:40]!r}).")
        target = self.release(build)
        target["followed_from"] = release.get("tag_name", "")
        return target

    def fill_checksums(self, release: dict[str, Any], choice: AssetChoice) -> None:
        """Take a missing sha256 from the release's ``SHA256SUMS.txt`` (BeeLlama publishes one)."""
        missing = [a for a in [choice.asset, *choice.extra] if not a.sha256]
        if not missing:
            return
        text = self._asset_text(release, SUMS_ASSET) if any(
            a.get("name") == SUMS_ASSET for a in release["assets"]) else None
        sums: dict[str, str] = {}
        for line in (text or "").splitlines():
            m = re.match(r"^([0-9a-fA-F]{64})\s+\*?(\S+)\s*$", line)
            if m:
                sums[m.group(2)] = m.group(1).lower()
        for asset in missing:
            asset.sha256 = sums.get(asset.name)
            if asset.sha256 is None:
                choice.notes.append(f"{asset.name} has no published sha256: it is checked by its size only.")


def resolve_release(repo: str, tag: str | None = None, *, os_name: str, arch: str, backend: str,
                    cuda_driver_version: str | None = None, api_url: str = GITHUB_API, token: str | None = None,
                    accept: Callable[[str], bool] | None = None, client: httpx2.Client | None = None) -> AssetChoice:
    """The archive to download: the newest release (or ``tag``) with a build for this machine.

    ``accept`` narrows the releases considered by tag (for example BeeLlama 0.1-0.3 for a Gen A pair).
    Raises :class:`ReleaseError` naming what was looked at and what to do instead.
    """
    with ReleaseIndex(repo, api_url=api_url, token=token, client=client) as index:
        def pick(release: dict[str, Any]) -> AssetChoice:
            choice = pick_asset(release, os_name, arch, backend, cuda_driver_version)
            choice.repo = repo
            if release.get("followed_from"):
                choice.notes.insert(0, f"{release['followed_from']} carries no binaries; its {NIGHTLY_TAG_ASSET} "
                                       f"names {choice.tag}, which does.")
            index.fill_checksums(release, choice)
            return choice

        if tag is not None:
            return pick(index.follow(index.release(tag)))
        first_error: ReleaseError | None = None
        walk_error: ReleaseError | None = None
        no_latest: ReleaseError | None = None
        tried: set[str] = set()
        try:
            newest = index.follow(index.release(None))
            tried.add(str(newest.get("tag_name")))
            if accept is None or accept(str(newest.get("tag_name", ""))):
                return pick(newest)
        except NoLatestRelease as exc:
            no_latest = exc  # only prereleases, perhaps: the list may still hold a build
        except ReleaseError as exc:
            first_error = exc
            if "Could not reach" in str(exc) or "rate limit" in str(exc):
                raise
        for release in index.releases():
            name = str(release.get("tag_name", ""))
            if name in tried or release.get("draft") or (release.get("prerelease") and not _BUILD_TAG.match(name)):
                continue
            if (accept is not None and not accept(name)) or not has_binaries(release):
                continue
            try:
                choice = pick(release)
            except ReleaseError as exc:
                walk_error = walk_error or exc
                continue
            if first_error is not None:
                choice.notes.insert(0, f"The newest release has no build for this machine: {first_error} "
                                       f"{choice.tag} is the newest release that has one.")
            elif accept is not None:
                choice.notes.insert(0, f"{choice.tag} is the newest release of the engine this pair needs.")
            return choice
        if first_error is not None:
            raise ReleaseError(f"{first_error} No older release among the last {WALK_BACK} has one either.")
        if walk_error is not None:
            raise walk_error
        if no_latest is not None:
            raise no_latest
        raise ReleaseError(f"None of {repo}'s last {WALK_BACK} releases fits: build from source instead "
                           "(`beedeck engine build`).")
