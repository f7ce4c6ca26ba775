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
from beedeck.core.engine.launch_settings import SpecMode
from beedeck.core.engine.registry import EngineRegistry
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
    run = w.run_page
    kw: dict[str, Any] = {"on_progress": lambda *_: None, "on_line": lambda _l: None, "cancel_event": threading.Event()}
    assert run._get_model("target", **kw) == f"on disk: {folder / 'Synth-Q5_K_M.gguf'}"
    assert run._get_model("draft", **kw).endswith("dflash-Synth-Q4_K_M.gguf (found next to the model)")
    s = run.launch_settings()
    assert s.target == str(folder / "Synth-Q5_K_M.gguf") and s.draft == str(folder / "dflash-Synth-Q4_K_M.gguf")
    assert s.spec_mode == SpecMode.DFLASH
    (folder / "dflash-Synth-Q4_K_M.gguf").unlink()
    with pytest.raises(FileNotFoundError, match="is gone since the recommendation: go Back"):
        run._get_model("draft", **kw)
