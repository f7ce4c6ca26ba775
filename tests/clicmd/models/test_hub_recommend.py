"""``beedeck recommend --repo``: every quant with every draft kind from range-read headers, the fast path
with its evidence, and one clear line (no traceback) for a gated or missing repo."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from beedeck import cli
from beedeck.core.engine.mode import Mode
from tests.conftest import PERSISTENT
from tests.fakes.fake_hub import FakeFile, FakeHub
from tests.fixtures import hub_models

REPO, DFLASH2, DSPARK = "unsloth/Qwen3.8-27B-GGUF", "incoai/Qwen3.8-27B-DFlash2-GGUF", "Anbeeld/Qwen3.8-27B-DSpark-GGUF"


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    files = hub_models.build_all(PERSISTENT / "hub-models")
    with FakeHub() as h:
        h.add_repo(REPO, {n: FakeFile.sparse_gguf(files[n]) for n in files if n.endswith(".gguf")})
        h.add_repo(DFLASH2, {files["dflash2"].name: FakeFile.sparse_gguf(files["dflash2"])})
        h.add_repo(DSPARK, {files["dspark"].name: FakeFile.sparse_gguf(files["dspark"])})
        h.add_repo("google/gated-GGUF", {"m.gguf": FakeFile.sparse_gguf(files["dspark"])}, gated="manual")
        monkeypatch.setenv("HF_ENDPOINT", h.endpoint)
        yield h


def test_recommend_repo_sizes_every_quant_with_the_catalogs_drafts(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    # No --draft-repo: the catalog says which drafts belong to this target (DFlash2, DSpark and mirrors;
    # the mirrors that are not on this fake Hub become notes, not errors).
    assert cli.main(["recommend", "--repo", REPO, "--vram", "23.5", "--card", "24gb-ada", "--generation",
                     "mainline", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    kinds = {(r["quant"], r["kind"]): r for r in out["rows"]}
    assert {("Q4_K_M", k) for k in ("none", "mtp", "dflash2", "dspark")} <= set(kinds)
    assert kinds[("Q4_K_M", "dflash2")]["fits"] and kinds[("Q4_K_M", "dflash2")]["cost_tokens"] > 0
    assert not kinds[("Q8_0", "none")]["fits"]
    assert out["mode"]["mode"] == "dflash2" and out["mode"]["evidence"] == "published" and out["mode"]["source"]
    assert any("Anbeeld/Qwen3.8-27B-DFlash2-GGUF was not sized" in n for n in out["notes"])
    assert out["sizing"][0]["bytes_read"] > 0 and out["sizing"][0]["fraction_read"] < 1e-3
    # again, offline: from the cache, the same rows
    assert cli.main(["recommend", "--repo", REPO, "--draft-repo", DFLASH2, "--vram", "23.5", "--card", "24gb-ampere",
                     "--offline"]) == 0
    text = capsys.readouterr().out
    assert "from this machine's cache of its headers" in text and "DFlash2 costs about" in text
    assert "Fast path: 24 GB Ampere (3090), bee-b: MTP (published figures:" in text


def test_recommend_repo_errors_are_one_clear_line(hub: FakeHub, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["recommend", "--repo", "google/gated-GGUF", "--vram", "24"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: google/gated-GGUF is a gated model") and "Traceback" not in err
    assert cli.main(["recommend", "--repo", "nobody/nothing", "--vram", "24"]) == 1
    assert "was not found on the Hub" in capsys.readouterr().err
    assert cli.main(["recommend", "--repo", "not a repo", "--vram", "24"]) == 1
    assert "OWNER/NAME" in capsys.readouterr().err


def test_recommend_table_prints_every_card_class_and_generation_with_its_evidence(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["recommend", "--table", "--card", "24gb-ada", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 4 * 4 and {r["family"] for r in rows} == {"qwen3.8-27b"}
    by = {(r["card_class"], r["engine"]): r for r in rows}
    assert by[("24gb-ampere", "mainline")]["mode"] == "mtp" and by[("24gb-ampere", "mainline")]["evidence"] == "published"
    assert by[("24gb-ada", "mainline")]["mode"] == "dflash2" and "zedong-peng" in by[("24gb-ada", "mainline")]["source"]
    old = by[("24gb-ada", "bee-b v0.4.3")]
    assert old["mode"] == "mtp" and "v0.4.4" in old["why"] and "issues/134" in old["source"]
    # BeeDeck's own measurements on this machine (a 4090 here) win for its card class only, and say so
    from beedeck.core.engine.speculation.advice import load_advice

    advice = load_advice()
    for tps in (80.0, 81.0, 82.0):
        advice.record("mainline b11434 | Qwen3.8-27B-Q4_K_M.gguf | Qwen3.8-27B-DFlash2-Q4_K_M.gguf", "code", Mode.MTP, tps,
                      "p")
        advice.record("mainline b11434 | Qwen3.8-27B-Q4_K_M.gguf | Qwen3.8-27B-DFlash2-Q4_K_M.gguf", "code", Mode.DFLASH,
                      tps - 20, "p")
    assert cli.main(["recommend", "--table", "--card", "24gb-ada"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("qwen3.8-27b (every kind assumed to fit")
    assert "  24 GB Ada (4090), mainline: MTP (measured here: BeeDeck's own advice: MTP 81.0 tok/s" in text
    assert "  24 GB Ampere (3090), mainline: MTP (published figures:" in text
    assert "  32 GB Blackwell (5090), bee-b v0.4.7: MTP (published figures:" in text
