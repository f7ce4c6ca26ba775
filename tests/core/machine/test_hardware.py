"""Hardware detection: the real no-GPU path of this machine, NVML through a fake with pynvml's real
shapes and exceptions, nvidia-smi through canned recorded output and a real executable, the sampler."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path

import pynvml
import pytest

from beedeck.core.machine import nvidia_smi, report, sampler, system
from beedeck.core.machine.hardware import detect
from beedeck.core.machine.report import HardwareReport
from beedeck.core.machine.sampler import GpuSampler
from tests.fakes.fake_nvml import (
    MIB,
    SMI_BANNER_H200,
    SMI_CSV_H200X2,
    SMI_CSV_LAPTOP_NA,
    FakeNvml,
    FakeSmi,
    h200,
    laptop_4060,
    rtx3090,
    rtx4090,
)

NO_DRIVER_TEXT = "No NVIDIA GPU driver found: BeeDeck will use the CPU starter profile. Install the NVIDIA driver to use your GPU."


def _missing_smi(argv: object, timeout: float) -> str:
    raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")


# ----------------------------------------------------------------- the real machine (no GPU here)


def test_real_no_gpu_path_on_this_machine(tmp_path: Path) -> None:
    # This machine has no NVIDIA driver: the real pynvml cannot load libnvidia-ml, nvidia-smi is absent.
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()
    report = detect(disk_path=tmp_path)
    assert report.source == "none"
    assert not report.has_gpu and report.best_gpu is None and report.total_vram == 0
    assert report.reason == NO_DRIVER_TEXT
    assert (
        report.detail
        == "nvml: NVMLError_LibraryNotFound: NVML Shared Library Not Found; nvidia-smi: not installed"
    )
    s = report.system
    assert s.ram_total and s.ram_available and 0 < s.ram_available <= s.ram_total
    assert s.cpu_cores_logical and s.cpu_cores_logical >= 1
    assert s.cpu_cores_physical is None or s.cpu_cores_physical <= s.cpu_cores_logical
    assert s.disk_path == str(tmp_path) and s.disk_free and s.disk_free > 0


def test_real_sampler_without_gpu_is_empty_and_does_not_retry() -> None:
    sampler = GpuSampler()
    assert sampler.sample() == []
    assert "LibraryNotFound" in sampler.unavailable_reason
    assert sampler.sample() == []
    sampler.stop()


def test_missing_nvidia_ml_py_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    report = detect(smi_runner=_missing_smi)
    assert report.source == "none"
    assert report.detail == "nvml: nvidia-ml-py not installed; nvidia-smi: not installed"
    assert "nvidia-ml-py package is missing" in report.reason and "pip install nvidia-ml-py" in report.reason


# ----------------------------------------------------------------- NVML through the fake


def test_rtx4090() -> None:
    nvml = FakeNvml([rtx4090()], driver="560.35.03", cuda=12060)
    report = detect(nvml_module=nvml, smi_runner=_missing_smi)
    assert report.source == "nvml" and report.reason == "" and report.detail == ""
    assert (report.driver_version, report.cuda_driver_version) == ("560.35.03", "12.6")
    (g,) = report.gpus
    assert g.name == "NVIDIA GeForce RTX 4090" and g.index == 0
    assert g.memory_total == 24564 * MIB
    assert (g.memory_reserved, g.memory_used) == (387 * MIB, 1210 * MIB)
    assert g.memory_free == (24564 - 387 - 1210) * MIB
    assert g.compute_capability == (8, 9) and g.cuda_arch == "89"
    assert (g.utilization, g.temperature, g.power_w, g.power_limit_w) == (3, 41, 31.5, 450.0)
    assert g.pci_bus_id == "00000000:01:00.0" and g.uuid and g.uuid.startswith("GPU-")
    assert (nvml.init_calls, nvml.shutdown_calls, nvml.refcount) == (1, 1, 0)


def test_dual_gpu_best_and_total() -> None:
    report = detect(nvml_module=FakeNvml([rtx4090(), rtx3090()]), smi_runner=_missing_smi)
    assert [g.name for g in report.gpus] == ["NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 3090"]
    assert report.gpus[1].compute_capability == (8, 6) and report.gpus[1].cuda_arch == "86"
    assert report.has_gpu
    assert report.total_vram == (24564 + 24576) * MIB
    best = report.best_gpu
    assert best is not None and best.index == 1  # the idle 3090 has more free memory


def test_h200_recorded_values() -> None:
    report = detect(nvml_module=FakeNvml([h200(0), h200(1)]), smi_runner=_missing_smi)
    assert report.cuda_driver_version == "13.0" and report.driver_version == "580.159.04"
    g = report.gpus[0]
    assert (g.memory_total, g.memory_reserved, g.memory_used, g.memory_free) == (
        150754820096,
        644939776,
        0,
        150109880320,
    )
    assert g.compute_capability == (9, 0) and g.cuda_arch == "90"
    assert g.power_w == pytest.approx(80.004) and g.power_limit_w == 700.0
    assert [x.pci_bus_id for x in report.gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    best = report.best_gpu
    assert best is not None and best.index == 0  # equal GPUs: the lowest index


@pytest.mark.parametrize(
    "error",
    [
        pynvml.NVMLError_FunctionNotFound,
        pynvml.NVMLError_InvalidArgument,
        pynvml.NVMLError_ArgumentVersionMismatch,
    ],
)
def test_old_driver_falls_back_to_memory_v1(error: type[pynvml.NVMLError]) -> None:
    nvml = FakeNvml([h200()], memory_v2_error=error)
    (g,) = detect(nvml_module=nvml, smi_runner=_missing_smi).gpus
    # v1: the driver's reserve is inside "used" and unknown on its own; free is the same as v2's.
    assert g.memory_reserved is None
    assert g.memory_used == 644939776 and g.memory_free == 150109880320
    assert nvml.calls.count("nvmlDeviceGetMemoryInfo_v2") == 1 and "nvmlDeviceGetMemoryInfo" in nvml.calls


def test_memory_v2_is_asked_first() -> None:
    nvml = FakeNvml([rtx3090()])
    detect(nvml_module=nvml, smi_runner=_missing_smi)
    assert "nvmlDeviceGetMemoryInfo_v2" in nvml.calls and "nvmlDeviceGetMemoryInfo" not in nvml.calls


def test_not_supported_optional_fields_are_none() -> None:
    (g,) = detect(nvml_module=FakeNvml([laptop_4060()]), smi_runner=_missing_smi).gpus
    assert (g.temperature, g.power_w, g.power_limit_w) == (None, None, None)
    assert g.memory_total == 8188 * MIB and g.compute_capability == (8, 9) and g.utilization == 0


def test_a_broken_gpu_does_not_hide_the_others() -> None:
    lost = rtx4090()
    lost.errors["nvmlDeviceGetMemoryInfo_v2"] = pynvml.NVMLError_GpuIsLost
    report = detect(nvml_module=FakeNvml([lost, rtx3090()]), smi_runner=_missing_smi)
    assert [g.name for g in report.gpus] == ["NVIDIA GeForce RTX 3090"]
    assert report.detail == "nvml: gpu 0: NVMLError_GpuIsLost: GPU is lost"


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (pynvml.NVMLError_LibraryNotFound, [NO_DRIVER_TEXT]),
        (pynvml.NVMLError_DriverNotLoaded, ["installed but not loaded", "modprobe nvidia", "Restart"]),
        (pynvml.NVMLError_NoPermission, ["no permission", "/dev/nvidia*", "video"]),
        (pynvml.NVMLError_LibRmVersionMismatch, ["driver was updated", "Restart"]),
    ],
)
def test_init_failures_have_their_own_remedy(error: type[pynvml.NVMLError], words: list[str]) -> None:
    nvml = FakeNvml([rtx4090()], init_error=error)
    report = detect(nvml_module=nvml, smi_runner=_missing_smi)
    assert report.source == "none" and report.gpus == []
    for word in words:
        assert word in report.reason
    assert "CPU starter profile" in report.reason
    assert report.detail == f"nvml: {error.__name__}: {error()}; nvidia-smi: not installed"
    assert nvml.shutdown_calls == 0  # never initialised, so nothing to shut down


def test_driver_loaded_but_no_device() -> None:
    report = detect(nvml_module=FakeNvml([]), smi_runner=FakeSmi(mode="no-devices"))
    assert report.source == "none"
    assert "sees no GPU" in report.reason and "nvidia-smi -L" in report.reason
    assert report.detail == "nvml: driver loaded, 0 devices; nvidia-smi: exit 6: No devices were found"


def test_unexpected_errors_never_escape_and_nvml_is_shut_down() -> None:
    class Exploding(FakeNvml):
        def nvmlDeviceGetCount(self) -> int:
            raise RuntimeError("boom")

    nvml = Exploding([rtx4090()])
    report = detect(nvml_module=nvml, smi_runner=_missing_smi)
    assert report.source == "none" and report.detail.startswith("nvml: RuntimeError: boom;")
    assert "could not read the NVIDIA GPU" in report.reason
    assert (nvml.shutdown_calls, nvml.refcount) == (1, 0)


# ----------------------------------------------------------------- nvidia-smi fallback


def test_smi_fallback_with_recorded_h200_output() -> None:
    smi = FakeSmi()
    report = detect(nvml_module=FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound), smi_runner=smi)
    assert report.source == "nvidia-smi" and report.reason == ""
    assert report.detail == "nvml: NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    assert (report.driver_version, report.cuda_driver_version) == ("580.159.04", "13.0")
    g0, g1 = report.gpus
    assert (g0.index, g1.index) == (0, 1)
    assert g0.memory_total == 143771 * MIB == 150754820096
    assert g0.memory_used == 0 and g0.memory_free == 143156 * MIB
    assert g0.memory_reserved == 615 * MIB  # total - used - free: the driver's reserve, as NVML v2 has it
    assert g0.compute_capability == (9, 0) and g0.cuda_arch == "90"
    assert (g0.utilization, g0.temperature, g0.power_w, g0.power_limit_w) == (0, 35, 79.98, 700.0)
    assert g1.uuid == "GPU-18250456-1f9d-21f5-c7c8-5f3088cfcf3e" and g1.pci_bus_id == "00000000:00:07.0"
    assert smi.calls == [(nvidia_smi.SMI_QUERY_ARGV, 10.0), (["nvidia-smi"], 10.0)]


def test_smi_not_available_values_become_none() -> None:
    gpus, driver = nvidia_smi.parse_smi_csv(SMI_CSV_LAPTOP_NA)
    (g,) = gpus
    assert driver == "560.35.03"
    assert (g.power_w, g.power_limit_w) == (None, None)
    assert g.temperature == 45 and g.memory_total == 8188 * MIB and g.memory_reserved == 245 * MIB
    (bare,), _ = nvidia_smi.parse_smi_csv("0, X, [N/A], [N/A], [N/A], [N/A], [Not Supported], [N/A], , , , d\n")
    assert bare.compute_capability is None and bare.uuid is None and bare.memory_total == 0


def test_smi_timeout_is_reported() -> None:
    report = detect(
        nvml_module=FakeNvml(init_error=pynvml.NVMLError_Unknown), smi_runner=FakeSmi(mode="timeout")
    )
    assert report.source == "none"
    assert (
        report.detail
        == "nvml: NVMLError_Unknown: Unknown Error; nvidia-smi: no answer in 10 s (wedged driver?)"
    )
    assert "Check that `nvidia-smi` works" in report.reason


def test_cuda_version_from_banner() -> None:
    assert nvidia_smi.parse_smi_cuda_version(SMI_BANNER_H200) == "13.0"
    assert nvidia_smi.parse_smi_cuda_version("no banner") is None


def test_real_nvidia_smi_executable_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_smi for real: a child process named nvidia-smi on PATH printing the recorded output."""
    (tmp_path / "csv.txt").write_text(SMI_CSV_H200X2)
    (tmp_path / "banner.txt").write_text(SMI_BANNER_H200)
    exe = tmp_path / "nvidia-smi"
    exe.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --query-gpu=*) cat "{tmp_path}/csv.txt";; *) cat "{tmp_path}/banner.txt";; esac\n'
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    report = detect(disk_path=tmp_path)  # the real pynvml still fails here, so nvidia-smi answers
    assert report.source == "nvidia-smi"
    assert [g.name for g in report.gpus] == ["NVIDIA H200", "NVIDIA H200"]
    assert report.cuda_driver_version == "13.0"


# ----------------------------------------------------------------- helpers and serialisation


def test_cuda_version_text() -> None:
    assert report.cuda_version_text(13000) == "13.0"
    assert report.cuda_version_text(12040) == "12.4"
    assert report.cuda_version_text(0) is None


def test_report_round_trips_through_json() -> None:
    report = detect(nvml_module=FakeNvml([h200(0), rtx3090()]), smi_runner=_missing_smi, disk_path="/")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["gpus"][0]["compute_capability"] == [9, 0]
    assert HardwareReport.from_dict(data) == report


def test_disk_free_of_a_folder_not_created_yet(tmp_path: Path) -> None:
    info = system.system_info(tmp_path / "not" / "yet")
    assert info.disk_path == str(tmp_path / "not" / "yet") and info.disk_free and info.disk_free > 0


# ----------------------------------------------------------------- sampler


def test_sampler_sample_on_demand_with_pid_memory() -> None:
    gpu0, gpu1 = h200(0), h200(1)
    gpu1.processes = {4242: 1616904192, 99: None}  # None: WDDM hides per-process memory
    gpu1.used = 1626144768
    nvml = FakeNvml([gpu0, gpu1])
    sampler = GpuSampler(nvml_module=nvml, pid=4242)
    s0, s1 = sampler.sample()
    assert (s0.pid_memory, s1.pid_memory) == (None, 1616904192)
    assert s1.memory_used == 1626144768 and s1.memory_free == 150754820096 - 644939776 - 1626144768
    assert (s0.temperature, s0.power_w, s0.utilization) == (35, pytest.approx(80.004), 0)
    sampler.sample()
    assert nvml.init_calls == 1  # opened once, kept open between samples
    sampler.stop()
    assert (nvml.shutdown_calls, nvml.refcount) == (1, 0)
    sampler.stop()
    assert nvml.shutdown_calls == 1


def test_sampler_thread_calls_back_and_stops() -> None:
    nvml = FakeNvml([laptop_4060()])
    got: list[list[sampler.GpuSample]] = []
    three = threading.Event()

    def on_sample(samples: list[sampler.GpuSample]) -> None:
        got.append(samples)
        if len(got) == 1:
            raise ValueError("a broken callback must not kill the sampler")
        if len(got) >= 3:
            three.set()

    sampler = GpuSampler(nvml_module=nvml, interval=0.01, on_sample=on_sample)
    sampler.start()
    assert three.wait(5)
    sampler.stop()
    assert not sampler.running
    assert got[0][0].temperature is None and got[0][0].power_w is None  # NotSupported on this laptop
    assert got[0][0].memory_total == 8188 * MIB
    assert (nvml.shutdown_calls, nvml.refcount) == (1, 0)


def test_sampler_without_gpu_reports_empty_once_and_ends() -> None:
    nvml = FakeNvml(init_error=pynvml.NVMLError_DriverNotLoaded)
    got: list[list[sampler.GpuSample]] = []
    sampler = GpuSampler(nvml_module=nvml, interval=0.01, on_sample=got.append)
    sampler.start()
    assert sampler._thread is not None
    sampler._thread.join(5)
    assert not sampler.running and got == [[]] and nvml.init_calls == 1
    sampler.stop()
    assert nvml.shutdown_calls == 0
