"""Sizing the catalog's repos from their GGUF headers (the catalog itself types no sizes): only the
catalog's quants are read, a record of some quants grows when more are asked for, every repo's failure is
its own line, and once the Hub proves unreachable the rest comes from the cache without waiting on each."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from beedeck.core.models import catalog
from beedeck.core.models.hub.sizing import load_cached, size_repo
from beedeck.core.models.recommend import catalog_sizing
from tests.fixtures import hub_models


def test_the_catalog_repos_are_the_targets_and_every_runnable_draft() -> None:
    got = dict(catalog_sizing.repos(catalog.load()))
    assert got["unsloth/gemma-4-31B-it-GGUF"] == ["Q3_K_M", "Q4_K_S", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]
    assert got["unsloth/Qwen3.8-27B-GGUF"] is None  # no quants listed: every GGUF in the repo
    assert got["Anbeeld/Qwen3.8-27B-DSpark-GGUF"] == list(catalog_sizing.DRAFT_QUANTS)
    assert got["ggml-org/Qwen3.8-27B-GGUF"] == ["Q4_0"]  # the MTP sidecar the catalog names
    assert "Lucebox/gemma-4-31B-it-DFlash-GGUF" not in got  # its format loads on no BeeDeck engine


def test_refresh_reads_headers_once_per_revision_and_names_each_failure(
        catalog_hub: Any, catalog_files: dict[str, dict[str, Path]], tmp_path: Path) -> None:
    cache = tmp_path / "c"
    first = catalog_sizing.refresh(endpoint=catalog_hub.endpoint, cache_dir=cache)
    assert set(first.sized) == set(catalog_files)  # every catalog repo the fake Hub holds
    assert {m.quant for m in first.sized[hub_models.GEMMA_REPO].models} == set(hub_models.GEMMA_QUANTS)
    assert "was not found on the Hub" in first.errors["unsloth/Qwen3.5-9B-GGUF"]
    assert first.bytes_read == catalog_hub.bytes_sent > 0
    assert first.lines()[-1].startswith(f"In all: {first.bytes_read / 1e6:.1f} MB read")
    sent = catalog_hub.bytes_sent
    again = catalog_sizing.refresh(endpoint=catalog_hub.endpoint, cache_dir=cache)
    assert catalog_hub.bytes_sent == sent and again.bytes_read == 0  # the same revisions: from the cache
    assert catalog_sizing.unsized(cache_dir=cache) == [p.id for p in catalog.load().pairs if p.target.repo not in
                                                       first.sized]


def test_a_partial_record_grows_when_more_quants_are_asked_for(catalog_hub: Any, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    one = size_repo(hub_models.GEMMA_REPO, endpoint=catalog_hub.endpoint, cache_dir=cache, quants=["Q4_K_S"])
    assert [m.quant for m in one.models] == ["Q4_K_S"] and one.quants == ["Q4_K_S"]
    sent = catalog_hub.bytes_sent
    assert size_repo(hub_models.GEMMA_REPO, endpoint=catalog_hub.endpoint, cache_dir=cache,
                     quants=["q4_k_s"]).bytes_read == 0 and catalog_hub.bytes_sent == sent
    more = size_repo(hub_models.GEMMA_REPO, endpoint=catalog_hub.endpoint, cache_dir=cache,
                     quants=["Q4_K_S", "Q5_K_M"])
    assert sorted(m.quant for m in more.models) == ["Q4_K_S", "Q5_K_M"] and more.quants == ["Q4_K_S", "Q5_K_M"]
    assert sum(m.bytes_read for m in more.models) == catalog_hub.bytes_sent - sent  # only Q5_K_M was read
    offline = size_repo(hub_models.GEMMA_REPO, offline=True, cache_dir=cache)  # all wanted, two held: said so
    assert len(offline.models) == 2 and "Offline: only the quants read earlier (Q4_K_S, Q5_K_M)" in offline.notes[0]
    every = size_repo(hub_models.GEMMA_REPO, endpoint=catalog_hub.endpoint, cache_dir=cache)
    assert sorted(m.quant for m in every.models) == ["Q4_K_M", "Q4_K_S", "Q5_K_M"] and every.quants is None
    cached = load_cached(hub_models.GEMMA_REPO, cache_dir=cache)
    assert cached is not None and cached.quants is None and len(cached.models) == 3


def test_an_unreachable_hub_answers_from_the_cache_and_says_so(catalog_hub: Any, tmp_path: Path) -> None:
    cache = tmp_path / "c"
    size_repo(hub_models.GEMMA_REPO, endpoint=catalog_hub.endpoint, cache_dir=cache, quants=["Q4_K_S"])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
        got = catalog_sizing.refresh(endpoint=dead, cache_dir=cache)
    # the first repo (Gemma's, cached earlier) answers from the cache with a note; the next one finds the Hub
    # unreachable
    assert list(got.sized) == [hub_models.GEMMA_REPO] and got.sized[hub_models.GEMMA_REPO].source == "cache"
    assert "cannot be reached" in got.sized[hub_models.GEMMA_REPO].notes[0]
    first = next(iter(got.errors.values()))
    assert "Cannot reach the Hugging Face Hub" in first
    # after the first refusal the rest is asked of the cache only: "not sized on this machine yet"
    assert "has not been sized on this machine yet and BeeDeck is offline" in got.errors[hub_models.QWEN38_REPO]
