"""The shipped catalog: every entry validates, formats match generations, sizes are bytes or null."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from beedeck.core.engine.caps import Generation
from beedeck.core.models import catalog
from beedeck.core.paths import resource_path


def _raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resource_path("catalog.json").read_text())
    return data


def test_shipped_catalog_loads_and_every_entry_is_valid() -> None:
    cat = catalog.load()
    ids = {p.id for p in cat.pairs}
    assert {"gemma-4-31b", "qwen3.6-27b", "qwen3.6-35b-a3b", "qwen3.5-9b", "qwen3.5-4b",
            "qwen3-coder-30b-a3b", "gemma-4-26b-a4b"} <= ids
    for p in cat.pairs:
        assert p.target.repo.count("/") == 1 and p.drafts, p.id
        for d in p.drafts:
            assert d.fmt in catalog.DRAFT_FORMAT_GENERATIONS and d.source.strip(), (p.id, d.repo)
            assert set(d.generations) <= set(catalog.DRAFT_FORMAT_GENERATIONS[d.fmt]), (p.id, d.repo)
            for f in d.files:
                assert f.file.endswith(".gguf") and (f.size is None or f.size > 10_000_000), (p.id, f)
        for g in p.generations:
            assert p.drafts_for(g), (p.id, g)
    assert cat.starter["model"]["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_guide_pair_facts() -> None:
    g = catalog.load().pair("gemma-4-31b")
    assert g.recommended == {"target_quant": "Q4_K_S", "draft_quant": "Q5_K_M"}
    assert g.target.file("Q4_K_S") is not None and g.target.file("Q4_K_S").size is None  # type: ignore[union-attr]
    assert g.drafts[0].arch is not None and g.drafts[0].arch["target_layers"] == [1, 12, 23, 35, 46, 57]
    assert "q5_0" in g.flags["guide"] and g.drafts_for(Generation.BEE_A) == []
    q = catalog.load().pair("qwen3.6-27b")
    assert q.target.file("Q5_K_S").size == 18_947_311_616  # type: ignore[union-attr]
    # BeeLlama 0.1-0.3 reads the fork format: spiritbuun's (the guide's) and Lucebox's Qwen upload, which
    # engine-facts.md §7.2 lists as "fork format, same file names as spiritbuun".
    assert [d.repo for d in q.drafts_for(Generation.BEE_A)] == ["spiritbuun/Qwen3.6-27B-DFlash-GGUF",
                                                              "Lucebox/Qwen3.6-27B-DFlash-GGUF"]
    assert all(d.fmt == "dflash-draft" for d in q.drafts_for(Generation.BEE_A))
    assert q.flags["speed"]["cache_type_k"] == "turbo3_tcq"


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d["pairs"][0]["draft"].update(format="gguf"), "unknown draft format 'gguf'"),
    (lambda d: d["pairs"][0]["draft"].pop("source"), "has no 'source'"),
    (lambda d: d["pairs"][0]["draft"].update(engines=["bee-a"]), "claims bee-a, which cannot load the 'dflash' format"),
    (lambda d: d["pairs"][0]["draft"].update(engines=["bee-z"]), "unknown engine in 'engines'"),
    (lambda d: d["pairs"][0]["target"]["files"][0].update(size=-1), "bad size"),
    (lambda d: d["pairs"][0]["target"]["files"][0].update(file="x.bin"), "not a .gguf name"),
    (lambda d: d["pairs"][0].update(generations=["bee-a"]), "none of its drafts' formats"),
    (lambda d: d["pairs"][0].update(generations=["bee-z"]), "unknown engine generation"),
    (lambda d: d["pairs"][0].update(recommended={"target_quant": "Q9", "draft_quant": "Q5_K_M"}), "does not list"),
    (lambda d: d["pairs"].append(d["pairs"][0]), "appears twice"),
])
def test_validation_names_the_problem(mutate: Any, match: str) -> None:
    data = _raw()
    mutate(data)
    with pytest.raises(catalog.CatalogError, match=match):
        catalog.parse(data)


def test_unreadable_catalog(tmp_path: Path) -> None:
    bad = tmp_path / "catalog.json"
    bad.write_text("{not json")
    with pytest.raises(catalog.CatalogError, match="Cannot read the catalog"):
        catalog.load(bad)


def test_refresh_sizes_uses_the_callable_per_repo() -> None:
    cat = catalog.load()
    calls: list[str] = []

    def sizes_of(repo: str) -> dict[str, int]:
        calls.append(repo)
        return {"gemma-4-31B-it-Q4_K_S.gguf": 17_000_000_123} if repo == "unsloth/gemma-4-31B-it-GGUF" else {}

    new = catalog.refresh_sizes(cat, sizes_of)
    assert new.pair("gemma-4-31b").target.file("Q4_K_S").size == 17_000_000_123  # type: ignore[union-attr]
    assert cat.pair("gemma-4-31b").target.file("Q4_K_S").size is None  # type: ignore[union-attr]
    assert len(calls) == len(set(calls))
    assert new.pair("qwen3.6-27b").target.file("Q5_K_S").size == 18_947_311_616  # type: ignore[union-attr]


# The drafts issue 13 added from docs/reference/anchors.md (Refresh §5-6): (pair, repo) -> format.
NEW_DRAFTS = {
    ("qwen3.8-27b", "Anbeeld/Qwen3.8-27B-DFlash2-GGUF"): "dflash2",
    ("qwen3.8-27b", "z-lab/Qwen3.8-27B-DFlash2-GGUF"): "dflash2",
    ("qwen3.8-27b", "Anbeeld/Qwen3.8-27B-DSpark-GGUF"): "dspark",
    ("qwen3.8-27b", "ggml-org/Qwen3.8-27B-GGUF"): "mtp",
    ("qwen3.5-27b", "Anbeeld/Qwen3.5-27B-DFlash-GGUF"): "dflash",
    ("qwen3.6-27b", "Lucebox/Qwen3.6-27B-DFlash-GGUF"): "dflash-draft",
    ("qwen3.6-35b-a3b", "Anbeeld/Qwen3.6-35B-A3B-DFlash-GGUF"): "dflash",
    ("gemma-4-31b", "Lucebox/gemma-4-31B-it-DFlash-GGUF"): "gemma4-dflash-draft",
    ("gemma-4-26b-a4b", "Lucebox/gemma-4-26B-A4B-it-DFlash-GGUF"): "gemma4-dflash-draft",
    ("gemma-4-31b", "Radamanthys11/Gemma-4-31B-it-DFlash-GGUF"): "dflash",
    ("gemma-4-26b-a4b", "Radamanthys11/Gemma-4-26B-A4B-it-DFlash-GGUF"): "dflash",
    ("qwen3.6-35b-a3b", "Radamanthys11/Qwen3.6-35B-A3B-DFlash-GGUF"): "dflash",
    ("qwen3.6-27b", "Radamanthys11/Qwen3.6-27B-DFlash-GGUF"): "dflash",
}


def test_2026_drafts_have_their_format_engines_and_source() -> None:
    cat = catalog.load()
    found = {(p.id, d.repo): d for p in cat.pairs for d in p.drafts}
    for key, fmt in NEW_DRAFTS.items():
        d = found[key]
        assert d.fmt == fmt and ("anchors.md" in d.source or "engine-facts.md" in d.source), key
    # what runs where: DFlash2 like DFlash, DSpark and MTP on mainline only, Lucebox's Gemma format nowhere
    assert found[("qwen3.8-27b", "Anbeeld/Qwen3.8-27B-DFlash2-GGUF")].generations == (Generation.BEE_B, Generation.MAINLINE)
    assert found[("qwen3.8-27b", "Anbeeld/Qwen3.8-27B-DSpark-GGUF")].generations == (Generation.MAINLINE,)
    mtp = found[("qwen3.8-27b", "ggml-org/Qwen3.8-27B-GGUF")]
    assert mtp.generations == (Generation.MAINLINE,) and [f.file for f in mtp.files] == ["mtp-Qwen3.8-27B-Q4_0.gguf"]
    assert mtp.files[0].size is None and mtp.files[0].approx_size is None  # the sources give no size
    assert found[("gemma-4-31b", "Lucebox/gemma-4-31B-it-DFlash-GGUF")].generations == ()
    lucebox_qwen = found[("qwen3.6-27b", "Lucebox/Qwen3.6-27B-DFlash-GGUF")]
    assert {f.file for f in lucebox_qwen.files} == {"dflash-draft-3.6-q4_k_m.gguf", "dflash-draft-3.6-q8_0.gguf"}
    g = cat.pair("gemma-4-31b")
    assert [d.repo for d in g.drafts_for(Generation.MAINLINE)] == ["Anbeeld/gemma-4-31B-it-DFlash-GGUF",
                                                                   "Radamanthys11/Gemma-4-31B-it-DFlash-GGUF"]
    assert g.drafts[0].file("BF16") is not None and g.drafts[0].file("BF16").approx_size == 2_900_000_000  # type: ignore[union-attr]
    q38 = cat.pair("qwen3.8-27b")
    assert q38.recommended is None and q38.target.files == ()  # nothing to size it with yet
    assert {d.fmt for d in q38.drafts_for(Generation.MAINLINE)} == {"dflash2", "dspark", "mtp"}
    assert {d.fmt for d in q38.drafts_for(Generation.BEE_B)} == {"dflash2"}


def test_the_library_knows_catalog_sidecar_files() -> None:
    from beedeck.core.models.library import catalog_entries

    assert ("ggml-org/Qwen3.8-27B-GGUF", "mtp-Qwen3.8-27B-Q4_0.gguf") in catalog_entries()
