"""The peak GPU memory of a benchmark's replies: the server process's own figure where the driver gives it, the
whole GPU's where it hides the pid (:class:`beedeck.core.machine.sampler.GpuSampler`)."""

from __future__ import annotations

import threading

from beedeck.core.machine.sampler import GpuSample, GpuSampler

__all__ = ["PeakTracker"]


class PeakTracker:
    """Peak GPU memory of the server process (or of the whole GPU when the driver hides the pid)."""

    def __init__(self, sampler: GpuSampler | None) -> None:
        self.sampler = sampler
        self.peak: int | None = None
        self._lock = threading.Lock()
        if sampler is not None:
            sampler.on_sample = self.observe

    def observe(self, samples: list[GpuSample]) -> None:
        values = [s.pid_memory if s.pid_memory is not None else s.memory_used for s in samples]
        if values:
            with self._lock:
                self.peak = max(self.peak or 0, max(values))

    def watch(self, pid: int | None) -> None:
        if self.sampler is not None:
            self.sampler.pid = pid
            self.sampler.start()

    def reset(self) -> None:
        with self._lock:
            self.peak = None

    def read(self) -> int | None:
        if self.sampler is None:
            return None
        self.observe(self.sampler.sample())  # at least one reading per reply, however short
        with self._lock:
            return self.peak

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
