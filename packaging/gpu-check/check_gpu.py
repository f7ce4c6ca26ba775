#!/usr/bin/env python3
"""Record what BeeDeck's hardware detection sees on a real NVIDIA machine, next to the raw sources.

Run from a checkout (no install needed; needs nvidia-ml-py, psutil is optional, no network):

    python3 packaging/gpu-check/check_gpu.py [--out DIR]

Prints, in sections: ``beedeck detect --json`` and the human text; raw pynvml values (memory v1 vs
v2, every optional call and the exception it raised); ``nvidia-smi`` CSV (BeeDeck's exact query,
with and without units), banner and ``-L``; BeeDeck's nvidia-smi fallback on that real CSV, compared
field by field with the NVML report; and a few GpuSampler readings with their cost. With ``--out``
(or $OUT) it also writes gpu-check.txt (all sections) and detect.json there.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "gui"))

SECTIONS: dict[str, str] = {}


def section(name: str, text: str) -> None:
    SECTIONS[name] = text
    print(f"\n===== {name} =====\n{text}", flush=True)


def call(fn: Any, *args: Any, **kwargs: Any) -> str:
    """repr of the result, or the exception's class and text."""
    try:
        t0 = time.perf_counter()
        value = fn(*args, **kwargs)
        ms = (time.perf_counter() - t0) * 1000
        return f"{value!r}  [{ms:.2f} ms]"
    except Exception as exc:
        return f"RAISED {type(exc).__name__}: {exc}"


def raw_nvml() -> str:
    out: list[str] = []
    try:
        from importlib.metadata import version

        out.append(f"nvidia-ml-py {version('nvidia-ml-py')}")
    except Exception as exc:
        out.append(f"nvidia-ml-py version unknown: {exc}")
    try:
        import pynvml as N
    except Exception as exc:
        return f"import pynvml failed: {type(exc).__name__}: {exc}"
    out.append(f"pynvml file {N.__file__}")
    out.append("nvmlInit " + call(N.nvmlInit))
    for name in (
        "nvmlSystemGetDriverVersion",
        "nvmlSystemGetNVMLVersion",
        "nvmlSystemGetCudaDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCount",
    ):
        out.append(f"{name} " + call(getattr(N, name)))
    try:
        count = N.nvmlDeviceGetCount()
    except Exception:
        count = 0
    for i in range(count):
        h = N.nvmlDeviceGetHandleByIndex(i)
        out.append(f"--- device {i}")
        for name, args in (
            ("nvmlDeviceGetName", ()),
            ("nvmlDeviceGetUUID", ()),
            ("nvmlDeviceGetCudaComputeCapability", ()),
            ("nvmlDeviceGetUtilizationRates", ()),
            ("nvmlDeviceGetTemperature", (N.NVML_TEMPERATURE_GPU,)),
            ("nvmlDeviceGetPowerUsage", ()),
            ("nvmlDeviceGetEnforcedPowerLimit", ()),
            ("nvmlDeviceGetPowerManagementLimit", ()),
            ("nvmlDeviceGetFanSpeed", ()),
            ("nvmlDeviceGetMigMode", ()),
            ("nvmlDeviceGetComputeRunningProcesses", ()),
            ("nvmlDeviceGetComputeRunningProcesses_v3", ()),
            ("nvmlDeviceGetComputeRunningProcesses_v2", ()),
        ):
            fn = getattr(N, name, None)
            out.append(f"{name} " + (call(fn, h, *args) if fn else "absent in this pynvml"))
        out.append("nvmlDeviceGetPciInfo.busId " + call(lambda h=h: N.nvmlDeviceGetPciInfo(h).busId))
        out.append("memory v1 " + call(N.nvmlDeviceGetMemoryInfo, h))
        out.append("memory v2 " + call(N.nvmlDeviceGetMemoryInfo, h, version=N.nvmlMemory_v2))
        try:
            m1 = N.nvmlDeviceGetMemoryInfo(h)
            m2 = N.nvmlDeviceGetMemoryInfo(h, version=N.nvmlMemory_v2)
            out.append(
                f"v1 total/used/free {m1.total} {m1.used} {m1.free}\n"
                f"v2 total/reserved/used/free {m2.total} {m2.reserved} {m2.used} {m2.free}\n"
                f"v1.used - v2.used = {m1.used - m2.used} (v2.reserved {m2.reserved}); "
                f"free equal: {m1.free == m2.free}"
            )
        except Exception as exc:
            out.append(f"memory compare failed: {type(exc).__name__}: {exc}")
    out.append("nvmlShutdown " + call(N.nvmlShutdown))
    return "\n".join(out)


def smi(argv: list[str]) -> str:
    try:
        t0 = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        ms = (time.perf_counter() - t0) * 1000
        return f"$ {' '.join(argv)}  [rc {p.returncode}, {ms:.0f} ms]\n{p.stdout}{p.stderr}"
    except Exception as exc:
        return f"$ {' '.join(argv)}\nRAISED {type(exc).__name__}: {exc}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder to write the sections to")
    args = ap.parse_args()
    section("platform", f"python {sys.version}\n{platform.platform()}\nrepo {REPO}")

    from beedeck.core.machine import hardware, nvidia_smi, sampler

    try:
        from contextlib import redirect_stdout
        from io import StringIO

        from beedeck.cli import main as cli_main

        for argv, name in (
            (["detect", "--json", "--path", str(REPO)], "beedeck detect --json"),
            (["detect", "--path", str(REPO)], "beedeck detect"),
        ):
            buf = StringIO()
            with redirect_stdout(buf):
                rc = cli_main(argv)
            section(name, buf.getvalue() + f"[exit {rc}]")
    except Exception:
        section("beedeck cli failed (falling back to hardware.detect)", traceback.format_exc())
        section("detect() as json", json.dumps(hardware.detect(disk_path=REPO).to_dict(), indent=2))

    t0 = time.perf_counter()
    nvml_report = hardware.detect(disk_path=REPO)
    section("detect() timing", f"{(time.perf_counter() - t0) * 1000:.1f} ms, source {nvml_report.source}")

    section("raw pynvml", raw_nvml())
    section("nvidia-smi query (BeeDeck's argv)", smi(nvidia_smi.SMI_QUERY_ARGV))
    section(
        "nvidia-smi query with units",
        smi([a for a in nvidia_smi.SMI_QUERY_ARGV if not a.startswith("--format")] + ["--format=csv"]),
    )
    section("nvidia-smi banner", smi(nvidia_smi.SMI_BANNER_ARGV))
    section("nvidia-smi -L", smi(["nvidia-smi", "-L"]))

    # The fallback path on the real CSV: an NVML stand-in whose init fails like a missing library.
    import pynvml

    class NoNvml:
        NVMLError = pynvml.NVMLError

        @staticmethod
        def nvmlInit() -> None:
            raise pynvml.NVMLError_LibraryNotFound()

    smi_report = hardware.detect(nvml_module=NoNvml(), disk_path=REPO)
    diffs = []
    for a, b in zip(nvml_report.gpus, smi_report.gpus, strict=False):
        for key, va in vars(a).items():
            vb = getattr(b, key)
            if va != vb:
                diffs.append(f"gpu {a.index} {key}: nvml={va!r} smi={vb!r}")
    for key in ("driver_version", "cuda_driver_version"):
        if getattr(nvml_report, key) != getattr(smi_report, key):
            diffs.append(f"{key}: nvml={getattr(nvml_report, key)!r} smi={getattr(smi_report, key)!r}")
    section(
        "nvidia-smi fallback vs nvml",
        json.dumps(smi_report.to_dict(), indent=2) + "\n--- differences (nvml vs smi)\n" + "\n".join(diffs),
    )

    got: list[str] = []
    sampler = sampler.GpuSampler(interval=0.2, pid=os.getpid(), on_sample=lambda s: got.append(repr(s)))
    t0 = time.perf_counter()
    first = sampler.sample()
    t1 = time.perf_counter()
    second = sampler.sample()
    t2 = time.perf_counter()
    sampler.start()
    deadline = time.time() + 3
    while len(got) < 3 and time.time() < deadline:
        time.sleep(0.05)
    sampler.stop()
    section(
        "GpuSampler",
        f"first sample (opens NVML) {(t1 - t0) * 1000:.2f} ms, second {(t2 - t1) * 1000:.2f} ms\n"
        f"{first}\n{second}\nthread callbacks: {len(got)}\n" + "\n".join(got[:3]),
    )

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        # Two files only: the device runner brings back at most 8.
        text = "".join(f"===== {name} =====\n{body}\n\n" for name, body in SECTIONS.items())
        (out / "gpu-check.txt").write_text(text)
        (out / "detect.json").write_text(json.dumps(nvml_report.to_dict(), indent=2) + "\n")
        print(f"\nwrote gpu-check.txt and detect.json to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
