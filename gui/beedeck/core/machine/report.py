"""What BeeDeck knows about the machine: GPUs, system facts, and the report ``detect()`` returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

MIB = 1024 * 1024
GIB = 1024 * MIB

Source = Literal["nvml", "nvidia-smi", "none"]


@dataclass
class GpuInfo:
    """One NVIDIA GPU. Memory in bytes; optional readings are None where the board does not report them."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    memory_total: int = 0
    memory_reserved: int | None = None
    memory_used: int = 0
    memory_free: int = 0
    compute_capability: tuple[int, int] | None = None
    cuda_arch: str | None = None  # "89" for 8.9: what CMAKE_CUDA_ARCHITECTURES wants
    utilization: int | None = None  # percent
    temperature: int | None = None  # °C
    power_w: float | None = None
    power_limit_w: float | None = None


@dataclass
class SystemInfo:
    """RAM (bytes), CPU cores and the free space of the folder models go to."""

    ram_total: int | None = None
    ram_available: int | None = None
    cpu_cores_physical: int | None = None
    cpu_cores_logical: int | None = None
    disk_path: str | None = None
    disk_free: int | None = None


@dataclass
class HardwareReport:
    """The result of ``detect()``. ``reason`` is for people (cause + remedy) and is empty when a GPU
    was found; ``detail`` is the technical trail, e.g. ``nvml: ...; nvidia-smi: not installed``."""

    gpus: list[GpuInfo] = field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # highest CUDA the driver supports, "13.0"
    source: Source = "none"
    reason: str = ""
    detail: str = ""
    system: SystemInfo = field(default_factory=SystemInfo)

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def best_gpu(self) -> GpuInfo | None:
        """The GPU with the most free memory (ties: most total memory, then lowest index)."""
        if not self.gpus:
            return None
        return max(self.gpus, key=lambda g: (g.memory_free, g.memory_total, -g.index))

    @property
    def total_vram(self) -> int:
        return sum(g.memory_total for g in self.gpus)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for gpu in data["gpus"]:
            cc = gpu["compute_capability"]
            gpu["compute_capability"] = list(cc) if cc is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HardwareReport:
        gpus = []
        for g in data.get("gpus", []):
            g = dict(g)
            cc = g.get("compute_capability")
            g["compute_capability"] = (int(cc[0]), int(cc[1])) if cc else None
            gpus.append(GpuInfo(**g))
        return cls(
            gpus=gpus,
            driver_version=data.get("driver_version"),
            cuda_driver_version=data.get("cuda_driver_version"),
            source=data.get("source", "none"),
            reason=data.get("reason", ""),
            detail=data.get("detail", ""),
            system=SystemInfo(**data.get("system", {})),
        )


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f}"


def system_rows(system: SystemInfo) -> list[tuple[str, str]]:
    """The RAM, the CPU cores and the models folder's free disk, as (what, value) rows: ``beedeck detect``
    prints them as "RAM: ..." lines, the wizard's first page as a table (one wording for both)."""
    rows = [("RAM", f"{_gib(system.ram_available)} GiB available of {_gib(system.ram_total)} GiB"),
            ("CPU", f"{system.cpu_cores_physical or '?'} cores, {system.cpu_cores_logical or '?'} threads")]
    if system.disk_path is not None:
        rows.append(("Disk", f"{_gib(system.disk_free)} GiB free in {system.disk_path}"))
    return rows


def cuda_version_text(value: int | None) -> str | None:
    """NVML's CUDA version integer to text: 13000 -> "13.0", 12040 -> "12.4"."""
    if not value or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def cuda_arch(cc: tuple[int, int] | None) -> str | None:
    return f"{cc[0]}{cc[1]}" if cc else None
