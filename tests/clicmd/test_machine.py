"""``beedeck detect``: the real answer on this GPU-less machine, and the text for fake GPUs."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from beedeck.cli import main
from beedeck.clicmd import machine as detect_cmd
from beedeck.core.machine import hardware
from tests.conftest import REPO
from tests.fakes.fake_nvml import FakeNvml, FakeSmi, h200, laptop_4060, rtx4090


def _missing_smi(argv: object, timeout: float) -> str:
    raise FileNotFoundError(2, "No such file or directory", "nvidia-smi")


def test_detect_without_gpu(capsys: pytest.CaptureFixture[str], beedeck_home: Path) -> None:
    assert main(["detect"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        "GPU: none. No NVIDIA GPU driver found: BeeDeck will use the CPU starter profile. "
        "Install the NVIDIA driver to use your GPU."
    )
    assert (
        lines[1]
        == "  (nvml: NVMLError_LibraryNotFound: NVML Shared Library Not Found; nvidia-smi: not installed)"
    )
    assert lines[2].startswith("RAM: ") and lines[2].endswith(" GiB")
    assert lines[3].startswith("CPU: ") and "cores" in lines[3]
    assert lines[4].startswith("Disk: ") and lines[4].endswith(f"free in {beedeck_home / 'data'}")


def test_detect_json_without_gpu(capsys: pytest.CaptureFixture[str], beedeck_home: Path) -> None:
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "none" and data["gpus"] == []
    assert "nvidia-smi: not installed" in data["detail"]
    assert data["system"]["ram_total"] > 0 and data["system"]["cpu_cores_logical"] >= 1
    assert data["system"]["disk_path"] == str(beedeck_home / "data") and data["system"]["disk_free"] > 0


def test_detect_json_as_a_real_process(tmp_path: Path, beedeck_home: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "beedeck", "detect", "--json", "--path", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "gui"), "BEEDECK_HOME": str(beedeck_home)},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["system"]["disk_path"] == str(tmp_path)


def test_detect_with_two_h200(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fake = functools.partial(
        hardware.detect, nvml_module=FakeNvml([h200(0), h200(1)]), smi_runner=_missing_smi
    )
    monkeypatch.setattr(detect_cmd, "detect", fake)
    assert main(["detect", "--path", "/"]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = (
        "NVIDIA H200, 0.0 / 140.4 GiB used (139.8 GiB free, 0.6 GiB reserved), compute 9.0, "
        "driver 580.159.04, CUDA 13.0"
    )
    assert lines[:2] == [f"GPU 0: {expected}", f"GPU 1: {expected}"]
    assert [line.split(":")[0] for line in lines[2:]] == ["RAM", "CPU", "Disk"]


def test_detect_json_with_a_4090(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    fake = functools.partial(
        hardware.detect, nvml_module=FakeNvml([rtx4090()], cuda=12060), smi_runner=_missing_smi
    )
    monkeypatch.setattr(detect_cmd, "detect", fake)
    assert main(["detect", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "nvml" and data["cuda_driver_version"] == "12.6"
    assert data["gpus"][0]["compute_capability"] == [8, 9] and data["gpus"][0]["cuda_arch"] == "89"
    assert data["gpus"][0]["memory_total"] == 24564 * 1024 * 1024


def test_text_says_when_nvidia_smi_answered() -> None:
    import pynvml

    report = hardware.detect(
        nvml_module=FakeNvml(init_error=pynvml.NVMLError_LibraryNotFound), smi_runner=FakeSmi()
    )
    text = detect_cmd.format_report(report)
    assert "  (read with nvidia-smi; nvml: NVMLError_LibraryNotFound: NVML Shared Library Not Found)" in text


def test_text_for_a_laptop_without_power_readings() -> None:
    report = hardware.detect(nvml_module=FakeNvml([laptop_4060()], cuda=12060), smi_runner=_missing_smi)
    first = detect_cmd.format_report(report).splitlines()[0]
    assert first == (
        "GPU 0: NVIDIA GeForce RTX 4060 Laptop GPU, 0.0 / 8.0 GiB used (7.7 GiB free, 0.2 GiB reserved), "
        "compute 8.9, driver 580.159.04, CUDA 12.6"
    )
