"""The recommend page's search box: a Hub repo sized from its headers in the background, shown with every
quant and draft kind and the fast path; a missing repo's own message; a stale answer dropped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.models.recommend.from_repo import recommend_repo
from beedeck.core.setup import STEP
from beedeck.ui.setup.hub_search import HubSearch
from beedeck.ui.setup.services import WizardServices
from beedeck.ui.setup.setup_wizard import SetupWizard
from tests.conftest import PERSISTENT
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fakes.fake_nvml import detect_rtx4090 as gpu_detect
from tests.fakes.inline_runner import run_inline as sync
from tests.fixtures import hub_models

REPO, DRAFTS = "unsloth/Qwen3.8-27B-GGUF", "incoai/Qwen3.8-27B-DFlash2-GGUF"


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    files = hub_models.build_all(PERSISTENT / "hub-models")
    with FakeHub() as h:
        h.add_repo(REPO, {"Qwen3.8-27B-Q4_K_M.gguf": FakeFile.sparse_gguf(files["Qwen3.8-27B-Q4_K_M.gguf"])})
        h.add_repo(DRAFTS, {files["dflash2"].name: FakeFile.sparse_gguf(files["dflash2"])})
        yield h


def test_the_wizard_sizes_a_typed_repo_with_its_drafts(qtbot: QtBot, hub: FakeHub, tmp_path: Path) -> None:
    calls: list[tuple[str, list[int], str, Sequence[str]]] = []

    def size(repo: str, vram: list[int], card: str, drafts: Sequence[str]) -> Any:
        calls.append((repo, vram, card, drafts))
        return recommend_repo(repo, vram, card, draft_repos=[DRAFTS], endpoint=hub.endpoint,
                              cache_dir=tmp_path / "c")

    w = SetupWizard(WizardServices(detect=gpu_detect, runner=sync, size_repo=size, extra={"registry": EngineRegistry()}))
    qtbot.addWidget(w)
    w.restart()
    w.next()
    search = w.recommend_page.hub_search
    with qtbot.waitSignal(search.sized):
        search.field.setText(f"  https://huggingface.co/{REPO}  ")
        search.button.click()
    text = search.result_label.text()
    assert calls and calls[0][2] == "24gb-ada" and calls[0][1]  # the detected 4090's free memory and class
    assert calls[0][3] == []  # no draft repo typed: the catalog's drafts
    assert "Q4_K_M (" in text and "+ MTP (its own head)" in text and "+ DFlash2 Q4_K_M" in text
    assert "tokens of context here" in text and "Fast path: 24 GB Ada (4090)" in text and "published" in text
    assert search.button.isEnabled()


def test_a_search_result_becomes_the_setup_the_wizard_downloads(qtbot: QtBot, hub: FakeHub, tmp_path: Path) -> None:
    """Choosing a sized row makes it the recommendation; the run page then fetches exactly that target and
    drafter from their repos (the MTP row: the target alone, its head is inside it)."""
    fetched: list[tuple[str, str]] = []

    def download(repo: str, filename: str, **_kw: Any) -> list[Path]:
        fetched.append((repo, filename))
        return [tmp_path / filename]

    w = SetupWizard(WizardServices(
        detect=gpu_detect, runner=sync,
        size_repo=lambda repo, vram, card, _drafts: recommend_repo(repo, vram, card, draft_repos=[DRAFTS],
                                                                   endpoint=hub.endpoint, cache_dir=tmp_path / "c"),
        extra={"registry": EngineRegistry(), "download_model": download, "find_local": lambda repo, f: None}))
    qtbot.addWidget(w)
    w.restart()
    w.next()
    page, search = w.recommend_page, w.recommend_page.hub_search
    assert search.rows.isHidden() and search.use_button.isHidden()  # nothing to pick before a search
    with qtbot.waitSignal(search.sized) as sized:
        search.field.setText(REPO)
        search.button.click()
    rec = sized.args[0]
    assert not search.use_button.isHidden() and search.rows.count() == len(rec.fitting())
    first = search.rows.itemData(0)
    assert first is rec.best_row() and first.kind == rec.choice.mode == "dflash2"  # the fast path first
    with qtbot.waitSignal(search.chosen):
        search.use_button.click()
    c = page.choice
    assert c is not None and page.rec is not None and page.rec.primary is c
    assert (c.target_repo, c.target_file, c.draft_repo, c.draft_file) == (
        REPO, "Qwen3.8-27B-Q4_K_M.gguf", DRAFTS, "Qwen3.8-27B-DFlash2-Q4_K_M.gguf")
    assert c.settings.spec_mode == "dflash" and c.settings.draft_n_max == 7 and c.plan is not None and c.plan.fits
    assert "Qwen3.8-27B-Q4_K_M.gguf + Qwen3.8-27B-DFlash2-Q4_K_M.gguf" in page.size_label.text()
    assert page.isComplete()
    setup = w.run_page.make_setup()
    for which in ("target", "draft"):
        STEP[which].run(setup, on_progress=lambda *_: None, on_line=lambda _l: None, cancel_event=threading.Event())
    assert fetched == [(REPO, "Qwen3.8-27B-Q4_K_M.gguf"), (DRAFTS, "Qwen3.8-27B-DFlash2-Q4_K_M.gguf")]
    assert setup.launch_settings().draft == str(tmp_path / "Qwen3.8-27B-DFlash2-Q4_K_M.gguf")
    # the MTP row: no draft to fetch, the run page skips the draft step
    mtp = next(i for i in range(search.rows.count()) if search.rows.itemData(i).kind == "mtp")
    search.rows.setCurrentIndex(mtp)
    search.use_button.click()
    c = page.choice
    assert c is not None and c.draft_file is None and c.settings.spec_mode == "mtp" and c.pair_id != "starter"
    assert page.title_label.text().startswith("Qwen3.8-27B + MTP (its own head): Q4_K_M")
    assert [s.key for s in w.run_page.make_setup().steps()] == ["engine", "target", "smoke", "save"]


def test_a_missing_repo_shows_its_message_and_a_stale_answer_is_dropped(qtbot: QtBot, hub: FakeHub,
                                                                        tmp_path: Path) -> None:
    pending: list[tuple[Callable[[], Any], Callable[[Any], None], Callable[[BaseException], None]]] = []
    search = HubSearch(lambda repo, _d: recommend_repo(repo, [], "smaller", endpoint=hub.endpoint, cache_dir=tmp_path),
                       lambda rec: rec.report([]), lambda fn, ok, err: pending.append((fn, ok, err)))
    qtbot.addWidget(search)
    search.field.setText("nobody/missing-GGUF")
    search.search()
    assert "Reading the GGUF headers of nobody/missing-GGUF" in search.result_label.text()
    assert not search.button.isEnabled()
    search.field.setText(REPO)
    search.search()  # a second search before the first answered
    fn, ok, err = pending[0]
    try:
        fn()
    except Exception as exc:
        err(exc)  # the first, stale answer: dropped
    assert "Reading the GGUF headers of unsloth" in search.result_label.text()
    fn, ok, err = pending[1]
    with qtbot.waitSignal(search.sized):
        ok(fn())
    assert "Fast path" in search.result_label.text()
    with qtbot.waitSignal(search.failed) as failed:
        search.field.setText("nobody/missing-GGUF")
        search.search()
        fn, ok, err = pending[2]
        try:
            fn()
        except Exception as exc:
            err(exc)
    assert "was not found on the Hub" in failed.args[0] and "was not found" in search.result_label.text()
    search.field.setText("")
    search.search()
    assert "OWNER/NAME" in search.result_label.text()


def test_the_default_search_reads_the_services_hub_for_the_default_engine_with_the_typed_drafts(
        qtbot: QtBot, hub: FakeHub, tmp_path: Path) -> None:
    """No ``size_repo`` injected: the services size live from their own endpoint (HF_ENDPOINT is a dead port
    here, tests/ui/setup/conftest.py), for the registry's default engine (BeeLlama v0.4.7 as its probe sees it:
    -ubd 64 on this 24 GB card, KVarN draft caches), with the draft repo typed in the search's second field."""
    import dataclasses

    from beedeck.core.engine.caps import Generation
    from beedeck.core.engine.help_text import caps_from_texts
    from beedeck.core.engine.registry import EngineRecord, Origin
    from tests.fixtures.engines import HERE, help_stdout

    caps = dataclasses.replace(caps_from_texts("/engines/bee/llama-server", (HERE / "beellama-0.4.3-cpu.version.txt")
                                               .read_text(), help_stdout("beellama-0.4.7-cpu")), release="v0.4.7")
    registry = EngineRegistry(tmp_path / "engines")
    registry.save(EngineRecord("bee-047", Origin.DOWNLOADED, caps.path, generation="bee-b", caps=caps.to_dict()))
    registry.set_default("bee-047")
    services = WizardServices(detect=gpu_detect, runner=sync, endpoint=hub.endpoint, extra={"registry": registry})
    assert services.size_repo is None and services.tune_caps() == caps
    w = SetupWizard(services)
    qtbot.addWidget(w)
    w.restart()
    w.next()
    search = w.recommend_page.hub_search
    before = len(hub.requests)  # the page's catalog read went to this Hub too, and cached what it read
    with qtbot.waitSignal(search.sized) as sized:
        search.field.setText(REPO)
        search.drafts_field.setText(f"{DRAFTS},")
        search.button.click()
    rec = sized.args[0]
    assert [s.repo for s in rec.drafts] == [DRAFTS]
    asked = [r.path for r in hub.requests[before:] if r.path.startswith("/api/models/")]
    assert any(REPO in p for p in asked) and any(DRAFTS in p for p in asked)  # this Hub, not HF_ENDPOINT's dead port
    assert rec.generation == Generation.BEE_B and rec.ubd == 64 and rec.card == "24gb-ada"
    d2 = next(r for r in rec.rows if r.kind == "dflash2")
    assert d2.settings.draft_ubatch_size == 64 and d2.settings.draft_cache_type == "kvarn5" and d2.fits
    assert "-ubd 64" in search.result_label.text()
    # a typed draft repo that is not on the Hub is the search's error, not a silent note
    with qtbot.waitSignal(search.failed) as failed:
        search.drafts_field.setText("nobody/no-drafts-GGUF")
        search.button.click()
    assert "nobody/no-drafts-GGUF" in failed.args[0] and "not found" in failed.args[0]


@pytest.mark.parametrize("box", ["field", "drafts_field"])
def test_enter_in_a_search_box_sizes_the_repo_and_stays_on_the_page(qtbot: QtBot, unreachable_hub: str,
                                                                    box: str) -> None:
    """Issue 37: Enter in "Any GGUF repo on the Hub" ran the sizing and also pressed the wizard's default button
    (Next), so the answer (offline: the Hub's error) was only seen after Back. Enter sizes and stays."""
    from PySide6.QtCore import Qt

    w = SetupWizard(WizardServices(detect=gpu_detect, runner=sync, endpoint=unreachable_hub,
                                   extra={"registry": EngineRegistry()}))
    qtbot.addWidget(w)
    w.show()
    w.restart()
    w.next()
    page = w.currentPage()
    assert page is w.recommend_page and page.isComplete()  # Next is enabled: Enter would reach it
    search = w.recommend_page.hub_search
    search.field.setText(REPO)
    getattr(search, box).setFocus()
    with qtbot.waitSignal(search.failed) as failed:
        qtbot.keyClick(getattr(search, box), Qt.Key.Key_Return)
    qtbot.wait(50)  # a default button's click would land in this turn of the event loop
    assert w.currentPage() is page
    assert search.result_label.isVisible() and search.result_label.text() == failed.args[0]
    assert "Hugging Face Hub" in failed.args[0]
    qtbot.keyClick(search.field, Qt.Key.Key_Enter)  # the keypad's Enter too
    qtbot.wait(50)
    assert w.currentPage() is page
