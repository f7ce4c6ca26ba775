"""Reading NVIDIA GPUs through NVML (nvidia-ml-py, imported as ``pynvml``).

Memory: we ask for ``nvmlMemory_v2`` because the v1 struct folds the driver's reserved memory
into ``used`` (615 MiB on an idle H200, where ``nvidia-smi`` shows 0 MiB used). Old drivers lack
the v2 call; then we fall back to v1 and report its ``used`` as is (nothing subtracted, since the
reserved share is unknown) with ``memory_reserved=None``. ``free`` is the same either way, and it is
the number that decides whether a model fits.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Collection
from typing import Any

from beedeck.core.machine.report import GpuInfo, HardwareReport, cuda_arch, cuda_version_text

log = logging.getLogger(__name__)

# Errors that mean "this driver has no memory v2 call / struct": fall back to v1.
_MEMORY_V2_FALLBACK = {
    "NVMLError_FunctionNotFound",
    "NVMLError_InvalidArgument",
    "NVMLError_ArgumentVersionMismatch",
    "NVMLError_NotSupported",
}


def err_text(exc: BaseException) -> str:
    """``NVMLError_LibraryNotFound: NVML Shared Library Not Found`` style text for the trail."""
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text and text != name else name


def optional(call: Callable[[], Any], nvml: Any) -> Any:
    """Run an optional NVML query; NotSupported (laptops, vGPU, MIG) and friends give None."""
    try:
        return call()
    except nvml.NVMLError:
        return None


def import_pynvml() -> Any:
    # The deprecated `pynvml` shim package warns on import; nvidia-ml-py (what we depend on) does not.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml

    return pynvml


def read_memory(nvml: Any, handle: Any) -> tuple[int, int | None, int, int]:
    """(total, reserved or None, used, free) in bytes: v2 when the driver has it, else v1."""
    try:
        mem = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
        return int(mem.total), int(mem.reserved), int(mem.used), int(mem.free)
    except nvml.NVMLError as exc:
        if type(exc).__name__ not in _MEMORY_V2_FALLBACK:
            raise
    mem = nvml.nvmlDeviceGetMemoryInfo(handle)
    return int(mem.total), None, int(mem.used), int(mem.free)


def _nvml_gpu(nvml: Any, index: int) -> GpuInfo:
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    total, reserved, used, free = read_memory(nvml, h)
    cc_raw = optional(lambda: nvml.nvmlDeviceGetCudaComputeCapability(h), nvml)
    cc = (int(cc_raw[0]), int(cc_raw[1])) if cc_raw else None
    util = optional(lambda: nvml.nvmlDeviceGetUtilizationRates(h), nvml)
    power_mw = optional(lambda: nvml.nvmlDeviceGetPowerUsage(h), nvml)
    limit_mw = optional(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h), nvml)
    pci = optional(lambda: nvml.nvmlDeviceGetPciInfo(h), nvml)
    return GpuInfo(
        index=index,
        name=str(nvml.nvmlDeviceGetName(h)),
        uuid=optional(lambda: str(nvml.nvmlDeviceGetUUID(h)), nvml),
        pci_bus_id=str(pci.busId) if pci is not None else None,
        memory_total=total,
        memory_reserved=reserved,
        memory_used=used,
        memory_free=free,
        compute_capability=cc,
        cuda_arch=cuda_arch(cc),
        utilization=int(util.gpu) if util is not None else None,
        temperature=optional(lambda: int(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)), nvml),
        power_w=power_mw / 1000.0 if power_mw is not None else None,
        power_limit_w=limit_mw / 1000.0 if limit_mw is not None else None,
    )


def _cuda_driver_version(nvml: Any) -> str | None:
    for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        try:
            return cuda_version_text(int(fn()))
        except nvml.NVMLError:
            continue
    return None


def detect_nvml(nvml: Any) -> tuple[HardwareReport | None, str, BaseException | None]:
    """(report or None, trail text, the init exception if NVML could not start)."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses, plus OSError from odd library loads
        return None, f"nvml: {err_text(exc)}", exc
    try:
        driver = optional(lambda: str(nvml.nvmlSystemGetDriverVersion()), nvml)
        count = int(nvml.nvmlDeviceGetCount())
        gpus: list[GpuInfo] = []
        skipped: list[str] = []
        for i in range(count):
            try:
                gpus.append(_nvml_gpu(nvml, i))
            except Exception as exc:  # one broken GPU (lost, no permission) must not hide the others
                skipped.append(f"gpu {i}: {err_text(exc)}")
        trail = "nvml: " + ("; ".join(skipped) if skipped else f"{count} device(s)")
        if not gpus:
            return None, trail if skipped else "nvml: driver loaded, 0 devices", None
        report = HardwareReport(
            gpus=gpus, driver_version=driver, cuda_driver_version=_cuda_driver_version(nvml), source="nvml"
        )
        report.detail = trail if skipped else ""
        return report, trail, None
    except Exception as exc:
        return None, f"nvml: {err_text(exc)}", exc
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down must not turn a good answer into an error
            log.debug("nvmlShutdown failed", exc_info=True)


def quiet_shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        log.debug("nvmlShutdown failed", exc_info=True)


_PROCESS_LISTS = (
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetComputeRunningProcesses_v2",
    "nvmlDeviceGetComputeRunningProcesses",
)


def _held_on(nvml: Any, handle: Any, pids: Collection[int]) -> int | None:
    """What the processes ``pids`` hold on one GPU (bytes; 0 when none of them runs there), or None when the
    driver does not say (no process list, or a usage it hides, as Windows' WDDM does)."""
    for name in _PROCESS_LISTS:
        fn = getattr(nvml, name, None)
        if fn is None:
            continue
        try:
            procs = fn(handle)
        except Exception:  # FunctionNotFound on older drivers, NVMLLibraryMismatchError: the next one
            continue
        held = 0
        for p in procs:
            if int(p.pid) in pids:
                if p.usedGpuMemory is None:
                    return None
                held += int(p.usedGpuMemory)
        return held
    return None


def held_by(pids: Collection[int], nvml_module: Any = None) -> list[int | None] | None:
    """Per GPU (NVML's order), what the processes ``pids`` hold there, in bytes (None where the driver does not
    say); None when NVML cannot be read at all. Never raises."""
    try:
        nvml = nvml_module if nvml_module is not None else import_pynvml()
        nvml.nvmlInit()
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, odd library loads
        log.debug("held_by: NVML unavailable: %s", err_text(exc))
        return None
    try:
        return [_held_on(nvml, nvml.nvmlDeviceGetHandleByIndex(i), pids) for i in range(int(nvml.nvmlDeviceGetCount()))]
    except Exception as exc:
        log.debug("held_by: %s", err_text(exc))
        return None
    finally:
        quiet_shutdown(nvml)
