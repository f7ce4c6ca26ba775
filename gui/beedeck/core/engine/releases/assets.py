"""What a release's asset list offers this machine: the archive to download and its runtime companion.

Asset names follow docs/reference/engine-facts.md §6.2/§6.3 and field-2026-12.md (releases and builds):

- BeeLlama: ``beellama-<ver>-bin-<platform>.<zip|tar.gz>``, platforms such as ``ubuntu-x64``,
  ``ubuntu-cuda-12.4-x64``, ``ubuntu-cuda-13.3-x64``, ``win-cpu-x64``, ``win-cuda-12.4-x64``; a Windows
  CUDA zip needs ``beellama-<ver>-cudart-win-cuda-<cuda>-x64.zip`` unpacked into the same folder.
- mainline: ``llama-bNNNN-bin-<platform>``; Linux CUDA 12.8/13.4 tarballs come with
  ``cudart-llama-bNNNN-bin-ubuntu-cuda-<cuda>-<arch>.tar.gz`` (tag in the name), Windows CUDA 12.4/13.4
  zips with ``cudart-llama-bin-win-cuda-<cuda>-<arch>.zip`` (no tag).

A CUDA build is runnable when the driver's CUDA version is at least the build's (a driver runs every
older runtime; a newer runtime's PTX cannot be JIT-compiled by an older driver). CUDA 13.2 builds are
never picked: that toolkit miscompiles low-bit quants such as IQ3 (beellama.cpp issue 113).
"""

from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass, field
from typing import Any

BEE_REPO = "Anbeeld/beellama.cpp"
MAINLINE_REPO = "ggml-org/llama.cpp"
BEE_FIRST_LINUX_CUDA = (0, 4, 1)
# Toolkits whose builds are never downloaded, with the reason shown to the user.
BAD_CUDA: dict[tuple[int, int], str] = {
    (13, 2): "CUDA 13.2 builds miscompile low-bit quants such as IQ3 (beellama.cpp issue 113)",
}

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
    """The archive(s) to download for one machine; ``extra`` is the CUDA runtime companion."""

    tag: str
    asset: Asset
    platform: Platform
    extra: list[Asset] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repo: str = ""

    @property
    def total_bytes(self) -> int:
        return sum(a.size or 0 for a in [self.asset, *self.extra])

    def summary(self) -> str:
        """``llama-b11434-bin-ubuntu-cuda-12.8-x64.tar.gz (512 MiB) + its CUDA runtime (420 MiB)``."""
        text = f"{self.asset.name} ({(self.asset.size or 0) / 2**20:.0f} MiB)"
        for extra in self.extra:
            text += f" + its CUDA runtime {extra.name} ({(extra.size or 0) / 2**20:.0f} MiB)"
        return text


def host_platform() -> tuple[str, str]:
    os_name = {"linux": "linux", "win32": "windows", "darwin": "macos"}.get(sys.platform, sys.platform)
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return os_name, arch


def tag_version(tag: str) -> tuple[int, ...] | None:
    """``v0.4.7`` / ``preview-v0.4.7`` -> (0, 4, 7); None for build tags such as ``b11434``."""
    m = re.search(r"v?(\d+)\.(\d+)\.(\d+)", tag)
    return tuple(int(x) for x in m.groups()) if m else None


def cuda_tuple(text: str | None) -> tuple[int, int] | None:
    """"13.0" / "12" -> (13, 0) / (12, 0); None when unknown."""
    nums = re.findall(r"\d+", text or "")
    return (int(nums[0]), int(nums[1]) if len(nums) > 1 else 0) if nums else None


def _cuda_text(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def has_binaries(release: dict[str, Any]) -> bool:
    """Whether the release carries any ``-bin-`` archive (mainline's semver releases carry none)."""
    return any(_ASSET.match(str(a.get("name", ""))) for a in release.get("assets", []))


def _driver_needed(cuda: tuple[int, int]) -> str:
    return ">= 580" if cuda[0] >= 13 else ">= 570" if cuda >= (12, 8) else ">= 550"


def pick_asset(release: dict[str, Any], os_name: str, arch: str, backend: str,
               cuda_driver_version: str | None = None) -> AssetChoice:
    """Choose the archive for (os, arch, backend) from a GitHub release JSON.

    For CUDA, the newest toolkit build the driver runs (driver CUDA >= build CUDA), never a CUDA 13.2
    build; on Windows a build whose cudart runtime the release carries is preferred over one without.
    With an unknown driver, the oldest (most compatible) build. Raises :class:`ReleaseError` with a remedy.
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
            ver = tag_version(tag)
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

    def runtime(cuda: tuple[int, int] | None) -> Asset | None:
        found = [a for a, o, c, ar in cudarts if o == os_name and c == cuda and ar == arch]
        return found[0] if found else None

    notes: list[str] = []
    if backend == "cuda":
        versions = sorted({p.cuda for _, p in fitting if p.cuda is not None})
        for bad in [v for v in versions if v in BAD_CUDA]:
            notes.append(f"Skipped the CUDA {_cuda_text(bad)} build: {BAD_CUDA[bad]}.")
        usable = [v for v in versions if v not in BAD_CUDA]
        if versions and not usable:
            raise ReleaseError(
                f"Release {tag} has only CUDA {', '.join(map(_cuda_text, versions))} builds for {os_name}/{arch}, "
                f"which BeeDeck never installs ({BAD_CUDA[versions[0]]}). Pick another release, or build from source."
            )
        driver = cuda_tuple(cuda_driver_version)
        if driver is None:
            ok = usable[:1]
            notes.append("Driver CUDA version unknown: picked the oldest CUDA build, which the most drivers run.")
        else:
            ok = [v for v in usable if v <= driver]
            if not ok:
                need = _cuda_text(usable[0]) if usable else "?"
                raise ReleaseError(
                    f"Your NVIDIA driver supports CUDA {cuda_driver_version}, but the oldest CUDA build of "
                    f"{tag} needs CUDA {need}. Update the driver ({_driver_needed(usable[0]) if usable else '>= 550'}), "
                    "or build from source with your installed toolkit."
                )
        if os_name == "windows" and len(ok) > 1 and any(runtime(v) for v in ok):
            for v in [v for v in ok if runtime(v) is None]:
                notes.append(f"Skipped the CUDA {_cuda_text(v)} build: {tag} has no cudart runtime archive for it.")
            ok = [v for v in ok if runtime(v) is not None]
        wanted = ok[-1] if ok else None
        fitting = [(a, p) for a, p in fitting if p.cuda == wanted]
    asset, plat = fitting[0]
    extra: list[Asset] = []
    if backend == "cuda" and plat.cuda is not None:
        companion = runtime(plat.cuda)
        if companion is not None:
            extra.append(companion)
        elif os_name == "windows":
            notes.append(f"No cudart-…-cuda-{_cuda_text(plat.cuda)} archive in {tag}: the CUDA runtime DLLs "
                         "must come from an installed CUDA Toolkit of that version.")
    return AssetChoice(tag, asset, plat, extra, notes)
