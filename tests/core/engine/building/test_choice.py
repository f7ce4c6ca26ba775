"""build_choice: what a CUDA build compiles, read from the real CMake files of each engine family."""

from __future__ import annotations

from pathlib import Path

import pytest

from beedeck.core.engine.building.builder import cmake_options
from beedeck.core.engine.building.choice import build_lacks_pair, choose_fa, gen_b_default_pairs, read_policy

TREES = Path(__file__).resolve().parents[3] / "fixtures" / "builds" / "trees"
GEN_B = TREES / "beellama-v0.4.3"
GEN_A = TREES / "beellama-v0.1.2"
MAINLINE = Path(__file__).resolve().parents[3] / "fixtures" / "mainline_cmake"


def test_gen_b_matrix_is_read_from_its_cmake_file_as_its_docs_count_it() -> None:
    policy = read_policy(GEN_B)
    assert policy.style == "kvarn" and "GGML_CUDA_KVARN" in policy.options
    standard = {p for p in policy.default_pairs if not p[0].startswith("kvarn")}
    kvarn = policy.default_pairs - standard
    # BeeLlama's CHANGELOG: "50 standard vector pairs and 15 balanced KVarN fast-decode pairs by default".
    assert len(standard) == 50 and len(kvarn) == 15
    assert {("f16", "f16"), ("bf16", "bf16"), ("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q8_0", "q5_0"),
            ("q2_0", "q2_0")} <= standard  # q2_0 is spelled q2_0s in the instance file names
    assert ("q4_0", "q8_0") not in standard  # K at least as wide as V only
    assert ("kvarn8", "kvarn6") in kvarn and ("kvarn6", "kvarn8") not in kvarn
    assert gen_b_default_pairs("no matrix here") == frozenset()


@pytest.mark.parametrize(("pairs", "expected"), [
    ([("f16", "f16")], ["-DGGML_CUDA_KVARN=OFF"]),
    ([("q8_0", "q8_0"), ("q8_0", "q5_0")], ["-DGGML_CUDA_KVARN=OFF"]),
    ([("kvarn4", "kvarn4")], []),  # the KVarN kernels it needs stay; nothing more
    ([("kvarn6", "kvarn8")], ["-DGGML_CUDA_FA_ALL_QUANTS=ON"]),  # outside the 15 balanced pairs
    ([("q4_0", "q8_0")], ["-DGGML_CUDA_FA_ALL_QUANTS=ON", "-DGGML_CUDA_KVARN=OFF"]),
    (None, []),  # nothing known: the default set, never everything
])
def test_gen_b_compiles_only_what_the_pairs_need(pairs: list[tuple[str, str]] | None, expected: list[str]) -> None:
    choice = choose_fa(read_policy(GEN_B), pairs)
    assert choice.options == expected
    assert choice.reasons  # every choice says why


def test_gen_a_keeps_its_turbo_set_and_all_quants_on_request() -> None:
    policy = read_policy(GEN_A)
    assert policy.style == "classic" and ("turbo3", "turbo3") in policy.default_pairs
    assert choose_fa(policy, [("turbo4", "turbo3"), ("f16", "f16")]).options == []
    assert choose_fa(policy, [("q5_0", "q4_1")]).options == ["-DGGML_CUDA_FA_ALL_QUANTS=ON"]  # the guide's baseline
    asked = choose_fa(policy, [("f16", "f16")], all_quants=True)
    assert asked.options == ["-DGGML_CUDA_FA_ALL_QUANTS=ON"] and "as asked" in asked.reasons[0]


def test_mainline_names_its_extra_pairs_in_the_list() -> None:
    policy = read_policy(MAINLINE)
    assert policy.style == "list"
    assert choose_fa(policy, [("q8_0", "q4_0")]).options == [
        "-DGGML_CUDA_FA_QUANTS=q4_0-q4_0;q8_0-q8_0;f16-f16;bf16-bf16;q8_0-q4_0"]
    opts = cmake_options(cuda=True, gpus=["9.0"], cache_pairs=[("f16", "f16")], policy=policy)
    assert not any("QUANTS" in o for o in opts) and "-DCMAKE_CUDA_ARCHITECTURES=90" in opts


def test_a_build_without_kernels_for_a_pair_says_how_to_get_them() -> None:
    built = ["-DGGML_CUDA=ON", "-DGGML_CUDA_FA=ON", "-DGGML_CUDA_KVARN=OFF"]
    why = build_lacks_pair(built, ("kvarn4", "kvarn4"))
    assert why is not None and "--cache-type kvarn4/kvarn4" in why
    assert build_lacks_pair(built, ("q8_0", "q8_0")) is None
    listed = ["-DGGML_CUDA=ON", "-DGGML_CUDA_FA_QUANTS=q4_0-q4_0;f16-f16"]
    assert "q8_0-q4_0" in (build_lacks_pair(listed, ("q8_0", "q4_0")) or "")
    assert build_lacks_pair(["-DGGML_CUDA=OFF"], ("kvarn4", "kvarn4")) is None  # CPU builds have them all
