"""A stand-in for the ``pynvml`` module (nvidia-ml-py) with the real shapes, and a canned ``nvidia-smi``.

Everything that NVML hands back is built from the installed pynvml itself: its exception classes
(``pynvml.NVMLError_NotSupported()`` etc.), its ctypes structs (``c_nvmlMemory_v2_t``,
``c_nvmlMemory_t``, ``c_nvmlUtilization_t``, ``nvmlPciInfo_t``) and its ``nvmlFriendlyObject`` for
process lists, so attribute names and types match the real library. Only the values are canned.

H200 values and the nvidia-smi text were recorded on a real 2 x NVIDIA H200 machine (driver
580.159.04, nvidia-ml-py 13.610.43) with ``packaging/gpu-check/check_gpu.py``. The RTX 4090 / 3090
totals are what those boards report (24564 / 24576 MiB); their reserved/used/power numbers are
plausible, not recorded.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml

MIB = 1024 * 1024


@dataclass
class FakeGpu:
    """One GPU as NVML would report it. ``errors`` maps an NVML function name to the exception class
    that call raises on this GPU (e.g. ``{"nvmlDeviceGetPowerUsage": pynvml.NVMLError_NotSupported}``)."""

    name: str
    uuid: str
    bus_id: str
    total: int
    reserved: int
    used: int  # v2 "used": without the driver's reserve
    cc: tuple[int, int]
    util_gpu: int = 0
    util_mem: int = 0
    temp: int = 35
    power_mw: int = 80000
    limit_mw: int = 700000
    processes: dict[int, int | None] = field(default_factory=dict)  # pid -> usedGpuMemory bytes
    errors: dict[str, type[pynvml.NVMLError]] = field(default_factory=dict)

    @property
    def free(self) -> int:
        return self.total - self.reserved - self.used


def h200(index: int = 0) -> FakeGpu:
    """Recorded: memory v2 total/reserved/used/free 150754820096 644939776 0 150109880320."""
    uuids = ["GPU-ae6403f3-2923-34ce-ec33-d3b2f5ea096d", "GPU-18250456-1f9d-21f5-c7c8-5f3088cfcf3e"]
    return FakeGpu(
        name="NVIDIA H200",
        uuid=uuids[index % 2],
        bus_id=f"00000000:00:0{6 + index}.0",
        total=150754820096,
        reserved=644939776,
        used=0,
        cc=(9, 0),
        temp=35,
        power_mw=80004,
        limit_mw=700000,
        errors={"nvmlDeviceGetFanSpeed": pynvml.NVMLError_NotSupported},
    )


def rtx4090() -> FakeGpu:
    return FakeGpu(
        name="NVIDIA GeForce RTX 4090",
        uuid="GPU-4090aaaa-0000-0000-0000-000000000001",
        bus_id="00000000:01:00.0",
        total=24564 * MIB,
        reserved=387 * MIB,
        used=1210 * MIB,
        cc=(8, 9),
        util_gpu=3,
        temp=41,
        power_mw=31500,
        limit_mw=450000,
    )


def rtx3090() -> FakeGpu:
    return FakeGpu(
        name="NVIDIA GeForce RTX 3090",
        uuid="GPU-3090bbbb-0000-0000-0000-000000000002",
        bus_id="00000000:02:00.0",
        total=24576 * MIB,
        reserved=300 * MIB,
        used=8 * MIB,
        cc=(8, 6),
        temp=30,
        power_mw=22000,
        limit_mw=350000,
    )


def laptop_4060() -> FakeGpu:
    """A laptop GPU: power and temperature queries answer NotSupported, as they often do there."""
    gpu = FakeGpu(
        name="NVIDIA GeForce RTX 4060 Laptop GPU",
        uuid="GPU-4060cccc-0000-0000-0000-000000000003",
        bus_id="00000000:01:00.0",
        total=8188 * MIB,
        reserved=245 * MIB,
        used=9 * MIB,
        cc=(8, 9),
    )
    for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTemperature"):
        gpu.errors[fn] = pynvml.NVMLError_NotSupported
    return gpu


class _Handle:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu


class FakeNvml:
    """Module-like object: pass it as ``nvml_module=``. ``init_error`` makes ``nvmlInit`` raise (e.g.
    ``pynvml.NVMLError_LibraryNotFound``); ``memory_v2_error`` makes the v2 memory call raise, as an
    old driver does (``NVMLError_FunctionNotFound`` when the symbol is missing, ``InvalidArgument`` /
    ``ArgumentVersionMismatch`` when it rejects the struct version). Calls before ``nvmlInit`` raise
    ``NVMLError_Uninitialized`` like the real library."""

    # Real exception classes and constants, straight from the installed pynvml.
    NVMLError = pynvml.NVMLError
    NVMLError_LibraryNotFound = pynvml.NVMLError_LibraryNotFound
    NVMLError_NotSupported = pynvml.NVMLError_NotSupported
    NVMLError_InvalidArgument = pynvml.NVMLError_InvalidArgument
    NVMLError_DriverNotLoaded = pynvml.NVMLError_DriverNotLoaded
    NVMLError_NoPermission = pynvml.NVMLError_NoPermission
    NVMLError_FunctionNotFound = pynvml.NVMLError_FunctionNotFound
    NVMLError_Uninitialized = pynvml.NVMLError_Uninitialized
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(
        self,
        gpus: Sequence[FakeGpu] = (),
        driver: str = "580.159.04",
        cuda: int = 13000,
        init_error: type[pynvml.NVMLError] | None = None,
        memory_v2_error: type[pynvml.NVMLError] | None = None,
    ) -> None:
        self.gpus = list(gpus)
        self.driver = driver
        self.cuda = cuda
        self.init_error = init_error
        self.memory_v2_error = memory_v2_error
        self.refcount = 0
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[str] = []

    # -- plumbing
    def _check(self, fn: str, handle: _Handle | None = None) -> None:
        self.calls.append(fn)
        if self.refcount <= 0:
            raise pynvml.NVMLError_Uninitialized()
        if handle is not None and fn in handle.gpu.errors:
            raise handle.gpu.errors[fn]()

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise self.init_error()
        self.refcount += 1

    def nvmlShutdown(self) -> None:
        self.shutdown_calls += 1
        if self.refcount <= 0:
            raise pynvml.NVMLError_Uninitialized()
        self.refcount -= 1

    # -- system
    def nvmlSystemGetDriverVersion(self) -> str:
        self._check("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion_v2")
        return self.cuda

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion")
        return self.cuda

    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._check("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return _Handle(self.gpus[index])

    # -- device
    def nvmlDeviceGetName(self, h: _Handle) -> str:
        self._check("nvmlDeviceGetName", h)
        return h.gpu.name

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:
        self._check("nvmlDeviceGetUUID", h)
        return h.gpu.uuid

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> Any:
        self._check("nvmlDeviceGetPciInfo", h)
        info = pynvml.nvmlPciInfo_t()
        info.busId = h.gpu.bus_id.encode()
        return info

    def nvmlDeviceGetMemoryInfo(self, h: _Handle, version: int | None = None) -> Any:
        g = h.gpu
        if not version:
            self._check("nvmlDeviceGetMemoryInfo", h)
            mem = pynvml.c_nvmlMemory_t()
            # v1 folds the reserve into used (recorded on the H200: v1 used 644939776, v2 used 0).
            mem.total, mem.used, mem.free = g.total, g.used + g.reserved, g.free
            return mem
        self._check("nvmlDeviceGetMemoryInfo_v2", h)
        if self.memory_v2_error is not None:
            raise self.memory_v2_error()
        if version != pynvml.nvmlMemory_v2:
            raise pynvml.NVMLError_ArgumentVersionMismatch()
        mem2 = pynvml.c_nvmlMemory_v2_t()
        mem2.version = version
        mem2.total, mem2.reserved, mem2.used, mem2.free = g.total, g.reserved, g.used, g.free
        return mem2

    def nvmlDeviceGetCudaComputeCapability(self, h: _Handle) -> tuple[int, int]:
        self._check("nvmlDeviceGetCudaComputeCapability", h)
        return h.gpu.cc

    def nvmlDeviceGetUtilizationRates(self, h: _Handle) -> Any:
        self._check("nvmlDeviceGetUtilizationRates", h)
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = h.gpu.util_gpu, h.gpu.util_mem
        return util

    def nvmlDeviceGetTemperature(self, h: _Handle, sensor: int) -> int:
        self._check("nvmlDeviceGetTemperature", h)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError_InvalidArgument()
        return h.gpu.temp

    def nvmlDeviceGetPowerUsage(self, h: _Handle) -> int:
        self._check("nvmlDeviceGetPowerUsage", h)
        return h.gpu.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: _Handle) -> int:
        self._check("nvmlDeviceGetEnforcedPowerLimit", h)
        return h.gpu.limit_mw

    def nvmlDeviceGetFanSpeed(self, h: _Handle) -> int:
        self._check("nvmlDeviceGetFanSpeed", h)
        return 30

    def nvmlDeviceGetComputeRunningProcesses_v3(self, h: _Handle) -> list[Any]:
        self._check("nvmlDeviceGetComputeRunningProcesses_v3", h)
        return [
            pynvml.nvmlFriendlyObject(
                {
                    "pid": pid,
                    "usedGpuMemory": used,
                    "gpuInstanceId": 0xFFFFFFFF,
                    "computeInstanceId": 0xFFFFFFFF,
                }
            )
            for pid, used in h.gpu.processes.items()
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[Any]:
        return self.nvmlDeviceGetComputeRunningProcesses_v3(h)


# ------------------------------------------------------------------------ nvidia-smi

# Recorded on the 2 x H200 machine with nvidia_smi.SMI_QUERY_ARGV (csv,noheader,nounits).
SMI_CSV_H200X2 = (
    "0, NVIDIA H200, GPU-ae6403f3-2923-34ce-ec33-d3b2f5ea096d, 143771, 0, 143156, 9.0, 0, 35, 79.98, 700.00,"
    " 580.159.04, 00000000:00:06.0\n"
    "1, NVIDIA H200, GPU-18250456-1f9d-21f5-c7c8-5f3088cfcf3e, 143771, 0, 143156, 9.0, 0, 34, 79.06, 700.00,"
    " 580.159.04, 00000000:00:07.0\n"
)
# A laptop board that hides power: nvidia-smi prints "[N/A]" in those columns (the shape is what
# nvidia-smi prints for unsupported fields; this line itself was not recorded).
SMI_CSV_LAPTOP_NA = (
    "0, NVIDIA GeForce RTX 4060 Laptop GPU, GPU-4060cccc-0000-0000-0000-000000000003, 8188, 9, 7934, 8.9, 0, 45,"
    " [N/A], [N/A], 560.35.03, 00000000:01:00.0\n"
)
# The top of the plain `nvidia-smi` banner, recorded on the same machine.
SMI_BANNER_H200 = """Mon Nov 30 02:44:51 2026
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H200                    On  |   00000000:00:06.0 Off |                    0 |
| N/A   35C    P0             79W /  700W |       0MiB / 143771MiB |      0%      Default |
"""


class FakeSmi:
    """A canned ``smi_runner(argv, timeout)``: the query CSV for ``--query-gpu`` calls, the banner for
    a plain call. ``mode``: "ok", "missing" (FileNotFoundError), "timeout", "no-devices" (exit 6)."""

    def __init__(
        self, csv_text: str = SMI_CSV_H200X2, banner: str = SMI_BANNER_H200, mode: str = "ok"
    ) -> None:
        self.csv_text, self.banner, self.mode = csv_text, banner, mode
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> str:
        self.calls.append((list(argv), timeout))
        if self.mode == "missing":
            raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")
        if self.mode == "timeout":
            raise subprocess.TimeoutExpired(list(argv), timeout)
        if self.mode == "no-devices":
            raise subprocess.CalledProcessError(6, list(argv), output="No devices were found\n")
        if any(a.startswith("--query-gpu=") for a in argv):
            return self.csv_text
        return self.banner


def _no_smi(argv: Sequence[str], timeout: float) -> str:
    raise FileNotFoundError("nvidia-smi")


def detect_rtx4090() -> Any:
    """``hardware.detect()`` on a machine with one RTX 4090 (a ``detect`` stand-in for the UI)."""
    from beedeck.core.machine import hardware

    return hardware.detect(nvml_module=FakeNvml([rtx4090()]), smi_runner=_no_smi)


def detect_no_gpu() -> Any:
    """``hardware.detect()`` on a machine with no NVIDIA driver and no nvidia-smi."""
    from beedeck.core.machine import hardware

    return hardware.detect(nvml_module=FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound), smi_runner=_no_smi)
