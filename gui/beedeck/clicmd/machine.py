"""``beedeck detect``: the GPUs, RAM, CPU cores and free disk BeeDeck sees (``--json`` for scripts)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from beedeck.core.machine.hardware import detect
from beedeck.core.machine.report import GIB, GpuInfo, HardwareReport, system_rows


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f}"


def gpu_line(gpu: GpuInfo, report: HardwareReport) -> str:
    cc = f"{gpu.compute_capability[0]}.{gpu.compute_capability[1]}" if gpu.compute_capability else "?"
    reserved = f", {_gib(gpu.memory_reserved)} GiB reserved" if gpu.memory_reserved else ""
    return (
        f"GPU {gpu.index}: {gpu.name}, {_gib(gpu.memory_used)} / {_gib(gpu.memory_total)} GiB used "
        f"({_gib(gpu.memory_free)} GiB free{reserved}), compute {cc}, "
        f"driver {report.driver_version or '?'}, CUDA {report.cuda_driver_version or '?'}"
    )


def format_report(report: HardwareReport) -> str:
    """The human-readable text of ``beedeck detect``."""
    lines: list[str] = []
    if report.gpus:
        lines += [gpu_line(g, report) for g in report.gpus]
        if report.source != "nvml":
            lines.append(f"  (read with {report.source}; {report.detail})" if report.detail else "")
    else:
        lines.append(f"GPU: none. {report.reason}")
        if report.detail:
            lines.append(f"  ({report.detail})")
    lines += [f"{what}: {value}" for what, value in system_rows(report.system)]
    return "\n".join(line for line in lines if line)


def _models_folder() -> str:
    try:
        from beedeck.core import paths

        return os.fspath(paths.data_dir())
    except Exception:  # platformdirs missing or the folder not creatable: report the current folder
        return os.getcwd()


def run(args: argparse.Namespace) -> int:
    report = detect(disk_path=args.path or _models_folder())
    if args.json:
        data: dict[str, Any] = report.to_dict()
        print(json.dumps(data, indent=2))
    else:
        print(format_report(report))
    return 0


def register(sub: Any, groups: dict[str, Any]) -> None:
    parser = sub.add_parser("detect", help="show the GPUs, RAM, CPU cores and free disk BeeDeck sees")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--path", help="folder whose free disk space to report (default: BeeDeck's data folder)"
    )
    parser.set_defaults(func=run)
