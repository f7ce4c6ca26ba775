"""What hardware BeeDeck runs on: NVIDIA GPUs (NVML, else ``nvidia-smi``), RAM, CPU cores, free disk.

``detect()`` never raises: with no usable GPU it returns ``source="none"`` and a ``reason`` that says
why and what to do, and the system part is still filled. The readers live beside it: ``nvml``,
``nvidia_smi``, ``system``; the live ``sampler`` too.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from beedeck.core.machine.nvidia_smi import SmiRunner, detect_smi, run_smi
from beedeck.core.machine.nvml import detect_nvml, err_text, import_pynvml
from beedeck.core.machine.report import HardwareReport, SystemInfo
from beedeck.core.machine.system import system_info

log = logging.getLogger(__name__)

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
        nvml = nvml_module if nvml_module is not None else import_pynvml()
        report, nvml_trail, nvml_exc = detect_nvml(nvml)
    except ImportError as exc:
        report, nvml_trail, nvml_exc = None, "nvml: nvidia-ml-py not installed", exc
    except Exception as exc:
        report, nvml_trail, nvml_exc = None, f"nvml: {err_text(exc)}", exc
    if report is not None:
        report.system = system
        return report
    try:
        report, smi_trail = detect_smi(smi_runner or run_smi)
    except Exception as exc:
        report, smi_trail = None, f"nvidia-smi: {err_text(exc)}"
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
