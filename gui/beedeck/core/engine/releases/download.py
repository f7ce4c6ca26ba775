"""Prebuilt llama-server downloads from GitHub releases (BeeLlama.cpp and mainline llama.cpp).

Which release and which archive: :mod:`.index` (the newest release with a build this machine
runs, through the configured API base) and :mod:`.assets` (the asset names, the CUDA rule and
the runtime companions). The download goes through :func:`beedeck.core.download.download_file` (resume, size and
sha256 checks), the archive is unpacked without trusting its paths, and the binary is smoke-tested (probed, then
a short generation on the registry's test model: :mod:`beedeck.core.engine.smoke`) and registered. A build whose
CPU code cannot run here (it dies by SIGILL, or inside AMX code) is refused with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tarfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import httpx2

from beedeck.core import paths
from beedeck.core.download import DownloadCancelled, DownloadError, ProgressCallback, download_file
from beedeck.core.engine.caps import ProbeError
from beedeck.core.engine.probe import write_release
from beedeck.core.engine.registry import EngineRecord, EngineRegistry, Origin, caps_fields
from beedeck.core.engine.releases.assets import (
    BEE_FIRST_LINUX_CUDA,
    BEE_REPO,
    MAINLINE_REPO,
    Asset,
    AssetChoice,
    Platform,
    ReleaseError,
    host_platform,
    parse_platform,
    pick_asset,
)
from beedeck.core.engine.releases.index import (
    GITHUB_API,
    RELEASES_API_ENV,
    ReleaseIndex,
    releases_api_base,
    resolve_release,
)
from beedeck.core.engine.smoke import GenerationCheck, smoke_engine
from beedeck.core.printable import printable

__all__ = [
    "BEE_FIRST_LINUX_CUDA", "BEE_REPO", "GITHUB_API", "MAINLINE_REPO", "RELEASES_API_ENV", "Asset", "AssetChoice",
    "Platform", "ReleaseError", "download_engine", "fetch_release", "find_server", "host_platform", "parse_platform",
    "pick_asset", "releases_api_base", "resolve_release", "safe_extract",
]


def fetch_release(repo: str = BEE_REPO, tag: str | None = None, *, api_url: str = GITHUB_API,
                  client: httpx2.Client | None = None, token: str | None = None) -> dict[str, Any]:
    """The release JSON (``/releases/latest`` or ``/releases/tags/{tag}``), a binary-less release
    followed to the build its ``nightly-tag.txt`` names."""
    with ReleaseIndex(repo, api_url=api_url, token=token, client=client) as index:
        return index.follow(index.release(tag))


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
def _refuse(folder: Path, what: str, check: GenerationCheck) -> NoReturn:
    """A download whose CPU code cannot run here: its folder goes, nothing is registered, the reason is raised."""
    shutil.rmtree(folder, ignore_errors=True)
    why = check.failure.message if check.failure is not None else check.message
    raise ReleaseError(
        f"{what} was downloaded but cannot run on this machine: in its first generation {why[0].lower()}{why[1:]} "
        "BeeDeck did not register it and removed its files. Build the engine here instead (`beedeck engine build "
        "--cpu`: a build for this CPU, rebuilt without what crashes if its smoke test meets that), or pick "
        "another release (`--tag`).")


def download_engine(
    *,
    repo: str = BEE_REPO,
    tag: str | None = None,
    backend: str = "cpu",
    cuda_driver_version: str | None = None,
    os_name: str | None = None,
    arch: str | None = None,
    api_url: str | None = None,
    token: str | None = None,
    on_progress: ProgressCallback | None = None,
    on_line: Callable[[str], None] | None = None,
    cancel_event: threading.Event | None = None,
    registry: EngineRegistry | None = None,
) -> EngineRecord:
    """Download, verify, unpack, smoke-test and register a prebuilt llama-server; return its record.

    ``tag`` None: the newest release with a build for this machine (:func:`resolve_release`);
    ``api_url`` None: :func:`releases_api_base` (``BEEDECK_RELEASES_API``, the setting, GitHub).
    """
    registry = registry or EngineRegistry()
    say = on_line or (lambda _line: None)
    host_os, host_arch = host_platform()
    choice = resolve_release(repo, tag, os_name=os_name or host_os, arch=arch or host_arch, backend=backend,
                             cuda_driver_version=cuda_driver_version, token=token,
                             api_url=api_url if api_url is not None else releases_api_base())
    for note in choice.notes:
        say(note)
    total, before = choice.total_bytes or None, 0

    def overall(done: int, _size: int | None) -> None:
        if on_progress is not None:
            on_progress(before + done, total)

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
        checked = "sha256 " + asset.sha256[:12] + "…" if asset.sha256 else "size only"
        say(f"downloading {asset.name} ({(asset.size or 0) / 2**20:.1f} MiB, checked by {checked})")
        try:
            download_file(asset.url, files[asset.name], expected_sha256=asset.sha256,
                          expected_size=asset.size, on_progress=overall, cancel_event=cancel_event,
                          headers={"Accept": "application/octet-stream"})
        except DownloadCancelled:
            raise  # the partial file stays; downloading again resumes
        except DownloadError as exc:
            raise ReleaseError(f"Downloading {asset.name} failed: {exc}") from exc
        before += asset.size or 0
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
    write_release(binary, choice.tag, source=choice.asset.url)
    smoke, check = smoke_engine(binary, expect_gpu=backend == "cuda", prober=registry.prober,
                                locate=registry.smoke_model)
    say(f"smoke test: {smoke.message}")
    if check is not None and check.cpu_fault:
        _refuse(folder, f"{repo.split('/')[-1]} {choice.tag} ({choice.asset.name})", check)
    try:
        # Probed even when the smoke test failed: the record then says what it is (generation, version).
        caps_data: dict[str, Any] = caps_fields(registry.prober(str(binary)))
    except ProbeError:
        caps_data = {}
    record = EngineRecord(
        id=engine_id, origin=Origin.DOWNLOADED, binary=str(binary),
        name=f"{repo.split('/')[-1]} {choice.tag} ({backend})", source=choice.asset.url,
        build_options=[a.name for a in [choice.asset, *choice.extra]], smoke=smoke, **caps_data,
    )
    return registry.save(record)
