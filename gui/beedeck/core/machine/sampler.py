"""Live GPU readings (memory, utilisation, temperature, power, one process's memory) from NVML."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from beedeck.core.machine.nvml import err_text, import_pynvml, optional, quiet_shutdown, read_memory

log = logging.getLogger(__name__)


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
            nvml = self._nvml_arg if self._nvml_arg is not None else import_pynvml()
            nvml.nvmlInit()
        except Exception as exc:
            self._state, self.unavailable_reason = "unavailable", err_text(exc)
            return False
        try:
            self._handles = [
                nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))
            ]
        except Exception as exc:
            self._state, self.unavailable_reason = "unavailable", err_text(exc)
            quiet_shutdown(nvml)
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
                    util = optional(partial(nvml.nvmlDeviceGetUtilizationRates, h), nvml)
                    power_mw = optional(partial(nvml.nvmlDeviceGetPowerUsage, h), nvml)
                    temp = optional(
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
                quiet_shutdown(self._nvml)
            # A later sample()/start() opens NVML again; "unavailable" stays (no driver appears mid-run).
            self._state = "new" if self._state == "open" else self._state
            self._handles = []
