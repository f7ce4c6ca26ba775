"""The wizard's three engine offers, decided in core against the recorded release listings served by the
releases fake: which one is preselected, and the reasons each gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beedeck.core.engine.engine_offers import (
    BUILD,
    DOWNLOAD,
    EXISTING,
    STARTER_BUILD_WHY,
    STARTER_WHY,
    engine_offers,
    order_records,
)
from beedeck.core.engine.registry import EngineRecord, Origin, SmokeResult
from beedeck.core.machine.report import GpuInfo, HardwareReport
from tests.conftest import FIXTURES
from tests.fakes.fake_releases import FakeReleases

LINUX = ("linux", "x64")


@pytest.fixture
def fake() -> Iterator[FakeReleases]:
    with FakeReleases() as server:
        server.add_listing(FIXTURES / "releases" / "mainline.json")
        server.add_listing(FIXTURES / "releases" / "beellama.json")
        yield server


def _gpu(cuda: str = "13.0") -> HardwareReport:
    gpu = GpuInfo(index=0, name="NVIDIA GeForce RTX 4090", memory_total=24 * 2**30, memory_free=23 * 2**30,
                  compute_capability=(8, 9))
    return HardwareReport(gpus=[gpu], driver_version="580.159.04", cuda_driver_version=cuda, source="nvml")


def _engine(id_: str, generation: str, backend: str, origin: Origin = Origin.DOWNLOADED) -> EngineRecord:
    return EngineRecord(id=id_, origin=origin, binary=f"/e/{id_}/llama-server", name=id_, generation=generation,
                        version="x", smoke=SmokeResult(True, "ok", backend))


def test_a_registered_gpu_engine_of_the_pairs_generation_is_preselected(fake: FakeReleases) -> None:
    records = order_records([_engine("starter", "mainline", "cpu", Origin.STARTER),
                             _engine("bee-cpu", "bee-b", "cpu"), _engine("bee-cuda", "bee-b", "cuda"),
                             _engine("ml-cuda", "mainline", "cuda")], "bee-b", gpu=True)
    assert [r.id for r in records] == ["bee-cuda", "bee-cpu", "ml-cuda", "starter"]  # the CPU starter last
    offers = engine_offers(_gpu(), records, generation="bee-b", starter_mode=False, api_url=fake.url, host=LINUX)
    assert offers.default == EXISTING and offers[EXISTING].why.startswith("bee-cuda: bee-b x, cuda.")
    assert offers[DOWNLOAD].enabled and offers[DOWNLOAD].choice is not None
    assert offers[DOWNLOAD].choice.tag == "v0.4.7" and offers[DOWNLOAD].backend == "cuda"


def test_only_a_cpu_engine_or_another_generation_leaves_the_download_first(fake: FakeReleases) -> None:
    records = order_records([_engine("ml-cuda", "mainline", "cuda")], "bee-b", gpu=True)
    offers = engine_offers(_gpu(), records, generation="bee-b", starter_mode=False, api_url=fake.url, host=LINUX)
    assert offers.default == DOWNLOAD and "wants a BeeLlama engine" in offers[EXISTING].why
    offers = engine_offers(_gpu(), [], generation="mainline", starter_mode=False, api_url=fake.url, host=LINUX,
                           missing_tools=lambda: ["cmake (Install CMake >= 3.18)"])
    assert offers.default == DOWNLOAD and not offers[EXISTING].enabled and "beedeck engine add" in offers[EXISTING].why
    assert offers[BUILD].enabled and "Missing here: cmake (Install CMake >= 3.18)" in offers[BUILD].why
    assert "b11434" in offers[DOWNLOAD].label and "v0.6.0 carries no binaries" in offers[DOWNLOAD].why


def test_a_gen_a_pair_on_linux_gets_no_download_and_the_reason(fake: FakeReleases) -> None:
    offers = engine_offers(_gpu(), [], generation="bee-a", starter_mode=False, api_url=fake.url, host=LINUX)
    assert not offers[DOWNLOAD].enabled and offers.default == BUILD
    assert "No prebuilt BeeLlama 0.1-0.3 for this machine" in offers[DOWNLOAD].why
    assert "Linux CUDA builds only from v0.4.1" in offers[DOWNLOAD].why


def test_without_a_gpu_the_download_is_the_cpu_build_and_the_starter_needs_nothing(fake: FakeReleases) -> None:
    offers = engine_offers(HardwareReport(), [], generation="mainline", starter_mode=False, api_url=fake.url,
                           host=LINUX)
    assert offers[DOWNLOAD].backend == "cpu" and offers[DOWNLOAD].choice is not None
    assert offers[DOWNLOAD].choice.asset.name == "llama-b11434-bin-ubuntu-x64.tar.gz"
    assert "no NVIDIA GPU found" in offers[DOWNLOAD].why and "builds a CPU engine" in offers[BUILD].why
    starter = [_engine("starter", "mainline", "cpu", Origin.STARTER)]
    fake.requests.clear()
    offers = engine_offers(HardwareReport(), starter, generation="", starter_mode=True, api_url=fake.url, host=LINUX)
    assert offers.default == EXISTING and offers[DOWNLOAD].why == STARTER_WHY
    assert offers[BUILD].why == STARTER_BUILD_WHY != STARTER_WHY  # each greyed choice its own words (issue 37)
    assert not fake.requests  # the starter path asks no releases API
