"""What a setup was asked to do, and what both the wizard and ``beedeck setup`` read before the steps run: the
engines and offers for the pick on this machine (releases: the recorded listings, served by the local fake), the
build's arguments, the card class."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.engine.engine_offers import BUILD, DOWNLOAD, EXISTING, STARTER_BUILD_WHY
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.releases.index import RELEASES_API_ENV
from beedeck.core.models.recommend.from_catalog import Choice
from beedeck.core.setup import SetupChoices, SetupServices, build_args, card_of, find_engines, unlisted_offers
from tests.conftest import FIXTURES
from tests.fakes.fake_nvml import detect_no_gpu, detect_rtx4090
from tests.fakes.fake_releases import FakeReleases


@pytest.fixture(autouse=True)
def releases(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeReleases]:
    import beedeck.core.engine.engine_offers as offers_mod

    monkeypatch.setattr(offers_mod, "host_platform", lambda: ("linux", "x64"))
    with FakeReleases() as fake:
        fake.add_listing(FIXTURES / "releases" / "mainline.json")
        fake.add_listing(FIXTURES / "releases" / "beellama.json")
        monkeypatch.setenv(RELEASES_API_ENV, fake.url)
        yield fake


def _pick(generation: Generation = Generation.BEE_B) -> Choice:
    s = LaunchSettings(target="t.gguf", draft="d.gguf", spec_mode=Mode.DFLASH, ctx_size=32768,
                       cache_type_k="q8_0", cache_type_v="q8_0")
    return Choice("fake", "Fake pair", generation, "org/t-GGUF", "t.gguf", "Q4_K_M", "org/d-GGUF", "d.gguf",
                  "Q4_K_M", s, None)


def test_the_build_gets_this_machines_gpus_and_the_picks_kv_types_with_those_named_outright() -> None:
    services = SetupServices()
    gpu = SetupChoices(detect_rtx4090(), _pick(), overrides={"cache_type_k": "f16"})
    args = build_args(gpu, services.registry)
    assert args == {"gpus": [(8, 9)], "cpu_only": False, "cache_pairs": [("f16", "q8_0")], "driver_cuda": "13.0",
                    "registry": services.registry}
    cpu = build_args(SetupChoices(detect_no_gpu(), None), services.registry)
    assert cpu["cpu_only"] is True and cpu["gpus"] == [] and cpu["cache_pairs"] is None  # the default kernel set
    assert gpu.settings().cache_type_k == "f16" and gpu.choice is not None and gpu.choice.settings.cache_type_k == "q8_0"


def test_the_card_class_and_the_memory_the_settings_are_planned_for() -> None:
    gpu = SetupChoices(detect_rtx4090(), _pick())
    assert card_of(gpu.report) == "24gb-ada" and card_of(detect_no_gpu()) == "smaller" and card_of(None) == "smaller"
    assert gpu.free_vram() and gpu.free_vram()[0] > 20 << 30 and gpu.gpu and not gpu.starter
    starter = SetupChoices(detect_rtx4090(), _pick(), use_starter=True)  # the starter runs on the CPU
    assert starter.free_vram() == [] and starter.starter and starter.no_draft


@pytest.mark.engine
def test_on_a_gpu_machine_the_download_comes_first_and_the_cpu_starter_is_offered_with_its_cost(
        starter_engine_path: Path) -> None:
    services = SetupServices(locate_starter=lambda: starter_engine_path,
                             missing_build_tools=lambda report, root: [])
    records, offers = find_engines(SetupChoices(detect_rtx4090(), _pick()), services)
    assert [r.id for r in records] == ["starter"]  # registered on the way (its probe: never on a GUI thread)
    assert offers.default == DOWNLOAD and offers[DOWNLOAD].enabled and "v0.4.7" in offers[DOWNLOAD].label
    assert "leave the GPU idle" in offers[EXISTING].why and offers[BUILD].enabled
    _records, starter = find_engines(SetupChoices(detect_rtx4090(), None), services)
    assert starter.default == EXISTING and not starter[DOWNLOAD].enabled and starter[BUILD].why == STARTER_BUILD_WHY


def test_an_engine_list_that_cannot_be_read_leaves_only_the_build() -> None:
    offers = unlisted_offers(False, PermissionError("engines: permission denied"))
    assert offers.default == BUILD and offers[BUILD].enabled
    assert not offers[DOWNLOAD].enabled and "engines: permission denied" in offers[EXISTING].why
    assert not unlisted_offers(True, OSError("x"))[BUILD].enabled  # the starter needs no build
