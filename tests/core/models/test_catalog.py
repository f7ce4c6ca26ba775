"""The shipped catalog: every entry validates, formats match generations, and it is a list of repos, not
numbers: no size or architecture figure is typed into it (they come from the GGUF headers)."""

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
                assert f.file.endswith(".gguf") and f.quant, (p.id, f)
        for g in p.generations:
            assert p.drafts_for(g), (p.id, g)
    assert cat.starter["model"]["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_guide_pair_facts() -> None:
    g = catalog.load().pair("gemma-4-31b")
    assert g.recommended == {"target_quant": "Q4_K_S", "draft_quant": "Q5_K_M"}
    assert g.target.file("Q4_K_S") is not None and g.drafts[0].file("Q5_K_M") is not None
    assert "q5_0" in g.flags["guide"] and g.drafts_for(Generation.BEE_A) == []
    q = catalog.load().pair("qwen3.6-27b")
    assert q.target.file("Q5_K_S") is not None and q.target.quants is not None and "Q5_K_S" in q.target.quants
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
    (lambda d: d["pairs"][0]["target"]["files"][0].update(size=17_600_000_000), "types size: sizes and architecture"),
    (lambda d: d["pairs"][0]["target"].update(arch={"n_layer": 60}), "types arch"),
    (lambda d: d["pairs"][0]["target"].update(params_b=31), "types params_b"),
    (lambda d: d["pairs"][0]["target"]["files"][0].update(file="x.bin"), "not a .gguf name"),
    (lambda d: d["pairs"][0].update(generations=["bee-a"]), "none of its drafts' formats"),
    (lambda d: d["pairs"][0].update(generations=["bee-z"]), "unknown engine generation"),
    (lambda d: d["pairs"][0].update(recommended={"target_quant": "Q9", "draft_quant": "Q5_K_M"}), "does not list"),
    (lambda d: d["pairs"][0].update(recommended={"target_quant": "Q4_K_S", "draft_quant": "Q9"}), "does not list"),
    (lambda d: d["pairs"][0].update(recommended={"target_quant": "Q4_K_S", "mode": "medusa"}), "unknown mode 'medusa'"),
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


# Keys that hold a size or an architecture number in a GGUF-catalog entry: what the headers say.
NUMBER_KEYS = {"size", "approx_size", "size_note", "bytes", "arch", "architecture", "params_b", "active_params_b",
               "n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "n_head_kv_swa", "head_dim", "head_dim_swa",
               "swa_pattern", "sliding_window", "vocab", "context_length", "tied_embeddings", "target_layers",
               "block_size", "ssm", "full_attention_interval"}


def test_the_catalog_file_holds_no_sizes_or_architecture_numbers() -> None:
    """Read the shipped file itself: no entry outside the guide's flags and cited notes types a number."""
    data = _raw()
    assert data["version"] == 2

    def walk(x: Any, where: str) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                assert k not in NUMBER_KEYS, f"{where}.{k} is a figure the GGUF header holds"
                if k in ("flags", "guide"):
                    continue  # the guide's own launch flags (-c 32768, -ub 512): what headers cannot say
                walk(v, f"{where}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{where}[{i}]")
        else:
            assert not isinstance(x, (int, float)) or isinstance(x, bool), f"{where} is a typed number {x!r}"

    walk({k: v for k, v in data.items() if k != "version"}, "catalog")


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
    # what runs where: DFlash2 like DFlash; DSpark, EAGLE-3 and MTP on mainline and on BeeLlama >= 0.4 (v0.4.3's own
    # --help lists draft-eagle3, draft-mtp and draft-dspark); an MTP head file alone only where a source says
    # so (mainline); Lucebox's Gemma format nowhere
    both = (Generation.BEE_B, Generation.MAINLINE)
    assert found[("qwen3.8-27b", "Anbeeld/Qwen3.8-27B-DFlash2-GGUF")].generations == both
    assert found[("qwen3.8-27b", "Anbeeld/Qwen3.8-27B-DSpark-GGUF")].generations == both
    assert catalog.DRAFT_FORMAT_GENERATIONS["eagle3"] == catalog.DRAFT_FORMAT_GENERATIONS["mtp"] == both
    mtp = found[("qwen3.8-27b", "ggml-org/Qwen3.8-27B-GGUF")]
    assert mtp.generations == (Generation.MAINLINE,) and [f.file for f in mtp.files] == ["mtp-Qwen3.8-27B-Q4_0.gguf"]
    assert found[("gemma-4-31b", "Lucebox/gemma-4-31B-it-DFlash-GGUF")].generations == ()
    lucebox_qwen = found[("qwen3.6-27b", "Lucebox/Qwen3.6-27B-DFlash-GGUF")]
    assert {f.file for f in lucebox_qwen.files} == {"dflash-draft-3.6-q4_k_m.gguf", "dflash-draft-3.6-q8_0.gguf"}
    g = cat.pair("gemma-4-31b")
    assert [d.repo for d in g.drafts_for(Generation.MAINLINE)] == ["Anbeeld/gemma-4-31B-it-DFlash-GGUF",
                                                                   "Radamanthys11/Gemma-4-31B-it-DFlash-GGUF"]
    assert g.drafts[0].file("BF16") is not None
    q38 = cat.pair("qwen3.8-27b")
    assert q38.target.quants is None  # every GGUF in the repo is sized
    # the guide's pick, like Gemma 4's: the field notes' default, UD-Q4_K_XL with its own MTP head (DFlash2's
    # Q4_K_M drafter as the code profile), with the guide's flags and their sources
    assert q38.recommended == {"target_quant": "UD-Q4_K_XL", "mode": "mtp", "draft_quant": "Q4_K_M"}
    assert "draft-mtp" in q38.flags["guide"] and "sudoingX" in q38.flags["guide_source"]
    assert "7" in q38.flags["dflash2"] and "zedong-peng" in q38.flags["dflash2_source"]
    assert {d.fmt for d in q38.drafts_for(Generation.MAINLINE)} == {"dflash2", "dspark", "mtp"}
    assert {d.fmt for d in q38.drafts_for(Generation.BEE_B)} == {"dflash2", "dspark"}


def test_the_library_knows_catalog_sidecar_files() -> None:
    from beedeck.core.models.library import catalog_entries

    assert ("ggml-org/Qwen3.8-27B-GGUF", "mtp-Qwen3.8-27B-Q4_0.gguf") in catalog_entries()
