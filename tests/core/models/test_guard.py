"""The known-issue table row by row: each row's pre-launch check fires on a launch that meets it and
stays quiet on one that does not, and its log pattern explains the engine's real words after a crash.

Engines are the real --help texts (tests/fixtures/engines); models are metadata-only GGUFs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from beedeck.core import paths
from beedeck.core.agents.toolsafe import TOOL_CHECKS
from beedeck.core.engine.caps import EngineCaps
from beedeck.core.engine.help_text import caps_from_texts
from beedeck.core.engine.known_issues import (
    KnownIssueError,
    dflash_target_archs,
    explain_log,
    in_range,
    load_table,
    markdown_table,
    parse_table,
    parse_version,
    refused_spec_types,
)
from beedeck.core.engine.launch_settings import LaunchSettings
from beedeck.core.engine.logparse import classify_failure
from beedeck.core.engine.mode import Mode
from beedeck.core.engine.server import ServerFailed
from beedeck.core.models.guard import CHECKS, GuardWarning, cache_block, check_launch
from tests.fixtures import meta_gguf as mg
from tests.fixtures.engines import BEE_A, BEE_B, MAINLINE, help_stdout

CUDA_DEVICES = "Available devices:\n  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23400 MiB free)\n"
CPU_DEVICES = "Available devices:\n  (none)\n"


def _caps(kind: str, release: str = "") -> EngineCaps:
    """``kind``: an engine family, optionally with ``-cuda`` (a CUDA build) and its CUDA version
    (``mainline-cuda-13.2``: the release asset's name, as the engine's folder keeps it)."""
    base = kind.split("-cuda")[0]
    text = {"bee-a": help_stdout(BEE_A), "bee-b": help_stdout(BEE_B), "mainline": help_stdout(MAINLINE)}[base]
    devices = CUDA_DEVICES if "-cuda" in kind else CPU_DEVICES
    caps = caps_from_texts(f"/engines/{kind}/llama-server", "", text, devices)
    return dataclasses.replace(caps, release=release)


@dataclasses.dataclass
class Models:
    head32: Path  # llama, 4 heads x 32
    head16: Path  # llama, 4 heads x 16
    head128: Path  # llama, 4 heads x 128
    gemma3: Path  # an architecture upstream DFlash cannot feed
    fork_draft: Path  # dflash-draft (BeeLlama 0.1-0.3 format)
    upstream_draft: Path  # dflash (mainline / BeeLlama >= 0.4 format)
    plain_draft: Path  # an ordinary small LM, not a DFlash draft
    mtp_target: Path  # qwen35 with one MTP head inside
    qwen35: Path  # qwen35 without MTP heads
    eagle3_draft: Path
    dflash_f32: Path  # an upstream DFlash draft whose tensor table is read in full (F32 shapes)
    dspark_no_head: Path  # DSpark (Markov head) without a confidence head
    dspark_head: Path  # DSpark with a confidence head
    dflash2_draft: Path  # an upstream DFlash file with DFlash2's selector
    gemma4_mtp: Path  # gemma4 with an MTP head, 128-wide heads (KVarN-able)
    iq3_target: Path  # a low-bit IQ3_XXS target


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Models:
    d = tmp_path_factory.mktemp("guard-models")
    return Models(
        head32=mg.tiny_model(d / "h32.gguf", n_embd=128),
        head16=mg.tiny_model(d / "h16.gguf", n_embd=64),
        head128=mg.tiny_model(d / "h128.gguf", n_embd=512),
        gemma3=mg.tiny_model(d / "gemma3.gguf", arch="gemma3", n_embd=128),
        fork_draft=mg.dflash_draft(d / "fork.gguf", "dflash-draft", 128, [0, 1], 1000, n_layer=1, n_ff=256),
        upstream_draft=mg.dflash_draft(d / "up.gguf", "dflash", 128, [0, 1], 1000, n_layer=1, n_ff=256),
        plain_draft=mg.tiny_model(d / "plain.gguf", n_embd=128, salt="x"),
        mtp_target=mg.tiny_model(d / "mtp.gguf", arch="qwen35", n_embd=128, extra={"qwen35.nextn_predict_layers": 1}),
        qwen35=mg.tiny_model(d / "qwen35.gguf", arch="qwen35", n_embd=128),
        eagle3_draft=mg.tiny_model(d / "eagle3.gguf", arch="eagle3", n_embd=128, n_layer=1),
        dflash_f32=mg.dflash_draft(d / "up-f32.gguf", "dflash", 128, [0, 1], 1000, n_layer=1, n_head=4, n_kv=2,
                                   hd=32, n_ff=256, qtype=mg.Q.F32),
        dspark_no_head=_dspark(d / "dspark-no-head.gguf", False),
        dspark_head=_dspark(d / "dspark-head.gguf", True),
        dflash2_draft=mg.write_meta_gguf(
            d / "dflash2.gguf", "dflash", {"block_count": 1, "embedding_length": 128, "attention.head_count": 4,
                                           "context_length": 2048, "target_layers": [1, 2], "block_size": 8,
                                           "selector_rank": 16},
            [("output_norm.weight", (128,), mg.Q.F32), ("fc.weight", (256, 128), mg.Q.F32),
             ("selector_proj.weight", (128, 16), mg.Q.F32), ("blk.0.attn_q.weight", (128, 128), mg.Q.F32)],
            mg.vocab(1000), {"general.name": "DFlash2 draft"}),
        gemma4_mtp=mg.tiny_model(d / "gemma4-mtp.gguf", arch="gemma4", n_embd=512,
                                 extra={"gemma4.nextn_predict_layers": 1}),
        iq3_target=mg.tiny_model(d / "iq3.gguf", n_embd=128, extra={"general.file_type": 23}),
    )


def _dspark(path: Path, confidence_head: bool) -> Path:
    """A metadata-only DSpark draft: an upstream DFlash file with the Markov head mainline detects."""
    tensors: list[mg.Tensor] = [("output_norm.weight", (128,), mg.Q.F32), ("fc.weight", (256, 128), mg.Q.F32),
                                ("markov_w1.weight", (128, 128), mg.Q.F32), ("blk.0.attn_q.weight", (128, 128), mg.Q.F32)]
    kv = {"block_count": 1, "embedding_length": 128, "attention.head_count": 4, "context_length": 2048,
          "target_layers": [1, 2], "block_size": 16, "has_confidence_head": confidence_head}
    return mg.write_meta_gguf(path, "dflash", kv, tensors, mg.vocab(1000), {"general.name": "DSpark draft"})


def _settings(target: Path, **kw: object) -> LaunchSettings:
    s = LaunchSettings(target=str(target))
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def _dflash(target: Path, draft: Path) -> LaunchSettings:
    return _settings(target, draft=str(draft), spec_mode=Mode.DFLASH)


def _with_draft(mode: Mode, target: Path, draft: Path, **kw: object) -> LaunchSettings:
    return _settings(target, draft=str(draft), spec_mode=mode, **kw)


P_MIN = ["--spec-draft-p-min", "0.5"]


# row id -> (engine, settings that meet the row, engine, settings that do not, a real log line it explains)
Case = tuple[str, Callable[[Models], LaunchSettings], str, Callable[[Models], LaunchSettings], str]
CASES: dict[str, Case] = {
    "cache-block-vs-head-dim": (
        "bee-a", lambda m: _settings(m.head32, cache_type_k="turbo4", cache_type_v="turbo4"),
        "bee-a", lambda m: _settings(m.head128, cache_type_k="turbo4", cache_type_v="turbo4"),
        # BeeLlama v0.1.2 (CPU build), then SIGSEGV
        "llama_init_from_model: K cache type turbo4 with block size 128 does not divide n_embd_head_k=32",
    ),
    "kvarn-head-dim": (
        "bee-b", lambda m: _settings(m.head32, cache_type_k="kvarn4", cache_type_v="kvarn4"),
        "bee-b", lambda m: _settings(m.head128, cache_type_k="kvarn4", cache_type_v="kvarn4"),
        "0.00.017.173 E llama_init_from_model: cannot enable kvarn_k4v4_g128: KVarN requires 128-, 256-, or "
        "512-dimensional key/value heads",
    ),
    "bee-a-sampling-assert": (
        "bee-a", lambda m: _settings(m.head32, spec_mode=Mode.MODEL_FREE, spec_model_free_type="ngram-mod"),
        "bee-a-cuda", lambda m: _settings(m.head32, spec_mode=Mode.MODEL_FREE, spec_model_free_type="copyspec"),
        "/src/beellama/common/sampling.cpp:724: GGML_ASSERT(idxs.size() == draft.size() + 1) failed",
    ),
    "fork-draft-on-upstream-engine": (
        "bee-b", lambda m: _dflash(m.head32, m.fork_draft),
        "bee-b", lambda m: _dflash(m.head32, m.upstream_draft),
        "llama_model_load: error loading model: unknown model architecture: 'dflash-draft'",
    ),
    "upstream-draft-on-bee-0.1": (
        "bee-a", lambda m: _dflash(m.head32, m.upstream_draft),
        "bee-a", lambda m: _dflash(m.head32, m.fork_draft),
        "llama_model_load: error loading model: error loading model architecture: unknown model architecture: 'dflash'",
    ),
    "not-a-dflash-draft": (
        "mainline", lambda m: _dflash(m.head32, m.plain_draft),
        "mainline", lambda m: _dflash(m.head32, m.upstream_draft),
        "llama_model_load: error loading model: DFlash model requires 'target_layers' in GGUF metadata",
    ),
    "upstream-dflash-target-arch": (
        "mainline", lambda m: _dflash(m.gemma3, m.upstream_draft),
        "bee-a", lambda m: _dflash(m.gemma3, m.fork_draft),
        "/src/llama.cpp/src/llama-context.cpp:2712: GGML_ASSERT(t_layer_inp[il] != nullptr) failed",
    ),
    "mtp-target-without-heads": (
        "mainline", lambda m: _settings(m.qwen35, spec_mode=Mode.MTP),
        "mainline", lambda m: _settings(m.mtp_target, spec_mode=Mode.MTP),
        # mainline b11434 (tests/engine/test_mtp_real.py)
        "W llama_init_from_model: context type MTP requested but model doesn't contain MTP layers",
    ),
    "draft-kind-mismatch": (
        "mainline", lambda m: _with_draft(Mode.EAGLE3, m.head32, m.dflash_f32),
        "bee-b", lambda m: _with_draft(Mode.EAGLE3, m.head32, m.eagle3_draft),
        # mainline b11434 common/speculative.cpp:562
        "common_speculative_init: draft model is not eagle3 (expected 3 extract layers, got 0)",
    ),
    "dspark-no-confidence-head": (
        "mainline", lambda m: _with_draft(Mode.DSPARK, m.head32, m.dspark_no_head, extra_args=P_MIN),
        "mainline", lambda m: _with_draft(Mode.DSPARK, m.head32, m.dspark_head, extra_args=P_MIN),
        # mainline b11434 common/speculative.cpp:1064
        "DSpark draft has no confidence head: please set --spec-draft-p-min 0",
    ),
    "dflash2-before-bee-0.4.4": (
        "bee-b", lambda m: _dflash(m.head32, m.dflash2_draft),
        "bee-b", lambda m: _dflash(m.head32, m.dflash_f32),
        # llama.cpp's loader on a file with more tensors than the architecture knows (issue #134)
        "llama_model_load: error loading model: done_getting_tensors: wrong number of tensors; expected 71, got 63",
    ),
    "kvarn-mtp-gemma4-segfault": (
        "bee-b", lambda m: _settings(m.gemma4_mtp, spec_mode=Mode.MTP, cache_type_k="kvarn4", cache_type_v="kvarn4"),
        "bee-b", lambda m: _settings(m.gemma4_mtp, spec_mode=Mode.MTP, cache_type_k="q8_0", cache_type_v="q8_0"),
        "",  # a segfault without words of its own
    ),
    "kvarn6-hallucinations": (
        "bee-b", lambda m: _settings(m.head128, cache_type_k="kvarn6", cache_type_v="kvarn6"),
        "bee-b", lambda m: _settings(m.head128, cache_type_k="kvarn5", cache_type_v="kvarn4"),
        "",  # wrong answers, no log line
    ),
    "cuda-13.2-low-bit-quants": (
        "mainline-cuda-13.2", lambda m: _settings(m.iq3_target),
        "mainline-cuda", lambda m: _settings(m.iq3_target),
        "",  # garbled output, no log line
    ),
    "cors-reflects-every-origin": (
        "bee-a", lambda m: _settings(m.head32),  # BeeLlama 0.1's --help has no --cors-origins
        "bee-a", lambda m: _settings(m.head32, api_key="a-key"),  # a key shuts a web page out
        "",  # a security warning: nothing fails
    ),
}
NO_CORS = "cors-reflects-every-origin"
RELEASES = {"bee-a": "v0.1.2", "bee-a-cuda": "v0.1.2", "bee-b": "v0.4.3", "mainline": "", "mainline-cuda": "",
            "mainline-cuda-13.2": ""}


# Rows with no pre-launch check (the log alone tells them): row id -> the lines of a failed load it explains,
# and a load of the other role that it must leave to its sibling row.
LOG_ONLY: dict[str, tuple[list[str], list[str]]] = {
    "draft-layout-mismatch": (
        ["print_info: arch                  = dflash",  # mainline b11434 (tests/engine/test_draft_layout_real.py)
         "llama_model_load: error loading model: check_tensor_dims: tensor 'blk.0.ffn_norm.weight' not found",
         "srv    load_model: failed to load draft model, '/m/d.gguf'"],
        ["print_info: arch                  = llama",
         "llama_model_load: error loading model: missing tensor 'blk.0.ffn_norm.weight'"]),
    "model-layout-mismatch": (
        ["print_info: arch                  = gemma4",
         "llama_model_load: error loading model: wrong number of tensors; expected 833, got 832"],
        ["print_info: arch                  = dflash-draft",
         "llama_model_load: error loading model: wrong number of tensors; expected 59, got 58"]),
}


def test_every_row_has_a_case_and_every_case_a_row() -> None:
    # Rows for coding agents (tool calls under speculation, forced tool calls) are read by core.agents.toolsafe,
    # not at launch.
    assert {r.id for r in load_table() if r.check and r.check not in TOOL_CHECKS} == set(CASES)
    assert {r.id for r in load_table() if not r.check} == set(LOG_ONLY)
    assert len(load_table()) == 20


@pytest.mark.parametrize("row_id", sorted(LOG_ONLY))
def test_a_log_only_row_explains_its_role_and_leaves_the_other(row_id: str) -> None:
    lines, other = LOG_ONLY[row_id]
    failure = classify_failure(lines, 1)
    assert failure.issue == row_id, failure
    assert "{" not in failure.message + failure.remedy
    assert classify_failure(other, 1).issue not in ("", row_id)


def _others(warnings: list[GuardWarning], row_id: str) -> list[str]:
    """The rows a launch warns of; BeeLlama 0.1's open CORS (every launch without a key) counts only for itself."""
    return [w.issue for w in warnings if w.issue != NO_CORS or row_id == NO_CORS]


@pytest.mark.parametrize("row_id", sorted(CASES))
def test_row_refuses_what_meets_it_and_passes_what_does_not(row_id: str, models: Models) -> None:
    hit_engine, hit, miss_engine, miss, _log = CASES[row_id]
    row = next(r for r in load_table() if r.id == row_id)
    if row.severity == "warn":  # shown, not refused
        warned = check_launch(_caps(hit_engine, RELEASES[hit_engine]), hit(models))
        assert [w.issue for w in warned] == [row_id] and "{" not in str(warned[0])
        assert _others(check_launch(_caps(miss_engine, RELEASES[miss_engine]), miss(models)), row_id) == []
        return
    with pytest.raises(ServerFailed) as exc:
        check_launch(_caps(hit_engine, RELEASES[hit_engine]), hit(models))
    failure = exc.value.failure
    assert failure.issue == row_id and failure.code == row.code
    assert "{" not in failure.message + failure.remedy  # every placeholder filled
    assert _others(check_launch(_caps(miss_engine, RELEASES[miss_engine]), miss(models)), row_id) == []


@pytest.mark.parametrize("row_id", sorted(k for k, case in CASES.items() if case[-1]))
def test_row_explains_the_engines_own_words_after_a_crash(row_id: str) -> None:
    *_, line = CASES[row_id]
    failure = classify_failure(["main: loading model", line, "common_init_from_params: failed to create context"],
                               -11, 11)
    assert failure.issue == row_id, failure
    assert "{" not in failure.message + failure.remedy and not failure.message.startswith("llama-server crashed")


def test_the_turbo_head_dim_refusal_names_the_type_and_the_head_size(models: Models) -> None:
    with pytest.raises(ServerFailed) as exc:
        check_launch(_caps("bee-a", "v0.1.2"), _settings(models.head32, cache_type_k="turbo4", cache_type_v="q8_0"))
    assert "turbo4" in exc.value.failure.message and "(32)" in exc.value.failure.message
    assert "K cache" in exc.value.failure.message and "f16" in exc.value.failure.remedy


def test_q8_0_and_q4_0_need_a_head_size_divisible_by_32_on_every_engine(models: Models) -> None:
    for kind in ("mainline", "bee-b", "bee-a"):
        with pytest.raises(ServerFailed, match=r"q4_0 stores values in blocks of 32.*\(16\)"):
            check_launch(_caps(kind), _settings(models.head16, cache_type_k="q4_0", cache_type_v="q4_0"))
        assert _others(check_launch(_caps(kind), _settings(models.head32, cache_type_k="q4_0", cache_type_v="q4_0")),
                       "") == []
    # With flash attention off a quantized K is not tested by the engine (and a quantized V is refused by argv).
    assert check_launch(_caps("mainline"), _settings(models.head16, cache_type_k="q8_0", flash_attn="off")) == []


def test_an_unknown_release_turns_a_versioned_row_into_a_warning(models: Models) -> None:
    # A Gen A engine of unknown release may be 0.2/0.3, which read upstream drafts: warn, do not refuse.
    warnings = check_launch(_caps("bee-a", release=""), _dflash(models.head32, models.upstream_draft))
    assert _others(warnings, "") == ["upstream-draft-on-bee-0.1"]
    assert "release is unknown" in warnings[0].message
    assert _others(check_launch(_caps("bee-a", release="v0.3.1"), _dflash(models.head32, models.upstream_draft)),
                   "") == []


def test_the_table_is_valid_and_the_docs_are_generated_from_it() -> None:
    rows = load_table()
    assert all(r.check in CHECKS or r.check in TOOL_CHECKS for r in rows if r.check)
    docs = Path(__file__).resolve().parents[3] / "docs" / "known-issues.md"
    assert docs.read_text(encoding="utf-8") == markdown_table(rows), "regenerate: beedeck engine known-issues --markdown"


def test_malformed_tables_are_refused_with_the_row_and_field() -> None:
    good = json.loads(paths.resource_path("known-issues.json").read_text())
    bad = json.loads(json.dumps(good))
    bad["issues"][2]["backend"] = "rocm"
    with pytest.raises(KnownIssueError, match=r"issues\[2\]\.backend"):
        parse_table(bad)
    bad = json.loads(json.dumps(good))
    bad["issues"][0]["check"], bad["issues"][0]["log"] = "", ""
    with pytest.raises(KnownIssueError, match="could never fire"):
        parse_table(bad)
    with pytest.raises(KnownIssueError, match="version range"):
        in_range((0, 1), "about 0.2")


def test_versions_and_block_sizes() -> None:
    assert parse_version("v0.4.3") == (0, 4, 3) and parse_version("0") is None and parse_version("11434") is None
    assert in_range((0, 1, 2), "<0.2") and not in_range((0, 2), "<0.2") and in_range((0, 3, 9), ">=0.1,<0.4")
    assert [cache_block(t) for t in ("f16", "bf16", "q8_0", "q2_1", "turbo3_tcq", "kvarn4")] == [
        None, None, 32, 32, 128, None]


def test_bee_version_formats_feed_the_version_ranges(models: Models) -> None:
    assert parse_version("0.4.5-dev") == (0, 4, 5) and parse_version("11207") is None
    caps = dataclasses.replace(_caps("bee-b"), version="0.4.7", build=240)
    assert check_launch(caps, _dflash(models.head32, models.dflash2_draft)) == []  # v0.4.4+ loads DFlash2
    with pytest.raises(ServerFailed, match="v0.4.3 and older") as exc:
        check_launch(dataclasses.replace(caps, version="0.4.3-dev"), _dflash(models.head32, models.dflash2_draft))
    assert "v0.4.4 or newer" in exc.value.failure.remedy


def test_dflash_target_lists_per_generation() -> None:
    assert dflash_target_archs("bee-a") is None  # fork DFlash reads every graph
    assert "gemma3" not in (dflash_target_archs("mainline") or ()) and "gemma4" in (dflash_target_archs("bee-b") or ())


def test_explain_log_skips_rows_of_other_engines() -> None:
    line = "/src/common/sampling.cpp:724: GGML_ASSERT(idxs.size() == draft.size() + 1) failed"
    assert explain_log([line], _caps("bee-a", "v0.1.2")) is not None
    assert explain_log([line], _caps("mainline")) is None


def test_refused_speculation_types_are_not_offered() -> None:
    assert refused_spec_types(_caps("bee-a", "v0.1.2")) == {"ngram-mod", "ngram-map-k"}
    assert refused_spec_types(_caps("bee-b", "v0.4.3")) == set() == refused_spec_types(_caps("mainline"))


def test_a_draft_of_another_kind_names_its_kind_and_the_mode_for_it(models: Models) -> None:
    with pytest.raises(ServerFailed) as exc:
        check_launch(_caps("mainline"), _with_draft(Mode.DSPARK, models.head32, models.eagle3_draft))
    f = exc.value.failure
    assert f.message.startswith("The draft eagle3.gguf is an EAGLE-3 draft, but the speculation mode is DSpark")
    assert f.remedy == "Match the mode to the draft: use the EAGLE-3 mode for it."
    with pytest.raises(ServerFailed) as exc:
        check_launch(_caps("bee-b"), _with_draft(Mode.EAGLE3, models.head32, models.plain_draft))
    assert "an ordinary 'llama' model" in exc.value.failure.message
    assert "pick the EAGLE-3 draft made for this target" in exc.value.failure.remedy
    # The heads are counted from the header: an MTP target passes, and DSpark at p-min 0 needs no head.
    assert check_launch(_caps("mainline"), _settings(models.mtp_target, spec_mode=Mode.MTP)) == []
    assert check_launch(_caps("mainline"), _with_draft(Mode.DSPARK, models.head32, models.dspark_no_head)) == []


@pytest.mark.parametrize("kind", ["mainline", "bee-b"])
def test_an_engine_with_cors_origins_is_not_warned_of(kind: str, models: Models) -> None:
    """The option is probed in --help (BeeDeck passes it: argv/build.py), never assumed from the engine's name."""
    assert _caps(kind).has("--cors-origins")
    assert NO_CORS not in [w.issue for w in check_launch(_caps(kind), _settings(models.head32))]
    no_option = dataclasses.replace(_caps(kind), flags=_caps(kind).flags - {"--cors-origins"})
    assert [w.issue for w in check_launch(no_option, _settings(models.head32))] == [NO_CORS]
