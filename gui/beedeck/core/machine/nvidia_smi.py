"""Reading NVIDIA GPUs through ``nvidia-smi``: the fallback when NVML cannot be loaded."""

from __future__ import annotations

import csv
import re
import subprocess
from collections.abc import Callable, Sequence

from beedeck.core.machine.nvml import err_text
from beedeck.core.machine.report import MIB, GpuInfo, HardwareReport, cuda_arch
from beedeck.core.secrets import child_env

SMI_TIMEOUT_S = 10.0
SMI_FIELDS = (
    "index,name,uuid,memory.total,memory.used,memory.free,compute_cap,utilization.gpu,"
    "temperature.gpu,power.draw,power.limit,driver_version,pci.bus_id"
)
SMI_QUERY_ARGV = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
SMI_BANNER_ARGV = ["nvidia-smi"]
# smi_runner(argv, timeout_s) -> stdout; raises FileNotFoundError, subprocess.TimeoutExpired,
# subprocess.CalledProcessError like subprocess.run(check=True) does.
SmiRunner = Callable[[Sequence[str], float], str]


def run_smi(argv: Sequence[str], timeout: float) -> str:
    """Run nvidia-smi (an argument list, never a shell) with a timeout: a wedged driver can hang it."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=True,
                          env=child_env())
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


def detect_smi(runner: SmiRunner) -> tuple[HardwareReport | None, str]:
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
        return None, f"nvidia-smi: {err_text(exc)}"
    gpus, driver = parse_smi_csv(out)
    if not gpus:
        return None, "nvidia-smi: no GPU rows in its output"
    cuda: str | None = None
    try:
        cuda = parse_smi_cuda_version(runner(SMI_BANNER_ARGV, SMI_TIMEOUT_S))
    except (OSError, subprocess.SubprocessError):
        pass  # the GPU list stands without the CUDA version
    return HardwareReport(gpus=gpus, driver_version=driver, cuda_driver_version=cuda, source="nvidia-smi"), ""
