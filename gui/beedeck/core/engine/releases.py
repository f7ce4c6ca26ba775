"""Prebuilt llama-server downloads from GitHub releases (BeeLlama.cpp and mainline llama.cpp).

Asset names follow docs/reference/engine-facts.md §6.2/§6.3: ``<prefix>-<tag>-bin-<platform>.<zip|tar.gz>`` with
platforms such as ``ubuntu-x64``, ``ubuntu-cuda-12.4-x64``, ``win-cpu-x64``, ``win-cuda-12.4-x64``,
``macos-arm64``; Windows CUDA builds need the matching ``cudart`` archive unpacked into the same
folder. The download goes through :func:`beedeck.core.download.download_file` (resume, size and
sha256 checks), the archive is unpacked without trusting its paths, and the binary is smoke-tested
and registered.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import stat
import sys
import tarfile
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2

from beedeck.core import paths
from beedeck.core.download import DownloadCancelled, DownloadError, ProgressCallback, download_file
from beedeck.core.engine.caps import ProbeError
from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin, caps_fields, smoke_test
from beedeck.core.printable import printable

GITHUB_API = "https://api.github.com"
BEE_REPO = "Anbeeld/beellama.cpp"
MAINLINE_REPO = "ggml-org/llama.cpp"
BEE_FIRST_LINUX_CUDA = (0, 4, 1)

_ASSET = re.compile(
    r"^(?P<prefix>[A-Za-z0-9_.]+?)-(?P<tag>[^-]+(?:-v[\d.]+)?)-bin-(?P<plat>.+?)\.(?P<ext>zip|tar\.gz|tgz)$"
)
_CUDART = re.compile(r"cudart.*?(?P<os>win|ubuntu|linux)-cuda-(?P<cuda>\d+\.\d+)-(?P<arch>x64|arm64)\.(zip|tar\.gz)$")


class ReleaseError(RuntimeError):
    """No usable release or asset; the message says why and what to do instead."""


@dataclass(frozen=True)
class Platform:
    """What an asset name says about where it runs."""

    os: str  # linux | windows | macos
    arch: str  # x64 | arm64 | ...
    backend: str  # cpu | cuda | vulkan | rocm | hip | sycl | ...
    cuda: tuple[int, int] | None = None


def parse_platform(plat: str) -> Platform | None:
    """``ubuntu-cuda-12.4-x64`` -> Platform("linux", "x64", "cuda", (12, 4)); None for unknown shapes."""
    parts = plat.split("-")
    os_map = {"ubuntu": "linux", "linux": "linux", "win": "windows", "macos": "macos"}
    if len(parts) < 2 or parts[0] not in os_map:
        return None
    os_name, arch, middle = os_map[parts[0]], parts[-1], parts[1:-1]
    if arch not in ("x64", "arm64", "s390x"):
        return None
    if not middle or middle == ["cpu"]:
        return Platform(os_name, arch, "cpu")
    backend = middle[0]
    cuda = None
    if backend == "cuda" and len(middle) > 1 and re.fullmatch(r"\d+\.\d+", middle[1]):
        major, minor = middle[1].split(".")
        cuda = (int(major), int(minor))
    return Platform(os_name, arch, backend, cuda)


@dataclass
class Asset:
    name: str
    url: str
    size: int | None = None
    sha256: str | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Asset:
        digest = data.get("digest") or ""
        sha = digest.split(":", 1)[1] if digest.startswith("sha256:") else None
        return cls(data["name"], data["browser_download_url"], data.get("size"), sha)


@dataclass
class AssetChoice:
    """The archive(s) to download for one machine; ``extra`` is the Windows cudart runtime."""

    tag: str
    asset: Asset
    platform: Platform
    extra: list[Asset] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def host_platform() -> tuple[str, str]:
    os_name = {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return os_name, arch


def _version(tag: str) -> tuple[int, ...] | None:
    m = re.search(r"v?(\d+)\.(\d+)\.(\d+)", tag)
    return tuple(int(x) for x in m.groups()) if m else None


def _cuda_tuple(text: str | None) -> tuple[int, int] | None:
    nums = re.findall(r"\d+", text or "")
    return (int(nums[0]), int(nums[1]) if len(nums) > 1 else 0) if nums else None


def pick_asset(release: dict[str, Any], os_name: str, arch: str, backend: str,
               cuda_driver_version: str | None = None) -> AssetChoice:
    """Choose the archive for (os, arch, backend) from a GitHub release JSON.

    For CUDA, the newest toolkit build the driver supports (driver CUDA >= asset CUDA); with an
    unknown driver, the oldest (most compatible) one. Raises :class:`ReleaseError` with a remedy.
    """
    tag = str(release.get("tag_name", ""))
    candidates: list[tuple[Asset, Platform]] = []
    cudarts: list[tuple[Asset, str, tuple[int, int], str]] = []
    for raw in release.get("assets", []):
        asset = Asset.from_api(raw)
        m = _CUDART.search(asset.name)
        if m and "cudart" in asset.name:
            cuda = (int(m["cuda"].split(".")[0]), int(m["cuda"].split(".")[1]))
            cudarts.append((asset, "windows" if m["os"] == "win" else "linux", cuda, m["arch"]))
            continue
        am = _ASSET.match(asset.name)
        plat = parse_platform(am["plat"]) if am else None
        if plat is not None:
            candidates.append((asset, plat))
    fitting = [(a, p) for a, p in candidates if p.os == os_name and p.arch == arch and p.backend == backend]
    is_bee = tag and any(a.name.startswith("beellama-") for a, _ in candidates)
    if not fitting:
        have = ", ".join(sorted(a.name for a, p in candidates if p.os == os_name)) or "none"
        if is_bee and backend == "cuda" and os_name == "linux":
            ver = _version(tag)
            if ver is not None and ver < BEE_FIRST_LINUX_CUDA:
                raise ReleaseError(
                    f"BeeLlama ships Linux CUDA builds only from v0.4.1; {tag} has none. Download a newer "
                    "release, or build this one from source (`beedeck engine build --ref "
                    f"{tag}`), which also optimises for your GPU."
                )
        raise ReleaseError(
            f"Release {tag or '?'} has no {backend} build for {os_name}/{arch} (its {os_name} assets: {have}). "
            "Build from source instead (`beedeck engine build`), or pick another backend/release."
        )
    notes: list[str] = []
    if backend == "cuda":
        driver = _cuda_tuple(cuda_driver_version)
        versions = sorted({p.cuda for _, p in fitting if p.cuda is not None})
        if driver is None:
            wanted = versions[0] if versions else None
            notes.append("Driver CUDA version unknown: picked the oldest CUDA build, which the most drivers run.")
        else:
            ok = [v for v in versions if v <= driver]
            if not ok:
                need = ".".join(map(str, versions[0])) if versions else "?"
                raise ReleaseError(
                    f"Your NVIDIA driver supports CUDA {cuda_driver_version}, but the oldest CUDA build of "
                    f"{tag} needs CUDA {need}. Update the driver ({'>= 580' if versions and versions[0][0] >= 13 else '>= 550'}), "
                    "or build from source with your installed toolkit."
                )
            wanted = ok[-1]
        fitting = [(a, p) for a, p in fitting if p.cuda == wanted]
    asset, plat = fitting[0]
    extra: list[Asset] = []
    if backend == "cuda" and plat.cuda is not None:
        runtime = [a for a, o, c, ar in cudarts if o == os_name and c == plat.cuda and ar == arch]
        if runtime:
            extra.append(runtime[0])
        elif os_name == "windows":
            notes.append(f"No cudart-…-cuda-{plat.cuda[0]}.{plat.cuda[1]} archive in {tag}: the CUDA runtime DLLs "
                         "must come from an installed CUDA Toolkit of that version.")
    return AssetChoice(tag, asset, plat, extra, notes)


def fetch_release(repo: str = BEE_REPO, tag: str | None = None, *, api_url: str = GITHUB_API,
                  client: httpx2.Client | None = None, token: str | None = None) -> dict[str, Any]:
    """The release JSON (``/releases/latest`` or ``/releases/tags/{tag}``)."""
    path = f"/repos/{repo}/releases/latest" if tag is None else f"/repos/{repo}/releases/tags/{tag}"
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    own = client is None
    http = client or httpx2.Client(timeout=30.0, follow_redirects=True)
    try:
        resp = http.get(api_url.rstrip("/") + path, headers=headers)
    except httpx2.HTTPError as exc:
        raise ReleaseError(f"Could not reach {api_url} ({type(exc).__name__}): check the network or proxy, "
                           "or build from source.") from None
    finally:
        if own:
            http.close()
    if resp.status_code == 404:
        raise ReleaseError(f"{repo} has no release {'latest' if tag is None else tag}: check the tag name.")
    if resp.status_code == 403 and resp.headers.get("x-ratelimit-remaining") == "0":
        raise ReleaseError("GitHub's API rate limit is used up for this network: wait an hour or set GITHUB_TOKEN.")
    if resp.status_code != 200:
        raise ReleaseError(f"GitHub answered HTTP {resp.status_code} for {path}: try again later.")
    data = resp.json()
    if not isinstance(data, dict) or "assets" not in data:
        raise ReleaseError(f"Unexpected answer from {api_url}{path}: not a release.")
    return data


# ------------------------------------------------------------------------------------ unpacking
def _safe_target(dest: Path, name: str) -> Path:
    if not name or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        raise ReleaseError(f"The archive holds an absolute path ({name!r}); refusing to unpack it.")
    target = (dest / name).resolve()
    if target != dest and dest not in target.parents:
        raise ReleaseError(f"The archive tries to write outside its folder ({name!r}); refusing to unpack it.")
    return target


def safe_extract(archive: Path, dest: Path) -> None:
    """Unpack a .zip or .tar.gz into ``dest``: no absolute paths, no ``..``, links only inside ``dest``,
    no device files; executable bits are kept."""
    dest.mkdir(parents=True, exist_ok=True)
    dest = dest.resolve()
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                target = _safe_target(dest, info.filename)
                mode = (info.external_attr >> 16) & 0o7777
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise ReleaseError(f"The archive holds a symbolic link ({info.filename}); refusing to unpack it.")
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
                if mode & 0o111:
                    target.chmod((mode & 0o755) | 0o600)
        return
    with tarfile.open(archive, "r:*") as tf:
        members = tf.getmembers()
        for m in members:
            target = _safe_target(dest, m.name)
            if m.issym() or m.islnk():
                link_base = target.parent if m.issym() else dest
                _safe_target(dest, os.path.relpath(link_base / m.linkname, dest))
            elif not (m.isfile() or m.isdir()):
                raise ReleaseError(f"The archive holds a special file ({m.name}); refusing to unpack it.")
        tf.extractall(dest, members=members, filter="data")


def find_server(root: Path) -> Path | None:
    """The shallowest ``llama-server`` (``.exe``) under ``root``."""
    names = ("llama-server.exe",) if os.name == "nt" else ("llama-server",)
    found = [p for p in root.rglob("*") if p.name in names and p.is_file()]
    return min(found, key=lambda p: (len(p.parts), str(p))) if found else None


# ------------------------------------------------------------------------------------ the flow
def download_engine(
    *,
    repo: str = BEE_REPO,
    tag: str | None = None,
    backend: str = "cpu",
    cuda_driver_version: str | None = None,
    os_name: str | None = None,
    arch: str | None = None,
    api_url: str = GITHUB_API,
    token: str | None = None,
    on_progress: ProgressCallback | None = None,
    on_line: Callable[[str], None] | None = None,
    cancel_event: threading.Event | None = None,
    registry: EngineRegistry | None = None,
) -> EngineRecord:
    """Download, verify, unpack, smoke-test and register a prebuilt llama-server; return its record."""
    registry = registry or EngineRegistry()
    say = on_line or (lambda _line: None)
    host_os, host_arch = host_platform()
    release = fetch_release(repo, tag, api_url=api_url, token=token)
    choice = pick_asset(release, os_name or host_os, arch or host_arch, backend, cuda_driver_version)
    for note in choice.notes:
        say(note)
    engine_id = re.sub(r"[^a-z0-9._-]+", "-", f"{repo.split('/')[-1]}-{choice.tag}-{backend}".lower())
    folder = registry.engine_dir(engine_id)
    downloads = folder / "downloads"
    unpacked = folder / "bin"
    files = {}
    for asset in [choice.asset, *choice.extra]:  # the names are GitHub's answer: they must stay in the folder
        try:
            files[asset.name] = paths.safe_join(downloads, asset.name)
        except ValueError:
            raise ReleaseError(f"The release names an asset {printable(asset.name)!r} that would be written outside "
                               f"{downloads}: BeeDeck refused it and wrote nothing. The release server is broken "
                               "or hostile; pick another release.") from None
    for asset in [choice.asset, *choice.extra]:
        say(f"downloading {asset.name} ({(asset.size or 0) / 2**20:.1f} MiB)")
        try:
            download_file(asset.url, files[asset.name], expected_sha256=asset.sha256,
                          expected_size=asset.size, on_progress=on_progress, cancel_event=cancel_event,
                          headers={"Accept": "application/octet-stream"})
        except DownloadCancelled:
            raise  # the partial file stays; downloading again resumes
        except DownloadError as exc:
            raise ReleaseError(f"Downloading {asset.name} failed: {exc}") from exc
    if unpacked.exists():
        shutil.rmtree(unpacked)  # a half-unpacked earlier attempt: start the unpack over
    for asset in [choice.asset, *choice.extra]:
        say(f"unpacking {asset.name}")
        safe_extract(files[asset.name], unpacked)
    binary = find_server(unpacked)
    if binary is None:
        raise ReleaseError(f"{choice.asset.name} holds no llama-server; pick another asset or build from source.")
    if choice.extra:
        # cudart DLLs must sit next to the binary (engine-facts §6.2): move them there if the
        # runtime archive had its own folder.
        for lib in unpacked.rglob("*"):
            if lib.is_file() and lib.parent != binary.parent and re.search(r"cu(da|blas)", lib.name):
                shutil.move(str(lib), binary.parent / lib.name)
    smoke = smoke_test(binary, expect_gpu=backend == "cuda", prober=registry.prober)
    say(f"smoke test: {smoke.message}")
    try:
        caps_data: dict[str, Any] = caps_fields(registry.prober(str(binary))) if smoke.ok else {}
    except ProbeError:
        caps_data = {}
    record = EngineRecord(
        id=engine_id, origin=Origin.DOWNLOADED, binary=str(binary),
        name=f"{repo.split('/')[-1]} {choice.tag} ({backend})", source=choice.asset.url,
        build_options=[a.name for a in [choice.asset, *choice.extra]], smoke=smoke, **caps_data,
    )
    return registry.save(record)
