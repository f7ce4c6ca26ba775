"""The recommendation page with real GGUFs in BeeDeck's models folder: a target with drafts beside it is
recommended with its offered draft (nothing to download), the page lists the drafts it did not use
with the reason, and the run page takes both files from disk into the launch settings."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from beedeck.core import paths
from beedeck.core.engine.caps import Generation
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.registry import EngineRegistry
from beedeck.core.engine.speculation.modes import engine_label
from beedeck.core.setup import STEP, StepFailed
from beedeck.ui.setup.services import WizardServices
from beedeck.ui.setup.setup_wizard import SetupWizard
from tests.core.models import sidecar_files as sf
from tests.fakes.fake_nvml import detect_rtx4090 as gpu_detect
from tests.fakes.inline_runner import run_inline as sync


@pytest.fixture
def folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no LM Studio folder of the machine's user
    d = paths.models_dir() / "Synth-GGUF"
    d.mkdir(parents=True)
    t = sf.target(d, "Synth-Q5_K_M.gguf", file_type=sf.Q5_K_M)
    sf.dflash(d, "dflash-Synth-Q4_K_M.gguf", t)
    sf.dflash(d, "dflash-Synth-Q8_0.gguf", t, file_type=sf.Q8_0)
    sf.dflash(d, "dflash-Synth-legacy-Q5_K_M.gguf", t, file_type=sf.Q5_K_M, fmt="bee")
    sf.lucebox(d, "dflash-gemma-lucebox.gguf", t)
    return d


def test_the_page_recommends_the_model_with_its_sidecar_and_lists_the_reasons(qtbot: QtBot, folder: Path) -> None:
    w = SetupWizard(WizardServices(detect=gpu_detect, runner=sync, extra={"registry": EngineRegistry()}))
    qtbot.addWidget(w)
    w.restart()
    w.next()
    page = w.recommend_page
    c = page.choice
    assert c is not None and c.target_path == folder / "Synth-Q5_K_M.gguf"
    # a current engine's upstream draft, the quant closest to the target's (Q4_K_M, not Q8_0), beats
    # the fork-format Q5_K_M one that only BeeLlama 0.1-0.3 runs
    assert c.draft_path == folder / "dflash-Synth-Q4_K_M.gguf" and c.generation.value in ("bee-b", "mainline")
    assert page.title_label.text().startswith("beedeck-synth-target-sticky v4")
    assert page.size_label.text().startswith("Download: nothing") and "dflash-Synth-Q4_K_M.gguf" in page.size_label.text()
    assert not page.drafts_label.isHidden()
    drafts = page.drafts_label.text()
    assert drafts.startswith("Drafts found next to your models:")
    assert "• Draft found next to the model: dflash-Synth-Q4_K_M.gguf (dflash, Q4_K_M)" in drafts
    assert "dflash-gemma-lucebox.gguf next to Synth-Q5_K_M.gguf but did not use it" in drafts and "Lucebox" in drafts
    assert "dflash-Synth-Q8_0.gguf next to Synth-Q5_K_M.gguf too (Q8_0)" in drafts
    assert "Found" not in page.reasons_label.text()  # the draft lines are in their own block
    assert page.memory_bar.plan is not None and page.memory_bar.state == "ok"

    # The run page takes both files from disk (no find_local, no download) into the launch settings.
    setup = w.run_page.make_setup()
    kw: dict[str, Any] = {"on_progress": lambda *_: None, "on_line": lambda _l: None, "cancel_event": threading.Event()}
    assert STEP["target"].run(setup, **kw) == f"on disk: {folder / 'Synth-Q5_K_M.gguf'}"
    assert STEP["draft"].run(setup, **kw).endswith("dflash-Synth-Q4_K_M.gguf (found next to the model)")
    s = setup.launch_settings()
    assert s.target == str(folder / "Synth-Q5_K_M.gguf") and s.draft == str(folder / "dflash-Synth-Q4_K_M.gguf")
    assert s.spec_mode == Mode.DFLASH
    (folder / "dflash-Synth-Q4_K_M.gguf").unlink()
    with pytest.raises(StepFailed, match="is gone since the recommendation. Get a new recommendation"):
        STEP["draft"].run(setup, **kw)


def _detect_rtx3090() -> Any:
    from beedeck.core.machine import hardware
    from tests.fakes.fake_nvml import FakeNvml, rtx3090

    def no_smi(argv: Any, timeout: float) -> str:
        raise FileNotFoundError("nvidia-smi")

    return hardware.detect(nvml_module=FakeNvml([rtx3090()]), smi_runner=no_smi)


@pytest.mark.parametrize(("detect", "kind", "evidence"), [(_detect_rtx3090, "mtp", "gilesknap"),
                                                          (gpu_detect, "dflash2", "zedong-peng")])
def test_the_page_shows_the_mode_by_evidence_and_an_mtp_pick_downloads_no_draft(
        qtbot: QtBot, catalog_sized: Path, tmp_path: Path, detect: Any, kind: str, evidence: str) -> None:
    """Qwen3.8 27B from the catalog on a 3090 (MTP, published) and a 4090 (DFlash2, published): the page names
    the mode and its evidence; the MTP pick has no draft to download and the run page skips that step."""
    import dataclasses

    from beedeck.core.models import catalog
    from beedeck.core.models.recommend.from_catalog import recommend

    cat = catalog.load()
    only = dataclasses.replace(cat, pairs=tuple(p for p in cat.pairs if p.id == "qwen3.8-27b"))
    seen: dict[str, Any] = {}

    def rec(vram: list[int], goal: str, **kw: Any) -> Any:
        seen.update(kw)
        return recommend(vram, goal, cat=only, local=[], **kw)

    fetched: list[tuple[str, str]] = []

    def download(repo: str, filename: str, **_kw: Any) -> list[Path]:
        fetched.append((repo, filename))
        return [tmp_path / filename]

    w = SetupWizard(WizardServices(detect=detect, runner=sync, recommend=rec, engine_caps=lambda: None,
                                   extra={"registry": EngineRegistry(), "download_model": download,
                                          "find_local": lambda repo, f: None}))
    qtbot.addWidget(w)
    w.restart()
    w.next()
    page = w.recommend_page
    c = page.choice
    assert c is not None and c.pair_id == "qwen3.8-27b" and c.draft_kind == kind
    assert seen["card"] == ("24gb-ampere" if kind == "mtp" else "24gb-ada") and "advice" in seen
    mode = page.mode_label.text()
    assert not page.mode_label.isHidden() and mode.startswith(f"Speculation: {'MTP (its own head)' if kind == 'mtp' else 'DFlash2'}, the fast path")
    assert "by published figures:" in mode and evidence in mode and "tokens of context here" in mode
    setup = w.run_page.make_setup()
    kw: dict[str, Any] = {"on_progress": lambda *_: None, "on_line": lambda _l: None, "cancel_event": threading.Event()}
    if kind == "mtp":
        assert c.draft_file is None and "its MTP head is inside it: no draft to download" in page.size_label.text()
        assert [s.key for s in setup.steps()] == ["engine", "target", "smoke", "save"]
        STEP["target"].run(setup, **kw)
        assert fetched == [("unsloth/Qwen3.8-27B-GGUF", c.target_file)]
        s = setup.launch_settings()
        assert s.spec_mode == Mode.MTP and s.draft is None and s.target == str(tmp_path / c.target_file)
    else:
        assert c.draft_repo == "incoai/Qwen3.8-27B-DFlash2-GGUF" and "draft" in [s.key for s in setup.steps()]


def test_the_run_page_replans_ubd_and_kvarn_for_the_engine_it_got(
        qtbot: QtBot, catalog_sized: Path, catalog_files: dict[str, dict[str, Path]]) -> None:
    """Recommended for the default engine (BeeLlama v0.4.7: -ubd 64, KVarN draft caches, its 2048-token draft
    window), set up on a BeeLlama v0.4.4 (none of those): the run page re-plans from the downloaded files'
    headers, drops -ubd and KVarN and lowers the context to what fits; back on v0.4.7 it keeps them."""
    import dataclasses

    from beedeck.core.engine.help_text import caps_from_texts
    from beedeck.core.models import catalog
    from beedeck.core.models.recommend.from_catalog import recommend
    from tests.fixtures.engines import BEE_B, HERE, help_stdout

    text = (HERE / "beellama-0.4.3-cpu.version.txt").read_text()
    v047 = dataclasses.replace(caps_from_texts("/e/047", text, help_stdout("beellama-0.4.7-cpu")), release="v0.4.7")
    v044 = dataclasses.replace(caps_from_texts("/e/044", text, help_stdout(BEE_B)), release="v0.4.4")
    cat = catalog.load()
    only = dataclasses.replace(cat, pairs=tuple(p for p in cat.pairs if p.id == "qwen3.8-27b"))
    w = SetupWizard(WizardServices(
        detect=gpu_detect, runner=sync, engine_caps=lambda: v047,
        recommend=lambda vram, goal, **kw: recommend(vram, goal, Generation.BEE_B, cat=only, local=[], **kw),
        extra={"registry": EngineRegistry(), "find_local": lambda repo, f: None,
               "download_model": lambda repo, filename, **_kw: [catalog_files[repo][filename]]}))
    qtbot.addWidget(w)
    w.restart()
    w.next()
    c = w.recommend_page.choice
    assert c is not None and c.draft_kind == "dflash2" and c.settings.draft_ubatch_size == 64
    assert c.settings.draft_cache_type == "kvarn5"
    setup = w.run_page.make_setup()
    kw: dict[str, Any] = {"on_progress": lambda *_: None, "on_line": lambda _l: None, "cancel_event": threading.Event()}
    for which in ("target", "draft"):
        STEP[which].run(setup, **kw)
    lines: list[str] = []
    setup.retune(v044, lines.append)
    s = setup.launch_settings()
    assert s.draft_ubatch_size is None and s.draft_cache_type is None and s.ctx_size < c.settings.ctx_size
    assert lines and lines[0].startswith("Re-planned for ") and "tokens of context fit" in lines[0]
    lines.clear()
    setup.retune(v047, lines.append)
    s = setup.launch_settings()
    assert (s.draft_ubatch_size, s.draft_cache_type, s.ctx_size) == (64, "kvarn5", c.settings.ctx_size)
    assert lines == [f"Tuned for {engine_label(v047)}: -ubd 64, kvarn5 drafter cache."]
    # a file whose header cannot be read: the recommended settings stay, and the line says why
    bad = Path(setup.paths["target"]).with_name("not-a-model.gguf")
    setup.paths["draft"] = str(bad)
    lines.clear()
    setup.retune(v044, lines.append)
    assert lines[0].startswith("The settings were not re-planned for this engine:")
    assert setup.launch_settings().ctx_size == c.settings.ctx_size
