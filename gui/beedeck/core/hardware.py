"""What hardware BeeDeck runs on: NVIDIA GPUs (NVML, else ``nvidia-smi``), RAM, CPU cores, free disk.

``detect()`` never raises: with no usable GPU it returns ``source="none"`` and a ``reason`` that says
why and what to do, and the system part is still filled. ``GpuSampler`` polls live GPU numbers.

NVML memory: we ask for ``nvmlMemory_v2`` because the v1 struct folds the driver's reserved memory
into ``used`` (615 MiB on an idle H200, where ``nvidia-smi`` shows 0 MiB used). Old drivers lack
the v2 call; then we fall back to v1 and report its ``used`` as is (nothing subtracted, since the
reserved share is unknown) with ``memory_reserved=None``. ``free`` is the same either way, and it is
the number that decides whether a model fits.
"""

from __future__ import annotations

import csv
import logging
import os
import re
import subprocess
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Literal

log = logging.getLogger(__name__)

MIB = 1024 * 1024
GIB = 1024 * MIB
SMI_TIMEOUT_S = 10.0
SMI_FIELDS = (
    "index,name,uuid,memory.total,memory.used,memory.free,compute_cap,utilization.gpu,"
    "temperature.gpu,power.draw,power.limit,driver_version,pci.bus_id"
)
SMI_QUERY_ARGV = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
SMI_BANNER_ARGV = ["nvidia-smi"]

Source = Literal["nvml", "nvidia-smi", "none"]
# smi_runner(argv, timeout_s) -> stdout; raises FileNotFoundError, subprocess.TimeoutExpired,
# subprocess.CalledProcessError like subprocess.run(check=True) does.
SmiRunner = Callable[[Sequence[str], float], str]

# Errors that mean "this driver has no memory v2 call / struct": fall back to v1.
_MEMORY_V2_FALLBACK = {
    "NVMLError_FunctionNotFound",
    "NVMLError_InvalidArgument",
    "NVMLError_ArgumentVersionMismatch",
    "NVMLError_NotSupported",
}


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


# --------------------------------------------------------------------------- helpers


def cuda_version_text(value: int | None) -> str | None:
    """NVML's CUDA version integer to text: 13000 -> "13.0", 12040 -> "12.4"."""
    if not value or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def cuda_arch(cc: tuple[int, int] | None) -> str | None:
    return f"{cc[0]}{cc[1]}" if cc else None


def _err(exc: BaseException) -> str:
    """``NVMLError_LibraryNotFound: NVML Shared Library Not Found`` style text for the trail."""
    text = str(exc)
    name = type(exc).__name__
    return f"{name}: {text}" if text and text != name else name


def _optional(call: Callable[[], Any], nvml: Any) -> Any:
    """Run an optional NVML query; NotSupported (laptops, vGPU, MIG) and friends give None."""
    try:
        return call()
    except nvml.NVMLError:
        return None


def _import_pynvml() -> Any:
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


# --------------------------------------------------------------------------- NVML


def _nvml_gpu(nvml: Any, index: int) -> GpuInfo:
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    total, reserved, used, free = read_memory(nvml, h)
    cc_raw = _optional(lambda: nvml.nvmlDeviceGetCudaComputeCapability(h), nvml)
    cc = (int(cc_raw[0]), int(cc_raw[1])) if cc_raw else None
    util = _optional(lambda: nvml.nvmlDeviceGetUtilizationRates(h), nvml)
    power_mw = _optional(lambda: nvml.nvmlDeviceGetPowerUsage(h), nvml)
    limit_mw = _optional(lambda: nvml.nvmlDeviceGetEnforcedPowerLimit(h), nvml)
    pci = _optional(lambda: nvml.nvmlDeviceGetPciInfo(h), nvml)
    return GpuInfo(
        index=index,
        name=str(nvml.nvmlDeviceGetName(h)),
        uuid=_optional(lambda: str(nvml.nvmlDeviceGetUUID(h)), nvml),
        pci_bus_id=str(pci.busId) if pci is not None else None,
        memory_total=total,
        memory_reserved=reserved,
        memory_used=used,
        memory_free=free,
        compute_capability=cc,
        cuda_arch=cuda_arch(cc),
        utilization=int(util.gpu) if util is not None else None,
        temperature=_optional(lambda: int(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU)), nvml),
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


def _detect_nvml(nvml: Any) -> tuple[HardwareReport | None, str, BaseException | None]:
    """(report or None, trail text, the init exception if NVML could not start)."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses, plus OSError from odd library loads
        return None, f"nvml: {_err(exc)}", exc
    try:
        driver = _optional(lambda: str(nvml.nvmlSystemGetDriverVersion()), nvml)
        count = int(nvml.nvmlDeviceGetCount())
        gpus: list[GpuInfo] = []
        skipped: list[str] = []
        for i in range(count):
            try:
                gpus.append(_nvml_gpu(nvml, i))
            except Exception as exc:  # one broken GPU (lost, no permission) must not hide the others
                skipped.append(f"gpu {i}: {_err(exc)}")
        trail = "nvml: " + ("; ".join(skipped) if skipped else f"{count} device(s)")
        if not gpus:
            return None, trail if skipped else "nvml: driver loaded, 0 devices", None
        report = HardwareReport(
            gpus=gpus, driver_version=driver, cuda_driver_version=_cuda_driver_version(nvml), source="nvml"
        )
        report.detail = trail if skipped else ""
        return report, trail, None
    except Exception as exc:
        return None, f"nvml: {_err(exc)}", exc
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down must not turn a good answer into an error
            log.debug("nvmlShutdown failed", exc_info=True)


# --------------------------------------------------------------------------- nvidia-smi


def run_smi(argv: Sequence[str], timeout: float) -> str:
    """Run nvidia-smi (an argument list, never a shell) with a timeout: a wedged driver can hang it."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=True)
    return proc.stdout


def _smi_value(cell: str) -> str | None:
    cell = cell.strip()
    if not cell or (cell.startswith("[") and cell.endswith("]")) or cell in ("N/A", "Not Supported"):
        return None  # "[N/A]", "[Not Supported]", "[Unknown Error]"
    return cell


def _smi_int(cell: str) -> int | None:
    v = _smi_value(cell)
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def _smi_float(cell: str) -> float | None:
    v = _smi_value(cell)
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def parse_smi_csv(text: str) -> tuple[list[GpuInfo], str | None]:
    """Parse ``SMI_QUERY_ARGV`` output (MiB, no units) into GPUs and the driver version."""
    gpus: list[GpuInfo] = []
    driver: str | None = None
    for row in csv.reader(line for line in text.splitlines() if line.strip()):
        if len(row) < 12:
            continue
        cells = [c.strip() for c in row]
        cc_text = _smi_value(cells[6])
        cc: tuple[int, int] | None = None
        if cc_text and re.fullmatch(r"\d+\.\d+", cc_text):
            major, minor = cc_text.split(".")
            cc = (int(major), int(minor))
        total_mib, used_mib, free_mib = _smi_int(cells[3]), _smi_int(cells[4]), _smi_int(cells[5])
        reserved = None
        if total_mib is not None and used_mib is not None and free_mib is not None:
            # nvidia-smi shows v2-style numbers: what is neither used nor free is the driver's reserve.
            reserved = max(total_mib - used_mib - free_mib, 0) * MIB
        driver = driver or _smi_value(cells[11])
        gpus.append(
            GpuInfo(
                index=_smi_int(cells[0]) or len(gpus),
                name=cells[1],
                uuid=_smi_value(cells[2]),
                pci_bus_id=_smi_value(cells[12]) if len(cells) > 12 else None,
                memory_total=(total_mib or 0) * MIB,
                memory_reserved=reserved,
                memory_used=(used_mib or 0) * MIB,
                memory_free=(free_mib or 0) * MIB,
                compute_capability=cc,
                cuda_arch=cuda_arch(cc),
                utilization=_smi_int(cells[7]),
                temperature=_smi_int(cells[8]),
                power_w=_smi_float(cells[9]),
                power_limit_w=_smi_float(cells[10]),
            )
        )
    return gpus, driver


def parse_smi_cuda_version(banner: str) -> str | None:
    """The "CUDA Version: 13.0" of the plain ``nvidia-smi`` banner (not a --query-gpu field)."""
    m = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", banner)
    return m.group(1) if m else None


def _detect_smi(runner: SmiRunner) -> tuple[HardwareReport | None, str]:
    try:
        out = runner(SMI_QUERY_ARGV, SMI_TIMEOUT_S)
    except FileNotFoundError:
        return None, "nvidia-smi: not installed"
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi: no answer in {SMI_TIMEOUT_S:.0f} s (wedged driver?)"
    except subprocess.CalledProcessError as exc:
        first = (exc.stdout or exc.stderr or "").strip().splitlines()
        return None, f"nvidia-smi: exit {exc.returncode}" + (f": {first[0]}" if first else "")
    except OSError as exc:
        return None, f"nvidia-smi: {_err(exc)}"
    gpus, driver = parse_smi_csv(out)
    if not gpus:
        return None, "nvidia-smi: no GPU rows in its output"
    cuda: str | None = None
    try:
        cuda = parse_smi_cuda_version(runner(SMI_BANNER_ARGV, SMI_TIMEOUT_S))
    except (OSError, subprocess.SubprocessError):
        pass  # the GPU list stands without the CUDA version
    return HardwareReport(gpus=gpus, driver_version=driver, cuda_driver_version=cuda, source="nvidia-smi"), ""


# --------------------------------------------------------------------------- system


def system_info(disk_path: str | os.PathLike[str] | None = None) -> SystemInfo:
    """RAM, cores and free disk via psutil; any part that cannot be read stays None."""
    info = SystemInfo(disk_path=os.fspath(disk_path) if disk_path is not None else None)
    try:
        import psutil
    except ImportError:
        return info
    try:
        vm = psutil.virtual_memory()
        info.ram_total, info.ram_available = int(vm.total), int(vm.available)
    except Exception:
        log.debug("virtual_memory failed", exc_info=True)
    try:
        info.cpu_cores_logical = psutil.cpu_count(logical=True)
        info.cpu_cores_physical = psutil.cpu_count(logical=False)
    except Exception:
        log.debug("cpu_count failed", exc_info=True)
    if info.disk_path is not None:
        path = info.disk_path
        # The data folder may not exist yet: measure the nearest existing parent (same file system).
        while not os.path.exists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        try:
            info.disk_free = int(psutil.disk_usage(path).free)
        except Exception:
            log.debug("disk_usage failed", exc_info=True)
    return info


# --------------------------------------------------------------------------- detect

_CPU_NOTE = "BeeDeck will use the CPU starter profile."


def explain(nvml_exc: BaseException | None, nvml_trail: str, smi_trail: str) -> str:
    """The user-facing reason (cause + remedy) for "no GPU", from what NVML and nvidia-smi said."""
    name = type(nvml_exc).__name__ if nvml_exc is not None else ""
    smi_missing = smi_trail.endswith("not installed")
    if name == "NVMLError_DriverNotLoaded":
        return (
            f"The NVIDIA driver is installed but not loaded: {_CPU_NOTE} "
            "Restart the computer (on Linux, `sudo modprobe nvidia` may be enough), then run `beedeck detect` again."
        )
    if name == "NVMLError_NoPermission":
        return (
            f"BeeDeck has no permission to talk to the NVIDIA driver: {_CPU_NOTE} "
            "Give your user access to /dev/nvidia* (usually the `video` group), log in again, "
            "and run `beedeck detect` again."
        )
    if name == "NVMLError_LibRmVersionMismatch":
        return (
            f"The NVIDIA driver was updated but the old one is still loaded: {_CPU_NOTE} "
            "Restart the computer to finish the driver update."
        )
    if isinstance(nvml_exc, ImportError):
        if smi_missing:
            return (
                f"BeeDeck could not look for an NVIDIA GPU: the nvidia-ml-py package is missing and nvidia-smi "
                f"is not installed. {_CPU_NOTE} Reinstall BeeDeck (or `pip install nvidia-ml-py`) and make sure "
                "the NVIDIA driver is installed."
            )
    if nvml_exc is None and "0 devices" in nvml_trail:
        return (
            f"The NVIDIA driver is loaded but sees no GPU: {_CPU_NOTE} Check that the card is seated and "
            "powered, or passed through to this VM/container (`nvidia-smi -L` lists what the driver sees)."
        )
    # Only then is the driver really absent; any other NVML error means a driver is there.
    if name == "NVMLError_LibraryNotFound":
        return f"No NVIDIA GPU driver found: {_CPU_NOTE} Install the NVIDIA driver to use your GPU."
    return (
        f"BeeDeck could not read the NVIDIA GPU ({nvml_trail}; {smi_trail}): {_CPU_NOTE} "
        "Check that `nvidia-smi` works in a terminal; update or reinstall the NVIDIA driver if it does not."
    )


def detect(
    nvml_module: Any = None,
    smi_runner: SmiRunner | None = None,
    disk_path: str | os.PathLike[str] | None = None,
) -> HardwareReport:
    """Find GPUs (NVML, then nvidia-smi) and system facts. Never raises.

    ``nvml_module`` replaces ``pynvml`` (tests pass a fake); ``smi_runner`` replaces ``run_smi``;
    ``disk_path`` is the folder whose free space is reported (the models folder).
    """
    try:
        system = system_info(disk_path)
    except Exception as exc:  # never raises, even on a platform psutil dislikes
        log.warning("system info failed: %s", exc)
        system = SystemInfo(disk_path=os.fspath(disk_path) if disk_path is not None else None)
    nvml_exc: BaseException | None
    try:
        nvml = nvml_module if nvml_module is not None else _import_pynvml()
        report, nvml_trail, nvml_exc = _detect_nvml(nvml)
    except ImportError as exc:
        report, nvml_trail, nvml_exc = None, "nvml: nvidia-ml-py not installed", exc
    except Exception as exc:
        report, nvml_trail, nvml_exc = None, f"nvml: {_err(exc)}", exc
    if report is not None:
        report.system = system
        return report
    try:
        report, smi_trail = _detect_smi(smi_runner or run_smi)
    except Exception as exc:
        report, smi_trail = None, f"nvidia-smi: {_err(exc)}"
    if report is not None:
        report.detail = nvml_trail  # why NVML did not answer, for bug reports
        report.system = system
        return report
    return HardwareReport(
        source="none",
        reason=explain(nvml_exc, nvml_trail, smi_trail),
        detail=f"{nvml_trail}; {smi_trail}",
        system=system,
    )


# --------------------------------------------------------------------------- live sampler


@dataclass
class GpuSample:
    """One reading of one GPU. ``pid_memory`` is the GPU memory of the watched process (bytes), None
    when no pid is watched, the process is not on this GPU, or the driver hides it (Windows WDDM)."""

    index: int
    utilization: int | None
    memory_used: int
    memory_free: int
    memory_total: int
    temperature: int | None
    power_w: float | None
    pid_memory: int | None = None


class GpuSampler:
    """Live GPU readings: ``sample()`` on demand, or ``start()`` a thread that calls
    ``on_sample(samples)`` every ``interval`` seconds (from that thread) until ``stop()``.

    NVML is opened on first use and closed by ``stop()``. With no NVML (no driver, no GPU)
    ``sample()`` returns ``[]`` at once and never retries, so polling is free on CPU-only machines.
    Per-process memory needs NVML to see the pid (it did inside the H200 test container; a pid
    namespace that hides the host pid would give None). NVML counts nvmlInit/nvmlShutdown pairs, so a
    ``detect()`` while the sampler runs does not close the sampler's session.
    """

    def __init__(
        self,
        nvml_module: Any = None,
        interval: float = 1.0,
        pid: int | None = None,
        on_sample: Callable[[list[GpuSample]], None] | None = None,
    ) -> None:
        self._nvml_arg = nvml_module
        self.interval = interval
        self.pid = pid
        self.on_sample = on_sample
        self._nvml: Any = None
        self._handles: list[Any] = []
        self._state = "new"  # new -> open (-> new after stop) | unavailable
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unavailable_reason = ""

    def _open(self) -> bool:
        if self._state == "open":
            return True
        if self._state != "new":
            return False
        try:
            nvml = self._nvml_arg if self._nvml_arg is not None else _import_pynvml()
            nvml.nvmlInit()
        except Exception as exc:
            self._state, self.unavailable_reason = "unavailable", _err(exc)
            return False
        try:
            self._handles = [
                nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))
            ]
        except Exception as exc:
            self._state, self.unavailable_reason = "unavailable", _err(exc)
            _quiet_shutdown(nvml)
            return False
        self._nvml, self._state = nvml, "open"
        return True

    def _pid_memory(self, handle: Any) -> int | None:
        if self.pid is None:
            return None
        nvml = self._nvml
        for name in (
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetComputeRunningProcesses_v2",
            "nvmlDeviceGetComputeRunningProcesses",
        ):
            fn = getattr(nvml, name, None)
            if fn is None:
                continue
            try:
                procs = fn(handle)
            except Exception:  # FunctionNotFound on older drivers, NVMLLibraryMismatchError: next one
                continue
            for p in procs:
                if int(p.pid) == self.pid and p.usedGpuMemory is not None:
                    return int(p.usedGpuMemory)
            return None
        return None

    def sample(self) -> list[GpuSample]:
        """Read every GPU now. Never raises; a GPU that fails this time is left out of the list."""
        with self._lock:
            if not self._open():
                return []
            nvml, out = self._nvml, []
            for i, h in enumerate(self._handles):
                try:
                    total, _reserved, used, free = read_memory(nvml, h)
                    util = _optional(partial(nvml.nvmlDeviceGetUtilizationRates, h), nvml)
                    power_mw = _optional(partial(nvml.nvmlDeviceGetPowerUsage, h), nvml)
                    temp = _optional(
                        partial(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU), nvml
                    )
                    out.append(
                        GpuSample(
                            index=i,
                            utilization=int(util.gpu) if util is not None else None,
                            memory_used=used,
                            memory_free=free,
                            memory_total=total,
                            temperature=int(temp) if temp is not None else None,
                            power_w=power_mw / 1000.0 if power_mw is not None else None,
                            pid_memory=self._pid_memory(h),
                        )
                    )
                except Exception as exc:
                    log.debug("sampling gpu %d failed: %s", i, exc)
            return out

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Poll in a daemon thread; ``on_sample`` runs in that thread (Qt code re-emits it as a signal)."""
        if self.running:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="beedeck-gpu-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            samples = self.sample()
            if self.on_sample is not None:
                try:
                    self.on_sample(samples)
                except Exception:
                    log.exception("on_sample callback failed")
            if self._state == "unavailable":
                return  # no GPU: one empty report, then nothing will ever come, so do not spin
            self._stop.wait(self.interval)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the thread (joins it) and close NVML. Safe to call twice or without start()."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._lock:
            if self._state == "open":
                _quiet_shutdown(self._nvml)
            # A later sample()/start() opens NVML again; "unavailable" stays (no driver appears mid-run).
            self._state = "new" if self._state == "open" else self._state
            self._handles = []


def _quiet_shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        log.debug("nvmlShutdown failed", exc_info=True)
