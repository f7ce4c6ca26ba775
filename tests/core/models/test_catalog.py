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
            assert d.fmt in ("dflash", "dflash-draft"), p.id
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
    assert [d.repo for d in q.drafts_for(Generation.BEE_A)] == ["spiritbuun/Qwen3.6-27B-DFlash-GGUF"]
    assert q.flags["speed"]["cache_type_k"] == "turbo3_tcq"


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d["pairs"][0]["draft"].update(format="gguf"), "neither 'dflash' nor 'dflash-draft'"),
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
